"""One grading run: pytest-xdist on a workdir, in a process group of its own, in the sandbox
where there is one, with the grader's guard (`run_guard.py`). The record and the guard's events
come back through pipes and a write-only FIFO, read from memory. A run with another harness is
refused; one silent for the stall limit or past its time limit is stopped; Ctrl-C kills it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jaxkoans.grader import run_guard, sandbox
from jaxkoans.grader.pristine_course import CouldNotGrade
from jaxkoans.learner import runner
from jaxkoans.plugin import results

POLL_S = 0.5
STARTUP_ALLOWANCE_S = 120.0  # JAX's import and the first compilations
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
RUN_TIMEOUT_S = 1800  # the whole pytest run of one copy; each koan has pytest-timeout's
GUARD_MODULE = "_jaxkoans_grade_guard"
DROPPED_ENV = (
    "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_CURRENT_TEST",
    "PYTEST_XDIST_AUTO_NUM_WORKERS", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONBREAKPOINT",
    "PYTHONSAFEPATH", "PYTHONHOME",
)  # fmt: skip


class Cancelled(Exception):
    """Grading was interrupted (Ctrl-C): nothing more is started."""


@dataclass
class Options:
    koan_timeout: float | None = None  # pytest-timeout's limit per koan (None: the course's)
    run_timeout: float = RUN_TIMEOUT_S
    workers: int = 2
    sandbox: bool = True  # False: run without bubblewrap (--no-sandbox)
    stall_timeout: float | None = None  # no event for this long stops the run (None: derived)


_RUNNING: set[subprocess.Popen] = set()
_LOCK = threading.Lock()
_CANCELLED = threading.Event()


def reset_cancel() -> None:
    _CANCELLED.clear()


def stop_all() -> None:
    """Ctrl-C: end every grading run's process group; start no new one."""
    with _LOCK:
        _CANCELLED.set()
        for process in _RUNNING:
            runner.kill_group(process)


@dataclass
class GradedRunResult:
    events: list[dict] = field(default_factory=list)
    guard: list[dict] = field(default_factory=list)
    stderr: str = ""
    exit_code: int | None = None
    harness: str = ""  # where the run's jaxkoans came from, relative to the workdir
    stopped: str = ""  # why the run ended before reporting its end ("" when it did)
    sandbox: dict = field(default_factory=dict)  # {"used", "bwrap", "reason"}


def run(
    work: Path,
    scratch: Path,
    targets: list[str],
    koans: int,
    options: Options,
    reached: Mapping[str, frozenset[str]] | None = None,
) -> GradedRunResult:
    """Run the koan files `targets` (holding `koans` koans) of the workdir `work`; `scratch`
    keeps what the grader keeps of the run. `reached`: koan -> the student's definitions its
    run reaches (`tamper.student_code_reached`), for the guard's shared processes."""
    guard_dir, tmp = scratch / "guard", scratch / "tmp"
    guard_dir.mkdir()
    tmp.mkdir()
    shutil.copyfile(run_guard.__file__, guard_dir / f"{GUARD_MODULE}.py")
    listed = guard_dir / "reached.json"
    listing = {koan: sorted(names) for koan, names in sorted((reached or {}).items())}
    listed.write_text(json.dumps(listing), encoding="utf-8")
    fifo = guard_dir / "events"  # the workers' evidence: see grade_guard
    os.mkfifo(fifo, 0o600)
    fifo_read = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    fifo_keep = os.open(fifo, os.O_WRONLY)  # no EOF before the run is over
    os.set_blocking(fifo_read, True)
    os.chmod(fifo, 0o222)  # write-only: no one in the run can read evidence away
    off = sandbox.Availability(None, reason="--no-sandbox")
    availability = sandbox.probe() if options.sandbox else off
    used = {"used": availability.ok, "bwrap": availability.version, "reason": availability.reason}
    outcome = GradedRunResult(sandbox=used)
    record_read, record_write = os.pipe()
    guard_read, guard_write = os.pipe()
    inside_tmp = Path("/tmp") if availability.ok else tmp
    command = runner.pytest_command(
        targets,
        record=f"/dev/fd/{record_write}",  # a pipe: no file of the run holds the record
        workers=options.workers,
        options=(
            "-q", f"--rootdir={work}", "-p", GUARD_MODULE, "--continue-on-collection-errors",
            f"--max-worker-restart={koans + 1}",  # every koan may crash its worker
            f"--basetemp={inside_tmp / 'basetemp'}",
        ),
    )  # fmt: skip
    if options.koan_timeout is not None:
        command.append(f"--timeout={options.koan_timeout:g}")
    env = {
        "JAXKOANS_ROOT": str(work),
        "PYTHONPATH": os.pathsep.join([str(work), str(guard_dir)]),
        "JAXKOANS_GRADE_GUARD": str(fifo),
        "JAXKOANS_GRADE_GUARD_FD": str(guard_write),
        "JAXKOANS_GRADE_REACHED": str(listed),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "TMPDIR": str(inside_tmp),
    }
    if availability.ok:
        env |= {"HOME": str(inside_tmp), "LANG": "C.UTF-8", "PATH": SANDBOX_PATH}
        command = sandbox.wrap(
            availability, command, read_only=[work, guard_dir], chdir=work, env=env
        )
        env = {"PATH": os.environ.get("PATH", SANDBOX_PATH)}  # bwrap's own
    else:
        env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV} | env
    # Longer than any koan may take: twice its time limit, and a start-up allowance.
    limit = runner.koan_timeout(work) if options.koan_timeout is None else options.koan_timeout
    stall = options.stall_timeout or 2 * limit + STARTUP_ALLOWANCE_S
    progress = _Progress()
    pipes = [("record", record_read, True), ("guard", guard_read, True)]
    pipes.append(("workers", fifo_read, False))  # evidence is no sign of progress
    readers = [
        threading.Thread(target=progress.drain, args=(*pipe, scratch), daemon=True)
        for pipe in pipes
    ]
    with open(scratch / "stdout", "wb") as stdout, open(scratch / "stderr", "wb") as stderr:
        try:
            if _CANCELLED.is_set():
                raise Cancelled()
            with runner.in_group(
                command, cwd=work, env=env, stdout=stdout, stderr=stderr,
                pass_fds=(record_write, guard_write),
            ) as process:  # fmt: skip
                os.close(record_write)
                os.close(guard_write)
                record_write = guard_write = -1
                for reader in readers:
                    reader.start()
                with _LOCK:
                    _RUNNING.add(process)
                try:
                    if not _CANCELLED.is_set():  # stop_all before the run was known: stop now
                        run = _wait(process, options.run_timeout, stall, progress)
                        outcome.exit_code, outcome.stopped = run
                finally:
                    with _LOCK:
                        _RUNNING.discard(process)
        finally:  # also on Ctrl-C: nothing of the run may outlive it (in_group kills the group)
            for fd in (fd for fd in (record_write, guard_write, fifo_keep) if fd >= 0):
                os.close(fd)
            if not readers[-1].is_alive() and not readers[-1].ident:
                os.close(fifo_read)  # never started: no one else closes it
            for reader in (reader for reader in readers if reader.is_alive()):
                reader.join(timeout=10)
    if _CANCELLED.is_set():
        raise Cancelled()
    outcome.stderr = (scratch / "stderr").read_text(encoding="utf-8", errors="replace")
    outcome.events = results.parse(progress.text("record"))
    outcome.guard = _guard_events(progress.text("guard"), progress.text("workers"))
    _require_pristine_harness(outcome, scratch, work)
    if not outcome.stopped and not any(e.get("event") == "finish" for e in outcome.events):
        outcome.stopped = _ended_how(outcome.exit_code)
    return outcome


