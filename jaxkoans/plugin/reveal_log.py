"""The learner's reveal log, `.jaxkoans/reveals.jsonl`: one JSON line per koan whose hidden
value the learner asked to see (`{"nodeid": "koans/01/test_scan.py::test_x", "at": "…"}`).

The plugin writes it whenever a run under `--koans-reveal` shows a koan's hidden value (by
`progress.py reveal`, watch's `v` or the learner's own `pytest --koans-reveal`); progress and
grade read it. Appending one short line is atomic, so pytest-xdist workers never lose each
other's reveals.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from jaxkoans.course import Course

LOG = "reveals.jsonl"


def koan_nodeid(checkout: Course, path: Path, name: str) -> str:
    """The koan's id as progress.py names it: its file relative to the course, its test name."""
    try:
        relative = Path(path).resolve().relative_to(checkout.root).as_posix()
    except ValueError:
        relative = Path(path).as_posix()
    return f"{relative}::{name.split('[', 1)[0]}"


def record(checkout: Course, nodeid: str) -> None:
    """Remember that the learner saw what koan `nodeid` hid."""
    line = json.dumps({"nodeid": nodeid, "at": datetime.now(UTC).isoformat(timespec="seconds")})
    folder = checkout.state  # where the learner's tools keep their files (learner/state.py too)
    try:
        folder.mkdir(exist_ok=True)
        with (folder / LOG).open("a", encoding="utf-8") as out:
            out.write(line + "\n")
    except OSError:  # a read-only checkout: the reveal still shows, it is just not remembered
        pass


def revealed(root: Path) -> set[str]:
    """The nodeids of every koan of the course at `root` whose hidden value the learner has
    asked to see."""
    try:
        return nodeids((Path(root) / ".jaxkoans" / LOG).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return set()


def nodeids(text: str) -> set[str]:
    """The koans a log's text names (progress.py's and grade's one reading of it)."""
    found = set()
    for line in text.splitlines():
        try:
            nodeid = json.loads(line)["nodeid"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a torn line of an interrupted write
        if isinstance(nodeid, str):
            found.add(nodeid.split("[", 1)[0])  # a parametrized koan is one koan
    return found
