"""The one way the course starts pytest (status, reveal, watch, grade, the gates): the same
command line (the plugin named, importlib imports, no cache beside the learner's files), and a
child in a process group that never outlives the command that started it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

PLUGIN = ("-p", "jaxkoans.plugin.hooks")
COMMON = ("--import-mode=importlib", "-p", "no:cacheprovider", "--no-header")
TICK_S = 0.25  # how often a running child's `tick` is called (its record read, keys polled)
OUTPUT_CHARS = 200_000  # of a child's output kept for the caller
DEFAULT_KOAN_TIMEOUT_S = 60.0  # pytest-timeout's limit when pyproject.toml names none


def koan_timeout(root: Path) -> float:
    """pytest-timeout's limit of one koan: the course's own (`root`/pyproject.toml's `timeout`)."""
    try:
        config = tomllib.loads((Path(root) / "pyproject.toml").read_text(encoding="utf-8"))
        options = config.get("tool", {}).get("pytest", {}).get("ini_options", {})
        return float(options.get("timeout", DEFAULT_KOAN_TIMEOUT_S))
    except (OSError, ValueError, UnicodeDecodeError):  # TOMLDecodeError is a ValueError
        return DEFAULT_KOAN_TIMEOUT_S


def pytest_command(
    targets: Iterable[str],
    *,
    record: Path | str | None = None,
    workers: int | None = None,
    options: Iterable[str] = (),
) -> list[str]:
    """This interpreter's pytest with the harness's plugin on `targets`, the common options, the
    record, `workers` xdist workers (None: no -n), then `options`."""
    args = [sys.executable, "-m", "pytest", *PLUGIN, *targets, *COMMON]
    args += [f"--koans-record={record}"] if record is not None else []
    args += ["-n", str(max(1, workers))] if workers is not None else []
    return args + list(options)


def run_in_group(
    command: list[str],
    timeout_s: float,
    tick: Callable[[], None] | None = None,
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    keep_stdout: bool = False,
) -> tuple[int | None, str]:
    """Run `command` (`in_group`) until it ends or `timeout_s`, calling `tick` every TICK_S.
    Returns (exit code, None on a timeout; the end of its stderr, after its stdout when
    `keep_stdout`)."""
    with stop_signals_leave(), tempfile.TemporaryFile("w+", encoding="utf-8") as output:
        stdout = output if keep_stdout else subprocess.DEVNULL
        with in_group(command, cwd=cwd, env=env, stdout=stdout, stderr=output) as child:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    child.wait(timeout=max(0.0, min(TICK_S, deadline - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    if tick is not None:
                        tick()
                    if time.monotonic() >= deadline:
                        return None, ""
            if tick is not None:
                tick()
            output.seek(0)
            return child.returncode, output.read()[-OUTPUT_CHARS:]


@contextlib.contextmanager
def in_group(
    command: list[str], *, cwd: Path, env: Mapping[str, str] | None = None, **popen
) -> Iterator[subprocess.Popen]:
    """`command` in a process group of its own, the whole group (pytest and its xdist workers)
    ended however the block leaves: Ctrl-C, SIGTERM, SIGHUP (`stop_signals_leave`)."""
    child = subprocess.Popen(
        command, cwd=cwd, env=None if env is None else dict(env), stdin=subprocess.DEVNULL,
        start_new_session=True, **popen,
    )  # fmt: skip
    try:
        yield child
    finally:
        kill_group(child)
        child.wait()
        kill_group(child)  # the workers of a child that ended first


def kill_group(child: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)


@contextlib.contextmanager
def stop_signals_leave() -> Iterator[None]:
    """SIGTERM (an outer `timeout`) and SIGHUP (a closed terminal) leave like Ctrl-C does,
    through `finally`, so whatever the caller started (a child run, the watch) is ended."""

    def leave(signum, frame):
        raise SystemExit(128 + signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.signal(s, leave) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)
