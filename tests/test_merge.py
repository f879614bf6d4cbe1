"""`grade --merge`: every report's signature, course and koans checked against the grading
course, every total recomputed; a forged, altered, foreign or unsigned report is an error row.
Also the instructor's friction of issue 55: --reports created, a class page without emoji, the
templates' checkouts without persisted credentials and the key as a secret."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from jaxkoans.grader import grading, report_formats
from jaxkoans.learner import cli
from jaxkoans.plugin.results import KoanResult, KoanState

from .fakecourse import REPO, make_course, write

KEY = "the instructor's secret"
VERSIONS = {"python": "3.12", "jax": "0.12", "jaxlib": "0.12", "pytest": "9.2"}
ALPHA, BETA = "koans/01/test_alpha.py", "koans/02/test_beta.py"
EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f]")


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return make_course(tmp_path_factory.mktemp("merge") / "course")


@pytest.fixture(scope="module")
def pristine(course, tmp_path_factory) -> grading.PristineCourse:
    return grading.prepare_course(str(course), tmp_path_factory.mktemp("pristine"))


def report(pristine, passed: set[str], key: str | None = KEY, chapters=None, **run) -> dict:
    """A student's report as grade writes it: the koans in `passed` passed, the rest failing."""
    graded = grading.select(pristine, chapters, None)
    koans = [
        KoanResult(f"{rel}::{name}", KoanState.PASSED if name in passed else KoanState.FAILING)
        for rel in graded.files
        for name in graded.koans[rel]
    ]
    grade = grading.Grade(
        "student", Path("/copy"), graded, koans, [], [], [], "t", 1.5, VERSIONS, {"isolated": True, **run}, {}
    )  # fmt: skip
    return report_formats.as_json(grade, key)


def merge(
    tmp_path, documents: dict[str, dict | str], *extra: str, key: str | None = KEY, monkeypatch
):
    """(exit code, CSV rows by student, the page) of `grade --merge` over `documents`."""
    if key:
        monkeypatch.setenv(report_formats.KEY_ENV, key)
    else:
        monkeypatch.delenv(report_formats.KEY_ENV, raising=False)
    reports = tmp_path / "reports"
    reports.mkdir(exist_ok=True)
    paths = []
    for name, document in documents.items():
        paths.append(str(reports / f"{name}.json"))
        text = document if isinstance(document, str) else report_formats.to_json_text(document)
        Path(paths[-1]).write_text(text, encoding="utf-8")
    out, page = tmp_path / "class.csv", tmp_path / "class.html"
    code = cli.main(["grade", "--merge", *paths, f"--csv={out}", f"--html={page}", *extra])
    if code == 2:
        return code, {}, ""
    rows = list(csv.reader(out.read_text(encoding="utf-8").splitlines()))
    return code, {row[0]: row for row in rows[1:]}, page.read_text(encoding="utf-8")


def test_an_honest_signed_set_merges_to_its_totals(course, pristine, tmp_path, monkeypatch):
    alice = report(pristine, {"test_sum", "test_dtype", "test_double", "test_x64"})
    bob = report(pristine, {"test_sum"})
    code, rows, page = merge(tmp_path, {"alice": alice, "bob": bob}, f"--course={course}", monkeypatch=monkeypatch)  # fmt: skip
    assert code == 0
    assert rows["alice"][:7] == ["alice", "graded", "4", "4", "1.0", "3", "1"]
    assert rows["bob"][:7] == ["bob", "graded", "1", "4", "0.25", "1", "0"]
    assert page.count('<tr data-student="') == 2 and page.count('data-status="passed"') == 5
    finding = {"kind": "runtime_patch", "file": ALPHA, "line": None, "koans": ["test_sum"], "message": "m"}  # fmt: skip
    carol = report(pristine, set()) | {"findings": [finding]}
    carol["signature"] = report_formats.signature(carol, KEY)  # as grade signs a copy with one
    code, rows, _ = merge(tmp_path, {"alice": alice, "carol": carol}, f"--course={course}", monkeypatch=monkeypatch)  # fmt: skip
    assert code == 1 and rows["carol"][:4] == ["carol", "findings", "0", "4"]


