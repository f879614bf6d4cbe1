"""The authoring gate: every koan fails for its blank, passes answered, and teaches in two languages.

Like rustlings' `dev check`, each failure says what to fix and where.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxkoans import course
from jaxkoans.course import giveaways, mutate, pristine, twins
from jaxkoans.learner.koan_runs import listed_koans
from jaxkoans.plugin import results

from .conftest import koan_files
from .fakecourse import is_alive

KOAN_FILES = koan_files(course.KOANS)
CHAPTERS = course.all_chapters()
CJK = re.compile(r"[\u4e00-\u9fff]")
WORD = re.compile(r"[A-Za-z]{2,}")


def is_english(text: str, words: int = 3) -> bool:
    return len(WORD.findall(CJK.sub(" ", text))) >= words


def ids(paths: list[Path]) -> list[str]:
    return [p.relative_to(course.KOANS).as_posix() for p in paths]


def answer_of(koan_file: Path) -> Path:
    return course.ANSWERS / koan_file.relative_to(course.KOANS)


def test_course_has_chapters_with_koans():
    assert CHAPTERS, "koans/NN/chapter.toml: no chapter found"
    assert KOAN_FILES, "koans/NN/test_*.py: no koan found"


def test_the_course_as_shipped_travels_with_it():
    """koans/.shipped.json (course/pristine.py) holds every koan file as it is here and the kind of
    each prediction blank, read from answers/: the learner's tools never read their git refs."""
    assert not pristine.stale(course.REPO), (
        "koans/.shipped.json does not match koans/ and answers/: run python -m jaxkoans.course.pristine"
    )
    kinds = [k for e in pristine.read_manifest().values() for k in e["predictions"].values()]
    assert len(kinds) > 400 and set(kinds) <= {"literal", "arithmetic", "dtype", "exception"}


def test_koans_and_answers_hold_the_same_files():
    koans = {p.relative_to(course.KOANS) for p in koan_files(course.KOANS)}
    answers = {p.relative_to(course.ANSWERS) for p in koan_files(course.ANSWERS)}
    assert koans - answers == set(), "koans without an answer file in answers/"
    assert answers - koans == set(), "answer files without a koan file in koans/"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.number for c in CHAPTERS])
def test_chapter_manifest_lists_its_files_and_hints(chapter: course.Chapter):
    directory = course.KOANS / chapter.number
    present = sorted(p.name for p in directory.glob("test_*.py"))
    assert chapter.title_zh and chapter.title_en, f"{directory}/chapter.toml: titles missing"
    assert sorted(chapter.files) == present, (
        f"{directory}/chapter.toml: `files` must list exactly the chapter's test files in course order"
    )
    koans = {f"{f}::{name}" for f in present for name, _, _ in listed_koans(directory / f)}
    assert set(chapter.hints) - koans == set(), "hints for koans that do not exist"
    assert koans - set(chapter.hints) == set(), "koans without a hint in chapter.toml"


@pytest.mark.parametrize("koan_file", KOAN_FILES, ids=ids(KOAN_FILES))
def test_koan_and_answer_are_twins(koan_file: Path):
    report = twins.compare(koan_file, answer_of(koan_file))
    assert report.ok, "\n".join(report.problems)
    assert report.blanks or report.todo_bodies or report.regions, f"{koan_file}: nothing to fill in"
    koan_names = [n for n, _, _ in listed_koans(koan_file)]
    assert koan_names == [n for n, _, _ in listed_koans(answer_of(koan_file))]


