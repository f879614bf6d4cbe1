"""The instructor's `grade`: a student's copy against the pristine course, on a small fake
course (two chapters, one file each, a pristine harness) and on the real one.

Set UPDATE_GOLDEN=1 to rewrite tests/golden/grade/ after an intended change of output.
"""

from __future__ import annotations

import ast
import base64
import concurrent.futures
import csv
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jaxkoans.course import fills
from jaxkoans.course import shipped as shipped_course  # `pristine` is a fixture here
from jaxkoans.grader import grading, release, report_formats, run_guard, sandbox, tamper
from jaxkoans.learner import cli, outside

pytestmark = pytest.mark.timeout(600)  # whole grading runs, beyond a koan's 60 s
REPO = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden" / "grade"

KOAN_A = '''"""假的第一章 / a fake chapter: sums and loops."""

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxkoans import __, todo  # noqa: F401


@pytest.fixture
def xs():
    return jnp.arange(4)


def double(x):
    """Doubles x."""
    {double}


def test_sum():
    """求和。The sum of three ones is three."""
    total = jnp.ones(3).sum()
    assert int(total) == {sum}


def test_cumsum(xs):
    """累加。cumsum keeps every partial sum."""
    np.testing.assert_array_equal(jnp.cumsum(xs), {cumsum})


def test_double():
    """加倍。Write double() so that it doubles an array."""
    np.testing.assert_array_equal(double(jnp.arange(3)), [0, 2, 4])


def test_loop():
    """循环。A while_loop runs until its condition is False."""
    final = lax.while_loop(lambda c: {limit}, lambda c: c + 1, 0)
    assert int(final) == 5
'''
KOAN_B = '''"""假的第二章 / a fake chapter: the host."""

import ctypes
import os

from jaxkoans import __  # noqa: F401

SEPARATOR = {separator}


def test_separator():
    """分隔符。os.sep joins the parts of a path."""
    assert "a" + SEPARATOR + "b" == os.path.join("a", "b")


def test_int_size():
    """整数。A C int is as wide as ctypes says."""
    assert ctypes.sizeof(ctypes.c_int) == {size}


def test_pid():
    """进程。A running process has a positive id."""
    assert {pid} > 0
'''
BLANKS_A = dict(double='todo("return 2 * x")', sum="__", cumsum="__", limit="__")
ANSWER_A = dict(double="return 2 * x", sum="3", cumsum="[0, 1, 3, 6]", limit="jnp.less(c, 5)")
ENDLESS = "jnp.equal(c, c)"  # a condition that never turns False, in compiled code
BLANKS_B = dict(separator="__", size="__", pid="__")
ANSWER_B = dict(separator="os.sep", size="ctypes.sizeof(ctypes.c_int32)", pid="os.getpid()")
A, B = "koans/01/test_a.py", "koans/02/test_b.py"
PYPROJECT = """[tool.pytest.ini_options]
addopts = "--import-mode=importlib --continue-on-collection-errors"
pythonpath = ["."]
testpaths = ["koans"]
timeout = 30
"""
MANIFEST = 'title_zh = "{zh}"\ntitle_en = "{en}"\nfiles = ["{file}"]\n'
# The answer of test_int_size reads ctypes (a module the reading engine counts as reading the
# program): its contract allows it, as a chapter's contract does for a koan that teaches it.
CONTRACT_B = """
[contracts."test_b.py::test_int_size"]
allow = ["inspect"]
traced = false
why = "the koan asks what ctypes measures"
"""


def write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")


def answer_a(**changes: str) -> str:
    return KOAN_A.format(**{**ANSWER_A, **changes})


def answer_b(**changes: str) -> str:
    return KOAN_B.format(**{**ANSWER_B, **changes})


@pytest.fixture(scope="module")
def fake_course(tmp_path_factory) -> Path:
    """A course with the pristine harness (this checkout's jaxkoans/), in a git repository."""
    root = tmp_path_factory.mktemp("grade") / "course"
    shutil.copytree(
        REPO / "jaxkoans", root / "jaxkoans", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO / "conftest.py", root / "conftest.py")
    write(root / "pyproject.toml", PYPROJECT)
    write(root / "koans" / "course.toml", 'path = ["01", "02"]\n')
    write(root / "koans/01/chapter.toml", MANIFEST.format(zh="第一章", en="Sums", file="test_a.py"))
    write(root / "koans/02/chapter.toml", MANIFEST.format(zh="第二章", en="Host", file="test_b.py") + CONTRACT_B)  # fmt: skip
    write(root / A, KOAN_A.format(**BLANKS_A))
    write(root / B, KOAN_B.format(**BLANKS_B))
    write(root / "answers/01/test_a.py", answer_a())
    write(root / "answers/02/test_b.py", answer_b())
    shipped_course.write(root)  # the course as shipped (koans/.shipped.json)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "course"], check=True)
    return root


@pytest.fixture(scope="module")
def pristine(fake_course, tmp_path_factory) -> grading.PristineCourse:
    return grading.prepare_course(str(fake_course), tmp_path_factory.mktemp("pristine"))


