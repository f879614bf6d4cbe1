"""The last resort against a koan stuck inside compiled code.

pytest-timeout's signal method interrupts Python code, but a `lax.while_loop` that never ends
runs inside XLA, where no signal handler gets a turn. A grace period after pytest-timeout's limit,
this watchdog prints what happened and ends the process: under pytest-xdist (which progress.py
uses) the worker is replaced and the other koans still run; a plain run stops with the message
instead of hanging forever.
"""

from __future__ import annotations

import os
import sys
import threading

import pytest

GRACE_S = 5.0


def limit_for(item: pytest.Item) -> float:
    """pytest-timeout's limit for `item` (marker, then --timeout / ini); 0 means none."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0] or 0)
    value = item.config.getoption("timeout", None)
    if value is None:
        value = item.config.getini("timeout") if "timeout" in item.config._parser._inidict else 0
    return float(value or 0)


def _abort(config: pytest.Config, nodeid: str, limit: float) -> None:
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:  # pytest captures fd 2 during a test: give the terminal back
        capture.suspend_global_capture(in_=False)
    sys.__stderr__.write(
        f"\n⏱️ 超时 / timed out: {nodeid} 在编译后的代码里运行超过 {limit:.0f} s，无法中断。\n"
        "   可能是永不结束的 lax.while_loop（条件永远为真）。修好它再运行。\n"
        f"   {nodeid} ran inside compiled code for more than {limit:.0f} s and could not be\n"
        "   interrupted: probably a lax.while_loop whose condition never turns False. Fix it and\n"
        "   run again (other koans: `pytest --deselect NODEID`, or `python progress.py`).\n"
    )
    sys.__stderr__.flush()
    os._exit(3)


class Watchdog:
    """Arms a timer for one koan; `disarm` when the koan returns."""

    def __init__(self, item: pytest.Item) -> None:
        limit = limit_for(item)
        self._timer = None
        if limit > 0:
            self._timer = threading.Timer(
                limit + GRACE_S, _abort, args=(item.config, item.nodeid, limit)
            )
            self._timer.daemon = True
            self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
