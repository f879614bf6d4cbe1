"""Grade a student's copy against the pristine course (docs/sandbox.md): a workdir holds the
pristine course (no `answers/`) with the *graded files* (`tamper.py`: the pristine file plus the
student's fills) in place of its koan files; the run (`graded_run.py`), the guard's evidence
and the static findings make each koan's state. The copy is only read.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
from jaxkoans.grader.graded_run import GradedRunResult, Options, run
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

__all__ = ["CouldNotGrade", "prepare_course", "select"]  # for command.py and the tests

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
        found[name] = "missing"
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found


def grade(student_dir: Path, pristine: PristineCourse, options: Options | None = None) -> Grade:
    """Grade one student's copy; raises UsageProblem, CouldNotGrade or Cancelled."""
    options = options or Options()
    student_dir = Path(student_dir)
    if not student_dir.is_dir():
        raise UsageProblem(f"不是目录 / not a directory: {student_dir}")
    student_dir = student_dir.resolve()
    started, clock = datetime.now(UTC), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="jaxkoans-grade-", ignore_cleanup_errors=True) as name:
        scratch = Path(name)
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
        # A file whose graded text is the course's own (nothing filled in) is not started:
        # like progress.py, grade knows that without running it.
        as_shipped = {
            rel
            for rel, check in checks.items()
            if check.graded == (pristine.root / rel).read_text(encoding="utf-8")
            and not check.tampered
        }
        targets = []
        for rel in (r for r, c in checks.items() if c.graded is not None and r not in as_shipped):
            partial = rel in pristine.partial
            targets += [f"{rel}::{name}" for name in pristine.koans[rel]] if partial else [rel]
        count = sum(len(pristine.koans[rel]) for rel in pristine.files)
        reached = {f"{rel}::{k}": v for rel, c in checks.items() for k, v in c.reached.items()}
        outcome = run(work, scratch, targets, count, options, reached) if targets else None
    outcome = outcome or GradedRunResult()
    koans = _merge(pristine, checks, outcome, findings, problems, work, as_shipped)
    when, took = started.isoformat(timespec="seconds"), round(time.monotonic() - clock, 2)
    return Grade(
        *(student_dir.name, student_dir, pristine, koans, findings, notes, problems),
        *(when, took, versions()),
        run={
            "exit_code": outcome.exit_code,
            "timed_out": outcome.stopped.startswith("time limit"),
            "ran": bool(targets),
            "harness": outcome.harness,
            "stopped": outcome.stopped,
            "sandbox": outcome.sandbox,
            "isolated": not _named(outcome.guard, "not_isolated"),
            "shared": len(_named(outcome.guard, "shared")),  # course code, in a shared process
            "chained": len(_named(outcome.guard, "chained")),  # after a koan of its file
        },
    )


def _named(guard: list[dict], event: str) -> set[str]:
    return {e.get("nodeid", "") for e in guard if e.get("event") == event}


def _vouched(outcome: GradedRunResult) -> list[dict]:
    """The record's events less the koan results the controller saw no report for (a line
    forged into the record pipe alone does not count)."""
    seen = {
        e.get("nodeid")
        for e in outcome.guard
        if e.get("event") == "reported"
        and e.get("source") == "controller"
        and e.get("when") in ("setup", "call")
    }
    return [e for e in outcome.events if e.get("event") != "koan" or e.get("nodeid") in seen]


def _selected(found: list[Finding], pristine: PristineCourse) -> list[Finding]:
    """What concerns the koans being graded (all of a file's, unless only some are)."""
    kept = []
    for finding in found:
        if finding.file in pristine.partial and finding.koans:
            koans = tuple(k for k in finding.koans if k in pristine.koans[finding.file])
            kept += [dataclasses.replace(finding, koans=koans)] if koans else []
        else:
            kept.append(finding)
    return kept


def _check(
    rel: str, student_dir: Path, pristine: PristineCourse, problems: list[dict]
) -> tamper.FileCheck:
    names = pristine.koans[rel]
    text, problem = tamper.read_text(student_dir / rel)
    if problem == "missing":
        message = f"缺少 koan 文件 / the koan file is missing: {rel}"
        note = Finding("missing_file", rel, None, tuple(names), message)
        return tamper.FileCheck(rel, names, {}, [], [note], missing=set(names))
    problem = problem or tamper.parse_problem(text or "")
    if problem:
        problems.append({"file": rel, "message": problem})
        return tamper.FileCheck(rel, names, {}, problem=problem)
    return tamper.check_file(rel, pristine.root / rel, text, pristine.allowed[rel])


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
    patched = _evidence(outcome.guard, pristine, findings)

    def problem(message: str, file: str | None = None) -> None:
        problems.append({"file": file, "message": message})

    for path, message in dict(record.collect_errors).items():
        last = message.strip().splitlines()[-1:] or [""]
        problem(f"无法导入 / cannot be imported: {last[0]}", path)
    if outcome.stopped:
        problem(f"评分运行提前结束 / the grading run ended early: {outcome.stopped}")
    elif outcome.exit_code not in (None, 0, 1) or (outcome.events and not record.finished):
        problem(f"pytest 异常结束 / pytest ended abnormally (exit code {outcome.exit_code})")
    shared = _named(outcome.guard, "not_isolated")
    if shared:
        problem(
            "koan 没有各自的进程 / koans ran without a process of their own: JAX was "
            "initialised while the koan files were imported (code at a file's top level), "
            "so a worker could not fork safely and earlier koans' code ran where later ones "
            f"ran ({len(shared)} koans: {', '.join(sorted(shared)[:5])}); the grade is "
            "incomplete: read them by hand"
        )
    crashed_files = _crashed_imports(outcome.guard)
    for path in crashed_files:
        problem("导入时解释器崩溃 / the interpreter crashed importing it", path)

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
                kept = result.state in (KoanState.PASSED, KoanState.NOT_STARTED)  # a skip: open
                state, cause = result.state if kept else KoanState.FAILING, result.cause
                if result.line and 0 < result.line <= len(check.line_map):
                    line = check.line_map[result.line - 1] or line
                duration, contracts = result.duration, result.contracts
                message = messages.get(nodeid, "")
                if result.state == KoanState.SKIPPED:
                    message = "跳过不算通过 / a skip is not a pass. " + message
            elif result.cause in ("import", "timeout"):  # failing: its file, or the watchdog
                state, cause, message = result.state, result.cause, _clean(result.note, work)
                if cause == "timeout":
                    message = "⏱️ 超时 / timed out: the watchdog stopped it inside compiled code"
            elif nodeid in running:
                crash = "💥 解释器崩溃 / the interpreter crashed: no report came back"
                message = messages.get(nodeid) or crash
            else:  # never reported: never a pass
                crash = "the interpreter crashed while importing the file"
                why = outcome.stopped or (crash if rel in crashed_files else "")
                message = f"没有结果 / no result ({why or 'the grading run stopped early'})"
            message = _cap(message)
            graded.append(KoanResult(nodeid, state, cause, line, duration, message, contracts))
    return graded


