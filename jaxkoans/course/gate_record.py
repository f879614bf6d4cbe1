"""The mutation gate's record: for each chapter, the content its gate last passed on.

The gate costs about a minute per chapter, too much to run on every chapter in each CI run. So
`python -m jaxkoans.course.mutate --stamp` writes, for a chapter whose every mutant was killed or
recorded equivalent, a digest of what the gate reads (its koan and answer files and its
`[equivalent]` table) into `tests/mutation_gate.toml`, with its kill table. The suite runs the
gate again for each chapter whose digest no longer matches: the chapters a change touched.
A change to the gate's own generator of wrong fills is not in the digest: re-stamp every chapter.

The TODO fakes are recorded the same way, in `tests/fakes_record.toml` (`mutate --fakes
--stamp`): a digest of the chapter's koan, answer and fakes files, for a chapter whose every
fake made its koan fail. The suite checks the fakes of the chapters whose digest changed.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from jaxkoans import course

RECORD = "tests/mutation_gate.toml"
HEADER = (
    "# The mutation gate's record (jaxkoans/course/gate_record.py): each chapter's content when\n"
    "# its gate last passed. Written by `python -m jaxkoans.course.mutate --chapter NN --stamp`.\n"
)
FAKES_RECORD = "tests/fakes_record.toml"
FAKES_HEADER = (
    "# The TODO fakes' record (jaxkoans/course/gate_record.py): each chapter's content when all\n"
    "# its fakes last failed their koans. Written by `python -m jaxkoans.course.mutate --fakes --stamp`.\n"
)


@dataclass(frozen=True)
class Stamp:
    digest: str
    mutants: int
    killed: int
    equivalent: int
    kill_rate: float


@dataclass(frozen=True)
class FakesStamp:
    digest: str
    fakes: int  # each made its koan fail


def record_path(root: Path | None = None, record: str = RECORD) -> Path:
    return (root or course.REPO) / record


def digest(chapter: course.Chapter) -> str:
    """What the gate of `chapter` reads: its koan and answer files and its equivalents."""
    hashed = hashlib.sha256()
    for tree in (course.KOANS, course.ANSWERS):
        for path in sorted((tree / chapter.number).glob("test_*.py")):
            hashed.update(f"{tree.name}/{path.name}\0".encode())
            hashed.update(path.read_bytes() + b"\0")
    hashed.update(json.dumps(chapter.equivalent, sort_keys=True).encode())
    return hashed.hexdigest()


def fakes_digest(chapter: course.Chapter) -> str:
    """What the fakes check of `chapter` reads: what its gate reads, and its fakes."""
    hashed = hashlib.sha256(digest(chapter).encode())
    for path in sorted((course.ANSWERS / chapter.number / "fakes").glob("*.py")):
        hashed.update(f"{path.name}\0".encode())
        hashed.update(path.read_bytes() + b"\0")
    return hashed.hexdigest()


def read(path: Path | None = None, kind: type = Stamp) -> dict:
    path = path or record_path()
    if not path.is_file():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {number: kind(**entry) for number, entry in data.items()}


def stale(chapters: list[course.Chapter], path: Path | None = None) -> list[course.Chapter]:
    """The chapters whose content changed since their gate last passed (or never did)."""
    stamps = read(path)
    return [c for c in chapters if getattr(stamps.get(c.number), "digest", None) != digest(c)]


def stale_fakes(chapters: list[course.Chapter], path: Path | None = None) -> list[course.Chapter]:
    """The chapters whose content or fakes changed since all their fakes last failed."""
    stamps = read(path or record_path(record=FAKES_RECORD), FakesStamp)
    return [c for c in chapters if getattr(stamps.get(c.number), "digest", None) != fakes_digest(c)]


def write(stamps: dict, path: Path | None = None, header: str = HEADER) -> None:
    path = path or record_path()
    lines = [header]
    for number in sorted(stamps):
        lines.append(f'\n["{number}"]\n')
        for key, value in asdict(stamps[number]).items():
            lines.append(f"{key} = {json.dumps(value)}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    part.write_text("".join(lines), encoding="utf-8")
    part.replace(path)
