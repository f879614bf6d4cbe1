"""A warm interpreter for `progress.py watch`: pytest, JAX and a koan's libraries imported once,
JAX never initialised (a chapter's devices and float64 must be set before its backend exists).

Each run is an `os.fork()` child running `pytest.main` with the harness, which configures JAX as
in any pytest process; it leaves its record and its short reports in files and ends with
`os._exit`. The parent polls it from its select loop, kills it at its deadline, and a child
never outlives the watcher (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import gc
import importlib
import importlib.metadata
import json
import os
import signal
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from jaxkoans import course
from jaxkoans.course import koan_model
from jaxkoans.learner import runner
from jaxkoans.plugin import results

# Libraries a koan file may import that are safe to import early: none computes with JAX at
# import time. Other modules (the course's own, anything unknown) are left to the child.
SAFE_PACKAGES = frozenset(
    {"jax", "jaxlib", "numpy", "ml_dtypes", "flax", "optax", "orbax", "chex", "einops", "scipy"}
    | {"pytest", "_pytest", "jaxkoans"}
)
_STDLIB = frozenset(sys.stdlib_module_names)
_TRIED: set[str] = set()  # names preload tried to import (`from jax import lax`: no jax.lax.lax)
PR_SET_PDEATHSIG = 1  # prctl: the child is killed when the watcher dies


class WarmError(RuntimeError):
    """The warm interpreter cannot be kept cold (JAX was initialised by an import)."""


def jax_initialised() -> bool:
    from jax._src import xla_bridge

    return bool(xla_bridge.backends_are_initialized())


def _freeze() -> None:
    """Move what is imported so far out of the garbage collector's view: a child's collections
    (pytest runs two at exit) then scan only its own objects, and its pages stay shared."""
    if jax_initialised():
        raise WarmError(
            "JAX 在预热时被初始化了 / JAX was initialised while warming up, so a chapter's devices "
            "and float64 could no longer be set: run the koans with plain pytest instead."
        )
    gc.collect()
    gc.freeze()


def entry_point_plugins() -> list[object]:
    """The pytest11 plugins a plain pytest would load (pytest-timeout, xdist), imported here."""
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return []
    plugins = []
    for entry in importlib.metadata.entry_points(group="pytest11"):
        with contextlib.suppress(Exception):  # a broken third-party plugin: pytest will say so
            plugin = entry.load()
            plugins += [plugin] if plugin not in plugins else []
    return plugins


def prepare() -> list[object]:
    """Import what every run needs without initialising JAX; returns the plugins for the child.

    The plugins go to `pytest.main(plugins=...)` as objects rather than `-p NAME`: pytest marks
    a `-p` module for assertion rewriting and, finding it imported already, warns, which the
    course's `filterwarnings = error` would turn into an error.
    """
    import jax.numpy  # noqa: F401  (and jax, numpy)
    from _pytest.config import default_plugins

    import jaxkoans.plugin.hooks

    for name in (*default_plugins, "pytester"):  # the root conftest asks for pytester
        importlib.import_module(f"_pytest.{name}")
    plugins = [jaxkoans.plugin.hooks, *entry_point_plugins()]
    _freeze()
    return plugins


def imported_by(test_file: Path) -> list[str]:
    """The absolute imports at the top level of a koan file, read without importing it."""
    tree = koan_model.read(test_file).tree
    if tree is None:
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*"]
    return names


def preload(test_file: Path) -> None:
    """Import the libraries `test_file` imports (never the course's own files), so that its
    child does not pay for them: flax and optax alone take seconds."""
    fresh = False
    for name in imported_by(test_file):
        top = name.partition(".")[0]
        if name in sys.modules or name in _TRIED or top not in SAFE_PACKAGES | _STDLIB:
            continue
        _TRIED.add(name)
        try:
            importlib.import_module(name)
            fresh = True
        except Exception:  # `from jax import lax` names no module jax.lax.lax; the child says
            continue
    if fresh:
        _freeze()


CAPTURED_LINES, CAPTURED_CHARS = 40, 4000  # of a koan's own output, shown under its verdict


def capped(text: str, lines: int = CAPTURED_LINES, chars: int = CAPTURED_CHARS) -> str:
    """The end of `text`, at most `lines` lines and `chars` characters: a koan that prints
    10 MB must not flood the terminal; what was cut is said."""
    if len(text) <= chars and text.count("\n") < lines:
        return text
    kept = text[-chars:].splitlines()[-lines:]
    cut = len(text) - sum(len(line) + 1 for line in kept)
    return f"… 前面 {cut} 个字符已截断 / {cut} earlier characters cut …\n" + "\n".join(kept)


class Reports:
    """In the child: each failed report (the harness's short report, a test's captured output
    capped) as a JSON line, for the parent to print."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def pytest_runtest_logreport(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if not report.failed:
            return
        kept = report.sections if report.when != "collect" else []
        sections = [[title, capped(content)] for title, content in kept]
        line = {"nodeid": report.nodeid, "when": report.when, "text": str(report.longrepr)}
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({**line, "sections": sections}, ensure_ascii=False) + "\n")

    pytest_collectreport = pytest_runtest_logreport


