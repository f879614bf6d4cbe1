"""A record of a pytest run, one JSON line per event, for progress.py and grading.

The recorder is a plain plugin object (like exercism's test runner). It writes as the run goes,
so a run that hangs or crashes still leaves what it finished and what it was running.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

SCHEMA = 1


@dataclass
class KoanResult:
    nodeid: str
    path: str  # relative to the repository root
    name: str
    state: str  # KoanState value
    cause: str = ""  # Cause value when failing
    line: int | None = None  # where the blank, TODO or failure is (1-based)
    duration: float = 0.0


class Recorder:
    """Appends `{"event": ...}` lines to `path`: start, collect-error, koan, finish."""

    def __init__(self, path: Path, root: Path) -> None:
        self.path = Path(path)
        self.root = root
        self.path.write_text(json.dumps({"event": "start", "schema": SCHEMA}) + "\n")

    def _write(self, record: dict) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        self._write({"event": "running", "nodeid": nodeid})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._write(
                {"event": "collect-error", "path": report.nodeid, "message": _last_lines(report)}
            )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        if report.skipped:  # a koan that does not run cannot be learned: say so
            properties.setdefault("koan_state", "skipped")
        done = report.when == "call" or (report.when == "setup" and not report.passed)
        if not done or "koan_state" not in properties:
            return
        path, _, name = report.nodeid.partition("::")
        result = KoanResult(
            nodeid=report.nodeid,
            path=path,
            name=name,
            state=properties["koan_state"],
            cause=properties.get("koan_cause", ""),
            line=properties.get("koan_line"),
            duration=round(report.duration, 3),
        )
        self._write({"event": "koan", **asdict(result)})

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus) -> None:
        self._write({"event": "finish", "exitstatus": int(exitstatus)})


# A parametrized koan runs as several items (`test_x[case]`); it is one koan all the same.
STATE_RANK = {"failing": 0, "environment": 1, "skipped": 1, "not_started": 2, "passed": 3}


def koan_id(nodeid: str) -> str:
    """The koan a test item belongs to: its nodeid without the parameters."""
    return nodeid.split("[", 1)[0]


def by_koan(events: list[dict]) -> dict[str, dict]:
    """One result per koan: a parametrized koan passes when every case passes, and otherwise
    takes the state, cause and line of its worst case."""
    koans: dict[str, dict] = {}
    for event in events:
        if event.get("event") != "koan":
            continue
        key = koan_id(event["nodeid"])
        merged = koans.get(key)
        if merged is None:
            koans[key] = {**event, "nodeid": key, "name": key.partition("::")[2]}
            continue
        duration = merged.get("duration", 0.0) + event.get("duration", 0.0)
        if STATE_RANK.get(event["state"], 0) < STATE_RANK.get(merged["state"], 0):
            merged.update({k: event[k] for k in ("state", "cause", "line") if k in event})
        merged["duration"] = round(duration, 3)
    return koans


def _last_lines(report, count: int = 6) -> str:
    text = str(report.longrepr or "").strip().splitlines()
    return "\n".join(text[-count:])


def read(path: Path) -> list[dict]:
    """The events of a record; a torn last line (a killed run) is dropped."""
    events = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return events