def test_forged_altered_foreign_and_unsigned_reports_are_error_rows(course, pristine, tmp_path, monkeypatch):  # fmt: skip
    honest = report(pristine, {"test_sum"})
    totals = json.loads(json.dumps(honest))
    totals["total"].update(passed=137, total=137, score=1.0)  # the red team's forged report
    status = json.loads(json.dumps(honest))
    status["koans"][1]["status"] = "passed"  # one koan edited after signing
    foreign = json.loads(json.dumps(honest))
    foreign["course"]["commit"] = "f" * 40  # graded against another course, signed honestly
    foreign["signature"] = report_formats.signature(foreign, KEY)
    other_text = json.loads(json.dumps(honest))
    other_text["course"]["digest"] = "0" * 64  # the same commit, other files (a dirty course)
    other_text["signature"] = report_formats.signature(other_text, KEY)
    unsigned = report(pristine, {"test_sum"}, key=None)
    other_key = report(pristine, {"test_sum"}, key="a key of the student's")
    reports = {
        "honest": honest, "totals": totals, "status": status, "foreign": foreign,
        "other_text": other_text, "unsigned": unsigned, "other_key": other_key, "torn": "{torn",
    }  # fmt: skip
    code, rows, page = merge(tmp_path, reports, f"--course={course}", monkeypatch=monkeypatch)
    assert code == 3
    assert list(rows) == list(reports)  # in the order given
    assert rows["honest"][:4] == ["honest", "graded", "1", "4"]
    for name in ("totals", "status", "other_key"):
        assert rows[name][1:5] == ["error", "", "", ""] and "signature does not match" in rows[name][-1]  # fmt: skip
    for name in ("foreign", "other_text"):
        assert rows[name][1] == "error" and "another course" in rows[name][-1], rows[name]
    assert rows["unsigned"][1] == "error" and "unsigned" in rows["unsigned"][-1]
    assert rows["torn"][1] == "error" and "JSONDecodeError" in rows["torn"][-1]
    assert page.count('<tr data-student="') == 1  # only the honest report has cells


def test_unsigned_reports_merge_only_with_the_flag_and_their_totals_recomputed(course, pristine, tmp_path, monkeypatch):  # fmt: skip
    forged = report(pristine, {"test_sum"}, key=None)
    forged["total"].update(passed=137, total=137, score=1.0)
    forged["chapters"][0].update(passed=99)
    assert merge(tmp_path, {"f": forged}, f"--course={course}", key=None, monkeypatch=monkeypatch)[0] == 2  # fmt: skip
    code, rows, _ = merge(tmp_path, {"f": forged}, f"--course={course}", "--unsigned", key=None, monkeypatch=monkeypatch)  # fmt: skip
    assert code == 0 and rows["f"][:7] == ["f", "graded", "1", "4", "0.25", "1", "0"]
    broken = report(pristine, {"test_sum"}, key=None)
    del broken["koans"][0]["status"]
    code, rows, _ = merge(tmp_path, {"b": broken}, f"--course={course}", "--unsigned", key=None, monkeypatch=monkeypatch)  # fmt: skip
    assert code == 3 and "malformed" in rows["b"][-1]


def test_a_report_of_other_koans_is_an_error_row_unless_the_merge_selects_them(course, pristine, tmp_path, monkeypatch):  # fmt: skip
    week = report(pristine, {"test_sum"}, chapters=["01"])
    code, rows, _ = merge(tmp_path, {"w": week}, f"--course={course}", monkeypatch=monkeypatch)
    assert code == 3 and "its koans are not the ones graded" in rows["w"][-1]
    code, rows, _ = merge(tmp_path, {"w": week}, f"--course={course}", "--chapter=01", monkeypatch=monkeypatch)  # fmt: skip
    assert code == 0 and rows["w"][:6] == ["w", "graded", "1", "3", "0.3333", "1"]