def evaluated_at_import(node: ast.AST):
    """The nodes Python evaluates while it imports a module: all but the bodies of functions
    and lambdas (their decorators and defaults, class bodies and module statements are)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        arguments = node.args
        outside = [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
        outside += getattr(node, "decorator_list", [])
    else:
        outside = list(ast.iter_child_nodes(node))
    yield node
    for child in outside:
        yield from evaluated_at_import(child)


@pytest.mark.parametrize("koan_file", KOAN_FILES, ids=ids(KOAN_FILES))
def test_blanks_and_todos_wait_inside_functions(koan_file: Path):
    """A learner's fill runs only where its koan runs: grade's workers import every koan file
    before forking a process per koan, so nothing the learner writes may run at import (a fix
    region's module code is the one exception, and grade runs it only in each koan's process)."""
    tree = ast.parse(koan_file.read_text(encoding="utf-8"))
    early = [
        node.lineno
        for node in evaluated_at_import(tree)
        if (isinstance(node, ast.Name) and node.id == "__")
        or (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "todo")
    ]
    assert early == [], (
        f"{koan_file}: blanks run at import on lines {early}; move them into a function"
    )


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.number for c in CHAPTERS])
def test_fix_regions_are_fingerprinted_as_shipped(chapter: course.Chapter):
    """A failing koan counts as not started while its fix region is as shipped: the harness
    knows that from the fingerprints in chapter.toml, so they must match the koan files."""
    directory = course.KOANS / chapter.number
    actual = {
        p.name: tuple(twins.region_hashes(p.read_text(encoding="utf-8")))
        for p in sorted(directory.glob("test_*.py"))
    }
    actual = {name: digests for name, digests in actual.items() if digests}
    assert chapter.regions == actual, (
        f"{directory}/chapter.toml: [regions] must fingerprint the fix regions as shipped; "
        f"print the table with `python -m jaxkoans.course.twins regions {directory}/test_*.py`"
    )


@pytest.mark.parametrize("koan_file", KOAN_FILES, ids=ids(KOAN_FILES))
def test_every_koan_teaches_in_chinese_and_english(koan_file: Path):
    chapter = course.chapter_for(koan_file)
    for name, line, doc in listed_koans(koan_file):
        where = f"{koan_file}:{line} {name}"
        assert CJK.search(doc) and is_english(doc, 6), (
            f"{where}: docstring needs Chinese and English"
        )
        hint = chapter.hint(koan_file.name, name)
        assert hint and hint.zh and hint.en, f"{where}: needs a hint with zh and en levels"
        assert all(CJK.search(t) for t in hint.zh), f"{where}: a zh hint level has no Chinese"
        assert all(is_english(t) and not CJK.search(t) for t in hint.en), (
            f"{where}: an en hint level is not English"
        )


def _gives_away(answer: str, hint: str) -> bool:
    """A blank's answer (an expression of 4+ characters) copied into a hint verbatim."""
    answer = answer.strip()
    if len(answer) < 4 or answer.replace(".", "").isdigit():
        return False
    return giveaways.appears(answer, hint)


@pytest.mark.parametrize("koan_file", KOAN_FILES, ids=ids(KOAN_FILES))
def test_no_hint_gives_the_answer_away(koan_file: Path):
    report = twins.compare(koan_file, answer_of(koan_file))
    chapter = course.chapter_for(koan_file)
    tree = ast.parse(koan_file.read_text(encoding="utf-8"))
    spans = [(n.name, n.lineno, n.end_lineno) for n in tree.body if isinstance(n, ast.FunctionDef)]
    for name, _, _ in listed_koans(koan_file):
        hint = chapter.hint(koan_file.name, name)
        texts = " ".join((hint.zh + hint.en) if hint else ())
        start, end = next((s, e) for n, s, e in spans if n == name)
        own = [answer for line, answer in report.blanks if start <= line <= end]
        given = [a for a in own if _gives_away(a, texts)]
        assert not given, f"{koan_file}::{name}: the hint contains the answer {given}"
        body_lines = [ln.strip() for b in report.todo_bodies.values() for ln in b.splitlines()]
        copied = [ln for ln in body_lines if len(ln) > 24 and ln in texts]
        assert not copied, f"{koan_file}::{name}: the hint copies the solution's code {copied}"


@pytest.mark.parametrize("koan_file", KOAN_FILES, ids=ids(KOAN_FILES))
def test_no_answer_stands_next_to_its_blank(koan_file: Path):
    """A blank whose answer is written in its docstring, its first hint, the lines around it
    or another koan of the file (or whose docstring names its exception class) asks the
    learner to copy, not to predict (course/giveaways.py)."""
    found = giveaways.findings(koan_file, answer_of(koan_file))
    assert not found, "\n".join(map(str, found))


def results_of_every_koan(events: list[dict], tree: Path) -> dict[str, dict]:
    """The run's result for each koan of `tree`; every file imported and every koan ran."""
    errors = [e for e in events if e["event"] == "collect-error"]
    assert not errors, f"files of {tree.name}/ that do not import: {errors}"
    seen = results.by_koan(events)  # a parametrized koan is one koan
    expected = [
        f"{f.relative_to(course.REPO).as_posix()}::{name}"
        for f in koan_files(tree)
        for name, _, _ in listed_koans(f)
    ]
    missing = [n for n in expected if n not in seen]
    assert not missing, f"koans of {tree.name}/ that did not run: {missing}"
    return seen


