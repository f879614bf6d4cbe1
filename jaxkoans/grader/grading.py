"""Grade a student's copy of the course against the pristine course, in isolation.

The pristine course (`pristine_course.py`: a git ref of this repository or a directory, maybe
narrowed to an assignment by `select`) is built once. For each copy a temporary workdir holds
the pristine course (without `answers/`) with, in place of its koan files, the *graded files*
that `tamper.py` builds from the copy's koan files: the pristine file plus the student's
blanks, TODO bodies and fix regions (`fills.py`). Nothing else of the copy is used (not its
conftest.py, jaxkoans/, pyproject.toml, csrc/ or added files; those are notes), and the copy is
only read. `graded_run.py` runs pytest there in the sandbox; its record, the guard's evidence and
the static findings make the grade: each koan passed, failing, not_started, tampered (evidence
names it), missing or crashed (including every koan a run that ended early never reported).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from jaxkoans.grader import tamper
from jaxkoans.grader.graded_run import (
    RUN_TIMEOUT_S,
    Cancelled,
    GradedRunResult,
    Options,
    reset_cancel,
    run,
    stop_all,
)
from jaxkoans.grader.pristine_course import (
    CouldNotGrade,
    PristineCourse,
    UsageProblem,
    prepare_course,
    select,
)
from jaxkoans.grader.tamper import Finding
from jaxkoans.plugin import results
from jaxkoans.plugin.results import KoanResult, KoanState

__all__ = [
    "RUN_TIMEOUT_S",
    "Cancelled",
    "CouldNotGrade",
    "Grade",
    "Options",
    "PristineCourse",
    "UsageProblem",
    "grade",
    "prepare_course",
    "reset_cancel",
    "select",
    "stop_all",
]

MESSAGE_LIMIT = 1000  # characters of a koan's message in the reports
WORKDIR_IGNORED = (".git", ".venv", "__pycache__", "*.pyc", ".pytest_cache", ".jaxkoans")
WORKDIR_IGNORED += ("answers", "tests", ".ci", ".github")
WATCHDOG_LINE = re.compile(r"timed out: (\S+::\S+)")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
XDIST_HEADER = re.compile(r"^\[gw\d+\] .* -- Python .*\n?", re.MULTILINE)  # which worker ran it


@dataclass
class Grade:
    student: str
    student_path: Path
    course: PristineCourse
    koans: list[KoanResult]  # in course order; `note` is the message the reports show
    findings: list[Finding]  # evidence: the koans named score zero
    notes: list[Finding]  # for a human reader: never cost a point
    problems: list[dict]  # {"file": str | None, "message": str}
    graded_at: str
    duration_s: float
    versions: dict[str, str]
    run: dict  # {"exit_code", "timed_out", "ran", "harness", "stopped", "sandbox"}


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in ("jax", "jaxlib", "pytest"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "missing"
    return found


def grade(student_dir: Path, pristine: PristineCourse, options: Options | None = None) -> Grade:
    """Grade one student's copy; raises UsageProblem, CouldNotGrade or Cancelled."""
    options = options or Options()
    student_dir = Path(student_dir)
    if not student_dir.is_dir():
        raise UsageProblem(f"不是目录 / not a directory: {student_dir}")
    student_dir = student_dir.resolve()
    started, clock = datetime.now(UTC), time.monotonic()
    with tempfile.TemporaryDirectory(
        prefix="jaxkoans-grade-", ignore_cleanup_errors=True
    ) as scratch_name:
        scratch = Path(scratch_name)
        work = scratch / "course"
        shutil.copytree(pristine.root, work, ignore=shutil.ignore_patterns(*WORKDIR_IGNORED))
        checks: dict[str, tamper.FileCheck] = {}
        problems: list[dict] = []
        for rel in pristine.files:
            (work / rel).unlink()
            checks[rel] = _check(rel, student_dir, pristine, problems)
            if checks[rel].graded is not None:
                (work / rel).write_text(checks[rel].graded, encoding="utf-8")
        findings = _selected([f for c in checks.values() for f in c.findings], pristine)
        notes = _selected([n for c in checks.values() for n in c.notes], pristine)
        student_harness = tamper.harness_entries(student_dir, set(pristine.shipped))
        notes += tamper.harness_notes(pristine.harness, student_harness)
        # A file whose graded text is the course's own (nothing filled in) is not started:
        # like progress.py, grade knows that without running it.
        as_shipped = {
            rel
            for rel in pristine.files
            if checks[rel].graded is not None
            and checks[rel].graded == (pristine.root / rel).read_text(encoding="utf-8")
            and not checks[rel].tampered
        }
        targets = [
            target
            for rel in pristine.files
            if checks[rel].graded is not None and rel not in as_shipped
            for target in (
                [f"{rel}::{name}" for name in pristine.koans[rel]]
                if rel in pristine.partial
                else [rel]
            )
        ]
        count = sum(len(pristine.koans[rel]) for rel in pristine.files)
        reached = {
            f"{rel}::{name}": names
            for rel, check in checks.items()
            for name, names in check.reached.items()
        }
        outcome = (
            run(work, scratch, targets, count, options, reached) if targets else GradedRunResult()
        )
    koans = _merge(pristine, checks, outcome, findings, problems, work, as_shipped)
    return Grade(
        student=student_dir.name,
        student_path=student_dir,
        course=pristine,
        koans=koans,
        findings=findings,
        notes=notes,
        problems=problems,
        graded_at=started.isoformat(timespec="seconds"),
        duration_s=round(time.monotonic() - clock, 2),
        versions=versions(),
        run={
            "exit_code": outcome.exit_code,
            "timed_out": outcome.timed_out,
            "ran": bool(targets),
            "harness": outcome.harness,
            "stopped": outcome.stopped,
            "sandbox": outcome.sandbox,
            "isolated": not _not_isolated(outcome.guard),
            # koans of the course's code only, judged in the workers' shared process
            "shared": _koans_with(outcome.guard, "shared"),
            # koans run after another koan of their file, in its process: they reach all its code
            "chained": _koans_with(outcome.guard, "chained"),
        },
    )