@dataclass
class RunResult:
    """What a child run left behind."""

    events: list[dict]  # the --koans-record events
    reports: list[dict]  # Reports' lines
    output: str  # pytest's own stdout and stderr (quiet: only surprises)
    exit_code: int | None  # None when it was killed or died of a signal
    signal: int | None = None
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def record(self) -> results.RunRecord:
        return results.RunRecord.of(self.events)

    def report(self, nodeid: str) -> str:
        """The short report of `nodeid` (a koan, or a file for a collection error)."""
        found = [r for r in self.reports if r["nodeid"].partition("[")[0] == nodeid]
        if not found:
            return ""
        first = found[0]
        parts = [first["text"].rstrip()]
        for title, content in first["sections"]:
            parts.append(f"─── {title} ───\n{content.rstrip()}")
        parts += [r["text"].rstrip() for r in found[1:] if r["when"] == "teardown"]
        return "\n".join(parts)


class Run:
    """One pytest run in a forked child; the parent calls `poll()` from its select loop."""

    _count = 0

    def __init__(
        self,
        checkout: course.Course,
        nodeids: list[str],
        plugins: list[object],
        scratch: Path,
        timeout_s: float,
        extra: tuple[str, ...] = (),
    ) -> None:
        Run._count += 1
        self.timeout_s = timeout_s
        self.record = scratch / f"run-{Run._count}.jsonl"
        self.reports = scratch / f"run-{Run._count}.reports.jsonl"
        self._output = bytearray()
        self._pidfd: int | None = None
        self._ended = False  # reaped and cleaned up
        quiet = ("--disable-plugin-autoload", "-qq", "--no-summary")
        options = ("--rootdir", str(checkout.root), *quiet, *extra)
        args = runner.pytest_args(nodeids, record=self.record, options=options)
        reading, writing = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # nothing buffered may be written twice
            stream.flush()
        parent = os.getpid()
        with warnings.catch_warnings():  # numpy's BLAS threads: OpenBLAS re-forms them itself
            warnings.simplefilter("ignore", DeprecationWarning)
            self.pid = os.fork()
        if self.pid == 0:
            os.close(reading)
            _child(checkout, args, [*plugins, Reports(self.reports)], writing, parent)
        self.started = time.monotonic()
        with contextlib.suppress(OSError):  # as the child does: a kill cannot miss the group
            os.setpgid(self.pid, self.pid)
        os.close(writing)
        os.set_blocking(reading, False)
        self._pipe: int | None = reading
        with contextlib.suppress(AttributeError, OSError):  # Linux ≥ 5.3: readable at exit
            self._pidfd = os.pidfd_open(self.pid)

    def fds(self) -> list[int]:
        return [fd for fd in (self._pipe, self._pidfd) if fd is not None]

    def wait_s(self) -> float:
        """How long the caller may wait before calling `poll()` again."""
        left = max(0.0, self.started + self.timeout_s - time.monotonic())
        return left if self._pidfd is not None else min(left, 0.05)

    def _drain(self) -> None:
        while self._pipe is not None:
            try:
                chunk = os.read(self._pipe, 65536)
            except BlockingIOError:
                return
            if not chunk:
                os.close(self._pipe)
                self._pipe = None
                return
            self._output += chunk[: max(0, 200_000 - len(self._output))]

    def poll(self) -> RunResult | None:
        """The outcome once the child has ended (or was killed at its deadline), else None."""
        self._drain()
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        timed_out = False
        if pid == 0:
            if time.monotonic() < self.started + self.timeout_s:
                return None
            timed_out = True
            status = self._kill()
        seconds = time.monotonic() - self.started
        code = None if timed_out else os.waitstatus_to_exitcode(status)
        files = (self.record, self.reports)
        events, reports = (results.read(p) if p.exists() else [] for p in files)
        self._close()
        return RunResult(
            events, reports, self._output.decode("utf-8", errors="replace"),
            exit_code=code if code is not None and code >= 0 else None,
            signal=-code if code is not None and code < 0 else None,
            timed_out=timed_out, seconds=seconds,
        )  # fmt: skip

    def _kill(self) -> int:
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        return status

    def _close(self) -> None:
        self._ended = True
        with contextlib.suppress(ProcessLookupError, PermissionError):  # anything it started
            os.killpg(self.pid, signal.SIGKILL)
        self._drain()
        for fd in (self._pipe, self._pidfd):
            if fd is not None:
                os.close(fd)
        self._pipe = self._pidfd = None
        for path in (self.record, self.reports):
            path.unlink(missing_ok=True)

    def stop(self) -> None:
        """End a run whose result is no longer wanted."""
        if self._ended:
            return
        self._kill()
        self._close()


def _die_with_parent(parent: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def _child(
    checkout: course.Course, args: list[str], plugins: list[object], output: int, parent: int
) -> NoReturn:
    """The forked child: pytest with the harness, then `os._exit`, never back to the caller."""
    code = 70  # EX_SOFTWARE: the harness itself failed
    try:
        os.setpgid(0, 0)  # its own group: killed as one, out of reach of the terminal's Ctrl-C
        _die_with_parent(parent)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for name in ("SIGTERM", "SIGHUP", "SIGTSTP", "SIGCONT", "SIGWINCH"):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(null)
        os.close(output)
        sys.dont_write_bytecode = True  # no __pycache__ beside the learner's files
        # No terminal here: breakpoint() is skipped with a note (pytest leaves the hook alone).
        os.environ["PYTHONBREAKPOINT"] = "jaxkoans.plugin.hangs.no_terminal_breakpoint"
        course.load_chapter.cache_clear()  # chapter.toml may have changed since the fork source
        os.chdir(checkout.root)
        code = int(pytest.main(args, plugins=plugins))
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