# The recorded runs (conftest.py) have limits of their own, worked out from their koans.


def test_every_answer_passes_under_xdist(answers_run):
    seen = results_of_every_koan(answers_run, course.ANSWERS)
    skipped = [n for n, e in seen.items() if e["state"] == "skipped"]
    assert not skipped, f"answers skipped on this machine: {skipped}"
    failing = [
        f"{n} ({e['cause']}, line {e['line']})" for n, e in seen.items() if e["state"] != "passed"
    ]
    assert not failing, "answers that fail (run `pytest <nodeid>` to see why):\n  " + "\n  ".join(
        failing
    )


def test_every_koan_fails_because_of_its_blank(koans_run):
    seen = results_of_every_koan(koans_run, course.KOANS)
    passing = [n for n, e in seen.items() if e["state"] == "passed"]
    assert not passing, f"koans that pass as shipped (nothing left to learn): {passing}"
    wrong = [
        f"{n} ({e['cause']} at line {e['line']})"
        for n, e in seen.items()
        if e["state"] != "not_started"
    ]
    assert not wrong, (
        "koans that fail for another reason than their blank or TODO (a typo, an import, an "
        "unrelated exception?) — run `pytest <nodeid>` and look for ❌:\n  " + "\n  ".join(wrong)
    )


def test_koans_and_answers_collect_together_without_collisions():
    files = koan_files(course.KOANS) + koan_files(course.ANSWERS)
    listing = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "koans",
            "answers",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=course.REPO,
        capture_output=True,
        text=True,
        timeout=mutate.run_limit(len(files), workers=1),  # a file's import: a koan's limit
        check=False,
    )
    items = [line for line in listing.stdout.splitlines() if "::test" in line]
    assert len(items) == len(set(items)), "two test items with the same nodeid"
    collected = {results.koan_id(item) for item in items}  # a parametrized koan is one koan
    assert listing.returncode == 0, listing.stdout[-2000:] + listing.stderr[-2000:]
    koans = sum(len(listed_koans(f)) for f in koan_files(course.KOANS))
    assert len(collected) == 2 * koans


# ---- the suite's own child runs end with it -----------------------------------------------

SPAWNER = """
import os, pathlib, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import threading; threading.Event().wait()"],
                         start_new_session=True)  # like progress.py's child pytest
told = pathlib.Path(os.environ["JAXKOANS_TEST_PIDS"])
told.with_suffix(".part").write_text(str(child.pid))
os.replace(told.with_suffix(".part"), told)
child.wait()
"""
WAITING_TEST = f"""
import subprocess, sys


def test_waits_on_a_tool_whose_child_has_a_session_of_its_own():
    subprocess.run([sys.executable, "-c", {SPAWNER!r}], check=False)
"""


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_stopping_the_suite_ends_the_children_of_its_tests(tmp_path, stop):
    """`pytest tests -n 2` stopped by SIGTERM (an outer timeout) or SIGHUP while a test waits on
    a tool whose child pytest has a session of its own: that child ends with the suite."""
    (tmp_path / "test_waiting.py").write_text(WAITING_TEST, encoding="utf-8")
    told = tmp_path / "pid"
    suite = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", str(tmp_path), "-n", "2",
         "-q", "-p", "no:cacheprovider", "-o", "timeout=0"],
        cwd=course.REPO, env={**os.environ, "JAXKOANS_TEST_PIDS": str(told)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    grandchild = None
    try:
        while not told.exists():  # the suite and its workers start: wait while it runs
            assert suite.poll() is None, suite.communicate()
            time.sleep(0.1)
        grandchild = int(told.read_text())
        assert is_alive(grandchild)
        suite.send_signal(stop)
        shown, _ = suite.communicate(timeout=mutate.STARTUP_S)
        deadline = time.monotonic() + mutate.STARTUP_S  # a guard against waiting forever
        while is_alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not is_alive(grandchild), f"a test's child outlived the suite:\n{shown[-3000:]}"
        assert suite.returncode != 0, shown[-3000:]
    finally:
        suite.kill()
        suite.communicate()
        if grandchild is not None:  # a failing check leaves nothing running
            with contextlib.suppress(ProcessLookupError):
                os.kill(grandchild, signal.SIGKILL)