def _koans_with(guard: list[dict], event: str) -> int:
    """How many koans the guard's events of kind `event` name."""
    return len({e.get("nodeid") for e in guard if e.get("event") == event})


def _vouched(outcome: GradedRunResult) -> list[dict]:
    """The record's koan results that the guard's own stream confirms: the controller saw a
    report for that item. (A line forged into the record pipe alone does not count.)"""
    seen = {
        (e.get("nodeid"), e.get("when"))
        for e in outcome.guard
        if e.get("event") == "reported" and e.get("source") == "controller"
    }
    kept = []
    for event in outcome.events:
        if event.get("event") == "koan" and not (
            (event.get("nodeid"), "call") in seen or (event.get("nodeid"), "setup") in seen
        ):
            continue
        kept.append(event)
    return kept


def _selected(found: list[Finding], pristine: PristineCourse) -> list[Finding]:
    """What concerns the koans being graded (all of a file's, unless only some are)."""
    kept = []
    for finding in found:
        if finding.file in pristine.partial and finding.koans:
            koans = tuple(k for k in finding.koans if k in pristine.koans[finding.file])
            if not koans:
                continue
            finding = Finding(finding.kind, finding.file, finding.line, koans, finding.message)
        kept.append(finding)
    return kept


def _check(
    rel: str, student_dir: Path, pristine: PristineCourse, problems: list[dict]
) -> tamper.FileCheck:
    names = pristine.koans[rel]
    text, problem = tamper.read_text(student_dir / rel)
    if problem == "missing":
        check = tamper.FileCheck(rel, names, {}, missing=set(names))
        message = f"缺少 koan 文件 / the koan file is missing: {rel}"
        check.notes.append(Finding("missing_file", rel, None, tuple(names), message))
        return check
    problem = problem or tamper.parse_problem(text or "")
    if problem:
        problems.append({"file": rel, "message": problem})
        return tamper.FileCheck(rel, names, {}, problem=problem)
    return tamper.check_file(rel, pristine.root / rel, text, pristine.allowed[rel])


# ---- the grade --------------------------------------------------------------------------------


