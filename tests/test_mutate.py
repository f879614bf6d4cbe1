"""The mutation gate: its wrong fills, where it finds the blanks, and a run on a fake course."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from jaxkoans import course
from jaxkoans.authoring import gates, mutate
from jaxkoans.authoring.mutate import sites, wrong_fills
from jaxkoans.course import koan_model
from jaxkoans.course.file_context import Context

from .conftest import chosen, complete_course
from .fakecourse import PYPROJECT, REPO, is_alive, make_course, python_in, write

SOURCE = """
import jax
import jax.numpy as jnp
from jax.experimental import checkify

KEY = jax.random.key(0, impl="rbg")
"""

HERE = course.Course.here()


@pytest.fixture(scope="module")
def context() -> Context:
    return Context.of(SOURCE)


def test_numbers_are_moved_by_one_and_by_a_factor(context):
    assert wrong_fills("3", context) == ["4", "2", "6", "1"]
    assert wrong_fills("0.5", context) == ["1.5", "-0.5", "1.0", "0.25"]
    assert set(wrong_fills("0", context)) == {"1", "-1"}


def test_booleans_flip(context):
    assert wrong_fills("True", context) == ["False"]


def test_a_shape_changes_one_axis_and_a_tuple_swaps(context):
    found = wrong_fills("(4, 2)", context, limit=20)
    assert found[0] == "(2, 4)"
    assert {"(5, 2)", "(4, 3)", "(8, 2)", "(4, 1)"} <= set(found)


def test_strings_take_the_other_values_of_the_same_api(context):
    found = wrong_fills('"rbg"', context)
    assert found[:2] == ["'threefry2x32'", "'unsafe_rbg'"]


def test_dtypes_take_their_siblings_that_exist(context):
    found = wrong_fills("jnp.float32", context)
    assert found[:3] == ["jnp.float16", "jnp.bfloat16", "jnp.float64"]
    assert all(context.resolve(f) is not None for f in found)


def test_an_exception_takes_its_parent_first_then_siblings(context):
    assert wrong_fills("ModuleNotFoundError", context)[0] == "ImportError"
    tracer = wrong_fills("jax.errors.ConcretizationTypeError", context)
    assert tracer[0] == "jax.errors.JAXTypeError"  # JAX's own base, itself a TypeError
    assert "jax.errors.TracerArrayConversionError" in tracer[1:]
    assert "Exception" in wrong_fills("ValueError", context)


def test_the_fill_itself_is_never_a_mutant(context):
    for fill in ("3", "(4, 2)", "jnp.float32", "ValueError", "'rbg'", "[1, 1]"):
        assert fill not in wrong_fills(fill, context)


def test_blanks_come_from_the_twins_with_the_koans_that_see_them(tmp_path):
    koan = write_pair(tmp_path, "x = __\n", "x = 5\n")
    found = sites(koan, tmp_path / "answers" / "test_t.py")
    assert [(s.line, s.fill, s.koans) for s in found] == [
        (1, "5", ("test_a", "test_b")),  # module level: every test of the file sees it
        (3, "2", ("test_a",)),
        (7, "(1, 2)", ("test_b",)),
    ]
    assert [s.span for s in found] == [(4, 5), (20, 21), (18, 24)]


def write_pair(root: Path, top_koan: str, top_answer: str) -> Path:
    body = "def test_a():\n    assert 1 + 1 == {a}\n\n\ndef test_b():\n    assert f() == {b}\n"
    helper = "\n\ndef f():\n    return (1, 2)\n"
    write(root / "koans" / "test_t.py", top_koan + body.format(a="__", b="__") + helper)
    write(root / "answers" / "test_t.py", top_answer + body.format(a="2", b="(1, 2)") + helper)
    return root / "koans" / "test_t.py"


def test_a_helper_fill_is_seen_by_the_tests_that_call_the_helper():
    model = koan_model.parse(
        "def h():\n    return 1\n\n\ndef test_x():\n    h()\n\n\ndef test_y():\n    pass\n"
    )
    assert model.koans_seeing(2) == ("test_x",)


WEAK = '''

def test_more_than():
    """比较。Three ones sum to more than two."""
    assert int(jnp.ones(3).sum()) > {bound}
'''


def test_the_gate_kills_counts_survivors_and_honours_equivalents(tmp_path):
    root = make_course(tmp_path / "course")
    for tree, bound in (("koans", "__"), ("answers", "2")):
        write(root / tree / "01" / "test_weak.py",
              "import jax.numpy as jnp\n\nfrom jaxkoans import __  # noqa: F401\n"
              + WEAK.format(bound=bound))  # fmt: skip
    ran = run_gate(root)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    # test_alpha: 4 + 4 mutants of `3` and `jnp.float32`, all killed; test_weak: 1 survives
    survivors = [line for line in ran.stdout.splitlines() if "test_weak.py" in line]
    assert survivors == ["  01  answers/01/test_weak.py:8  test_more_than  `2` → `1`"]
    assert (root / "survivors.txt").read_text().count("\n") == 1
    manifest = root / "koans" / "01" / "chapter.toml"
    manifest.write_text(
        manifest.read_text()
        + '\n[equivalent]\n"test_weak.py::test_more_than" = [{fill = "1", why = "a bound"}]\n'
    )
    ran = run_gate(root)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    row = next(line for line in ran.stdout.splitlines() if line.strip().startswith("01"))
    mutants, killed, equivalent, survived, unknown = (int(x) for x in row.split()[1:6])
    assert (equivalent, survived, unknown) == (1, 0, 0) and killed == mutants - 1 > 6


def run_gate(root: Path, *options: str) -> subprocess.CompletedProcess:
    return python_in(
        root,
        "-m",
        "jaxkoans.authoring.mutate",
        "--chapter",
        "01",
        "-n",
        "1",
        "--survivors",
        str(root / "survivors.txt"),
        *options,
    )


def test_a_variant_whose_koan_never_reported_is_no_pass(monkeypatch):
    """A worker killed mid-koan leaves no result for it: that koan did not pass. Only when the
    whole run failed is a variant with missing results left without a verdict."""
    from jaxkoans.authoring import mutate

    def fake_run(command, timeout_s, cwd):
        record = Path(next(a for a in command if a.startswith("--koans-record=")).partition("=")[2])
        events = [
            {"event": "koan", "path": "x/01/hung.py", "name": "test_a", "state": "passed"},
            {"event": "koan", "path": "x/01/killed.py", "name": "test_b[1]", "state": "failing"},
            {"event": "koan", "path": "x/01/clean.py", "name": "test_a[0]", "state": "passed"},
            {"event": "koan", "path": "x/01/clean.py", "name": "test_a[1]", "state": "passed"},
        ]
        record.write_text("".join(f"{json.dumps(e)}\n" for e in events), encoding="utf-8")
        return 0, ""

    variants = [
        mutate.Variant("hung.py", "", ("test_a", "test_hangs")),
        mutate.Variant("killed.py", "", ("test_b", "test_never_ran")),
        mutate.Variant("clean.py", "", ("test_a",)),
    ]
    monkeypatch.setattr(mutate.runner, "run_in_group", fake_run)
    assert mutate.run_chapters(HERE, {"01": variants}) == (
        {("01", "hung.py"): False, ("01", "killed.py"): False, ("01", "clean.py"): True},
        "",
    )
    monkeypatch.setattr(mutate.runner, "run_in_group", lambda c, t, cwd: fake_run(c, t, cwd) and (2, "the run was cut"))
    assert mutate.run_chapters(HERE, {"01": variants}) == (
        {("01", "killed.py"): False, ("01", "clean.py"): True},
        "the run was cut",
    )


def test_a_helper_fill_is_seen_through_other_helpers():
    """A test that reaches the TODO only through another helper still runs against its fakes."""
    model = koan_model.parse(
        "def h():\n    return 1\n\n\ndef wrap():\n    return h()\n\n\n"
        "def test_x():\n    wrap()\n\n\ndef test_y():\n    h()\n\n\ndef test_z():\n    pass\n"
    )
    assert model.koans_seeing(2) == ("test_x", "test_y")


BLOCKING_FAKE = '''
def double__blocks(x):
    """Says where it runs (its worker and the child pytest above it), then waits forever."""
    import os
    import pathlib
    import threading

    told = pathlib.Path(os.environ["JAXKOANS_TEST_PIDS"])
    told.with_suffix(".part").write_text(f"{os.getpid()} {os.getppid()}")
    os.replace(told.with_suffix(".part"), told)
    threading.Event().wait()
'''


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_stopping_the_gate_ends_its_child_pytest_and_workers(tmp_path, stop):
    """An outer `timeout` (SIGTERM) or a closed terminal (SIGHUP) stops the gate while a fake
    hangs in its child pytest: that pytest and its worker end with the gate."""
    root = make_course(tmp_path / "course")
    # no pytest-timeout limit: the fake must still be hanging when the gate is stopped
    write(root / "pyproject.toml", PYPROJECT.replace("timeout = 3\n", ""))
    write(root / "answers" / "01" / "fakes" / "alpha.py", BLOCKING_FAKE)
    told = tmp_path / "pids"
    env = {**os.environ, "JAXKOANS_ROOT": str(root), "PYTHONPATH": str(REPO)}
    gate = subprocess.Popen(
        [sys.executable, "-m", "jaxkoans.authoring.mutate", "--fakes", "--chapter", "01", "-n", "1"],
        cwd=root, env={**env, "JAXKOANS_TEST_PIDS": str(told)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    running: list[int] = []
    try:
        # the child pytest starts JAX and a worker first: wait for as long as the gate runs
        while not told.exists():
            assert gate.poll() is None, gate.communicate()
            time.sleep(0.1)
        running = [int(pid) for pid in told.read_text().split()]
        assert all(is_alive(pid) for pid in running)
        gate.send_signal(stop)
        _, stderr = gate.communicate(timeout=mutate.STARTUP_S)
        # the gate sent SIGKILL to the child's group as it left: its processes go when it lands
        deadline = time.monotonic() + mutate.STARTUP_S  # a guard against waiting forever
        while (alive := [pid for pid in running if is_alive(pid)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert alive == [], f"the gate's child pytest and its worker outlived it: {stderr}"
        assert gate.returncode == 128 + stop, stderr
    finally:
        gate.kill()
        gate.communicate()
        for pid in running:  # a failing check leaves nothing running
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_koans_limit_in_the_gate_stretches_with_the_load(monkeypatch):
    """On a loaded machine a koan's wall time grows, its work does not: the gate's per-koan limit
    (and so a whole run's) grows with the load, never below the course's own."""
    monkeypatch.setattr(mutate.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(mutate.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    assert mutate.koan_limit(HERE) == 60  # pyproject.toml's timeout
    monkeypatch.setattr(mutate.os, "getloadavg", lambda: (8.0, 1.0, 1.0))
    assert mutate.koan_limit(HERE) == 4 * 60
    assert mutate.run_limit(HERE, 10, workers=2) == mutate.STARTUP_S + 4 * 60 * 10 / 2


def test_a_file_selects_its_koans_and_an_empty_selection_is_a_usage_error(capsys):
    by_file = mutate.main(["--list", "answers/01/test_scan.py"])
    listed = capsys.readouterr().out.splitlines()
    assert by_file == 0 and listed
    assert all("test_scan.py" in line for line in listed)
    assert mutate.main(["answers/01/test_no_such_file.py"]) == 2
    assert "no mutants for" in capsys.readouterr().err


GATED = [c for c in HERE.chapters() if chosen(c.number)]


@pytest.mark.parametrize("chapter", GATED, ids=[c.number for c in GATED])
def test_the_gate_passes_for_every_file_a_change_touched(chapter):
    """CI runs the mutation gate of the koans whose lines, their file's lines outside its koans
    or `[equivalent]` entries changed since it last passed (tests/gate_record.toml); the record
    of the others must meet the target. After a harness edit alone, the canary stands in."""
    names = gates.stale(HERE, [chapter])[0].files["mutation"]
    if names:
        outcome = mutate.gate(HERE, chapter, set(names))
        assert not (outcome.survived or outcome.unknown or outcome.problem), (
            f"{chapter.number}: run `python -m jaxkoans.authoring.mutate answers/{chapter.number}/"
            f"{names[0]}` to see the survivors; once the gates pass, "
            f"`python -m jaxkoans.authoring stamp --chapter {chapter.number}`\n"
            + "\n".join(mutate.table([outcome]))
        )
    own = gates.read(gates.record_path(HERE)).get(chapter.number, {})
    recorded = [
        entry
        for key in gates.chapter_digests(HERE, chapter)["mutation"]
        if key not in names and (entry := gates.recorded(own, "mutation", key))
    ]
    if not names and not recorded:
        pytest.skip(f"{chapter.number}: no koan file with a blank")
    killed = sum(e["killed"] for e in recorded) + (len(outcome.killed) if names else 0)
    counted = sum(e["mutants"] for e in recorded) + (len(outcome.tried) if names else 0)
    assert all(e["killed"] + e["equivalent"] == e["mutants"] for e in recorded)
    assert killed >= 0.95 * counted, f"{chapter.number}: {killed}/{counted} mutants killed"
    if not names:
        pytest.skip(
            f"{chapter.number}: every file's mutation record is current ({killed}/{counted} killed)"
        )


def test_the_canary_passes_where_the_harness_changed():
    """After an edit of the harness code, a chapter whose content the record still covers runs
    its canary (a few mutants, fakes and generated fakes that must fail, gates.CANARY), not
    every gate: the edit costs minutes, not half an hour."""
    stale = gates.stale(HERE, GATED)
    chapters = [s.chapter for s in stale if s.harness and s.recorded]
    if not chapters:
        never = [s.chapter.number for s in stale if not s.recorded]
        pytest.skip(
            f"no recorded chapter to confirm; never stamped (their gates run in full): {never}"
            if never
            else "every chosen chapter's gates were confirmed with the current harness code"
        )
    wrong = {n: w for n, w in gates.canary(HERE, chapters).items() if w}
    assert not wrong, wrong


GAMMA = '''

def test_three():
    """三。Two and one make three, counted the slow way."""
    assert int(jnp.ones(3).sum()) - 1 == {two}
'''


def authoring(root: Path, *args: str) -> subprocess.CompletedProcess:
    return python_in(root, "-m", "jaxkoans.authoring", *args)


def test_one_stamp_runs_every_gate_and_records_what_each_file_passed(tmp_path):
    """`python -m jaxkoans.authoring stamp` runs what the record says is stale, writes the
    manifest and the record; `check` names what is stale, runs nothing. A koan file without a
    TODO has no fakes or shortcut entry; an edit of the harness runs the canary, not every gate."""
    root = complete_course(make_course(tmp_path / "course"))
    write(root / "answers" / "01" / "fakes" / "alpha.py", FAKE_DOUBLE)
    before = authoring(root, "check")
    assert before.returncode == 1, before.stdout + before.stderr
    assert "01: the fakes record is stale for test_alpha.py" in before.stdout
    assert "02: the fakes record" not in before.stdout  # test_beta.py has no TODO
    stamped = authoring(root, "stamp", "-n", "1")
    assert stamped.returncode == 0, stamped.stdout + stamped.stderr
    record = tomllib.loads((root / gates.RECORD).read_text(encoding="utf-8"))
    alpha, beta = record["01"]["test_alpha.py"], record["02"]["test_beta.py"]
    assert set(alpha) == {"mutation", "fakes", "shortcuts"} and set(beta) == {"mutation"}
    per_koan = alpha["mutation"]  # the mutation gate: one entry per koan
    assert (
        set(per_koan) == {"test_sum", "test_dtype", "test_double"} and alpha["fakes"]["fakes"] == 1
    )
    assert all(e["killed"] == e["mutants"] for e in per_koan.values())
    assert per_koan["test_sum"]["mutants"] > 2 and per_koan["test_dtype"]["mutants"] > 2
    assert authoring(root, "check").returncode == 0
    assert "is current" in authoring(root, "stamp").stdout

    # A prediction koan edited in a file with a TODO, another in a new file: those two koans'
    # mutants, no fakes, no generated fakes, and the manifest.
    for tree in ("koans", "answers"):
        path = root / tree / "01" / "test_alpha.py"
        path.write_text(
            path.read_text().replace(
                "The sum of three ones is three.", "The sum of three ones, counted again, is three."
            )
        )
    for tree, two in (("koans", "__"), ("answers", "2")):
        write(root / tree / "01" / "test_gamma.py", HEADER_LINE + GAMMA.format(two=two))
    toml = root / "koans" / "01" / "chapter.toml"
    toml.write_text(toml.read_text().replace('files = ["test_alpha.py"]', 'files = ["test_alpha.py", "test_gamma.py"]')
                    + '\n[hints."test_gamma.py::test_three"]\nzh = ["减一。"]\nen = ["One is taken away."]\n')  # fmt: skip
    stale = authoring(root, "check", "--chapter", "01").stdout
    assert "koans/.shipped.json does not match" in stale, stale
    assert (
        "01: the mutation record is stale for test_alpha.py (test_sum), test_gamma.py (test_three): "
        in stale
    ), stale
    assert (
        "fakes record" not in stale and "shortcuts record" not in stale and "harness" not in stale
    )
    again = authoring(root, "stamp", "--chapter", "01", "-n", "1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "fakes fail" not in again.stdout and "generated fakes" not in again.stdout
    restamped = tomllib.loads((root / gates.RECORD).read_text(encoding="utf-8"))["01"]
    ran = (
        per_koan["test_sum"]["mutants"]
        + restamped["test_gamma.py"]["mutation"]["test_three"]["mutants"]
    )
    assert f"     01  {ran:>7}  {ran:>6}" in again.stdout, again.stdout  # the mutants of two koans
    assert restamped["test_alpha.py"]["mutation"]["test_dtype"] == per_koan["test_dtype"]
    assert authoring(root, "check").returncode == 0

    # An edit of the harness (here pytest's configuration): the canary, not the gates.
    config = root / "pyproject.toml"
    config.write_text(config.read_text().replace("timeout = 3", "timeout = 4"))
    harness = authoring(root, "check").stdout
    assert harness.count("the harness code changed") == 2 and "record is stale" not in harness
    canary = authoring(root, "stamp", "-n", "1")
    assert canary.returncode == 0, canary.stdout + canary.stderr
    assert "canary: 01, 02" in canary.stdout and "kill rate" not in canary.stdout
    assert authoring(root, "check").returncode == 0


HEADER_LINE = "import jax.numpy as jnp\n\nfrom jaxkoans import __, todo  # noqa: F401\n"
FAKE_DOUBLE = '''
def double__identity(x):
    """Returns its input: the koan must see that nothing was doubled."""
    return x
'''


def test_a_change_to_the_harness_code_makes_every_gate_record_stale(tmp_path, monkeypatch):
    """The digests cover the harness code a verdict depends on (issue 34): an edit to the
    plugin, the runner, pytest's configuration or the gate itself re-checks every chapter;
    an edit to the learner's commands or the grader does not."""
    shortcuts = "jaxkoans/authoring/shortcuts.py"
    for rel in (
        *gates.HARNESS,
        gates.MUTATE,
        shortcuts,
        "jaxkoans/learner/status.py",
        "jaxkoans/grader/x.py",
    ):
        path = tmp_path / rel
        path = path / "module.py" if not path.suffix else path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {rel}\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        "[tool.pytest.ini_options]\ntimeout = 60\n[tool.ruff]\nline-length = 100\n"
    )
    there = course.Course(tmp_path)
    before = gates.harness_digest(there, gates.MUTATE)
    for rel, counts in (
        ("jaxkoans/learner/status.py", False),
        ("jaxkoans/grader/x.py", False),
        ("jaxkoans/plugin/module.py", True),
        ("jaxkoans/learner/runner.py", True),
        (gates.MUTATE, True),
        ("conftest.py", True),
    ):
        path = tmp_path / rel
        original = path.read_text(encoding="utf-8")
        path.write_text(original + "# an edit\n", encoding="utf-8")
        assert (gates.harness_digest(there, gates.MUTATE) != before) is counts, rel
        path.write_text(original, encoding="utf-8")
    config = tmp_path / "pyproject.toml"
    config.write_text(config.read_text().replace("line-length = 100", "line-length = 99"))
    assert gates.harness_digest(there, gates.MUTATE) == before  # not pytest's configuration
    config.write_text(config.read_text().replace("timeout = 60", "timeout = 61"))
    assert gates.harness_digest(there, gates.MUTATE) != before
    assert gates.harness_digest(there, gates.MUTATE, shortcuts) != gates.harness_digest(
        there, gates.MUTATE
    )
