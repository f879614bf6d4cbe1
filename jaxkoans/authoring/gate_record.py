"""The mutation gate's record: for each chapter, the content its gate last passed on.

The gate costs about a minute per chapter, too much to run on every chapter in each CI run. So
`python -m jaxkoans.authoring.mutate --stamp` writes, for a chapter whose every mutant was killed or
recorded equivalent, a digest of what the gate reads (its koan and answer files and its
`[equivalent]` table) and of the harness code its verdict depends on (`harness_digest`: what
runs a koan and decides how it fails, and the gate itself) into `tests/mutation_gate.toml`,
with its kill table. The suite runs the gate again for each chapter whose digest no longer
matches: the chapters a change touched, and every chapter after a change to that code.

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
    "# The mutation gate's record (jaxkoans/authoring/gate_record.py): each chapter's content when\n"
    "# its gate last passed. Written by `python -m jaxkoans.authoring.mutate --chapter NN --stamp`.\n"
)
FAKES_RECORD = "tests/fakes_record.toml"
FAKES_HEADER = (
    "# The TODO fakes' record (jaxkoans/authoring/gate_record.py): each chapter's content when all\n"
    "# its fakes last failed their koans. Written by `python -m jaxkoans.authoring.mutate --fakes --stamp`.\n"
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


# The harness code every gate's verdict depends on: what a koan imports (api), what decides how
# it fails (plugin, and the course's readers of what the learner wrote), the runner that starts
# pytest, pytest's configuration, and this record. A gate adds its own module.
HARNESS = (
    "conftest.py", "jaxkoans/__init__.py", "jaxkoans/api", "jaxkoans/plugin", "jaxkoans/course",
    "jaxkoans/learner/runner.py", "jaxkoans/authoring/gate_record.py",
)  # fmt: skip


def harness_digest(*gate_modules: str) -> str:
    """A digest of the harness code (HARNESS) and of `gate_modules` (paths under the root)."""
    root = course.REPO
    files: set[Path] = set()
    for entry in (*HARNESS, *gate_modules):
        path = root / entry
        files |= set(path.rglob("*.py")) if path.is_dir() else {path} if path.is_file() else set()
    hashed = hashlib.sha256()
    for path in sorted(files):
        hashed.update(f"{path.relative_to(root).as_posix()}\0".encode())
        hashed.update(path.read_bytes() + b"\0")
    with (root / "pyproject.toml").open("rb") as config:
        pytest_options = tomllib.load(config).get("tool", {}).get("pytest", {})
    hashed.update(json.dumps(pytest_options, sort_keys=True).encode())
    return hashed.hexdigest()


MUTATE = "jaxkoans/authoring/mutate.py"  # the mutation gate and the fakes check


def digest(chapter: course.Chapter) -> str:
    """What the gate of `chapter` reads: its koan and answer files and its equivalents, and
    the harness code its verdict depends on."""
    hashed = hashlib.sha256(harness_digest(MUTATE).encode())
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