class _Progress:
    """What the run's pipes said, and when one that counts as progress last said something."""

    def __init__(self) -> None:
        self.last, self.said = time.monotonic(), {}

    def drain(self, name: str, fd: int, counts: bool, scratch: Path) -> None:
        """A pipe into memory, and into scratch/NAME.jsonl for a person to watch."""
        kept = self.said.setdefault(name, bytearray())
        with (
            os.fdopen(fd, "rb", buffering=0) as source,
            open(scratch / f"{name}.jsonl", "wb") as out,
        ):
            while chunk := source.read(1 << 16):
                kept += chunk
                out.write(chunk)
                out.flush()
                if counts:
                    self.last = time.monotonic()

    def text(self, name: str) -> str:
        return bytes(self.said.get(name, b"")).decode("utf-8", errors="replace")


def _wait(
    process: subprocess.Popen, limit: float, stall: float, progress: _Progress
) -> tuple[int | None, str]:
    """(exit code, why the run was stopped: "" when it ended by itself)."""
    deadline = time.monotonic() + limit
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return process.wait(timeout=POLL_S), ""
        now = time.monotonic()
        if now >= deadline:
            return None, f"time limit: the run was stopped after {limit:g} s"
        if now - progress.last >= stall:
            return None, (
                f"no progress: nothing was reported for {stall:g} s (a stopped or hung "
                "process?); the run was stopped"
            )


def _ended_how(code: int | None) -> str:
    number = -code if code and code < 0 else code - 128 if code and code > 128 else 0  # bwrap's
    if number in signal.valid_signals():
        return f"killed: pytest ended by signal {signal.Signals(number).name}"
    return f"stopped early: pytest ended (exit code {code}) before reporting its end"


def _guard_events(controller: str, workers: str) -> list[dict]:
    """The controller's events (its pipe), then the workers' (the FIFO); `source` says which."""
    events = []
    for text, pid in ((controller, "controller"), (workers, "worker")):
        for line in text.splitlines():
            with contextlib.suppress(json.JSONDecodeError, TypeError):
                events.append({"pid": pid, **json.loads(line), "source": pid})
    return events


def _require_pristine_harness(outcome: GradedRunResult, scratch: Path, work: Path) -> None:
    harness = [e for e in outcome.guard if e.get("event") == "harness"]
    wrong = [e for e in harness if not e.get("ok")]
    if wrong:
        raise CouldNotGrade(
            f"the grading run imported jaxkoans from {wrong[0].get('jaxkoans')}, not from the "
            f"pristine course at {work}"
        )
    started = any(e.get("event") == "start" for e in outcome.events)
    controller = [e for e in harness if e.get("worker") == "controller"]
    if not started or not controller:
        stdout = (scratch / "stdout").read_text(encoding="utf-8", errors="replace")
        tail = "\n".join((stdout + outcome.stderr).strip().splitlines()[-12:])
        raise CouldNotGrade(
            f"pytest did not start the grading run (exit code {outcome.exit_code}):\n{tail}"
        )
    where = Path(controller[0]["jaxkoans"])
    outcome.harness = where.relative_to(work.resolve()).as_posix()
