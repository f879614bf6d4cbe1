"""Fixtures of the suite's own checks: one recorded run of answers/ and one of koans/.

`pytest tests --koans-chapter 03` (repeatable) collects chapter 03's checks only: the recorded
runs cover its koans and answers, the per-chapter checks run for it, the gates
for its stale files; the harness's own tests, the other chapters' checks and the few checks that
only make sense for the whole course are deselected (the header says so).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from xdist.scheduler import LoadScopeScheduling

from jaxkoans import course
from jaxkoans.authoring import mutate
from jaxkoans.course import shipped as as_shipped
from jaxkoans.grader import grading
from jaxkoans.learner import cli, koan_runs, runner
from jaxkoans.plugin import results

HERE = course.Course.here()  # the course these tests check: this checkout, or $JAXKOANS_ROOT

WORKERS = 2
# The course's `timeout = 60` is a koan's limit. The suite's own tests wait on child processes
# that have their own limits, worked out from their work (mutate.run_limit); this one only guards
# against a hang of the test itself, so it is far above what a loaded machine needs, and never
# the reason a test fails.
HANG_GUARD_S = 3600  # on an idle machine; stretched by the load like the child runs
WHOLE_COURSE_ONLY = (  # checks that compare the whole of koans/ with the whole of answers/
    "test_course.py::test_koans_and_answers_collect_together_without_collisions",
)

CHOSEN: set[str] = set()  # --koans-chapter: the chapters checked (empty: all)
# With --koans-chapter, a chapter's checks are the checks parametrized by the chapter, and these, which check the chosen chapters inside (conftest.chosen); the harness's
# own tests, about no chapter, are deselected (the header says so).
CHAPTER_CHECKS = (
    "test_course.py::test_the_course_as_shipped_travels_with_it",
    "test_course.py::test_every_answer_passes_under_xdist",
    "test_course.py::test_every_koan_fails_because_of_its_blank",
    "test_fakes.py::test_every_fake_makes_its_koan_fail",
    "test_shortcuts.py::test_every_generated_shortcut_makes_its_koan_fail",
    "test_mutate.py::test_the_canary_passes_where_the_harness_changed",
    "test_harness.py::test_answers_that_read_printed_programs_pass_in_a_terminal",
)
# Checks only `--answer-key` runs: they grade the whole answer key in the sandbox (CI runs them;
# that graded run then stands in for the plain run of answers/, see answers_run).
ANSWER_KEY_ONLY = (
    "test_grade.py::test_the_whole_answer_key_graded_in_the_sandbox_keeps_every_point",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("jax-koans").addoption(
        "--koans-chapter",
        action="append",
        default=[],
        metavar="NN",
        help="check only this chapter's koans and answers (repeatable)",
    )
    parser.getgroup("jax-koans").addoption(
        "--answer-key",
        action="store_true",
        help="grade the whole answer key in grade's sandbox; that run is also the run of answers/ (CI)",
    )


def pytest_configure(config: pytest.Config) -> None:
    end_children_with_this_process()
    CHOSEN.clear()
    CHOSEN.update(c.zfill(2) for c in config.getoption("koans_chapter", []) or [])
    unknown = CHOSEN - {c.number for c in HERE.chapters()}
    if unknown:
        raise pytest.UsageError(f"--koans-chapter: no such chapter {', '.join(sorted(unknown))}")


def pytest_unconfigure(config: pytest.Config) -> None:
    ended = end_every_child()
    if ended:
        print(f"\njax-koans tests: ended {ended} processes left behind", file=sys.stderr)


def chosen(number: str) -> bool:
    return not CHOSEN or number in CHOSEN


README = (
    "# {n}\n\n这一章很小，只用来测试工具。\n\nThis small chapter exists only so that the tests of the "
    "course's own tools have a course to run on: one koan file, a few blanks, no lesson.\n"
)
HINT_02 = """
[hints."test_beta.py::test_x64"]
zh = ["这一章用双精度。"]
en = ["This chapter runs in double precision."]
"""


def complete_course(root: Path) -> Path:
    """tests/fakecourse.make_course's course, given what `python -m jaxkoans.authoring check`
    asks of a chapter beyond its koans: a README in both languages, a hint for every koan."""
    for number in ("01", "02"):
        (root / "koans" / number / "README.md").write_text(
            README.format(n=number), encoding="utf-8"
        )
    toml = root / "koans" / "02" / "chapter.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + HINT_02, encoding="utf-8")
    for tree in ("koans", "answers"):
        beta = root / tree / "02" / "test_beta.py"
        text = beta.read_text(encoding="utf-8")
        beta.write_text(text.replace("runs in float64.", "runs each of its koans in float64."))
    as_shipped.write(root)
    return root


def koan_files(tree: Path) -> list[Path]:
    """The koan (or answer) files of the chapters being checked."""
    return [p for p in sorted(tree.glob("*/test_*.py")) if chosen(p.parent.name)]


def _chapter_of(item: pytest.Item) -> str | None:
    """The chapter a parametrized check is about (its Chapter parameter)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return next((v.number for v in params.values() if isinstance(v, course.Chapter)), None)