def _merge(
    pristine: PristineCourse,
    checks: dict[str, tamper.FileCheck],
    outcome: GradedRunResult,
    findings: list[Finding],
    problems: list[dict],
    work: Path,
    as_shipped: set[str] = frozenset(),
) -> list[KoanResult]:
    record = results.RunRecord.of(_vouched(outcome))  # a parametrized koan is one
    running = {results.koan_id(n) for n in record.started}
    messages = _messages(outcome.guard, work)
    timed_out = {results.koan_id(n) for n in WATCHDOG_LINE.findall(outcome.stderr)}
    patched = _patched(outcome.guard, pristine, findings)
    patched |= _violations(outcome.guard, pristine, findings, patched)
    for path, message in dict(record.collect_errors).items():
        last = message.strip().splitlines()[-1:] or [""]
        problems.append({"file": path, "message": f"无法导入 / cannot be imported: {last[0]}"})
    if outcome.stopped:
        problems.append(
            {
                "file": None,
                "message": f"评分运行提前结束 / the grading run ended early: {outcome.stopped}",
            }
        )
    elif outcome.exit_code not in (None, 0, 1) or (outcome.events and not record.finished):
        problems.append(
            {
                "file": None,
                "message": f"pytest 异常结束 / pytest ended abnormally (exit code {outcome.exit_code})",
            }
        )
    shared = _not_isolated(outcome.guard)
    if shared:
        problems.append(
            {
                "file": None,
                "message": "koan 没有各自的进程 / koans ran without a process of their own: JAX was "
                "initialised while the koan files were imported (code at a file's top level), "
                "so a worker could not fork safely and earlier koans' code ran where later ones "
                f"ran ({len(shared)} koans: {', '.join(sorted(shared)[:5])}); the grade is "
                "incomplete: read them by hand",
            }
        )
    crashed_files = _crashed_imports(outcome.guard)
    for path in crashed_files:
        problems.append(
            {"file": path, "message": "导入时解释器崩溃 / the interpreter crashed importing it"}
        )

    graded = []
    for rel in pristine.files:
        check = checks[rel]
        for name in pristine.koans[rel]:
            nodeid = f"{rel}::{name}"
            result = record.result(nodeid, timed_out=nodeid in timed_out)
            state, cause, line = KoanState.CRASHED, "", check.def_lines.get(name)
            duration, contracts = 0.0, ()
            if name in check.missing:
                state, line = KoanState.MISSING, None
                message = "学生的副本里没有这个 koan / not in the student's copy"
            elif check.problem:
                state, message = KoanState.FAILING, check.problem
            elif name in check.tampered:
                state, message = KoanState.TAMPERED, check.tampered[name].message
                line = check.tampered[name].line or line
            elif nodeid in patched or rel in patched:
                state, message = KoanState.TAMPERED, patched.get(nodeid) or patched[rel]
            elif rel in as_shipped:
                state = KoanState.NOT_STARTED
                message = "与发布时相同，未运行 / as shipped: not started (not run)"
            elif nodeid in record.koans:  # its own report
                state, cause = _status(result.state), result.cause
                line = _student_line(check, result.line) or line
                duration, contracts = result.duration, result.contracts
                message = messages.get(nodeid, "")
                if result.state == KoanState.SKIPPED:
                    message = "跳过不算通过 / a skip is not a pass. " + message
            elif result.cause == "import":
                state, cause, message = result.state, result.cause, _clean(result.note, work)
            elif result.cause == "timeout":
                state, cause = result.state, result.cause
                message = "⏱️ 超时 / timed out: the watchdog stopped it inside compiled code"
            elif nodeid in running:
                message = messages.get(nodeid) or (
                    "💥 解释器崩溃 / the interpreter crashed: no report came back"
                )
            else:  # never reported: never a pass
                message = "没有结果 / no result" + (
                    f" ({outcome.stopped})"
                    if outcome.stopped
                    else " (the interpreter crashed while importing the file)"
                    if rel in crashed_files
                    else " (the grading run stopped early)"
                )
            graded.append(
                KoanResult(nodeid, state, cause, line, duration, _cap(message), contracts)
            )
    return graded


def _not_isolated(guard: list[dict]) -> set[str]:
    """Koans that ran in their worker's process, not one of their own (run_guard.py)."""
    return {e.get("nodeid", "") for e in guard if e.get("event") == "not_isolated"}


def _status(state: KoanState) -> KoanState:
    """A run's state as grade counts it: a skip or a failed build is no pass, so it is open."""
    return state if state in (KoanState.PASSED, KoanState.NOT_STARTED) else KoanState.FAILING


def _student_line(check: tamper.FileCheck, line: int | None) -> int | None:
    if line and 0 < line <= len(check.line_map):
        return check.line_map[line - 1]
    return None


def _messages(guard: list[dict], work: Path) -> dict[str, str]:
    """A koan's message: the text of its failed call, else setup, else a crash."""
    rank = {"call": 0, "setup": 1, "???": 2, "teardown": 3}
    best: dict[str, tuple[int, str]] = {}
    for event in guard:
        if event.get("event") != "message":
            continue
        order = rank.get(event.get("when"), 4)
        nodeid = results.koan_id(event.get("nodeid", ""))
        if nodeid not in best or order < best[nodeid][0]:
            best[nodeid] = (order, _clean(event.get("text", ""), work))
    return {nodeid: headline(text) for nodeid, (_, text) in best.items()}


# pytest-timeout's failure: "Failed: Timeout (>30.0s) from pytest-timeout."
TIMEOUT_LINE = re.compile(r"Timeout \(>(?P<limit>[\d.]+)s\) from pytest-timeout")
OWN_EXIT = re.compile(r"the koan's own process exited with code (?P<code>-?\d+)")
OWN_SIGNAL = re.compile(r"the koan's own process ended by signal (?P<signal>\w+)")


