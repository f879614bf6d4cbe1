"""One run of `progress.py watch`: pytest on some koans in a child (runner's command line, in a
process group of its own), polled from the watch's select loop. This module is also the child's
plugin (`-p`): each failed report comes back as a JSON line, a koan's printed output capped."""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from jaxkoans import course
from jaxkoans.learner import runner
from jaxkoans.plugin import results

REPORTS_ENV = "JAXKOANS_WATCH_REPORTS"  # where the child writes its failed reports
CAPTURED_LINES, CAPTURED_CHARS = 40, 4000  # of a koan's own output, shown under its verdict


def capped(text: str, lines: int = CAPTURED_LINES, chars: int = CAPTURED_CHARS) -> str:
    """The end of `text`: a koan that prints 10 MB must not flood the terminal; the cut is said."""
    if len(text) <= chars and text.count("\n") < lines:
        return text
    kept = text[-chars:].splitlines()[-lines:]
    cut = len(text) - sum(len(line) + 1 for line in kept)
    return f"… 前面 {cut} 个字符已截断 / {cut} earlier characters cut …\n" + "\n".join(kept)


def pytest_runtest_logreport(report) -> None:
    """In the child: a failed report (the harness's short report, captured output capped)."""
    if not report.failed or not os.environ.get(REPORTS_ENV):
        return
    kept = report.sections if report.when != "collect" else []
    sections = [[title, capped(content)] for title, content in kept]
    line = {"nodeid": report.nodeid, "when": report.when, "text": str(report.longrepr)}
    with open(os.environ[REPORTS_ENV], "a", encoding="utf-8") as out:
        out.write(json.dumps({**line, "sections": sections}, ensure_ascii=False) + "\n")


pytest_collectreport = pytest_runtest_logreport


@dataclass
class RunResult:
    """What a child run left behind."""

    events: list[dict]  # the --koans-record events
    reports: list[dict]  # failed reports' lines
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
        parts = [found[0]["text"].rstrip()]
        parts += [f"─── {title} ───\n{text.rstrip()}" for title, text in found[0]["sections"]]
        parts += [r["text"].rstrip() for r in found[1:] if r["when"] == "teardown"]
        return "\n".join(parts)


class Run:
    """One pytest run in a child; the caller selects on `fds()` and calls `poll()`."""

    _count = 0

    def __init__(self, checkout: course.Course, nodeids: list[str], scratch: Path,
                 timeout_s: float, extra: tuple[str, ...] = ()) -> None:  # fmt: skip
        Run._count += 1
        self.timeout_s = timeout_s
        self.files = [scratch / f"run-{Run._count}.{n}" for n in ("jsonl", "reports", "out")]
        options = ("-p", __name__, "--rootdir", str(checkout.root), "-qq", "--no-summary", *extra)
        command = runner.pytest_command(nodeids, record=self.files[0], options=options)
        env = checkout.env({
            REPORTS_ENV: str(self.files[1]),
            "PYTHONDONTWRITEBYTECODE": "1",  # no __pycache__ beside the learner's files
            # no terminal here: breakpoint() is skipped with a note
            "PYTHONBREAKPOINT": "jaxkoans.plugin.hangs.no_terminal_breakpoint",
        })  # fmt: skip
        self._stack = contextlib.ExitStack()
        output = self._stack.enter_context(self.files[2].open("w+b"))
        group = runner.in_group(command, cwd=checkout.root, env=env, stdout=output, stderr=output)
        self.child = self._stack.enter_context(group)
        self.started = time.monotonic()
        self._pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):  # Linux ≥ 5.3: readable at exit
            self._pidfd = os.pidfd_open(self.child.pid)

    def fds(self) -> list[int]:
        return [self._pidfd] if self._pidfd is not None else []

    def wait_s(self) -> float:
        """How long the caller may wait before calling `poll()` again."""
        left = max(0.0, self.started + self.timeout_s - time.monotonic())
        return left if self._pidfd is not None else min(left, 0.05)

    def poll(self) -> RunResult | None:
        """The outcome once the child has ended (or was killed at its deadline), else None."""
        code = self.child.poll()
        timed_out = code is None and time.monotonic() >= self.started + self.timeout_s
        if code is None and not timed_out:
            return None
        seconds, code = time.monotonic() - self.started, None if timed_out else code
        events, failed = (results.read(p) if p.exists() else [] for p in self.files[:2])
        output = self.files[2].read_bytes()[-runner.OUTPUT_CHARS :].decode("utf-8", "replace")
        self.stop()
        exit_code, died = (code, None) if code is None or code >= 0 else (None, -code)
        return RunResult(events, failed, output, exit_code, died, timed_out, seconds)

    def stop(self) -> None:
        """End the run (its whole group) and forget its files."""
        self._stack.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        for path in self.files:
            path.unlink(missing_ok=True)