# `pytest tests -n 2`: each file's checks run on one worker (its module fixtures are made once),
# and every check of one recorded run goes with that run, which is then made once. (pytest 9.2
# names items by `Node._id`, so xdist 3.8's `--dist loadgroup`, which renames `_nodeid`, groups
# nothing: the suite brings its own scheduler.)
RECORDED_RUNS = {
    "tests/test_course.py::test_every_answer_passes_under_xdist": "answers_run",
    "tests/test_fakes.py::test_every_fake_makes_its_koan_fail": "answers_run",
    "tests/test_grade.py::test_the_whole_answer_key_graded_in_the_sandbox_keeps_every_point": (
        "answers_run"
    ),
    "tests/test_course.py::test_every_koan_fails_because_of_its_blank": "koans_run",
}
# The fixtures each run is made by (with --answer-key, answers_run is the answer key's grade).
RUN_FIXTURES = {
    "answers_run": "answers_run",
    "answer_key_graded": "answers_run",
    "koans_run": "koans_run",
}


class ByFileAndRecordedRun(LoadScopeScheduling):
    def _split_scope(self, nodeid: str) -> str:
        return RECORDED_RUNS.get(nodeid, nodeid.split("::", 1)[0])

    def _assign_work_unit(self, node) -> None:
        # The recorded runs first, the longest first: xdist orders scopes by their number of
        # tests, which would start a run of minutes (one to three tests) last, on one worker
        # while the other has nothing left to do.
        for scope in ("koans_run", "answers_run"):
            if scope in self.workqueue:
                self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)  # xdist may be off (-p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log) -> LoadScopeScheduling:
    return ByFileAndRecordedRun(config, log)