def _messages(guard: list[dict], work: Path) -> dict[str, str]:
    """A koan's message: the text of its failed call, else setup, else a crash."""
    rank = {"call": 0, "setup": 1, "???": 2, "teardown": 3}
    best: dict[str, tuple[int, str]] = {}
    for event in (e for e in guard if e.get("event") == "message"):
        order, nodeid = rank.get(event.get("when"), 4), results.koan_id(event.get("nodeid", ""))
        if nodeid not in best or order < best[nodeid][0]:
            best[nodeid] = (order, _clean(event.get("text", ""), work))
    return {nodeid: headline(text) for nodeid, (_, text) in best.items()}


HEADS = (  # what happened, by the text of the report
    ("Timeout \\(>(?P<v>[\\d.]+)s\\) from pytest-timeout", "⏱️ 超时 / timed out: still running after {} s (an endless loop?)"),
    ("the koan's own process exited with code (?P<v>-?\\d+)", "🚪 进程自己退出 / the koan's process exited by itself (code {}: os._exit, sys.exit or pytest.exit) before its verdict"),
    ("the koan's own process ended by signal (?P<v>\\w+)", "💥 崩溃 / crashed: the koan's process was killed by {}"),
)  # fmt: skip


def headline(text: str) -> str:
    """A message that starts with what happened (a timeout, an exit the koan's code made, a
    signal) rather than the first line of source in the report."""
    for pattern, head in HEADS:
        if found := re.search(pattern, text):
            return f"{head.format(found['v'])}\n{text}"
    return text


def _evidence(
    guard: list[dict], pristine: PristineCourse, findings: list[Finding]
) -> dict[str, str]:
    """nodeid or file -> why, for what the run's guard caught, with a finding each: a name
    replaced at run time, an action against the run (the audit hook), forged reports (a worker
    that reported a koan it was not given, or one twice, voids every koan it reported)."""
    caught: dict[str, str] = {}
    for kind, finding in (("patched", "runtime_patch"), ("violation", "run_violation")):
        for event in (e for e in guard if e.get("event") == kind):
            where = results.koan_id(event.get("nodeid") or event.get("file") or "")
            if kind == "patched":
                names = ", ".join(event.get("names", [])[:5])
                message = f"运行时替换了 / replaced at run time: {names}"
            else:
                message = "运行时越界 / tried at run time: " + "; ".join(event.get("what", [])[:3])
            if where not in caught:
                caught[where] = message
                rel, _, name = where.partition("::")
                koans = (name,) if name else tuple(pristine.koans.get(rel, ()))
                findings.append(Finding(finding, rel, None, koans, message))
    called: set[str] = set()
    for event in [e for e in guard if e.get("event") == "reported" and e.get("when") == "call"]:
        if event.get("nodeid") in called:  # a koan runs once: a second call report was made up
            guard.append({**event, "event": "forged"})
        called.add(event.get("nodeid"))
    forgers = sorted({e["worker"] for e in guard if e.get("event") == "forged" and e.get("worker")})
    for worker in forgers:
        mine = [e for e in guard if e.get("worker") == worker]
        forged = sorted({e.get("nodeid", "") for e in mine if e.get("event") == "forged"})
        message = (
            f"伪造的报告 / forged reports: worker {worker} reported koans it was not given or "
            f"reported twice ({', '.join(forged[:3])}); every koan it reported scores zero"
        )
        by_file: dict[str, list[str]] = {}
        voided = {results.koan_id(e.get("nodeid", "")) for e in mine}  # its harness event: ""
        for nodeid in sorted(voided):
            rel, _, name = nodeid.partition("::")
            if name in pristine.koans.get(rel, ()):
                by_file.setdefault(rel, []).append(name)
                caught.setdefault(nodeid, message)
        for rel, names in by_file.items():
            findings.append(Finding("forged_report", rel, None, tuple(names), message))
    return caught


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
