"""A koan's result, and the record of a pytest run, one JSON line per event, written as the run
goes (a run that hangs or crashes leaves what it finished): progress.py, grade and the gates
read it back here."""

from __future__ import annotations

import contextlib
import enum
import json
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

SCHEMA = 1
# The notes of a koan that has no report of its own (`RunRecord.result`).
NO_REPORT = "did not report (crash or hang)"
TIMED_OUT = "timed out"


class KoanState(enum.StrEnum):
    NOT_STARTED = "not_started"  # fails because of its blank, TODO or unedited fix region
    FAILING = "failing"  # attempted, still wrong
    PASSED = "passed"
    ENVIRONMENT = "environment"  # this machine failed it (a C++ build): not the learner's
    SKIPPED = "skipped"  # did not run here (no compiler, a skip mark): not a pass
    CRASHED = "crashed"  # no report came back: the interpreter died or the koan hung
    MISSING = "missing"  # the koan, or its whole file, is gone from the learner's copy
    TAMPERED = "tampered"  # grade only: the koan's own checks were changed


# Attempted and still open, as a learner's summary counts them (❌).
FAILED_STATES = frozenset({KoanState.FAILING, KoanState.CRASHED, KoanState.MISSING})
# Nothing for the learner to do here: solved, or this machine cannot run it.
SETTLED_STATES = frozenset({KoanState.PASSED, KoanState.SKIPPED, KoanState.ENVIRONMENT})
# A parametrized koan runs as several items (`test_x[case]`); it is one koan all the same,
# and takes the state of its worst case (the states not named here rank 0).
RANK = {KoanState.ENVIRONMENT: 1, KoanState.SKIPPED: 1,
        KoanState.NOT_STARTED: 2, KoanState.PASSED: 3}  # fmt: skip


@dataclass(frozen=True)
class KoanResult:
    nodeid: str  # path::name, the path relative to the repository root
    state: KoanState
    cause: str = ""  # a classify.Cause value when failing
    line: int | None = None  # where the blank, TODO or failure is (1-based)
    duration: float = 0.0
    note: str = ""  # why, when the state alone does not say (a crash, a deleted file)
    contracts: tuple[str, ...] = ()  # the TODOs whose programs met their technique contracts

    @property
    def path(self) -> str:
        return self.nodeid.partition("::")[0]

    @property
    def name(self) -> str:
        return self.nodeid.partition("::")[2]

    @classmethod
    def from_event(cls, event: dict) -> KoanResult:
        line, get = event.get("line"), event.get
        return cls(
            event["nodeid"], KoanState(event["state"]), get("cause") or "",
            line if isinstance(line, int) else None, float(get("duration") or 0.0),
            get("note") or "", tuple(get("contracts") or ()),
        )  # fmt: skip

    def as_event(self) -> dict:
        return {"event": "koan", "path": self.path, "name": self.name, **asdict(self)}

    def remembered(self) -> list:
        """The form progress.py's memory keeps: [state, cause, line, note]."""
        return [self.state.value, self.cause, self.line, self.note]

    @classmethod
    def recalled(cls, nodeid: str, entry: list) -> KoanResult:
        state, cause, line, note = entry
        return cls(nodeid, KoanState(state), cause, line, note=note)

    def worse(self, other: KoanResult) -> KoanResult:
        """One result for two cases of a parametrized koan: the worse state, both durations,
        the contracts either case met."""
        worst = other if RANK.get(other.state, 0) < RANK.get(self.state, 0) else self
        duration = round(self.duration + other.duration, 3)
        contracts = tuple(dict.fromkeys(self.contracts + other.contracts))
        return replace(worst, nodeid=koan_id(self.nodeid), duration=duration, contracts=contracts)