def _check_recorded_runs(item: pytest.Item) -> None:
    for fixture, run in RUN_FIXTURES.items():
        if fixture in getattr(item, "fixturenames", ()) and RECORDED_RUNS.get(item.nodeid) != run:
            raise pytest.UsageError(f"tests/conftest.py: add {item.nodeid!r} to RECORDED_RUNS")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    guard = HANG_GUARD_S * mutate.load_factor()  # the child runs' own limits grow with the load
    keep, drop = [], []
    for item in items:
        if not Path(item.path).is_relative_to(here):
            keep.append(item)
            continue
        # A prepended marker wins over a test's own: no fixed limit may fail a slow machine.
        item.add_marker(pytest.mark.timeout(guard), append=False)
        _check_recorded_runs(item)
        chapter = _chapter_of(item)
        whole = any(item.nodeid.endswith(name) for name in WHOLE_COURSE_ONLY)
        answer_key = any(item.nodeid.endswith(name) for name in ANSWER_KEY_ONLY)
        about_chapter = chapter or any(item.nodeid.endswith(name) for name in CHAPTER_CHECKS)
        dropped = CHOSEN and (
            whole or answer_key or not about_chapter or (chapter and not chosen(chapter))
        )
        if answer_key and not config.getoption("answer_key"):
            dropped = True
        (drop if dropped else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not CHOSEN:
        return []
    return [
        f"jax-koans tests: chapters {', '.join(sorted(CHOSEN))} only: their checks; the "
        f"harness's own tests and the whole-course checks ({', '.join(WHOLE_COURSE_ONLY)}) "
        "are deselected"
    ]


def run_timeout(targets: list[Path]) -> float:
    """A hang guard for one recorded run, from its work (every koan may take pytest-timeout's
    whole limit, shared by the workers, plus the start of the processes)."""
    return mutate.run_limit(HERE, sum(len(koan_runs.listed_koans(f)) for f in targets), WORKERS)


def record_run(tmp_path_factory, tree: str) -> list[dict]:
    """Run `pytest <tree's chosen chapters> -n 2` through koan_runs.py's runner (its own process
    group, ended whatever happens) and return its record's koan events."""
    root = HERE.root / tree
    targets = [root / c.number for c in HERE.chapters() if chosen(c.number)]
    targets = [t for t in targets if t.is_dir()]
    record = tmp_path_factory.mktemp(tree) / "record.jsonl"
    command = [
        *koan_runs.pytest_command(
            [str(t.relative_to(HERE.root)) for t in targets], record, WORKERS
        ),
        *("-o", f"timeout={mutate.koan_limit(HERE):.0f}"),  # a koan's limit, stretched by the load
    ]
    runner.run_in_group(command, run_timeout(koan_files(root)), cwd=HERE.root)
    events = results.read(record) if record.exists() else []
    return [e for e in events if e["event"] in ("koan", "collect-error")]


class AnswerKeyGrade(NamedTuple):
    course: grading.PristineCourse  # the course as grade took it
    document: dict  # grade's JSON report
    exit_code: int  # what `grade` exited with


@pytest.fixture(scope="session")
def answer_key_graded(tmp_path_factory) -> AnswerKeyGrade:
    """Issue 33's copy: every koan file its answer, graded on this checkout in grade's sandbox
    (`progress.py grade COPY --course=. --json=…`, two workers)."""
    pristine = grading.prepare_course(str(HERE.root), tmp_path_factory.mktemp("answer-key"))
    solved = tmp_path_factory.mktemp("solved") / "solved"
    for rel in pristine.files:
        answer = pristine.root / "answers" / Path(rel).relative_to("koans")
        (solved / rel).parent.mkdir(parents=True, exist_ok=True)
        (solved / rel).write_text(answer.read_text(encoding="utf-8"), encoding="utf-8")
    out = solved.parent / "solved.json"
    code = cli.main(["grade", str(solved), f"--course={HERE.root}", f"--json={out}"])
    if not out.is_file():
        pytest.fail(f"grade wrote no report for the answer key (exit code {code}): see its output")
    return AnswerKeyGrade(pristine, json.loads(out.read_text(encoding="utf-8")), code)


@pytest.fixture(scope="session")
def answers_run(request, tmp_path_factory) -> list[dict]:
    """The run of answers/ the course checks read. With --answer-key (and every chapter) it is
    the answer key's graded run: the answers run once, in koans/ under the sandbox, with two
    workers; each koan's result reads as the answer file's (the same text, line for line)."""
    if request.config.getoption("answer_key") and not CHOSEN:
        return as_answer_events(request.getfixturevalue("answer_key_graded").document)
    return record_run(tmp_path_factory, "answers")


def as_answer_events(document: dict) -> list[dict]:
    """A grade document's koans as the record events of a run of answers/."""
    return [
        {
            "event": "koan",
            "nodeid": f"answers/{Path(k['file']).relative_to('koans').as_posix()}::{k['name']}",
            "state": k["status"],
            "cause": k["cause"],
            "line": k["line"],
            "duration": k["duration"],
            "note": k["message"],
            "contracts": k["contracts"],
        }
        for k in document["koans"]
    ]


@pytest.fixture(scope="session")
def koans_run(tmp_path_factory) -> list[dict]:
    return record_run(tmp_path_factory, "koans")


# ---- the suite's child processes end with it ------------------------------------------------
# Tests start tools (progress.py, the mutation gate, pytest) that start pytest in a session of
# its own, out of reach of a signal to the suite's process group. So every process of the suite
# (the xdist controller and each worker) adopts the orphans below it, passes SIGTERM and SIGHUP
# on to its children and stops as on Ctrl-C, and at its end ends whatever is still below it.

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def end_children_with_this_process() -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans below come to us, not to init
    with contextlib.suppress(ValueError):  # not the main thread: no signal handlers
        for number in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, _stop)
        # A suite started in the background of a script (`cmd &`) inherits SIGINT ignored, and
        # so would every tool a test starts: the Ctrl-C tests would interrupt nothing.
        if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def _stop(signum, frame) -> None:
    for pid in _children():  # xdist workers, a tool a test started: each cleans up its own
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
    raise KeyboardInterrupt  # pytest (and xdist, for its workers) ends the session as on Ctrl-C


def _children() -> list[int]:
    """This process's children, adopted orphans included (Linux /proc; elsewhere none)."""
    found = []
    for task in Path(f"/proc/{os.getpid()}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(pid) for pid in (task / "children").read_text().split()]
    return found


def end_every_child() -> int:
    """Kill every process still below this one (a child's own process group with it) and reap
    it; orphans of those killed come to us in turn. Returns how many were still running."""
    ended, own_group = 0, os.getpgrp()
    for _ in range(100):  # each round reaches one generation further down
        below = _children()
        if not below:
            break
        for pid in below:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if not _is_zombie(pid):
                    ended += 1
                group = os.getpgid(pid)
                if group != own_group:
                    os.killpg(group, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
        for pid in below:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return ended


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