def test_grade_signs_with_the_key_and_says_when_it_did_not(pristine, monkeypatch):
    signed, unsigned = report(pristine, {"test_sum"}), report(pristine, {"test_sum"}, key=None)
    assert signed["signature"] == report_formats.signature(signed, KEY) != report_formats.signature(signed, "x")  # fmt: skip
    assert unsigned["signature"] is None and {**signed, "signature": None} == unsigned
    assert "unsigned" in report_formats.summary(unsigned) and "unsigned" not in report_formats.summary(signed)  # fmt: skip
    monkeypatch.setenv(report_formats.KEY_ENV, KEY)
    assert cli.main(["grade"]) == 2  # a usage error, after grade took the key out of reach
    assert report_formats.KEY_ENV not in os.environ  # no graded run inherits it


def test_reports_dir_is_created(course, tmp_path):
    empty, reports = tmp_path / "copies", tmp_path / "new" / "reports"
    empty.mkdir()
    code = cli.main(["grade", "--batch", str(empty), f"--course={course}", f"--csv={tmp_path / 'c.csv'}", f"--reports={reports}"])  # fmt: skip
    assert code == 0 and reports.is_dir()
    write(tmp_path / "file", "")
    assert cli.main(["grade", "--batch", str(empty), f"--csv={tmp_path / 'c.csv'}", f"--reports={tmp_path / 'file'}"]) == 2  # fmt: skip


def test_the_class_page_needs_no_emoji_font_and_an_absent_log_is_not_an_old_release(course, pristine, tmp_path, monkeypatch):  # fmt: skip
    alice = report(pristine, {"test_sum"}, key=None) | {"reveals": {"found": False, "problem": ""}}
    alice["koans"][0]["revealed"] = alice["koans"][0]["noted"] = True
    alice["problems"] = [{"file": None, "message": "a problem"}]
    code, _, page = merge(tmp_path, {"alice": alice}, f"--course={course}", "--unsigned", key=None, monkeypatch=monkeypatch)  # fmt: skip
    assert code == 0 and EMOJI.findall(page) == []
    legend = page.split('<p class="legend">')[1].split("</p>")[0]
    assert all(report_formats.LABELS[s] in legend for s in report_formats.STATUSES)
    assert "revealed 1" in page and "noted 1" in page and "问题 / problem: a problem" in page
    absent = report_formats.summary(alice) + report_formats.markdown(alice) + page
    assert "nothing was revealed" in absent and "older" not in absent


def checkouts(template: str) -> list[str]:
    """Each step of a workflow that runs actions/checkout, as its text."""
    steps = re.split(r"\n\s*- (?=name:|uses:)", template)
    return [step for step in steps if "uses: actions/checkout@" in step]


@pytest.mark.parametrize("name", ["github-classroom.yml", "grade-matrix.yml"])
def test_the_templates_check_out_without_persisted_credentials(name):
    template = (REPO / "templates" / name).read_text(encoding="utf-8")
    steps = checkouts(template)
    assert len(steps) >= 2 and all("persist-credentials: false" in step for step in steps)


def test_the_matrix_signs_and_verifies_with_a_secret_the_classroom_never_sees():
    matrix = (REPO / "templates" / "grade-matrix.yml").read_text(encoding="utf-8")
    secret = f"{report_formats.KEY_ENV}: ${{{{ secrets.{report_formats.KEY_ENV} }}}}"
    assert matrix.count(secret) == 2  # the grade step and the merge step
    merge_line = next(line for line in matrix.splitlines() if "progress.py grade --merge" in line)
    assert '--chapter "$CHAPTERS"' in merge_line and "--unsigned" not in matrix
    classroom = (REPO / "templates" / "github-classroom.yml").read_text(encoding="utf-8")
    assert report_formats.KEY_ENV not in classroom  # a student can read its secrets


def test_the_payload_figures_in_the_docs_are_todays():
    """docs/grading.md quotes the payload of the whole course: as many koans as today."""
    done = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "koans/*/test_*.py"], capture_output=True, text=True, timeout=60, check=True
    )  # fmt: skip
    from jaxkoans.course import koan_model

    count = sum(len(koan_model.read(REPO / rel).koans) for rel in done.stdout.split())
    docs = (REPO / "docs" / "grading.md").read_text(encoding="utf-8")
    assert f"this course ({count} koans" in docs, (
        "re-measure with the command docs/grading.md quotes"
    )