class Recorder:
    """Appends `{"event": ...}` lines to `path`: start, collect-error, koan, finish."""

    def __init__(self, path: Path, root: Path) -> None:
        self.path, self.root = Path(path), root
        self.path.write_text(json.dumps({"event": "start", "schema": SCHEMA}) + "\n")

    def write(self, record: dict) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        self.write({"event": "running", "nodeid": nodeid})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # the last lines of its report
            message = "\n".join(str(report.longrepr or "").strip().splitlines()[-6:])
            self.write({"event": "collect-error", "path": report.nodeid, "message": message})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        if report.skipped:  # a koan that does not run cannot be learned: say so
            properties.setdefault("koan_state", "skipped")
        done = report.when == "call" or (report.when == "setup" and not report.passed)
        if not done or "koan_state" not in properties:
            return
        state, get = KoanState(properties["koan_state"]), properties.get
        contracts = tuple(get("koan_contracts", ()))
        result = KoanResult(report.nodeid, state, get("koan_cause", ""), get("koan_line"),
                            round(report.duration, 3), contracts=contracts)  # fmt: skip
        self.write(result.as_event())

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus) -> None:
        self.write({"event": "finish", "exitstatus": int(exitstatus)})


def koan_id(nodeid: str) -> str:
    """The koan a test item belongs to: its nodeid without the parameters."""
    return nodeid.split("[", 1)[0]


def by_koan(events: list[dict]) -> dict[str, KoanResult]:
    """One result per koan: a parametrized koan passes when every case passes, and otherwise
    takes the state, cause and line of its worst case."""
    koans: dict[str, KoanResult] = {}
    for event in events:
        if event.get("event") != "koan":
            continue
        result = KoanResult.from_event(event)
        key = koan_id(result.nodeid)
        known = koans.get(key)
        koans[key] = replace(result, nodeid=key) if known is None else known.worse(result)
    return koans


@dataclass(frozen=True)
class RunRecord:
    """The one reading of a run's record that status, watch and grade turn into koan states."""

    koans: dict[str, KoanResult]
    collect_errors: tuple[tuple[str, str], ...]  # (file as the record names it, message), in order
    started: tuple[str, ...]  # nodeids of the items that started, in order
    finished: bool  # the run wrote its "finish" event

    @classmethod
    def of(cls, events: list[dict]) -> RunRecord:
        failed = [e for e in events if e.get("event") == "collect-error"]
        return cls(
            by_koan(events),
            tuple((e["path"], e.get("message", "")) for e in failed),
            tuple(e["nodeid"] for e in events if e.get("event") == "running"),
            any(e.get("event") == "finish" for e in events),
        )

    def result(self, nodeid: str, timed_out: bool = False) -> KoanResult:
        """A koan's report; else its file did not import, or it ran out of time (failing); else
        no report came back (crashed): never a pass."""
        found = self.koans.get(koan_id(nodeid))
        if found is not None:
            return found
        path = nodeid.partition("::")[0]
        error = next((message for where, message in self.collect_errors if where == path), None)
        if error is not None:
            return KoanResult(nodeid, KoanState.FAILING, "import", note=error)
        if timed_out:
            return KoanResult(nodeid, KoanState.FAILING, "timeout", note=TIMED_OUT)
        return KoanResult(nodeid, KoanState.CRASHED, note=NO_REPORT)


def read(path: Path) -> list[dict]:
    return parse(Path(path).read_text(encoding="utf-8"))


def parse(text: str) -> list[dict]:
    """The events of a record's text; a torn last line (a killed run) is dropped."""
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return events


# ---- The learner's reveal log, .jaxkoans/reveals.jsonl: one line per koan whose hidden value the
# learner asked to see (`--koans-reveal`: progress.py reveal, watch's `v`), read by status and
# grade. Appending one short line is atomic: pytest-xdist workers never lose each other's.
REVEALS = "reveals.jsonl"


def record_reveal(checkout, nodeid: str) -> None:
    """Remember that the learner saw what koan `nodeid` hid."""
    line = json.dumps({"nodeid": nodeid, "at": datetime.now(UTC).isoformat(timespec="seconds")})
    try:
        checkout.state.mkdir(exist_ok=True)  # where the learner's tools keep their files
        with (checkout.state / REVEALS).open("a", encoding="utf-8") as out:
            out.write(line + "\n")
    except OSError:  # a read-only checkout: the reveal still shows, it is just not remembered
        pass


def revealed(root: Path) -> set[str]:
    """The koans of the course at `root` whose hidden value the learner has asked to see."""
    try:
        text = (Path(root) / ".jaxkoans" / REVEALS).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return set()
    found = set()
    for line in text.splitlines():
        with contextlib.suppress(ValueError, LookupError, TypeError, AttributeError):  # torn line
            found.add(koan_id(json.loads(line)["nodeid"]))  # a parametrized koan is one koan
    return found
