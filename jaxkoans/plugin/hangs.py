"""The last resort against a koan stuck inside compiled code (pytest-timeout cannot interrupt a
`lax.while_loop` inside XLA): armed by pytest-timeout's timer hooks, a grace period after its limit
it says why and ends the process (xdist replaces the worker). A debugger disarms it."""

from __future__ import annotations

import os
import sys
import threading

import pytest

GRACE_S = 5.0
# XLA compiling a big program (a slow machine, a heavy koan) is not a hang: the watchdog waits
# for it, and pytest-timeout fails the koan as timed out once Python runs again; the run goes on.
COMPILER_FILE = os.path.join("jax", "_src", "compiler.py")
COMPILING = ("backend_compile_and_load", "compile_or_get_cached", "_compile_and_write_cache")
COMPILE_PATIENCE = 10  # how many limits a compile may take before it counts as stuck too
NO_TERMINAL = (
    "🐞 {what} 需要终端，这里跳过 / needs a terminal and was skipped here: "
    "run `pytest {nodeid}` in a terminal to use it."
)


def _abort(config: pytest.Config, nodeid: str, limit: float, compiling: bool = False) -> None:
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:  # pytest captures fd 2 during a test: give the terminal back
        capture.suspend_global_capture(in_=False)
    if compiling:
        sys.__stderr__.write(
            f"\n⏱️ 超时 / timed out: {nodeid} 的程序编译了 {limit:.0f} s 还没有结束，无法中断。\n"
            f"   XLA compiled {nodeid}'s program for {limit:.0f} s without finishing and could not\n"
            "   be interrupted: a program that big (a Python loop unrolled into the trace?) is\n"
            "   the koan's problem. Run again (other koans: `python progress.py`).\n"
        )
    else:
        sys.__stderr__.write(
            f"\n⏱️ 超时 / timed out: {nodeid} 在编译后的代码里运行超过 {limit:.0f} s，无法中断。\n"
            "   可能是永不结束的 lax.while_loop（条件永远为真）。修好它再运行。\n"
            f"   {nodeid} ran inside compiled code for more than {limit:.0f} s and could not be\n"
            "   interrupted: probably a lax.while_loop whose condition never turns False. Fix it and\n"
            "   run again (other koans: `pytest --deselect NODEID`, or `python progress.py`).\n"
        )
    sys.__stderr__.flush()
    os._exit(3)


def compiling(thread_id: int | None) -> bool:
    """True while the thread `thread_id` is inside XLA's compiler (not running a program)."""
    frame = sys._current_frames().get(thread_id) if thread_id is not None else None
    while frame is not None:
        code = frame.f_code
        if code.co_name in COMPILING and code.co_filename.endswith(COMPILER_FILE):
            return True
        frame = frame.f_back
    return False


class HangGuard:
    """A pytest plugin object: pytest-timeout's `pytest_timeout_set_timer` arms it for an item,
    `pytest_timeout_cancel_timer` disarms it; entering a debugger disarms it for good."""

    def __init__(self, config: pytest.Config) -> None:
        self.config, self.debugging, self.nodeid = config, False, ""  # nodeid: the koan running now
        self._timers: dict[str, threading.Timer] = {}

    @pytest.hookimpl(optionalhook=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings) -> None:
        self.pytest_timeout_cancel_timer(item)
        limit = float(settings.timeout or 0)
        if limit > 0 and not self.debugging:  # pytest-timeout sets its own timer as well
            detect = not getattr(settings, "disable_debugger_detection", False)
            self._arm(item, limit + GRACE_S, limit, detect, threading.get_ident(), limit + GRACE_S)

    def _arm(self, item, after: float, limit: float, detect: bool, thread: int, at: float) -> None:
        timer = threading.Timer(after, self._expire, args=(item, limit, detect, thread, at))
        timer.daemon = True
        self._timers[item.nodeid] = timer
        timer.start()

    @pytest.hookimpl(optionalhook=True)
    def pytest_timeout_cancel_timer(self, item: pytest.Item) -> None:
        timer = self._timers.pop(item.nodeid, None)
        if timer is not None:
            timer.cancel()

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.nodeid = nodeid

    def pytest_enter_pdb(self) -> None:
        self.debugging = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def _expire(
        self, item: pytest.Item, limit: float, detect: bool, thread_id: int, at: float = 0.0
    ) -> None:
        """`at`: seconds since the koan started. A koan still compiling is looked at again
        later, up to COMPILE_PATIENCE limits: slow, not stuck; past that it is stuck too."""
        from pytest_timeout import is_debugging  # pytest's pdb entered, or a tracing debugger

        if self.debugging or (detect and is_debugging()) or item.nodeid not in self._timers:
            return  # or the koan ended meanwhile
        still = compiling(thread_id)
        if still and at < limit * COMPILE_PATIENCE:
            self._arm(item, GRACE_S, limit, detect, thread_id, at + GRACE_S)
            return
        _abort(item.config, item.nodeid, at if still else limit, compiling=still)


def register_debugger(watchdog: HangGuard) -> None:
    """`jax.debug.breakpoint()` (JAX takes the highest priority): JAX's command-line debugger on
    the terminal, the one JAX picks by itself, with pytest's capture suspended and no timer."""
    from jax._src.debugger import cli_debugger, core

    def run(frames, thread_id, **kwargs) -> None:
        config = watchdog.config
        watchdog.pytest_enter_pdb()
        config.hook.pytest_enter_pdb(config=config, pdb=None)  # pytest-timeout stands down too
        capture = config.pluginmanager.getplugin("capturemanager")
        if capture is not None:
            capture.suspend(in_=True)
        try:
            if sys.stdin is None or not sys.stdin.isatty():
                what = "jax.debug.breakpoint()"
                sys.stderr.write(NO_TERMINAL.format(what=what, nodeid=watchdog.nodeid) + "\n")
                return
            cli_debugger.run_debugger(frames, thread_id, **kwargs)
        finally:
            if capture is not None:
                capture.resume()

    try:
        core.register_debugger("jaxkoans", run, priority=0)
    except ValueError:  # registered by an earlier in-process pytest run: this run's wins
        core._debugger_registry["jaxkoans"] = (0, run)


def no_terminal_breakpoint(*args, **kwargs) -> None:
    """`sys.breakpointhook` where no terminal is (watch's child, via PYTHONBREAKPOINT): pdb
    would read end-of-file and stop the whole run, so `breakpoint()` is skipped with a note."""
    caller = sys._getframe(1)
    where = f"{caller.f_code.co_filename}:{caller.f_lineno}"
    sys.stderr.write(NO_TERMINAL.format(what=f"breakpoint() ({where})", nodeid="NODEID") + "\n")
