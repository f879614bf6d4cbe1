"""The authoring gate: every koan fails for its blank, passes answered, and teaches in two languages.

Like rustlings' `dev check`, each failure says what to fix and where.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxkoans import course
from jaxkoans.authoring import contract_fakes, mutate
from jaxkoans.course import shipped as as_shipped
from jaxkoans.learner.koan_runs import listed_koans
from jaxkoans.plugin import results
from jaxkoans.plugin.results import KoanState

from .conftest import as_answer_events, koan_files
from .fakecourse import is_alive

HERE = course.Course.here()
KOAN_FILES = koan_files(HERE.koans)
CHAPTERS = HERE.chapters()


def test_course_has_chapters_with_koans():
    assert CHAPTERS, "koans/NN/chapter.toml: no chapter found"
    assert KOAN_FILES, "koans/NN/test_*.py: no koan found"


def test_the_course_as_shipped_travels_with_it():
    """koans/.shipped.json (course/shipped.py) holds every koan file as it is here and the kind of
    each prediction blank, read from answers/: the learner's tools never read their git refs."""
    assert not as_shipped.stale(HERE.root), (
        "koans/.shipped.json does not match koans/ and answers/: run python -m jaxkoans.course.shipped"
    )
    kinds = [k for e in HERE.shipped().values() for k in e["predictions"].values()]
    assert len(kinds) > 400 and set(kinds) <= {"literal", "arithmetic", "dtype", "exception"}


NEW_KOAN = '''

def test_triple():
    """三倍。Three ones, each tripled, sum to nine: the manifest grows by these lines."""
    total = 0
    for value in jnp.ones(3):
        total += 3 * int(value)
    assert total == {nine}
'''


def test_the_manifest_changes_by_the_lines_the_koan_file_did(tmp_path):
    """koans/.shipped.json keeps each file's text as a list of lines, one JSON line each: adding
    a koan to a file changes about as many lines of the manifest as of the file (issue 43), and
    every reader still gets the whole text."""
    import difflib
    import json

    from .fakecourse import make_course

    root = make_course(tmp_path / "course")
    manifest = root / "koans" / ".shipped.json"
    before = manifest.read_text(encoding="utf-8").splitlines()
    koan = root / "koans" / "01" / "test_alpha.py"
    for tree, nine in (("koans", "__"), ("answers", "9")):
        path = root / tree / "01" / "test_alpha.py"
        path.write_text(path.read_text(encoding="utf-8") + NEW_KOAN.format(nine=nine))
    as_shipped.write(root)
    after = manifest.read_text(encoding="utf-8").splitlines()
    changed = [
        line for line in difflib.unified_diff(before, after, n=0, lineterm="")
        if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]  # fmt: skip
    added = len(NEW_KOAN.splitlines())
    # besides the added lines: the blob ids of the koan and its answer, the new blank's kind,
    # and a comma after the lines that were last in their lists
    assert added <= sum(line.startswith("+") for line in changed) <= added + 6, changed
    assert sum(line.startswith("-") for line in changed) <= 4, changed
    entry = as_shipped.read_manifest(root / "koans")["koans/01/test_alpha.py"]
    assert entry["text"] == koan.read_text(encoding="utf-8")
    assert len(entry["predictions"]) == 3  # the two blanks, and the new one
    assert not as_shipped.stale(root)
    # A manifest of the first format (one string per file) is still read.
    document = json.loads(manifest.read_text(encoding="utf-8"))
    for each in document["files"].values():
        each["text"] = "".join(each.pop("lines"))
    document["format"] = 1
    manifest.write_text(json.dumps(document), encoding="utf-8")
    old = as_shipped.read_manifest(root / "koans")["koans/01/test_alpha.py"]
    assert old["text"] == koan.read_text(encoding="utf-8")