def headline(text: str) -> str:
    """A message that starts with what happened: a timeout, an exit the koan's code made, a
    signal (a crash), rather than the first line of source in the report."""
    if found := TIMEOUT_LINE.search(text):
        head = f"⏱️ 超时 / timed out: still running after {found['limit']} s (an endless loop?)"
    elif found := OWN_EXIT.search(text):
        head = (
            f"🚪 进程自己退出 / the koan's process exited by itself (code {found['code']}: "
            "os._exit, sys.exit or pytest.exit) before its verdict"
        )
    elif found := OWN_SIGNAL.search(text):
        head = f"💥 崩溃 / crashed: the koan's process was killed by {found['signal']}"
    else:
        return text
    return f"{head}\n{text}"


def _patched(
    guard: list[dict], pristine: PristineCourse, findings: list[Finding]
) -> dict[str, str]:
    """nodeid or file -> why, for what the runtime guard caught; adds a finding for each."""
    caught: dict[str, str] = {}
    for event in guard:
        if event.get("event") != "patched":
            continue
        names = ", ".join(event.get("names", [])[:5])
        message = f"运行时替换了 / replaced at run time: {names}"
        where = results.koan_id(event.get("nodeid") or event.get("file") or "")
        if where in caught:
            continue
        caught[where] = message
        rel, _, name = results.koan_id(where).partition("::")
        koans = (name,) if name else tuple(pristine.koans.get(rel, ()))
        findings.append(Finding("runtime_patch", rel, None, koans, message))
    return caught


def _violations(
    guard: list[dict], pristine: PristineCourse, findings: list[Finding], caught: dict[str, str]
) -> dict[str, str]:
    """What the run's processes did against the run itself: evidence, so the koans score zero.
    A koan that tried (audit hook) is tampered; a worker that sent reports for koans it was not
    given voids every koan it reported."""
    found: dict[str, str] = {}
    for event in guard:
        if event.get("event") != "violation":
            continue
        nodeid = results.koan_id(event.get("nodeid", ""))
        message = "运行时越界 / tried at run time: " + "; ".join(event.get("what", [])[:3])
        if nodeid in caught or nodeid in found:
            continue
        found[nodeid] = message
        rel, _, name = nodeid.partition("::")
        findings.append(Finding("run_violation", rel, None, (name,), message))
    seen_calls: set[tuple[str, str]] = set()
    for event in list(guard):  # a koan runs once: a second call report was made up
        if event.get("event") == "reported" and event.get("when") == "call":
            key = (event.get("nodeid", ""), event.get("worker", ""))
            if key in seen_calls or any(k[0] == key[0] for k in seen_calls):
                guard.append({"event": "forged", "nodeid": key[0], "worker": key[1]})
            seen_calls.add(key)
    forgers = {e.get("worker") for e in guard if e.get("event") == "forged"}
    for worker in sorted(w for w in forgers if w):
        forged = sorted(
            {e["nodeid"] for e in guard if e.get("event") == "forged" and e.get("worker") == worker}
        )
        message = (
            f"伪造的报告 / forged reports: worker {worker} reported koans it was not given or reported twice "
            f"({', '.join(forged[:3])}); every koan it reported scores zero"
        )
        voided = {
            results.koan_id(e["nodeid"])
            for e in guard
            if e.get("event") in ("reported", "forged") and e.get("worker") == worker
        }
        by_file: dict[str, list[str]] = {}
        for nodeid in sorted(voided):
            rel, _, name = nodeid.partition("::")
            if rel in pristine.koans and name in pristine.koans[rel]:
                by_file.setdefault(rel, []).append(name)
                found.setdefault(nodeid, message)
        for rel, names in by_file.items():
            findings.append(Finding("forged_report", rel, None, tuple(names), message))
    return found


def _crashed_imports(guard: list[dict]) -> list[str]:
    """Files whose import never ended in some process: it died importing them."""
    began = {(e["pid"], e.get("file")) for e in guard if e.get("event") == "collecting"}
    ended = {(e["pid"], e.get("file")) for e in guard if e.get("event") == "collected"}
    return sorted({file for _, file in began - ended if file})


def _clean(text: str, work: Path) -> str:
    text = XDIST_HEADER.sub("", ANSI.sub("", text or ""))
    return text.replace(f"{work}{os.sep}", "").replace(str(work), ".").strip()


def _cap(text: str, limit: int = MESSAGE_LIMIT) -> str:
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half]}\n…\n{text[-half:]}"