def student(course_root: Path, where: Path, files: dict[str, str | bytes | None]) -> Path:
    """A student's fork: the whole course, its koan files replaced (None deletes one)."""
    shutil.copytree(course_root, where, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    for rel, text in files.items():
        if text is None:
            (where / rel).unlink()
        else:
            write(where / rel, text)
    return where


def digest(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under `root` with its mtime and content: grade must change none of them."""
    return {
        p.relative_to(root).as_posix(): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def statuses(grade: grading.Grade) -> dict[str, str]:
    return {k.name: k.state for k in grade.koans}


# ---- the static side: what grade takes from a file, and what it only notes -------------------

ALL_A = ["test_sum", "test_cumsum", "test_double", "test_loop"]
IGNORED = {  # edits outside the fills: grade runs the course's code there, and says so
    "edited assert": (A, answer_a().replace("assert int(total) == 3", "assert int(total) >= 3"), ["test_sum"]),
    "skip marker": (A, answer_a().replace("def test_sum", "@pytest.mark.skip\ndef test_sum"), ["test_sum"]),
    "xfail marker": (A, answer_a().replace("def test_loop", "@pytest.mark.xfail\ndef test_loop"), ["test_loop"]),
    "changed fixture": (A, answer_a().replace("jnp.arange(4)", "jnp.arange(1)"), ALL_A),
    "added import": (A, answer_a().replace("import pytest\n", "import pytest\nimport os\n"), ALL_A),
    "a debugging print": (A, answer_a().replace("    total = jnp.ones(3).sum()\n", "    total = jnp.ones(3).sum()\n    print(total)\n"), ["test_sum"]),
    "fill beyond its blank": (A, answer_a(sum="0 or True"), ["test_sum"]),
    "two statements in a blank": (A, answer_a(sum="3; total = 3"), ["test_sum"]),
    "a TODO docstring changed": (A, answer_a().replace('"""Doubles x."""', '"""Doubles."""'), ALL_A),
}  # fmt: skip


@pytest.mark.parametrize("case", IGNORED, ids=list(IGNORED))
def test_an_edit_outside_the_fills_is_ignored_and_noted_never_a_finding(case, pristine):
    rel, text, koans = IGNORED[case]
    check = tamper.check_file(rel, pristine.root / rel, text, pristine.allowed[rel])
    assert check.findings == [] and check.tampered == {}
    notes = [n for n in check.notes if n.kind == "ignored_edit"]
    assert notes, check.notes
    assert sorted({k for n in notes for k in n.koans}) == sorted(koans), notes
    assert all(" / " in n.message and "ignored by grade" in n.message for n in notes)
    assert all(n.line is None or 0 < n.line <= len(text.splitlines()) for n in notes)
    # What runs is the course's file with fills only: taking it apart again finds no edit.
    shipped = (pristine.root / rel).read_text(encoding="utf-8")
    assert fills.take(shipped, check.graded).ignored == []


def test_a_deleted_or_renamed_koan_is_missing_and_noted(pristine):
    for text in (
        answer_a().split("def test_loop")[0],
        answer_a().replace("def test_loop", "def test_loops"),
    ):
        check = tamper.check_file(A, pristine.root / A, text, pristine.allowed[A])
        assert check.missing == {"test_loop"} and check.findings == []
        assert "missing_test" in {n.kind for n in check.notes}


UNUSUAL = {  # code in a fill that a koan does not need: a note for a human, never a zero
    "a class with __init__ and __call__ in a TODO": (A, answer_a(double="class Scale:\n        def __init__(self, k):\n            self.k = k\n\n        def __call__(self, v):\n            return self.k * v\n\n    return Scale(2)(x)"), "test_double"),
    "setattr on an object of its own": (A, answer_a(double="class Box:\n        pass\n\n    box = Box()\n    setattr(box, 'value', 2 * x)\n    return box.value"), "test_double"),
    "os beyond what the answer uses": (B, answer_b(size="os.cpu_count()"), "test_int_size"),
    "open() in a TODO body": (A, answer_a(double='import tempfile\n    with open(tempfile.mktemp(), "wb") as out:\n        out.write(b"1")\n    return 2 * x'), "test_double"),
}  # fmt: skip


@pytest.mark.parametrize("case", UNUSUAL, ids=list(UNUSUAL))
def test_unusual_code_is_a_note_for_a_human_never_a_zero(case, pristine):
    rel, text, owner = UNUSUAL[case]
    check = tamper.check_file(rel, pristine.root / rel, text, pristine.allowed[rel])
    assert check.findings == [] and check.tampered == {}
    notes = [n for n in check.notes if n.kind == "unusual_code"]
    assert len(notes) == 1 and "costs nothing" in notes[0].message
    expected = pristine.koans[rel] if owner == "<module>" else [owner]
    assert list(notes[0].koans) == expected
    assert check.graded == text  # it runs: the sandbox and the guard judge what it does


FORBIDDEN = {  # ways to change the graded run from inside it: the koan scores zero
    "os._exit in a blank": (B, answer_b(pid='__import__("os")._exit(0)'), ["test_pid"]),
    "pytest.exit in a TODO": (A, answer_a(double="pytest.exit('done', 0)"), ["test_double"]),
    "setattr on a module": (A, answer_a(limit='(setattr(np.testing, "assert_array_equal", print), c < 5)[1]'), ["test_loop"]),
    "a patched __code__": (A, answer_a(double="np.testing.assert_array_equal.__code__ = (lambda *a, **k: None).__code__\n    return x"), ["test_double"]),
    "widened __defaults__": (A, answer_a(double="np.testing.assert_allclose.__defaults__ = (1e9, 1e9, True, '', True)\n    return 2 * x"), ["test_double"]),
    "a patch put back before teardown": (A, answer_a(double="original = np.testing.assert_array_equal\n    np.testing.assert_array_equal = lambda *a, **k: None\n    return x"), ["test_double"]),
    "the guard through sys.modules": (A, answer_a(limit='__import__("sys").modules.pop("_jaxkoans_grade_guard", None) or c < 5'), ["test_loop"]),
    "globals().update": (A, answer_a(limit="globals().update(np=None) or c < 5"), ["test_loop"]),
    "builtins": (A, answer_a(double="import builtins\n    builtins.all = lambda *a, **k: True\n    return x"), ["test_double"]),
    "an always-equal class": (A, answer_a(double="class Same:\n        def __eq__(self, other):\n            return True\n\n    return Same()"), ["test_double"]),
    "an always-equal object from type()": (A, answer_a(double='return type("A", (), {"__eq__": lambda s, o: True})()'), ["test_double"]),
    "gc": (A, answer_a(double="import gc\n    gc.collect()\n    return 2 * x"), ["test_double"]),
    "inspect": (A, answer_a(double="import inspect\n    inspect.stack()\n    return 2 * x"), ["test_double"]),
    "vars() of a module": (A, answer_a(limit="(vars(np.testing).clear() or c < 5)"), ["test_loop"]),
    "the guard imported by name": (A, answer_a(double="import _jaxkoans_grade_guard\n    return 2 * x"), ["test_double"]),
    "__import__ of the harness": (A, answer_a(limit='__import__("jaxkoans") and c < 5'), ["test_loop"]),
}  # fmt: skip


@pytest.mark.parametrize("case", FORBIDDEN, ids=list(FORBIDDEN))
def test_a_construct_no_koan_needs_scores_that_koan_zero_with_its_line(case, pristine):
    rel, text, koans = FORBIDDEN[case]
    check = tamper.check_file(rel, pristine.root / rel, text, pristine.allowed[rel])
    found = [f for f in check.findings if f.kind == "forbidden_code"]
    assert found, (check.findings, check.notes)
    expected = koans
    assert sorted(check.tampered) == sorted(expected)
    line = found[0].line
    assert line and f"line {line}" in found[0].message and "scores zero" in found[0].message
    assert " / " in found[0].message  # Chinese, then English
    assert "Compare" not in found[0].message and "FunctionDef" not in found[0].message


def test_the_course_answers_use_no_forbidden_construct_the_answer_key_does_not_allow():
    """The exemption is per koan: every answer of the course, checked as a student's file,
    has no forbidden_code finding."""
    from jaxkoans.grader.fill_audit import forbidden

    for koan in sorted((REPO / "koans").glob("*/test_*.py")):
        answer = REPO / "answers" / koan.relative_to(REPO / "koans")
        rel = koan.relative_to(REPO).as_posix()
        allowed = tamper.answer_flags(koan, answer)
        check = tamper.check_file(rel, koan, answer.read_text(encoding="utf-8"), allowed)
        assert not [f for f in check.findings if f.kind == "forbidden_code"], rel
        used = {flag for flags in allowed.values() for flag in flags if forbidden(flag)}
        assert len(used) <= 12, (rel, used)  # the course itself needs few of them


TAUTOLOGY = {
    "the result copied into the blank": (answer_a(sum="int(total)"), "test_sum"),
    "the array copied into the blank": (answer_a(cumsum="jnp.cumsum(xs)"), "test_cumsum"),
}


@pytest.mark.parametrize("case", TAUTOLOGY, ids=list(TAUTOLOGY))
def test_a_fill_that_repeats_its_assert_is_a_finding(case, pristine):
    """`assert f(x) == f(x)` cannot fail: the graded check itself was made void."""
    text, koan = TAUTOLOGY[case]
    check = tamper.check_file(A, pristine.root / A, text, pristine.allowed[A])
    assert "tautology" in [f.kind for f in check.findings]
    assert list(check.tampered) == [koan]


COMPUTED = {
    "an always-equal object": 'type("A", (), {"__eq__": lambda s, o: True})()',
    "the result plus nothing": "int(jnp.ones(3).sum()) + 0",
    "a call": "len([1, 2, 3])",
    "wrapped over lines": "(\n        1\n        + 2\n    )",
}


@pytest.mark.parametrize("case", COMPUTED, ids=list(COMPUTED))
def test_a_computation_in_a_prediction_blank_scores_zero_with_its_line(case, pristine):
    """A blank whose answer is a literal takes a literal: grade refuses what pytest refuses."""
    check = tamper.check_file(
        A, pristine.root / A, answer_a(sum=COMPUTED[case]), pristine.allowed[A]
    )
    found = [f for f in check.findings if f.kind == "not_a_prediction"]
    assert len(found) == 1 and found[0].koans == ("test_sum",), check.findings
    assert "a computation where a prediction is asked" in found[0].message and found[0].line
    assert list(check.tampered) == ["test_sum"]
    honest = tamper.check_file(A, pristine.root / A, answer_a(sum="4"), pristine.allowed[A])
    assert not [f for f in honest.findings if f.kind == "not_a_prediction"]


FINE = {  # the student's file, and the file that runs (the same program)
    "the answer": (answer_a(), answer_a()),
    "partly solved": (KOAN_A.format(**{**BLANKS_A, "sum": "3"}),) * 2,
    "a comment line added": (answer_a().replace("    total = jnp", "    # my note\n    total = jnp"), answer_a()),
    "a comment after a blank in mid-line": (
        answer_a().replace("lambda c: c < 5, lambda", "lambda c: c < 5,  # five\n        lambda"),
        answer_a(),
    ),
    "an empty line next to a filled blank": (answer_a().replace("    assert int(total) == 3\n", "\n    assert int(total) == 3\n\n"), answer_a()),
    "a formatter re-wrapping a call over three lines": (
        answer_a().replace("np.testing.assert_array_equal(jnp.cumsum(xs), [0, 1, 3, 6])", "np.testing.assert_array_equal(\n        jnp.cumsum(xs), [0, 1, 3, 6]\n    )"),
        answer_a(),
    ),
    "trailing spaces": ("\n".join(line + "  " for line in answer_a().splitlines()) + "\n", answer_a()),
    "no trailing newline": (answer_a().rstrip("\n"), answer_a()),
    "a trailing comment": (answer_a(sum="3  # three ones"), answer_a()),
    "CRLF line endings": (answer_a().replace("\n", "\r\n"), answer_a()),
    "a byte order mark": ("\ufeff" + answer_a(), answer_a()),
    "a local variable named input": (answer_a(double="input = 2 * x\n    return input"),) * 2,
    "a lambda": (answer_a(limit="(lambda n: jnp.less(c, n))(5)"),) * 2,
    "a fill over two lines": (answer_a(cumsum="[0, 1,\n        3, 6]"), answer_a()),
    "an import in a TODO body": (answer_a(double="from jax import numpy as np2\n\n    return np2.multiply(x, 2)"),) * 2,
    "a helper beside its TODO": (answer_a(double="return twice(x)").replace("def double(x):", "def twice(x):\n    return 2 * x\n\n\ndef double(x):"),) * 2,
    "a helper class and its helper": (answer_a(double="return Doubler().apply(x)").replace("def double(x):", "def factor():\n    return 2\n\n\nclass Doubler:\n    def apply(self, x):\n        return factor() * x\n\n\ndef double(x):"),) * 2,
}  # fmt: skip


@pytest.mark.parametrize("case", FINE, ids=list(FINE))
def test_honest_edits_are_never_findings_nor_ignored(case, pristine, tmp_path):
    written, runs = FINE[case]
    path = tmp_path / "student.py"
    path.write_bytes(written.encode("utf-8"))  # the BOM case starts with U+FEFF
    text, problem = tamper.read_text(path)
    assert problem == ""
    check = tamper.check_file(A, pristine.root / A, text, pristine.allowed[A])
    assert check.findings == [] and check.tampered == {}
    assert [n for n in check.notes if n.kind != "unusual_code"] == []
    assert ast.dump(ast.parse(check.graded)) == ast.dump(ast.parse(runs))


def test_every_answer_of_the_course_is_taken_whole_with_nothing_ignored():
    """fills.take on each koan file and its answer: the graded file is the answer, and the
    answer has no finding (no tautology) and no note."""
    pairs = [(k, REPO / "answers" / k.relative_to(REPO / "koans")) for k in sorted((REPO / "koans").glob("*/test_*.py"))]  # fmt: skip
    assert len(pairs) > 40
    for koan, answer in pairs:
        taken = fills.take(koan.read_text(encoding="utf-8"), answer.read_text(encoding="utf-8"))
        assert taken.ignored == [], (koan, taken.ignored[:3])
        assert ast.dump(ast.parse(taken.graded)) == ast.dump(
            ast.parse(answer.read_text(encoding="utf-8"))
        ), koan
        allowed = tamper.answer_flags(koan, answer)
        check = tamper.check_file(str(koan), koan, answer.read_text(encoding="utf-8"), allowed)
        assert check.findings == [] and check.notes == [], (koan, check.findings + check.notes)


def test_a_fill_nested_too_deeply_to_check_runs_as_shipped(pristine):
    assert "nested too deeply" in tamper.parse_problem(answer_a(sum="+".join(["1"] * 50_000)))
    deep = answer_a(
        limit="jnp.less(c, " + "+".join(["1"] * 900) + ")"
    )  # parses; deeper than a walk may go
    check = tamper.check_file(A, pristine.root / A, deep, pristine.allowed[A])
    assert check.findings == []
    assert check.graded is not None


def test_os_in_a_blank_is_not_even_a_note_where_the_answer_uses_it(pristine):
    check = tamper.check_file(
        B, pristine.root / B, answer_b(pid="os.getppid()"), pristine.allowed[B]
    )
    assert check.findings == [] and check.notes == []


def test_the_guard_finds_and_undoes_a_replaced_function():
    import numpy as np
    import numpy.testing  # loaded before the fingerprint, as the plugin does

    from jaxkoans.plugin import boundary

    snapshot = boundary.Fingerprint()  # run_guard's watch list became the plugin's boundary
    original = np.testing.assert_array_equal
    try:
        np.testing.assert_array_equal = print
        assert snapshot.restore() == ["numpy.testing.assert_array_equal"]
        assert np.testing.assert_array_equal is original
        assert snapshot.restore() == []
    finally:
        np.testing.assert_array_equal = original


def test_the_audit_resolves_a_removal_against_its_directory_descriptor(tmp_path, monkeypatch):
    """pytest empties its basetemp with shutil.rmtree, which removes names relative to a
    directory's descriptor: that is not the workdir (the run's cwd), and no violation."""
    work, basetemp = tmp_path / "work", tmp_path / "basetemp"
    work.mkdir()
    basetemp.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(run_guard._Audit, "root", str(work))
    monkeypatch.setattr(run_guard._Audit, "guard", str(tmp_path / "guard"), raising=False)
    fd = os.open(basetemp, os.O_RDONLY)
    try:
        assert run_guard._Audit.judge("os.remove", ("current", fd)) == ""
        assert run_guard._Audit.judge("shutil.rmtree", ("test_x0", fd)) == ""
        assert run_guard._Audit.judge("os.rename", ("a.py", "b.py", fd, fd)) == ""
        removed = run_guard._Audit.judge("os.remove", ("current", None))  # in the workdir
        assert removed.startswith("os.remove current: deleted or moved the graded run's files")
    finally:
        os.close(fd)


# ---- the command end to end, against golden files ------------------------------------------------


def normalised(document: dict) -> dict:
    """The JSON without what changes from run to run: paths, times, versions, the commit."""
    document = json.loads(json.dumps(document))
    document["student"]["path"] = "<student>"
    document["course"].update(source="<course>", commit="<commit>")
    document["versions"] = dict.fromkeys(document["versions"], "<version>")
    document["graded_at"], document["duration_s"] = "<time>", 0
    for koan in document["koans"]:
        koan["duration"] = 0.0
    return document


def matches_golden(name: str, text: str) -> None:
    golden = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.is_file(), f"no golden file {golden}: run with UPDATE_GOLDEN=1 once"
    assert text == golden.read_text(encoding="utf-8")


def progress_py(*args: str, root: Path, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAXKOANS_ROOT": str(root), "LANG": "C.UTF-8", **kwargs.pop("env", {})}
    return subprocess.run(
        [sys.executable, str(REPO / "progress.py"), "grade", *args],
        capture_output=True, text=True, env=env, timeout=300, **kwargs,
    )  # fmt: skip


def workflow_command(copy: Path, out: Path) -> list[str]:
    """The arguments templates/github-classroom.yml gives `progress.py grade`, with its paths
    pointed at `copy` and `out`, and its variables at both chapters."""
    template = (REPO / "templates" / "github-classroom.yml").read_text(encoding="utf-8")
    line = next(x for x in template.splitlines() if ".venv/bin/python progress.py grade" in x)
    places = {
        "../student": str(copy),
        "../grade.json": str(out / "g.json"),
        "$GITHUB_STEP_SUMMARY": str(out / "g.md"),
        "../classroom.b64": str(out / "classroom.b64"),
        "$ASSIGNMENT": "01,02",
    }
    args = shlex.split(line.split("progress.py grade", 1)[1].split("||")[0])
    assert set(places) <= set(args), f"the workflow's command changed: {line}"
    return [places.get(arg, arg) for arg in args]


def test_the_workflows_command_grades_a_copy_and_writes_every_report(fake_course, tmp_path):
    """The command the classroom workflow runs, on a copy with passed, failing, not started and
    missing koans, an edited assert, harness edits and an added test file: none of those
    edits is used, so none is a finding (exit 0); the edits of koan files are notes."""
    copy = student(
        fake_course,
        tmp_path / "alice",
        {
            A: KOAN_A.format(**{**ANSWER_A, "double": BLANKS_A["double"], "cumsum": "[0, 1, 2, 3]"}).split("def test_loop")[0],
            B: answer_b(size="4").replace("assert ctypes.sizeof(ctypes.c_int) == 4", "assert True"),
            "koans/01/conftest.py": "collect_ignore = ['test_a.py']\n",
            "koans/01/test_extra.py": "def test_free():\n    pass\n",
            "koans/01/notes.txt": "what I learned\n",
            "pyproject.toml": PYPROJECT + "# mine\n",
        },
    )  # fmt: skip
    before = digest(copy)
    out = tmp_path / "reports"
    out.mkdir()
    command = workflow_command(copy, out)  # --course HEAD: a git ref of the course at root
    done = progress_py(*command, "--workers=1", root=fake_course, cwd=fake_course)
    assert done.returncode == 0, done.stdout + done.stderr  # graded; notes cost nothing
    assert digest(copy) == before, "grade changed the student's copy"
    document = json.loads((out / "g.json").read_text(encoding="utf-8"))
    assert document["exit_code"] == done.returncode == 0  # grade's own, not pytest's (1 here)
    assert (out / "g.md").read_text(encoding="utf-8") == report_formats.markdown(document)
    assert document["run"]["harness"] == "jaxkoans/__init__.py"  # the pristine copy ran
    assert document["run"]["sandbox"]["used"] == bool(sandbox.probe().ok)
    assert document["course"]["source"] == "HEAD" and len(document["course"]["commit"]) == 40
    assert {k["name"]: k["status"] for k in document["koans"]} == {
        "test_sum": "passed",
        "test_cumsum": "failing",
        "test_double": "not_started",
        "test_loop": "missing",
        "test_separator": "passed",
        "test_int_size": "not_started",  # `assert True` replaced the assert and its blank
        "test_pid": "passed",
    }
    assert document["findings"] == []
    notes = {(n["kind"], n["file"]) for n in document["notes"]}
    assert notes == {("missing_test", A), ("ignored_edit", B)}
    assert "notes (2)" in done.stdout
    assert document["total"]["passed"] == 3
    # GitHub Classroom's reporter: base64 JSON, one test per koan, points = passed koans.
    payload = json.loads(base64.b64decode((out / "classroom.b64").read_text(encoding="ascii")))
    assert payload["version"] == 1 and payload["status"] == "fail" and payload["max_score"] == 7
    assert len(payload["tests"]) == 7 and sum(t["score"] for t in payload["tests"]) == 3
    assert {t["status"] for t in payload["tests"]} == {"pass", "fail"}
    assert all(t["name"].startswith("koans/0") and "message" in t for t in payload["tests"])
    document = normalised(document)
    matches_golden("alice.json", report_formats.to_json_text(document))
    matches_golden("alice.md", report_formats.markdown(document))
    matches_golden("alice.txt", report_formats.summary(document))
    header = report_formats.csv_header(["01", "02"])
    row = report_formats.csv_row("alice", document, ["01", "02"])
    matches_golden("alice.csv", report_formats.csv_text([header, row]))


def reporter_points(payload: dict) -> tuple[float, float, int]:
    """What the reporter makes of a payload, in its own arithmetic: the table's score
    (getTestScore: passing tests / tests * max_score), the points it records
    (NotifyClassroom: the sum of tests[].score) and the max_score of both."""
    tests = payload["tests"]
    passing = sum(t["status"] == "pass" for t in tests)
    table = passing / len(tests) * payload["max_score"] if tests else float("nan")
    return table, sum(t["score"] for t in tests), payload["max_score"]


# Linux refuses one environment string over 128 KiB (MAX_ARG_STRLEN, counting `NAME=` and the
# final NUL), and the reporter reads the payload from one (`JAXKOANS_RESULTS` in the template).
ENV_STRING_LIMIT = 131072 - len("JAXKOANS_RESULTS=") - 1


def _course_nodeids() -> list[str]:
    from jaxkoans.course import koan_model

    return [
        f"{path.relative_to(REPO).as_posix()}::{koan.name}"
        for path in sorted((REPO / "koans").glob("*/test_*.py"))
        for koan in koan_model.read(path).koans
    ]


def test_the_whole_course_payload_fits_one_environment_string_for_any_mix():
    """This course's koans with long messages, 0, 16, half and all passed: each payload is
    under the budget (a margin under Linux's 131,072-byte limit for one environment string),
    and the reporter's table and its recorded points agree."""
    nodeids = _course_nodeids()
    assert len(nodeids) >= 500
    chapters = sorted({n.split("/")[1] for n in nodeids})
    for passed in (0, 16, len(nodeids) // 2, len(nodeids)):
        koans = [
            {"nodeid": n, "chapter": n.split("/")[1], "name": n.split("::")[1],
             "file": n.split("::")[0], "line": 1000 + i, "duration": 12.5,
             "status": "passed" if i < passed else ("crashed" if i % 7 == 0 else "failing"),
             "message": "E   AssertionError: 学生的答案与课 / the learner's answer and the lesson " * 9}
            for i, n in enumerate(nodeids)
        ]  # fmt: skip
        document = {
            "koans": koans, "findings": [], "status": "graded", "total": {"total": len(koans)},
            "chapters": [{"number": c, "title_en": f"Chapter {c}: sharding, collectives and the compiler"} for c in chapters],
        }  # fmt: skip
        payload = report_formats.classroom(document, points=1)
        text = report_formats.classroom_text(payload).strip()
        assert len(text) <= report_formats.PAYLOAD_BUDGET < ENV_STRING_LIMIT
        assert reporter_points(payload) == (passed, passed, len(nodeids))
        assert [t["status"] == "pass" for t in payload["tests"]].count(True) == passed
    reporter = "import base64, json, os; d = json.loads(base64.b64decode(os.environ['JAXKOANS_RESULTS'])); print(sum(t['score'] for t in d['tests']))"  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", reporter], env={**os.environ, "JAXKOANS_RESULTS": text},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == str(len(nodeids)), done.stderr


def test_a_payload_that_cannot_fit_is_refused_not_cut():
    koans = [
        {"nodeid": f"koans/01/test_x.py::test_{'n' * 60}_{i}", "chapter": "01", "name": "t",
         "file": "koans/01/test_x.py", "line": 1, "duration": 0.0, "status": "failing", "message": "m"}
        for i in range(1500)
    ]  # fmt: skip
    document = {"koans": koans, "chapters": [], "findings": [], "status": "graded", "total": {"total": 1500}}  # fmt: skip
    with pytest.raises(report_formats.PayloadTooLarge):
        report_formats.classroom(document)


def test_usage_errors_exit_2_before_any_work(fake_course, tmp_path):
    assert cli.main(["grade"]) == 2
    assert cli.main(["grade", str(tmp_path / "nobody")]) == 2
    assert cli.main(["grade", "--batch", str(tmp_path)]) == 2  # no --csv
    assert cli.main(["grade", str(tmp_path), f"--json={tmp_path / 'no' / 'g.json'}"]) == 2
    done = progress_py(str(tmp_path), "--course", "no-such-ref", root=fake_course)
    assert done.returncode == 2 and "no-such-ref" in done.stderr
    for wrong in ("--chapter=07", "--koans=test_nothing", "--chapter=02 --koans=test_sum"):
        done = progress_py(
            str(tmp_path), f"--course={fake_course}", *wrong.split(), root=fake_course
        )
        assert done.returncode == 2 and "no such" in done.stderr, (wrong, done.stderr)


def test_the_run_refuses_a_harness_that_is_not_the_pristine_course(fake_course, tmp_path):
    """Without jaxkoans/ in the course, the child would import the editable install of this
    checkout: without the sandbox the guard stops it, in the sandbox there is none to import;
    either way grade says it could not grade (exit code 3)."""
    bare = tmp_path / "bare"
    shutil.copytree(fake_course, bare, ignore=shutil.ignore_patterns(".git", "jaxkoans"))
    course = grading.prepare_course(str(bare), tmp_path / "p")
    copy = student(bare, tmp_path / "s", {A: KOAN_A.format(**{**BLANKS_A, "sum": "3"})})  # it runs
    outside = r"imported jaxkoans from \S+/jaxkoans/__init__\.py, not from the pristine course"
    with pytest.raises(grading.CouldNotGrade, match=outside):
        grading.grade(copy, course, grading.Options(workers=1, sandbox=False))
    if sandbox.probe().ok:  # in the sandbox this checkout does not even exist
        with pytest.raises(grading.CouldNotGrade, match="No module named 'jaxkoans'"):
            grading.grade(copy, course, grading.Options(workers=1))


# ---- robustness: one broken file, koan or copy costs only itself ----------------------------------


@pytest.fixture(scope="module")
def broken(fake_course, pristine, tmp_path_factory) -> dict[str, grading.Grade]:
    """Copies with one broken file each, graded at once (their runs are independent)."""
    base = tmp_path_factory.mktemp("students")
    crash_b = answer_b(size="ctypes.string_at(0)")  # a segfault: `ctypes` is what the answer uses
    copies = {  # the longest run first
        "hostile": {
            A: answer_a(limit=ENDLESS, double='__import__("os")._exit(0)'),  # endless; exit
            B: crash_b,
        },
        "syntax": {A: answer_a().replace("def test_sum():", "def test_sum(:")},
        "garbage": {A: bytes(range(256)) * 8},
        "import": {A: answer_a(), B: answer_b(separator="os.no_such_thing")},
    }
    fast = grading.Options(workers=1)
    options = {"hostile": grading.Options(koan_timeout=2, workers=1)}  # short, not too short
    paths = {name: student(fake_course, base / name, files) for name, files in copies.items()}
    for name in ("syntax", "garbage", "import"):
        for rel in (A, B):
            if rel not in copies[name]:
                write(paths[name] / rel, answer_a() if rel == A else answer_b())
    before = {name: digest(path) for name, path in paths.items()}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(grading.grade, path, pristine, options.get(name, fast))
            for name, path in paths.items()
        }
        graded = {name: future.result() for name, future in futures.items()}
    assert {name: digest(path) for name, path in paths.items()} == before
    return graded


def test_a_syntax_error_costs_only_its_file(broken):
    grade = broken["syntax"]
    assert statuses(grade) == dict.fromkeys(["test_sum", "test_cumsum", "test_double", "test_loop"], "failing") | dict.fromkeys(["test_separator", "test_int_size", "test_pid"], "passed")  # fmt: skip
    assert grade.problems == [
        {"file": A, "message": "无法解析 / does not parse: line 21: invalid syntax"}
    ]
    assert grade.findings == []


def test_a_corrupted_file_is_named_and_the_rest_counts(broken):
    grade = broken["garbage"]
    assert [k.state for k in grade.koans] == ["failing"] * 4 + ["passed"] * 3
    assert grade.problems[0]["file"] == A and "UTF-8" in grade.problems[0]["message"]


def test_a_file_that_fails_to_import_is_named_and_the_rest_counts(broken):
    grade = broken["import"]
    assert [k.state for k in grade.koans] == ["passed"] * 4 + ["failing"] * 3
    assert grade.problems[0]["file"] == B and "cannot be imported" in grade.problems[0]["message"]
    assert "no_such_thing" in grade.koans[-1].note


def test_an_endless_loop_in_compiled_code_costs_only_its_koan(broken):
    loop = next(k for k in broken["hostile"].koans if k.name == "test_loop")
    assert (loop.state, loop.cause) == ("failing", "timeout")
    assert statuses(broken["hostile"])["test_cumsum"] == "passed"


def test_an_interpreter_crash_costs_only_its_koan(broken):
    """A segfault (ctypes.string_at(0)): xdist replaces the worker, the other koans run."""
    grade = broken["hostile"]
    assert statuses(grade)["test_int_size"] == "crashed"
    assert statuses(grade)["test_separator"] == statuses(grade)["test_pid"] == "passed"
    crash = next(k for k in grade.koans if k.name == "test_int_size")
    assert "crashed" in crash.note


def test_exiting_the_interpreter_from_a_todo_scores_only_its_koan_zero(broken):
    """`__import__("os")._exit(0)` in a TODO body ends the process before its verdict: a
    finding with its line (forbidden_code), for the koans that use that TODO only."""
    grade = broken["hostile"]
    assert statuses(grade)["test_double"] == "tampered"
    assert statuses(grade)["test_sum"] == "passed"
    found = [f for f in grade.findings if f.kind == "forbidden_code"]
    assert found and all(f.koans == ("test_double",) for f in found), grade.findings
    assert "before its verdict" in found[0].message


def test_ctrl_c_removes_the_workdir_and_writes_no_report(fake_course, tmp_path):
    copy = student(fake_course, tmp_path / "slow", {A: answer_a(limit=ENDLESS)})
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    report = tmp_path / "g.json"
    env = {**os.environ, "JAXKOANS_ROOT": str(fake_course), "TMPDIR": str(scratch)}
    grade = subprocess.Popen(
        [sys.executable, str(REPO / "progress.py"), "grade", str(copy), "--course", "HEAD", f"--json={report}", "--timeout=60"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not any(
        "test_loop" in p.read_text() for p in scratch.glob("jaxkoans-grade-*/record.jsonl")
    ):
        assert time.monotonic() < deadline and grade.poll() is None, grade.communicate()
        time.sleep(0.2)
    grade.send_signal(signal.SIGINT)
    _, stderr = grade.communicate(timeout=60)
    assert grade.returncode == 130, stderr
    assert "interrupted" in stderr
    assert not report.exists() and list(tmp_path.glob(".g.json.*")) == []
    assert list(scratch.iterdir()) == [], "the workdir was left behind"
    survivors = []
    for process in Path("/proc").glob("[0-9]*"):
        try:
            seen = (process / "environ").read_bytes() + (process / "cmdline").read_bytes()
        except OSError:
            continue
        if str(scratch).encode() in seen:
            survivors.append(process.name)
    assert survivors == [], "processes of the grading run survived"


def test_batch_writes_one_row_per_copy_and_survives_a_broken_one(
    fake_course, tmp_path, monkeypatch
):
    batch = tmp_path / "class"
    (batch / "empty").mkdir(parents=True)  # nothing of the course: every koan missing
    student(fake_course, batch / "koans-is-a-file", {})
    shutil.rmtree(batch / "koans-is-a-file" / "koans")
    write(batch / "koans-is-a-file" / "koans", "not a directory\n")
    student(fake_course, batch / "explodes", {})
    real = grading.grade

    def grade(path, *args, **kwargs):
        if path.name == "explodes":
            raise RuntimeError("disk on fire")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(grading, "grade", grade)
    out = tmp_path / "grades.csv"
    code = cli.main(
        ["grade", "--batch", str(batch), f"--csv={out}", "--jobs=2", f"--course={fake_course}"]
    )
    assert code == 3  # one copy could not be graded
    rows = list(csv.DictReader(out.read_text(encoding="utf-8").splitlines()))
    assert [r["student"] for r in rows] == ["empty", "explodes", "koans-is-a-file"]
    assert rows[0] | {"score": "x"} == {"student": "empty", "status": "graded", "passed": "0", "total": "7", "score": "x", "ch01": "0", "ch02": "0", "findings": "0", "problems": "0", "error": ""}  # fmt: skip
    assert rows[1]["status"] == "error" and "disk on fire" in rows[1]["error"]
    # `koans` is a file: both koan files cannot be read (problems), the file is a note
    assert (rows[2]["status"], rows[2]["findings"], rows[2]["problems"]) == ("graded", "0", "2")


# ---- the real course -----------------------------------------------------------------------------


def test_the_real_course_solved_passes_and_an_edited_assert_is_only_a_note(tmp_path):
    """Two copies of this course (as committed: HEAD), a file of chapter 01 and chapter 09's
    capstone graded as a batch (`--koans`; the whole answer key is graded by the test below):
    the answers, with the capstone written with `open(path, "wb")` and an
    `import orbax.checkpoint as checkpointing` added at the top (ignored by grade: no TODO uses
    the name; one that a TODO uses is graded with it, as a helper); and a copy with one edited
    assert (`== 10` → `> 0`), whose koan
    then runs with the course's assert and what stands where the blank was: `== 0`, failing."""
    head = grading.prepare_course("HEAD", tmp_path / "head")
    batch = tmp_path / "class"
    solved, edited = batch / "solved", batch / "edited"
    graded = ("koans/01/test_scan.py", "koans/09/test_capstone_deploy.py")
    for rel in graded:
        answer = head.root / "answers" / Path(rel).relative_to("koans")
        write(solved / rel, answer.read_text(encoding="utf-8"))
    chosen = [f"{rel}::{name}" for rel in graded for name in head.koans[rel]]
    capstone = solved / "koans/09/test_capstone_deploy.py"
    text = capstone.read_text(encoding="utf-8")
    write_bytes = "    (directory / MODEL_FILE).write_bytes(exp.serialize())\n"
    assert write_bytes in text and "\nimport numpy as np\n" in text
    text = text.replace(
        write_bytes,
        '    with open(directory / MODEL_FILE, "wb") as out:\n        out.write(exp.serialize())\n',
    )
    text = text.replace(
        "\nimport numpy as np\n",
        "\nimport numpy as np\nimport orbax.checkpoint as checkpointing\n",
        1,
    )
    write(capstone, text)
    scan = (head.root / "answers" / "01" / "test_scan.py").read_text(encoding="utf-8")
    assert "    assert int(carry) == 10\n" in scan
    write(
        edited / "koans/01/test_scan.py",
        scan.replace("    assert int(carry) == 10\n", "    assert int(carry) > 0\n"),
    )
    out, reports = tmp_path / "grades.csv", tmp_path / "reports"
    reports.mkdir()
    code = cli.main(["grade", "--batch", str(batch), f"--csv={out}", f"--reports={reports}", "--jobs=1", "--course=HEAD", f"--koans={','.join(chosen)}"])  # fmt: skip
    assert code == 0  # notes cost nothing: no copy has findings
    everything = json.loads((reports / "solved.json").read_text(encoding="utf-8"))
    not_passed = [(k["nodeid"], k["status"], k["message"][:200]) for k in everything["koans"] if k["status"] != "passed"]  # fmt: skip
    assert not_passed == [] and everything["findings"] == [] and everything["problems"] == []
    assert {k["chapter"] for k in everything["koans"]} == {"01", "09"}
    assert everything["total"]["passed"] == everything["total"]["total"] == len(chosen)
    ignored = [n for n in everything["notes"] if n["kind"] == "ignored_edit"]
    assert [(n["file"], "added an import" in n["message"]) for n in ignored] == [("koans/09/test_capstone_deploy.py", True)]  # fmt: skip
    document = json.loads((reports / "edited.json").read_text(encoding="utf-8"))
    scan_koans = {k["name"]: k["status"] for k in document["koans"] if k["file"] == "koans/01/test_scan.py"}  # fmt: skip
    first = "test_scan_returns_final_carry_and_stacked_outputs"
    assert scan_koans.pop(first) == "failing" and set(scan_koans.values()) == {"passed"}
    assert document["findings"] == []
    note = next(n for n in document["notes"] if n["kind"] == "ignored_edit")
    assert note["koans"] == ["test_scan_returns_final_carry_and_stacked_outputs"]
    assert note["file"] == "koans/01/test_scan.py" and note["line"] == scan.splitlines().index("    assert int(carry) == 10") + 1  # fmt: skip


def test_the_whole_answer_key_graded_in_the_sandbox_keeps_every_point(answer_key_graded):
    """Issue 33: honest work loses no point. A copy whose every koan file is its answer, graded
    on this course in the sandbox where this machine has one (conftest.answer_key_graded): every
    koan passes, chapter 03's processes (gloo looks up the sandbox's host name) and chapter 05's
    C++ kernels (built where a read-only course lets them) included, and every TODO the answers
    reach meets its contract. Only `--answer-key` runs it (CI does); its run is then also the
    suite's run of answers/."""
    document = answer_key_graded.document
    not_passed = [(k["nodeid"], k["status"], k["message"][:300]) for k in document["koans"] if k["status"] != "passed"]  # fmt: skip
    assert not_passed == [] and document["findings"] == [] and document["problems"] == []
    assert document["run"]["sandbox"]["used"] == bool(sandbox.probe().ok)
    assert document["total"]["passed"] == sum(
        len(n) for n in answer_key_graded.course.koans.values()
    )
    assert answer_key_graded.exit_code == 0


# ---- a corpus of tampered and honest copies, graded as one batch -------------------------------


def _body(code: str) -> str:
    """Code for the TODO body of `double` (indented under it)."""
    return "\n    ".join(textwrap.dedent(code).strip().splitlines())


TAMPERED = {  # each a route named in issue 19; test_loop is left unsolved: nothing may pass it
    "forges-the-record": _body('''
        import glob, json, os
        line = json.dumps({"event": "koan", "nodeid": "koans/01/test_a.py::test_loop", "path": "koans/01/test_a.py", "name": "test_loop", "state": "passed"})
        # its own process and its parent (the controller) only: never the host's other processes
        for fd in glob.glob(f"/proc/{os.getpid()}/fd/*") + glob.glob(f"/proc/{os.getppid()}/fd/*"):
            try:
                with open(fd, "a") as out:
                    out.write(line + "\\n")
            except OSError:
                pass
        os.killpg(0, 9)
    '''),
    "plants-a-conftest": _body('''
        import os
        try:
            with open(os.path.join(os.environ["JAXKOANS_ROOT"], "koans", "01", "conftest.py"), "w") as out:
                out.write("collect_ignore = ['test_a.py']\\n")
        except OSError:
            pass
        os._exit(1)
    '''),
    "reads-the-answers": _body('''
        import os
        root = os.environ["JAXKOANS_ROOT"]
        for path in (os.path.join(root, "..", "pristine", "answers", "01", "test_a.py"), "answers/01/test_a.py"):
            try:
                open(path).read()
            except OSError:
                pass
        return 2 * x
    '''),
    "patches-numpys-comparison": _body('''
        import numpy.testing._private.utils as u
        u.assert_array_compare = lambda *a, **k: None
        return x
    '''),
    "deletes-the-guards-files": _body('''
        import os
        for path in (os.environ.get("JAXKOANS_GRADE_GUARD", ""), "_jaxkoans_grade_guard.py"):
            try:
                os.remove(path)
            except OSError:
                pass
        return 2 * x
    '''),
    "reads-the-evidence": _body('''
        import os
        try:
            os.read(os.open(os.environ["JAXKOANS_GRADE_GUARD"], os.O_RDONLY | os.O_NONBLOCK), 1 << 16)
        except (OSError, KeyError):
            pass
        return 2 * x
    '''),
    "stops-itself": _body('''
        import os, signal
        os.kill(os.getpid(), signal.SIGSTOP)
        return 2 * x
    '''),
    "kills-the-controller": _body('''
        import os
        os.kill(os.getppid(), 9)
        return 2 * x
    '''),
    "forges-an-xdist-report": _body('''
        import sys
        import pytest
        frame = sys._getframe()  # the koan's caller holds its item (gc.freeze hides objects)
        while "item" not in frame.f_locals:
            frame = frame.f_back
        plugins = frame.f_locals["item"].config.pluginmanager.get_plugins()
        w = next(o for o in plugins if type(o).__name__ == "WorkerInteractor")
        report = pytest.TestReport("koans/01/test_a.py::test_loop", ("koans/01/test_a.py", 40, "test_loop"), {}, "passed", None, "call", user_properties=[("koan_state", "passed")])
        w.sendevent("testreport", data=w.config.hook.pytest_report_to_serializable(config=w.config, report=report))
        return 2 * x
    '''),
}  # fmt: skip
_ITEM = """
    import sys
    frame = sys._getframe()
    while "item" not in frame.f_locals:
        frame = frame.f_back
    config = frame.f_locals["item"].config
"""
CROSS_KOAN = {  # code in test_double's TODO that would make the unsolved test_loop, run after it on the same worker, pass
    "registers-a-hook-wrapper": _body(_ITEM + '''
    import pytest
    class Forger:
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_makereport(self, item, call):
            report = yield
            if item.name == "test_loop":
                report.outcome, report.longrepr = "passed", None
                report.user_properties.append(("koan_state", "passed"))
            return report
    config.pluginmanager.register(Forger(), "forger")
    return 2 * x
    '''),
    "patches-pytest-internals": _body('''
        import _pytest.python
        real = _pytest.python.Function.runtest  # a method: the guard watches modules' names
        _pytest.python.Function.runtest = lambda self: None if self.name == "test_loop" else real(self)
        return 2 * x
    '''),
}  # fmt: skip
HONEST = {  # each solves every koan in a way a person might
    "mid-line-comment": {A: answer_a().replace("lambda c: c < 5, lambda", "lambda c: c < 5,  # five\n        lambda")},
    "blank-and-comment-lines": {A: answer_a().replace("    assert int(total) == 3\n", "\n    # three ones\n    assert int(total) == 3\n\n")},
    "reformatted": {A: answer_a().replace("np.testing.assert_array_equal(jnp.cumsum(xs), [0, 1, 3, 6])", "np.testing.assert_array_equal(\n        jnp.cumsum(xs),\n        [0, 1, 3, 6],\n    )")},
    "trailing-spaces": {A: "\n".join(line + "   " for line in answer_a().splitlines()) + "\n"},
    "notes-txt": {A: answer_a(), "koans/01/notes.txt": "cumsum keeps the partial sums\n"},
    "open-wb": {A: answer_a(double=_body('''
        import os, tempfile
        path = os.path.join(tempfile.mkdtemp(), "double.bin")
        with open(path, "wb") as out:
            out.write(b"2")
        return 2 * x
    '''))},
    "added-import": {A: answer_a().replace("import pytest\n", "import pytest\nimport orbax.checkpoint as ocp\n")},
}  # fmt: skip


@pytest.fixture(scope="module")
def corpus(fake_course, tmp_path_factory) -> dict:
    """Every copy of the corpus graded by one `grade --batch`."""
    root = tmp_path_factory.mktemp("corpus")
    batch = root / "class"
    for name, attack in TAMPERED.items():
        student(fake_course, batch / name, {A: KOAN_A.format(**{**BLANKS_A, "sum": "3", "double": attack}), B: answer_b()})  # fmt: skip
    for name, attack in CROSS_KOAN.items():
        student(fake_course, batch / name, {A: KOAN_A.format(**{**BLANKS_A, "sum": "3", "double": attack}), B: answer_b()})  # fmt: skip
    for name, files in HONEST.items():
        student(fake_course, batch / name, {B: answer_b(), **files})
    out = root / "out"
    (out / "reports").mkdir(parents=True)
    done = progress_py(
        "--batch", str(batch), f"--csv={out / 'class.csv'}", f"--reports={out / 'reports'}",
        "--jobs=2", "--workers=1", "--stall-timeout=45",
        f"--course={fake_course}", root=fake_course,
    )  # fmt: skip
    documents = {
        path.stem: json.loads(path.read_text(encoding="utf-8"))
        for path in sorted((out / "reports").glob("*.json"))
    }
    return {
        "done": done,
        "documents": documents,
        "csv": out / "class.csv",
    }


@pytest.mark.parametrize("name", TAMPERED)
def test_every_tampered_copy_is_caught(corpus, name):
    document = corpus["documents"][name]
    status = {k["name"]: k["status"] for k in document["koans"]}
    assert document["status"] in ("findings", "incomplete"), (document["findings"], document["problems"])  # fmt: skip
    assert status["test_loop"] != "passed" and status["test_double"] != "passed", status
    assert status["test_sum"] in ("passed", "tampered")  # solved honestly, unless voided
    if document["status"] == "incomplete":  # killed or stopped: named, never a pass
        assert document["run"]["stopped"] and any("ended early" in p["message"] for p in document["problems"])  # fmt: skip
        assert all(k["status"] != "passed" for k in document["koans"] if k["name"] == "test_loop")
    else:
        assert {f["kind"] for f in document["findings"]} <= {"run_violation", "runtime_patch", "forged_report", "forbidden_code", "reads_the_test", "not_a_prediction", "tautology"}  # fmt: skip
    assert document["exit_code"] == (3 if document["status"] == "incomplete" else 1)


@pytest.mark.parametrize("name", CROSS_KOAN)
def test_a_koans_code_cannot_change_a_later_koans_result(corpus, name):
    """Each koan runs in a process of its own, forked from a worker that runs no koan's code:
    what test_double's code changes in its process is gone when test_loop runs, so test_loop
    keeps its own result (its blank is unfilled)."""
    document = corpus["documents"][name]
    status = {k["name"]: k["status"] for k in document["koans"]}
    assert status["test_loop"] == "not_started", (status, document["findings"])
    # 2 * x is right, but importing pytest's machinery in a TODO is a finding: no point for it
    assert status["test_double"] == "tampered" and status["test_sum"] == "passed"
    assert "forbidden_code" in {f["kind"] for f in document["findings"]}
    assert document["problems"] == []


@pytest.mark.parametrize("name", HONEST)
def test_every_honest_copy_grades_clean_with_its_koans_passed(corpus, name):
    document = corpus["documents"][name]
    assert document["status"] == "graded" and document["findings"] == [], document["findings"]
    assert {k["name"]: k["status"] for k in document["koans"]} == dict.fromkeys([*ALL_A, "test_separator", "test_int_size", "test_pid"], "passed")  # fmt: skip
    kinds = {n["kind"] for n in document["notes"]}
    assert kinds <= {"unusual_code", "ignored_edit"}
    assert ("ignored_edit" in kinds) == (name == "added-import")  # the import: ignored by grade


def test_the_batch_exits_3_when_a_run_ended_early(corpus):
    done = corpus["done"]
    assert done.returncode == 3, done.stdout + done.stderr
    assert set(corpus["documents"]) == set(TAMPERED) | set(HONEST) | set(CROSS_KOAN)
    rows = {r["student"]: r for r in csv.DictReader(corpus["csv"].read_text(encoding="utf-8").splitlines())}  # fmt: skip
    assert {name: r["status"] for name, r in rows.items()} == {name: d["status"] for name, d in corpus["documents"].items()}  # fmt: skip


def test_a_note_names_its_koans_in_every_report_and_costs_nothing():
    """A note of what a koan ran (unusual code, an edit grade ignored) names the koans it
    concerns in the Markdown report and the text summary, as a finding does; they still pass."""
    koans = [
        {"nodeid": f"{A}::test_sum", "chapter": "01", "name": "test_sum", "file": A, "status": "passed", "line": None, "duration": 0.1, "message": "", "cause": ""},
        {"nodeid": f"{A}::test_loop", "chapter": "01", "name": "test_loop", "file": A, "status": "passed", "line": None, "duration": 0.1, "message": "", "cause": ""},
    ]  # fmt: skip
    total = report_formats._tally(koans)
    assert total["passed"] == 2
    note = {"kind": "unusual_code", "file": A, "line": 7, "koans": ["test_sum"], "message": "open()"}
    document = {
        "student": {"name": "ann"}, "course": {"source": "HEAD", "commit": None},
        "versions": {"python": "3", "jax": "0", "jaxlib": "0"}, "total": total,
        "chapters": [{"number": "01", "title_zh": "一", "title_en": "One", **total}],
        "koans": koans, "findings": [], "notes": [note], "problems": [], "run": {},
    }  # fmt: skip
    assert f"- `{A}:7` **unusual_code** (test_sum): open()" in report_formats.markdown(document)
    assert f"  - {A}:7 unusual_code (test_sum): open()" in report_formats.summary(document)


# ---- the sandbox itself ------------------------------------------------------------------------


@pytest.mark.skipif(not sandbox.probe().ok, reason=f"no sandbox here: {sandbox.probe().reason}")
def test_the_sandbox_shows_only_what_grading_binds_read_only_without_network(tmp_path):
    """What a koan's code sees: the bound workdir read-only, no answers/, a private /tmp, no
    network interface but loopback (where "localhost" resolves and binds: chapter 03's
    multi-process answers need it), and not the grader's files."""
    work = tmp_path / "work"
    (work / "koans").mkdir(parents=True)
    (work / "koans" / "k.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "answers").mkdir()
    (tmp_path / "secret.txt").write_text("grader only\n", encoding="utf-8")
    probe = textwrap.dedent(
        f"""
        import json, os, socket
        seen = {{}}
        try:
            open({str(work / "koans" / "k.py")!r}, "a").write("y = 2")
            seen["workdir"] = "writable"
        except OSError as error:
            seen["workdir"] = error.strerror
        seen["answers"] = os.path.exists({str(tmp_path / "answers")!r})
        seen["secret"] = os.path.exists({str(tmp_path / "secret.txt")!r})
        seen["repo answers"] = os.path.exists({str(REPO / "answers")!r})
        open({f"/tmp/{tmp_path.name}"!r}, "w").write("private")
        seen["interfaces"] = sorted(name for _, name in socket.if_nameindex())
        server = socket.socket()
        server.bind(("localhost", 0))
        seen["localhost"] = server.getsockname()[0]
        seen["env"] = sorted(os.environ)
        print(json.dumps(seen))
        """
    )
    command = sandbox.wrap(
        sandbox.probe(), [sys.executable, "-c", probe], read_only=[work], chdir=work, env={"LANG": "C.UTF-8"}
    )  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["workdir"] == "Read-only file system"
    assert seen["answers"] is False and seen["secret"] is False and seen["repo answers"] is False
    assert seen["interfaces"] == ["lo"]
    assert seen["localhost"] == "127.0.0.1"
    assert seen["env"] == ["LANG", "PWD"]  # bwrap sets PWD for --chdir
    assert not Path(f"/tmp/{tmp_path.name}").exists()  # its /tmp was its own


# ---- what the learner's tools say grade will not take ------------------------------------------


def test_the_learner_is_told_which_edits_grade_will_not_use(tmp_path, monkeypatch):
    shipped = KOAN_A.format(**BLANKS_A)
    mine = tmp_path / "test_a.py"
    mine.write_text(
        answer_a(sum="3  # three").replace("import pytest\n", "import pytest\nimport os\n"),
        encoding="utf-8",
    )

    class Course:  # a checkout whose koan file was shipped as `shipped`
        root = tmp_path

        def relative(self, path):
            return Path(path.name)

        def shipped_text(self, relative):
            return "shipped", shipped

    edits = outside.edits_outside(Course(), mine)
    assert [(e.line, e.koan, e.what) for e in edits] == [(6, "<module>", "added an import")]
    assert outside.where(Course(), edits[0]) == "test_a.py:6"  # as the summary lists it
    mine.write_text(answer_a(sum="3  # a comment is not an edit"), encoding="utf-8")
    assert outside.edits_outside(Course(), mine) == []


# ---- grading per assignment, and without the sandbox -------------------------------------------


def test_an_assignment_selects_chapters_and_koans(pristine):
    one = grading.select(pristine, ["1"], None)
    assert one.files == [A] and [c.number for c in one.chapters] == ["01"] and one.partial == set()
    some = grading.select(pristine, None, ["test_sum", "test_b.py::test_pid"])
    assert some.koans == {A: ["test_sum"], B: ["test_pid"]} and some.partial == {A, B}
    both = grading.select(pristine, ["01", "02"], [f"{B}::test_pid", "test_loop", "test_sum"])
    assert both.koans == {A: ["test_sum", "test_loop"], B: ["test_pid"]}
    with pytest.raises(grading.UsageProblem, match="no such koan"):
        grading.select(pristine, ["01"], ["test_pid"])


def test_grading_some_koans_runs_and_reports_only_them(fake_course, pristine, tmp_path):
    copy = student(fake_course, tmp_path / "s", {A: answer_a(cumsum="[0]"), B: answer_b()})
    chosen = grading.select(pristine, None, ["test_cumsum", "test_b.py::test_pid"])
    grade = grading.grade(copy, chosen, grading.Options(workers=1))
    assert statuses(grade) == {"test_cumsum": "failing", "test_pid": "passed"}
    document = report_formats.as_json(grade)
    assert document["total"]["total"] == 2 and [c["total"] for c in document["chapters"]] == [1, 1]


def test_require_sandbox_exits_3_where_there_is_none(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "probe", lambda: sandbox.Availability(None, reason="not here"))
    assert cli.main(["grade", str(tmp_path), "--require-sandbox"]) == 3


def test_without_the_sandbox_every_report_says_so(fake_course, pristine, tmp_path):
    copy = student(fake_course, tmp_path / "s", {A: answer_a(), B: answer_b()})
    grade = grading.grade(copy, grading.select(pristine, ["02"], None), grading.Options(workers=1, sandbox=False))  # fmt: skip
    document = report_formats.as_json(grade)
    assert document["status"] == "graded" and document["total"]["passed"] == 3
    assert document["run"]["sandbox"] == {"used": False, "bwrap": "", "reason": "--no-sandbox"}
    assert "no sandbox: --no-sandbox" in report_formats.summary(document)
    assert "no sandbox" in report_formats.markdown(document)


def test_koan_files_outside_the_assignment_are_not_notes(fake_course, pristine, tmp_path):
    copy = student(fake_course, tmp_path / "s", {A: answer_a(), B: answer_b()})
    grade = grading.grade(copy, grading.select(pristine, ["01"], None), grading.Options(workers=1))
    assert statuses(grade) == dict.fromkeys(ALL_A, "passed")
    assert grade.notes == [] and grade.findings == []


def test_a_local_variable_named_like_a_builtin_is_not_even_a_note(pristine):
    text = answer_a(double="open = 2\n    input = open * x\n    return input")
    check = tamper.check_file(A, pristine.root / A, text, pristine.allowed[A])
    assert check.notes == [] and check.findings == []


def test_jax_initialised_at_import_leaves_the_koans_unisolated_and_the_grade_incomplete(fake_course, pristine, tmp_path):  # fmt: skip
    """A worker that has a JAX backend cannot fork safely: its koans run in its own process,
    and the grade says so (incomplete, exit 3) instead of claiming the isolation."""
    early = answer_b(separator='(__import__("jax").numpy.zeros(1), os.sep)[1]')
    copy = student(fake_course, tmp_path / "s", {A: answer_a(), B: early})
    grade = grading.grade(copy, grading.select(pristine, ["02"], None), grading.Options(workers=1))
    document = report_formats.as_json(grade)
    # __import__ in a module-level fill is a finding for every koan of the file; the run goes on
    assert statuses(grade) == dict.fromkeys(["test_separator", "test_int_size", "test_pid"], "tampered")  # fmt: skip
    assert document["run"]["isolated"] is False and document["status"] == "incomplete"
    assert any("without a process of their own" in p["message"] for p in document["problems"])
    fine = grading.grade(copy, grading.select(pristine, ["01"], None), grading.Options(workers=1))
    assert report_formats.as_json(fine)["status"] == "graded" and fine.run["isolated"] is True


def test_without_the_sandbox_a_line_forged_into_the_record_pipe_does_not_count(fake_course, pristine, tmp_path):  # fmt: skip
    """As root, outside the sandbox, a koan can write into the controller's record pipe through
    /proc: a result counts only when the guard's own stream saw its report too."""
    # open() spelled as io.open, the koan's file name split: past the reading engine, so the
    # attack runs and the run's own record is what must hold
    forges = TAMPERED["forges-the-record"].replace(
        "import glob, json, os", "import glob, io, json, os"
    )
    forges = forges.replace('with open(fd, "a")', 'with io.open(fd, "a")')
    forges = forges.replace('"koans/01/test_a.py', '"ko" + "ans/01/test_" + "a.py')  # no file named
    attack = KOAN_A.format(**{**BLANKS_A, "sum": "3", "double": forges})
    copy = student(fake_course, tmp_path / "s", {A: attack, B: answer_b()})
    grade = grading.grade(copy, pristine, grading.Options(workers=1, sandbox=False, stall_timeout=60))  # fmt: skip
    assert grade.run["stopped"] and statuses(grade)["test_loop"] != "passed"


# ---- a fix region's module-level code runs only in its own file's koan processes -----------

KOAN_R = '''"""假的第三章 / a fake chapter with a fix region at module level."""

import ctypes

# ✍️ BEGIN
def width():
    """C int 的字节数。The bytes of a C int."""
    return 0


# ✍️ END


def test_width():
    """宽度。Repair width() so that it gives a C int's size."""
    assert width() == ctypes.sizeof(ctypes.c_int)
'''
FORGING_REGION = '''def width():
    """C int 的字节数。The bytes of a C int."""
    return ctypes.sizeof(ctypes.c_int)


import sys  # noqa: E402

import pytest  # noqa: E402

_frame = sys._getframe()  # at import: the collector's `config`; in a koan's process: its `item`
while not hasattr(_frame.f_locals.get("config"), "pluginmanager") and not hasattr(_frame.f_locals.get("item"), "config"):
    _frame = _frame.f_back
_config = _frame.f_locals.get("config") or _frame.f_locals["item"].config


class _Forger:
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if item.name == "test_loop":
            report.outcome, report.longrepr = "passed", None
            report.user_properties.append(("koan_state", "passed"))
        return report


_config.pluginmanager.register(_Forger(), "forger")
'''  # fmt: skip


@pytest.fixture(scope="module")
def region_course(fake_course, tmp_path_factory) -> Path:
    """The fake course with a third chapter whose koan file has a fix region at module level."""
    root = tmp_path_factory.mktemp("regions") / "course"
    shutil.copytree(fake_course, root)
    write(root / "koans" / "course.toml", 'path = ["01", "02", "03"]\n')
    write(root / "koans/03/chapter.toml", MANIFEST.format(zh="第三章", en="Regions", file="test_r.py"))  # fmt: skip
    write(root / "koans/03/test_r.py", KOAN_R)
    write(root / "answers/03/test_r.py", KOAN_R.replace("return 0", "return ctypes.sizeof(ctypes.c_int)"))  # fmt: skip
    shipped_course.write(root)  # the course as shipped (koans/.shipped.json)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "a fix region"], check=True)
    return root


def test_a_fix_regions_module_code_cannot_change_another_files_koans(region_course, tmp_path):
    """The worker collects a koan file without its fix regions' module-level code, and each
    koan's process runs the whole file before its koan: a region that registers a forging hook
    wrapper at import reaches only its own file's koans (whose own code it is), never the
    unsolved test_loop of chapter 01, which runs on the same worker."""
    region = KOAN_R.split("# ✍️ BEGIN\n")[1].split("# ✍️ END\n")[0]
    forging = KOAN_R.replace(region, FORGING_REGION + "\n\n")
    copy = student(region_course, tmp_path / "s", {A: KOAN_A.format(**{**BLANKS_A, "sum": "3"}), "koans/03/test_r.py": forging})  # fmt: skip
    pristine = grading.prepare_course(str(region_course), tmp_path / "pristine")
    grade = grading.grade(copy, grading.select(pristine, ["01", "03"], None), grading.Options(workers=1))  # fmt: skip
    status = statuses(grade)
    assert status["test_width"] == "tampered", status  # the region imports pytest: a finding
    assert status["test_loop"] == "not_started" and status["test_sum"] == "passed", status


def test_a_koan_file_with_long_notes_is_graded_not_refused(pristine):
    """A student who keeps 300 KB of notes in comments of a solved file keeps every point."""
    notes = "".join(f"# note {i}: what I learned about scan and carries\n" for i in range(6000))
    text = answer_a() + notes
    assert len(text.encode()) > 290_000
    path = pristine.root.parent / "notes_test_a.py"
    path.write_text(text, encoding="utf-8")
    read, problem = tamper.read_text(path)
    assert problem == "" and read == text
    check = tamper.check_file(A, pristine.root / A, read, pristine.allowed[A])
    assert check.findings == [] and check.graded == answer_a()


def test_reports_are_written_readable_by_others_as_any_file_is(tmp_path):
    """Written through a temporary file (never half a report), yet 0644 under umask 022,
    not mkstemp's 0600: a CI job's next step or a TA must read them."""
    old = os.umask(0o022)
    try:
        report_formats.write_all(
            {str(tmp_path / "g.json"): "{}\n", str(tmp_path / "g.md"): "# g\n"}
        )
    finally:
        os.umask(old)
    assert {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()} == {
        "g.json": 0o644,
        "g.md": 0o644,
    }


@pytest.mark.parametrize(
    ("report", "head"),
    [
        ("    while True:\nE   Failed: Timeout (>30.0s) from pytest-timeout.", "⏱️ 超时 / timed out: still running after 30.0 s"),
        ("the koan's own process exited with code 0 before it reported its end", "exited by itself (code 0: os._exit, sys.exit or pytest.exit)"),
        ("the koan's own process ended by signal SIGSEGV before it reported its end", "💥 崩溃 / crashed: the koan's process was killed by SIGSEGV"),
    ],
)  # fmt: skip
def test_a_timeout_an_exit_and_a_crash_are_named_as_what_they_are(report, head):
    shown = grading.headline(report)
    assert head in shown.splitlines()[0]
    assert shown.endswith(report)  # the report itself follows
    assert grading.headline("assert 1 == 2") == "assert 1 == 2"


def test_a_file_as_shipped_costs_no_run(fake_course, pristine, tmp_path):
    """Like progress.py, grade knows an untouched file is not started without running it; a
    file with one fill runs whole."""
    untouched = student(fake_course, tmp_path / "u", {})
    grade = grading.grade(untouched, pristine, grading.Options(workers=1))
    assert set(statuses(grade).values()) == {"not_started"}, statuses(grade)
    assert grade.run["ran"] is False and grade.findings == []
    one = student(fake_course, tmp_path / "o", {A: KOAN_A.format(**{**BLANKS_A, "sum": "3"})})
    grade = grading.grade(one, pristine, grading.Options(workers=1))
    status = statuses(grade)
    assert status["test_sum"] == "passed" and status["test_loop"] == "not_started", status
    assert status["test_separator"] == "not_started" and grade.run["ran"] is True


def test_a_helper_beside_a_todo_is_graded_as_part_of_it(fake_course, pristine, tmp_path):
    """A TODO solved with a small function of the learner's own next to it passes in pytest
    and in grade alike; a helper that no TODO uses is an ignored edit, named."""
    helped = answer_a(double="return twice(x)").replace("def double(x):", "def twice(x):\n    return 2 * x\n\n\ndef double(x):")  # fmt: skip
    copy = student(fake_course, tmp_path / "h", {A: helped})
    grade = grading.grade(copy, grading.select(pristine, ["01"], None), grading.Options(workers=1))
    assert statuses(grade)["test_double"] == "passed", grade.notes
    assert not [n for n in grade.notes if "added a function" in n.message]
    unused = answer_a().replace("def double(x):", "def spare(x):\n    return x\n\n\ndef double(x):")
    check = tamper.check_file(A, pristine.root / A, unused, pristine.allowed[A])
    assert [n for n in check.notes if "added a function" in n.message], check.notes


@pytest.mark.parametrize(
    "helper",
    [
        "from operator import mul as times\n",
        "FACTOR = 2\n",
        "scale = lambda v: 2 * v\n",
    ],
    ids=["an import", "a constant", "a lambda"],
)
def test_module_level_helpers_of_a_todo_are_graded_with_it(fake_course, pristine, tmp_path, helper):
    """An import, a constant or a lambda at module level that a TODO uses is kept, as a `def`
    helper is (issue 46): the koan passes in grade as it does in pytest."""
    uses = {"an": "return times(2, x)", "FA": "return FACTOR * x", "sc": "return scale(x)"}
    body = uses[helper[:2] if not helper.startswith("from") else "an"]
    helped = answer_a(double=body).replace("def double(x):", helper + "\n\ndef double(x):")
    copy = student(fake_course, tmp_path / "m", {A: helped})
    grade = grading.grade(copy, grading.select(pristine, ["01"], None), grading.Options(workers=1))
    assert statuses(grade)["test_double"] == "passed", grade.notes


@pytest.mark.parametrize(
    "trick",
    [
        "all = lambda *a, **k: True",  # the capstone's asserts call all()
        "class _Proxy:\n    def __getattr__(self, name):\n        return lambda *a, **k: True\n\n\nctypes = _Proxy()",
    ],
    ids=["a builtin rebound", "an imported module rebound"],
)
def test_a_fix_region_that_rebinds_what_the_asserts_use_scores_zero(region_course, trick):
    """In a debugging capstone the region is module code: `all = lambda *a: True` or a proxy
    for an imported module leaves the bugs in and every assert passing; both are findings."""
    region = KOAN_R.split("# ✍️ BEGIN\n")[1].split("# ✍️ END\n")[0]
    text = KOAN_R.replace(region, region + trick + "\n\n\n")
    rel = "koans/03/test_r.py"
    pristine = region_course / rel
    check = tamper.check_file(
        rel, pristine, text, tamper.answer_flags(pristine, region_course / "answers/03/test_r.py")
    )
    found = [f for f in check.findings if f.kind == "forbidden_code"]
    assert any("rebinds" in f.message for f in found) and list(check.tampered) == ["test_width"]


@pytest.mark.skipif(not sandbox.probe().ok, reason=f"no sandbox here: {sandbox.probe().reason}")
def test_the_sandbox_resolves_its_own_host_name(tmp_path):
    """gloo (JAX's CPU collectives across processes, chapter 03's multi-process koans) looks up
    the machine's host name; with no DNS in the sandbox its hosts file must name it."""
    code = "import socket; print(socket.gethostbyname(socket.gethostname()))"
    command = sandbox.wrap(sandbox.probe(), [sys.executable, "-c", code], read_only=[], chdir=Path("/tmp"), env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "127.0.0.1", done.stderr[-2000:]


# ---- koans of the course's own code: one shared process per worker ----------------------------

SHARED_PRISTINE = '''import pytest

from jaxkoans import __, todo  # noqa: F401


def helper(x):
    """A TODO."""
    todo("helper")


@pytest.fixture
def made():
    return helper(1)


@pytest.fixture(autouse={autouse})
def every():
    return {every}


def test_plain():
    assert 1 + 1 == __


def test_helper():
    assert helper(2) == __


def test_fixture(made):
    assert made == __


def test_by_name():
    assert "helper" == __
'''


@pytest.mark.parametrize(
    "edit, course_code",
    [
        ({}, {"test_plain", "test_helper", "test_fixture", "test_by_name"}),
        ({"helper": "return 2 * x"}, {"test_plain"}),  # reached by name, fixture, string
        (
            {"plain": "int('2')"},
            {"test_helper", "test_fixture", "test_by_name"},
        ),  # a call runs code
        ({"plain": "len"}, {"test_helper", "test_fixture", "test_by_name"}),  # a name of the file
        ({"plain": "(1 + 1)", "helper": "return 2 * x"}, {"test_plain"}),
        ({"every": "open('x')", "autouse": "True"}, set()),  # runs for every koan
    ],
    ids=["literals", "a solved TODO", "a call", "a name", "arithmetic", "an autouse fixture"],
)
def test_only_koans_whose_run_reaches_literal_predictions_share_a_process(edit, course_code):
    """The grade's shared process runs a koan only where nothing the student wrote runs in it:
    its fills are literals, and no TODO, helper or fixture it reaches (by name, argument or
    string) holds the student's code; a TODO body or an autouse fixture keeps its koans apart."""
    from jaxkoans.grader.tamper import student_code_reached

    shipped = SHARED_PRISTINE.format(autouse="False", every="0")
    fills_in = {"plain": "2", "helper_fill": "4", "fixture": "2", "name": "'helper'"}
    graded = SHARED_PRISTINE.format(
        autouse=edit.get("autouse", "False"), every=edit.get("every", "0")
    )
    graded = graded.replace('todo("helper")', edit.get("helper", 'todo("helper")'))
    for koan, fill in (("test_plain", edit.get("plain", fills_in["plain"])), ("test_helper", fills_in["helper_fill"]), ("test_fixture", fills_in["fixture"]), ("test_by_name", fills_in["name"])):  # fmt: skip
        head, tail = graded.split(f"def {koan}", 1)
        graded = head + f"def {koan}" + tail.replace("__", fill, 1)
    koans = ["test_plain", "test_helper", "test_fixture", "test_by_name"]
    reached = student_code_reached(shipped, graded, koans, {})
    assert {koan for koan, names in reached.items() if not names} == course_code


def test_each_koan_is_told_which_of_the_students_definitions_it_reaches():
    """The grade's chains share a process between koans of a file by what each reaches: a
    solved TODO by name, through a fixture or a string; nothing for literal predictions."""
    from jaxkoans.grader.tamper import student_code_reached

    shipped = SHARED_PRISTINE.format(autouse="False", every="0")
    graded = shipped.replace('todo("helper")', "return 2 * x").replace("== __", "== 2")
    koans = ["test_plain", "test_helper", "test_fixture", "test_by_name"]
    reached = student_code_reached(shipped, graded, koans, {})
    helper = frozenset({"helper"})
    assert reached == {"test_plain": frozenset(), "test_helper": helper, "test_fixture": helper, "test_by_name": helper}  # fmt: skip
    assert student_code_reached(shipped, "def broken(:", koans, {}) == {}  # no one can say
    staged = "STAGES = ['helper']\n\n\ndef test_staged():\n    assert STAGES\n"  # by a constant
    reached = student_code_reached(shipped + staged, graded + staged, ["test_staged"], {})
    assert reached == {"test_staged": helper}


KOAN_C = '''"""假的第三章 / a fake chapter: a capstone, built on its first TODO."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxkoans import todo  # noqa: F401

BUILT = []


def first(x):
    """Adds one."""
    todo("return x + 1")


def second(x):
    """Doubles first(x)."""
    todo("return first(x) * 2")


@pytest.fixture(scope="module")
def table():
    BUILT.append("table")
    return jnp.arange(3)


def test_first(table):
    """第一步。first() adds one."""
    np.testing.assert_array_equal(first(table), [1, 2, 3])


def test_between():
    """中间一个只跑课程代码的 koan。A koan of the course's own code, in between."""
    assert int(jnp.arange(3).sum()) == 3


def test_second(table):
    """第二步。second() doubles first(); the module's fixture is built once in a process."""
    np.testing.assert_array_equal(second(table), [2, 4, 6])
    assert BUILT.count("table") == 1


def test_first_again(table):
    """再用 first。Only first() runs here, and nothing second() did."""
    np.testing.assert_array_equal(first(table) - 1, [0, 1, 2])
    assert "doubled" not in BUILT  # (a string naming a definition would reach it)
'''
SOLVED_C = KOAN_C.replace('todo("return x + 1")', "return x + 1").replace(
    'todo("return first(x) * 2")', "return first(x) * 2"
)


@pytest.fixture(scope="module")
def chain_course(fake_course, tmp_path_factory) -> Path:
    """The fake course with a third chapter: three koans on two TODOs, the second built on
    the first."""
    root = tmp_path_factory.mktemp("chains") / "course"
    shutil.copytree(fake_course, root)
    write(root / "koans" / "course.toml", 'path = ["01", "02", "03"]\n')
    write(root / "koans/03/chapter.toml", MANIFEST.format(zh="第三章", en="Chains", file="test_c.py"))  # fmt: skip
    write(root / "koans/03/test_c.py", KOAN_C)
    write(root / "answers/03/test_c.py", SOLVED_C)
    shipped_course.write(root)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "a chain"], check=True)
    return root


def test_a_koan_shares_a_process_only_with_koans_whose_code_it_reaches(chain_course, tmp_path):
    """test_second reaches all that test_first reached (first) and more: it runs in
    test_first's process (test_between, of the course's code, runs in the shared process in
    between), with the module's fixture still built. test_first_again reaches
    less than test_second did (not second): it gets a process of its own, where nothing
    second() did is left."""
    marked = SOLVED_C.replace("return first(x) * 2", 'BUILT.append("doubled")\n    return first(x) * 2')  # fmt: skip
    copy = student(chain_course, tmp_path / "s", {"koans/03/test_c.py": marked})
    pristine = grading.prepare_course(str(chain_course), tmp_path / "pristine")
    grade = grading.grade(copy, grading.select(pristine, ["03"], None), grading.Options(workers=1))  # fmt: skip
    status = statuses(grade)
    assert status == dict.fromkeys(["test_first", "test_between", "test_second", "test_first_again"], "passed"), status  # fmt: skip
    assert grade.run["chained"] == 1 and grade.run["shared"] == 1, grade.run


KILLS_ITS_SIBLINGS = _body("""
    import os, signal
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            if pid.isdigit() and parent == os.getppid() and int(pid) != os.getpid():
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass
    return 2 * x
""")


def test_a_koan_that_kills_the_shared_process_costs_only_itself(fake_course, pristine, tmp_path):
    """The koans of literal predictions share one process per worker; a TODO's own process
    that kills it (its worker's other children) is a finding against that TODO only: the koan
    that finds the shared process gone starts another, and keeps its point."""
    literal_b = answer_b(separator='"/"', size="4")  # test_b.py's module code stays the course's
    copy = student(fake_course, tmp_path / "k", {A: answer_a(double=KILLS_ITS_SIBLINGS), B: literal_b})  # fmt: skip
    grade = grading.grade(copy, pristine, grading.Options(workers=1))
    status = statuses(grade)
    assert status["test_double"] == "tampered", (status, grade.findings)
    assert "signalled another process" in " ".join(f.message for f in grade.findings)
    shared = ("test_sum", "test_cumsum", "test_separator", "test_int_size")  # 2 before, 2 after
    assert [status[k] for k in shared] == ["passed"] * 4, status
    assert grade.run["shared"] == 4 and grade.problems == [], (grade.run, grade.problems)


def test_a_prediction_that_fails_in_the_shared_process_is_judged_alone(fake_course, pristine, tmp_path):  # fmt: skip
    """Only a clean pass in the shared process counts there: a wrong prediction retires it
    and runs again in a process of its own, and the koans after it still share one."""
    literal_b = answer_b(separator='"/"', size="4")
    copy = student(fake_course, tmp_path / "w", {A: answer_a(sum="4"), B: literal_b})
    grade = grading.grade(copy, pristine, grading.Options(workers=1))
    status = statuses(grade)
    assert status["test_sum"] == "failing" and status["test_cumsum"] == "passed", status
    assert status["test_int_size"] == "passed" and grade.run["shared"] == 3, grade.run
    failing = next(k for k in grade.koans if k.name == "test_sum")
    assert "4" in failing.note and grade.problems == [], (failing.note, grade.problems)


# ---- the release and the grading course: no answer leaves the instructor -----------------------

AUTHORS_TABLES = """
[shortcuts."test_a.py::double"]
library = ["return x + x  # a near-answer"]

[giveaways]
"test_a.py::test_sum" = [{ answer = "3", why = "the sum asked" }]
"""


@pytest.fixture(scope="module")
def releases(fake_course, tmp_path_factory) -> dict[str, Path]:
    """The fake course with authors' tables in a chapter.toml, its student release and its
    grading course."""
    where = tmp_path_factory.mktemp("releases")
    course = where / "course"
    shutil.copytree(fake_course, course)
    manifest = course / "koans/01/chapter.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8") + AUTHORS_TABLES, encoding="utf-8")
    shutil.copy(REPO / ".gitignore", course / ".gitignore")  # ignores .jaxkoans/
    shipped_course.write(course)
    subprocess.run(["git", "-C", str(course), "add", ".gitignore"], check=True)
    release.release(course, where / "student")
    release.release(course, where / "grader", grader=True)
    return {"course": course, "student": where / "student", "grader": where / "grader"}


def _answer_lines(course: Path) -> set[str]:
    """Each answer's distinctive lines: those of answers/ that its koan file lacks."""
    found = set()
    for answer in (course / "answers").rglob("test_*.py"):
        koan = (course / "koans" / answer.relative_to(course / "answers")).read_text(
            encoding="utf-8"
        )
        found |= {
            line.strip()
            for line in answer.read_text(encoding="utf-8").splitlines()
            if len(line.strip()) > 3 and line.strip() not in koan
        }
    return found


@pytest.mark.parametrize("kind", ["student", "grader"])
def test_no_release_holds_an_answer_or_what_identifies_one(releases, kind):
    import tomllib

    out, course = releases[kind], releases["course"]
    files = [p for p in out.rglob("*") if p.is_file()]
    assert not (out / "answers").exists() and not (out / "tests").exists()
    assert tomllib.loads((out / "koans/01/chapter.toml").read_text(encoding="utf-8")).keys() == {
        "title_zh", "title_en", "files"
    }  # fmt: skip
    manifest = json.loads((out / "koans/.shipped.json").read_text(encoding="utf-8"))
    assert all(entry["answer"] is None for entry in manifest["files"].values())
    blobs = {shipped_course.blob_id(p.read_bytes()) for p in (course / "answers").rglob("*.py")}
    distinctive = _answer_lines(course) | {"x + x", "a near-answer"}
    assert len(distinctive) >= 4
    for path in files:
        text = path.read_bytes().decode("utf-8", "replace")
        assert not [line for line in distinctive if line in text], path
        assert not [blob for blob in blobs if blob in text], path
    # What the learner's tools read from the manifest still reads: the shipped texts, the
    # kinds of blanks, and the manifest is not stale in the release (no answers/ to read).
    assert not shipped_course.stale(out)
    assert (out / ".grading/answer_flags.json").is_file() == (kind == "grader")


def test_the_grading_course_grades_as_the_course_does(releases, tmp_path):
    """`release --grader` holds what grade read from answers/: the same answer flags, the same
    per-koan statuses and notes."""
    course, grader = releases["course"], releases["grader"]
    full = grading.prepare_course(str(course), tmp_path / "full")
    keyless = grading.prepare_course(str(grader), tmp_path / "keyless")
    assert {r: dict(full.allowed[r]) for r in full.files} == {
        r: dict(keyless.allowed[r]) for r in keyless.files
    }
    assert any(any(flags.values()) for flags in (dict(full.allowed[r]) for r in full.files))
    copy = tmp_path / "bob"
    shutil.copytree(releases["student"], copy)
    write(copy / A, answer_a(double=BLANKS_A["double"]))
    write(copy / B, answer_b())
    graded = [grading.grade(copy, c, grading.Options(workers=1)) for c in (full, keyless)]
    assert statuses(graded[0]) == statuses(graded[1])
    assert statuses(graded[0])["test_sum"] == "passed"
    assert statuses(graded[0])["test_double"] == "not_started"
    for grade in graded:
        assert grade.findings == [] and grade.notes == [], grade.notes


ROUTES = {  # each passes test_double without doubling, green in the learner's own pytest
    "global-np": _body('''
        global np
        import types
        np = types.SimpleNamespace(testing=types.SimpleNamespace(assert_array_equal=lambda *a, **k: None))
        return x
    '''),
    "frame-globals": _body('''
        import sys, types
        fake = types.SimpleNamespace(testing=types.SimpleNamespace(assert_array_equal=lambda *a, **k: None))
        sys._getframe(1).f_globals.update(np=fake)
        return x
    '''),
    "builtin-shadow": _body('''
        import sys
        g = sys.modules[double.__module__].__dict__
        g["int"] = lambda v: 3
        g["np"] = type(sys)("np")
        return x
    '''),
    # Past what the syntax tree can read: only the run's own evidence catches these.
    "frame-globals-spelled-apart": _body('''
        import sys, types
        fake = types.SimpleNamespace(testing=types.SimpleNamespace(assert_array_equal=lambda *a, **k: None))
        frame = getattr(sys, "_get" + "frame")(1)
        getattr(frame, "f_glo" + "bals").update(np=fake)
        return x
    '''),
    "frame-read-spelled-apart": _body('''
        import sys
        caller = getattr(sys, "_get" + "frame")(1)  # reads, rebinds nothing
        assert caller is not None
        return 2 * x
    '''),
    "code-read-spelled-apart": _body('''
        assert getattr(double, "__co" + "de__").co_name == "double"
        return 2 * x
    '''),
    "file-read-spelled-apart": _body('''
        import io
        text = io.open(getattr(double, "__glo" + "bals__")["__fi" + "le__"]).read()
        assert "[0, 2, 4]" in text  # the expected value, read from the koan's own text
        return 2 * x
    '''),
    "dunder-globals-spelled-apart": _body('''
        import types
        getattr(double, "__glo" + "bals__")["int"] = lambda v: 3  # hides a builtin
        return 2 * x
    '''),
    # No name the text engine reads: only the audit hook, while the koan runs, sees the frame.
    "frame-read-unspelled": _body('''
        import sys
        look = type(sys).__getattribute__(sys, "_get" + "frame")
        assert look(1) is not None
        return 2 * x
    '''),
}  # fmt: skip
STATIC_ROUTES = {"frame-globals", "builtin-shadow"}  # read in the text: refused before running
# Spelled apart for the text, still read by it (a name computed at run time is refused); the run's
# own evidence would catch them too.
SPELLED_APART = {r for r in ROUTES if r.endswith("-spelled-apart")}


@pytest.mark.parametrize("route", ROUTES)
def test_a_route_through_the_koans_module_or_a_patch_put_back_is_a_finding(fake_course, pristine, tmp_path, route):  # fmt: skip
    copy = student(fake_course, tmp_path / route, {A: KOAN_A.format(**{**BLANKS_A, "double": ROUTES[route]})})  # fmt: skip
    grade = grading.grade(copy, grading.select(pristine, ["01"], None), grading.Options(workers=1))
    assert statuses(grade)["test_double"] == "tampered", (statuses(grade), grade.findings)
    found = {f.kind for f in grade.findings if "test_double" in f.koans}
    if route in STATIC_ROUTES:
        assert found & {"reads_the_test", "forbidden_code"}, grade.findings
    elif route in SPELLED_APART:
        assert found & {"reads_the_test", "run_violation", "runtime_patch"}, grade.findings
    elif "-read-" in route:  # the audit hook saw the read; issue 55's table reads it as text too
        assert found & {"run_violation", "reads_the_test"}, grade.findings
    else:
        assert "runtime_patch" in found, grade.findings  # the run's own evidence
    assert statuses(grade)["test_sum"] == "not_started"  # nothing leaks to another koan


KOAN_D = '''"""假的第四章 / a fake chapter: a value prepared before its assert."""

import jax.numpy as jnp
import numpy as np

from jaxkoans import __, todo  # noqa: F401


def prepare():
    """Returns 0, 2, 4."""
    {prepare}


def test_prepared():
    """准备。prepare() returns the even numbers below 6."""
    got = prepare()
    np.testing.assert_array_equal(got, [0, 2, 4])
'''
PUT_BACK = _body("""
    t = np.testing  # no name the text refuses (object.__setattr__ is): the run must see it
    real = t.assert_array_equal
    def fake(*a, **k):
        t.assert_array_equal = real  # put back before teardown looks
    t.assert_array_equal = fake
    return jnp.zeros(3)
""")


def test_a_patched_assert_put_back_before_teardown_is_still_a_finding(fake_course, tmp_path):
    """The koan's own code object calls np.testing.assert_array_equal at its top level; its
    call phase passed without reaching the real one: the call went to a replacement."""
    root = tmp_path / "course"
    shutil.copytree(fake_course, root)
    write(root / "koans" / "course.toml", 'path = ["01", "02", "04"]\n')
    write(root / "koans/04/chapter.toml", MANIFEST.format(zh="第四章", en="Prepared", file="test_d.py"))  # fmt: skip
    write(root / "koans/04/test_d.py", KOAN_D.format(prepare='todo("return 2 * jnp.arange(3)")'))
    write(root / "answers/04/test_d.py", KOAN_D.format(prepare="return 2 * jnp.arange(3)"))
    shipped_course.write(root)
    course = grading.select(grading.prepare_course(str(root), tmp_path / "p"), ["04"], None)
    honest = student(root, tmp_path / "honest", {"koans/04/test_d.py": KOAN_D.format(prepare="return 2 * jnp.arange(3)")})  # fmt: skip
    graded = grading.grade(honest, course, grading.Options(workers=1))
    assert statuses(graded) == {"test_prepared": "passed"} and graded.findings == []
    forged = student(root, tmp_path / "forged", {"koans/04/test_d.py": KOAN_D.format(prepare=PUT_BACK)})  # fmt: skip
    graded = grading.grade(forged, course, grading.Options(workers=1))
    assert statuses(graded) == {"test_prepared": "tampered"}, graded.findings
    assert (  # the boundary compares what the checks call at the check itself (plugin/boundary.py)
        "before the call of" in graded.findings[0].message
        and graded.findings[0].kind == "runtime_patch"
    )


def test_a_formatters_docstrings_are_no_note_and_a_changed_one_still_is(pristine):
    """black and ruff move a docstring's closing quotes and re-indent it: the words are the
    same, the course's string runs anyway; a docstring with other words is still a note."""
    formatted = answer_a().replace('"""Doubles x."""', '"""Doubles x.\n    """').replace(
        '"""求和。The sum of three ones is three."""', '"""\n    求和。The sum of three ones is three.\n    """'
    )  # fmt: skip
    check = tamper.check_file(A, pristine.root / A, formatted, pristine.allowed[A])
    assert check.notes == [] and check.findings == []
    reworded = answer_a().replace('"""Doubles x."""', '"""Doubles x.\n    """').replace("three ones is three", "3 ones is 3")  # fmt: skip
    check = tamper.check_file(A, pristine.root / A, reworded, pristine.allowed[A])
    assert [(n.kind, n.koans) for n in check.notes] == [("ignored_edit", ("test_sum",))]
