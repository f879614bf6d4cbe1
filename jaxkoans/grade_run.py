"""One grading run: pytest on a workdir in a child process of its own process group.

The child runs under a time limit, through pytest-xdist (a crashed worker is replaced and the
other koans still run), with the pristine harness (`-p jaxkoans.plugin`; JAXKOANS_ROOT and
PYTHONPATH name the workdir) and the grader's guard (`grade_guard.py`, copied beside the
workdir, so any version of the course can be graded). The guard reports where `jaxkoans` was
imported from: a run that did not use the workdir's copy is refused. On Ctrl-C or a time
limit the whole process group is killed; `stop_all` does it for every run of a batch.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from jaxkoans import grade_guard, results
from jaxkoans.grade_course import CouldNotGrade

RUN_TIMEOUT_S = 1800  # the whole pytest run of one copy; each koan has pytest-timeout's
GUARD_MODULE = "_jaxkoans_grade_guard"
DROPPED_ENV = (
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
    "PYTEST_CURRENT_TEST",
    "PYTEST_XDIST_AUTO_NUM_WORKERS",
    "PYTHONSTARTUP",
    "PYTHONINSPECT",
    "PYTHONBREAKPOINT",
    "PYTHONSAFEPATH",
    "PYTHONHOME",
)


class Cancelled(Exception):
    """Grading was interrupted (Ctrl-C): nothing more is started."""


@dataclass
class Options:
    koan_timeout: float | None = None  # pytest-timeout's limit per koan (None: the course's)
    run_timeout: float = RUN_TIMEOUT_S
    workers: int = 2


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
            _kill_group(process)


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


@dataclass
class Outcome:
    """What a run left: its record's events, the guard's events, stderr, how it ended."""

    events: list[dict] = field(default_factory=list)
    guard: list[dict] = field(default_factory=list)
    stderr: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    harness: str = ""  # where the run's jaxkoans came from, relative to the workdir


def run(work: Path, scratch: Path, targets: list[str], koans: int, options: Options) -> Outcome:
    """Run the koan files `targets` (holding `koans` koans) of the workdir `work`; `scratch`
    takes the record, the guard and the child's temporary files."""
    guard_dir, guard_out, tmp = scratch / "guard", scratch / "guard-out", scratch / "tmp"
    for directory in (guard_dir, guard_out, tmp):
        directory.mkdir()
    shutil.copyfile(grade_guard.__file__, guard_dir / f"{GUARD_MODULE}.py")
    record = scratch / "record.jsonl"
    command = [
        sys.executable,
        "-m",
        "pytest",
        *targets,
        "-q",
        "--no-header",
        f"--rootdir={work}",
        "-p",
        "jaxkoans.plugin",
        "-p",
        GUARD_MODULE,
        "--import-mode=importlib",
        "--continue-on-collection-errors",
        "-p",
        "no:cacheprovider",
        "-n",
        str(max(1, options.workers)),
        f"--max-worker-restart={koans + 1}",  # every koan may crash its worker
        f"--koans-record={record}",
        f"--basetemp={scratch / 'basetemp'}",
    ]
    if options.koan_timeout is not None:
        command.append(f"--timeout={options.koan_timeout:g}")
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
    env.update(
        JAXKOANS_ROOT=str(work),
        PYTHONPATH=os.pathsep.join([str(work), str(guard_dir)]),
        JAXKOANS_GRADE_GUARD=str(guard_out),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
        TMPDIR=str(tmp),
    )
    outcome = Outcome()
    process = None
    with open(scratch / "stdout", "wb") as stdout, open(scratch / "stderr", "wb") as stderr:
        try:
            with _LOCK:
                if _CANCELLED.is_set():
                    raise Cancelled()
                process = subprocess.Popen(
                    command,
                    cwd=work,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=stdout,
                    stderr=stderr,
                    start_new_session=True,  # its own process group, out of the terminal's reach
                )
                _RUNNING.add(process)
            outcome.exit_code = process.wait(timeout=options.run_timeout)
        except subprocess.TimeoutExpired:
            outcome.timed_out = True
        finally:  # also on Ctrl-C: nothing of the run may outlive it
            if process is not None:
                _kill_group(process)
                process.wait()
                with _LOCK:
                    _RUNNING.discard(process)
    if _CANCELLED.is_set():
        raise Cancelled()
    outcome.stderr = (scratch / "stderr").read_text(encoding="utf-8", errors="replace")
    outcome.events = results.read(record) if record.exists() else []
    outcome.guard = _guard_events(guard_out)
    _require_pristine_harness(outcome, scratch, work)
    return outcome


def _guard_events(directory: Path) -> list[dict]:
    events = []
    for path in sorted(directory.glob("guard-*.jsonl")):
        pid = path.stem.removeprefix("guard-")
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                events.append({**json.loads(line), "pid": pid})
            except (json.JSONDecodeError, TypeError):
                continue
    return events


def _require_pristine_harness(outcome: Outcome, scratch: Path, work: Path) -> None:
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