def test_the_static_gate_runs_without_jax_in_one_command():
    """`python -m jaxkoans.authoring check --chapter NN`: the same checks, and JAX's backend is
    never started (a blank's kind may import a JAX module to resolve a name)."""
    number = CHAPTERS[0].number
    code = (
        "import sys; from jaxkoans.authoring.__main__ import main; code = main(['check', "
        f"'--chapter', '{number}']); bridge = sys.modules.get('jax._src.xla_bridge'); "
        "assert bridge is None or not bridge.backends_are_initialized(); sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=HERE.root, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no problem" in done.stdout


def results_of_every_koan(events: list[dict], tree: Path) -> dict[str, results.KoanResult]:
    """The run's result for each koan of `tree`; every file imported and every koan ran."""
    errors = [e for e in events if e["event"] == "collect-error"]
    assert not errors, f"files of {tree.name}/ that do not import: {errors}"
    seen = results.by_koan(events)  # a parametrized koan is one koan
    expected = [
        f"{f.relative_to(HERE.root).as_posix()}::{name}"
        for f in koan_files(tree)
        for name, _, _ in listed_koans(f)
    ]
    missing = [n for n in expected if n not in seen]
    assert not missing, f"koans of {tree.name}/ that did not run: {missing}"
    return seen


# The recorded runs (conftest.py) have limits of their own, worked out from their koans.


def test_every_answer_passes_under_xdist(answers_run):
    seen = results_of_every_koan(answers_run, HERE.answers)
    skipped = [n for n, e in seen.items() if e.state == KoanState.SKIPPED]
    assert not skipped, f"answers skipped on this machine: {skipped}"
    failing = [
        f"{n} ({e.cause}, line {e.line})" for n, e in seen.items() if e.state != KoanState.PASSED
    ]
    assert not failing, "answers that fail (run `pytest <nodeid>` to see why):\n  " + "\n  ".join(
        failing
    )
    # A contract is a check only if a koan's answer reaches its TODO with arrays it can trace.
    read = {
        f"{e['nodeid'].split('/')[-1].split('::')[0]}::{name}"
        for e in answers_run
        for name in e.get("contracts", ())
    }
    ran = {e["nodeid"].split("/")[1] for e in answers_run if e.get("nodeid", "").count("/") >= 2}
    unread = [
        f"{c.number} {key}"
        for c in HERE.chapters()
        if c.number in ran
        for key, contract in c.contracts.items()
        if contract_fakes.asks_of_program(contract) and key not in read
    ]
    assert not unread, (
        "contracts that no koan of the answers read (its TODO is never called with arrays "
        "from a koan: mark it traced = false with why, or call it):\n  " + "\n  ".join(unread)
    )


def test_a_graded_answer_key_reads_as_a_run_of_answers():
    """With --answer-key, answers_run is the answer key's grade: a koan its grade did not pass
    is a failing answer (its cause and line kept), and the contracts a passed koan met are read
    (a parametrized koan's cases together)."""
    koan = {"file": "koans/01/test_a.py", "cause": "", "line": 3, "duration": 0.1, "message": ""}
    document = {
        "koans": [
            {**koan, "name": "test_x", "status": "passed", "contracts": ["double"]},
            {**koan, "name": "test_y", "status": "failing", "cause": "wrong", "line": 9, "contracts": []},
        ]
    }  # fmt: skip
    seen = results.by_koan(as_answer_events(document))
    assert set(seen) == {"answers/01/test_a.py::test_x", "answers/01/test_a.py::test_y"}
    assert seen["answers/01/test_a.py::test_x"].state == KoanState.PASSED
    assert seen["answers/01/test_a.py::test_x"].contracts == ("double",)
    failing = seen["answers/01/test_a.py::test_y"]
    assert (failing.state, failing.cause, failing.line) == (KoanState.FAILING, "wrong", 9)
    cases = [
        results.KoanResult("a.py::test_z[1]", KoanState.PASSED, contracts=("f",)),
        results.KoanResult("a.py::test_z[2]", KoanState.PASSED, contracts=("g",)),
    ]
    assert results.by_koan([c.as_event() for c in cases])["a.py::test_z"].contracts == ("f", "g")


def test_every_koan_fails_because_of_its_blank(koans_run):
    seen = results_of_every_koan(koans_run, HERE.koans)
    passing = [n for n, e in seen.items() if e.state == KoanState.PASSED]
    assert not passing, f"koans that pass as shipped (nothing left to learn): {passing}"
    wrong = [
        f"{n} ({e.cause} at line {e.line})"
        for n, e in seen.items()
        if e.state != KoanState.NOT_STARTED
    ]
    assert not wrong, (
        "koans that fail for another reason than their blank or TODO (a typo, an import, an "
        "unrelated exception?) — run `pytest <nodeid>` and look for ❌:\n  " + "\n  ".join(wrong)
    )


def test_koans_and_answers_collect_together_without_collisions():
    files = koan_files(HERE.koans) + koan_files(HERE.answers)
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
        cwd=HERE.root,
        capture_output=True,
        text=True,
        timeout=mutate.run_limit(HERE, len(files), workers=1),  # a file's import: a koan's limit
        check=False,
    )
    items = [line for line in listing.stdout.splitlines() if "::test" in line]
    assert len(items) == len(set(items)), "two test items with the same nodeid"
    collected = {results.koan_id(item) for item in items}  # a parametrized koan is one koan
    assert listing.returncode == 0, listing.stdout[-2000:] + listing.stderr[-2000:]
    koans = sum(len(listed_koans(f)) for f in koan_files(HERE.koans))
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
        cwd=HERE.root, env={**os.environ, "JAXKOANS_TEST_PIDS": str(told)},
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
