"""The course as data: each chapter's `chapter.toml` (titles, devices, float64, file order, hints,
gate data), and `Course`, the one object every tool is handed: its root, chapters, the course as
shipped (`koans/.shipped.json`) and its answers when present. Each entry point builds one
(`Course.here()`: $JAXKOANS_ROOT, else this checkout) and passes it down.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

MANIFEST = "chapter.toml"
# Files at a course's root that configure how pytest runs its koans, beside jaxkoans/ and csrc/:
# grade digests them, and progress.py's memory keys its results on them.
HARNESS_FILES = ("conftest.py", "pyproject.toml", "pytest.ini", "tox.ini", "setup.cfg", "setup.py")
ROOT_ENV = "JAXKOANS_ROOT"  # another course (a fake one in tests, a copy being graded); children inherit it


@dataclass(frozen=True)
class Hint:
    zh: tuple[str, ...]
    en: tuple[str, ...]


@dataclass(frozen=True)
class Chapter:
    number: str  # the directory name, "01" … "11"
    title_zh: str
    title_en: str
    devices: int = 1  # CPU devices the chapter's koans need
    x64: bool = False  # run the chapter's koans with jax_enable_x64
    files: tuple[str, ...] = ()  # test files in course order
    hints: dict[str, Hint] = field(default_factory=dict, compare=False, hash=False)
    # file -> fingerprints of its `# ✍️ BEGIN/END` fix regions as shipped (twins.region_hashes)
    regions: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, hash=False)
    # "file::koan" -> ({"fill": …, "why": …}, …): wrong fills the koan cannot tell apart from
    # its answer, each with its reason (jaxkoans.authoring.mutate counts them as equivalent, not survived)
    equivalent: dict[str, tuple[dict, ...]] = field(default_factory=dict, compare=False, hash=False)
    # "file::TODO function" -> {"library": [bodies that call the library the lesson replaces],
    # "equivalent": [{"fake": label, "why": …}]}: the shortcut gate's chapter data
    shortcuts: dict[str, dict] = field(default_factory=dict, compare=False, hash=False)
    # "file::koan" -> ({"answer": …, "why": …}, …): answers the give-away check finds next to
    # their blank where the koan asks something else of them (authoring/giveaways.py)
    giveaways: dict[str, tuple[dict, ...]] = field(default_factory=dict, compare=False, hash=False)
    # "file::TODO function" or "file::regions" -> the technique contract the program reader
    # checks (jaxkoans/plugin/contracts.py): on_path, absent, max_intermediate, allow, traced, why
    contracts: dict[str, dict] = field(default_factory=dict, compare=False, hash=False)

    @property
    def title(self) -> str:
        return f"{self.number} {self.title_zh} / {self.title_en}"

    def file_rank(self, filename: str) -> int:
        """Position of a test file in course order; unlisted files come last."""
        return self.files.index(filename) if filename in self.files else len(self.files)

    def hint(self, filename: str, koan: str) -> Hint | None:
        return self.hints.get(f"{filename}::{koan}")


class CourseDataError(ValueError):
    """A chapter.toml that cannot be read; the message names the file."""


# The keys of a chapter.toml and the type each value must have: anything else is a typo
# (`x46 = true`) that would otherwise be ignored without a word.
KEYS: dict[str, type | tuple[type, ...]] = {
    "title_zh": str, "title_en": str, "devices": int, "x64": bool, "files": list,
    **dict.fromkeys(("hints", "regions", "equivalent", "shortcuts", "giveaways", "contracts"), dict),
}  # fmt: skip
HINT_KEYS: dict[str, type | tuple[type, ...]] = {"zh": (str, list), "en": (str, list)}
CONTRACT_KEYS: dict[str, type | tuple[type, ...]] = {
    "on_path": list,  # primitives that must lie on the path from the inputs to the outputs
    "each_output": bool,  # on_path holds for every output on its own (a jvp's primal and tangent)
    "in_loop": list,  # primitives that must run live inside a loop body (while, scan)
    "absent": list,  # primitives that must appear nowhere in the program, dead code included
    "max_intermediate": int,  # elements of the largest live intermediate, sub-programs included
    "allow": list,  # reads of the test (or guard switches) this TODO's own answer needs
    "traced": bool,  # false: the TODO builds no JAX program to read
    "why": str,  # what the contract rests on, or why nothing is traced
    "fresh": str,  # a reference of the koan's file the TODO must match on new random inputs
    "costs": dict,  # dimension -> factor against the answer's profile, or why it is free
    "liveness": bool,  # false: the technique need not vary with the inputs (say why)
    "batched_output": bool,  # a batching rule: (output, its batch axis), any axis as good
    # why the problem has no answer on a smaller mesh (one expert per device): its fresh case
    # under shard_map draws new values on the koan's own mesh instead
    "smaller_mesh": str,
}


def _check_keys(manifest: Path, where: str, table: dict, allowed: dict) -> None:
    for key, value in table.items():
        if key not in allowed:
            raise CourseDataError(f"{manifest}: 未知的键 / unknown key {where}{key!r} (known: {', '.join(allowed)})")
        if not isinstance(value, allowed[key]) or (allowed[key] is int and isinstance(value, bool)):
            raise CourseDataError(f"{manifest}: {where}{key!r} 类型不对 / has the wrong type ({type(value).__name__})")


def validate(manifest: Path, data: dict) -> None:
    """A usage error naming the file and key for anything chapter.toml may not hold."""
    for required in ("title_zh", "title_en"):
        if required not in data:
            raise CourseDataError(f"{manifest}: 缺少 / missing key {required!r}")
    _check_keys(manifest, "", data, KEYS)
    for table, allowed in (("hints", HINT_KEYS), ("contracts", CONTRACT_KEYS)):
        for key, entry in data.get(table, {}).items():
            if not isinstance(entry, dict):
                raise CourseDataError(f"{manifest}: {table}.{key!r} 必须是表 / must be a table")
            _check_keys(manifest, f"{table}.{key!r}.", entry, allowed)


@cache
def load_chapter(manifest: Path) -> Chapter:
    try:
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise CourseDataError(f"{manifest}: 章节数据无法读取 / chapter data unreadable: {error!r}") from error
    validate(manifest, data)

    def levels(value: str | list[str] | None) -> tuple[str, ...]:
        return () if value is None else (value,) if isinstance(value, str) else tuple(value)

    tuples = {k: {key: tuple(v) for key, v in data.get(k, {}).items()} for k in ("regions", "equivalent", "giveaways")}
    return Chapter(
        number=manifest.parent.name, title_zh=data["title_zh"], title_en=data["title_en"],
        devices=int(data.get("devices", 1)), x64=bool(data.get("x64", False)),
        files=tuple(data.get("files", ())), shortcuts=dict(data.get("shortcuts", {})),
        hints={key: Hint(levels(v.get("zh")), levels(v.get("en"))) for key, v in data.get("hints", {}).items()},
        contracts=dict(data.get("contracts", {})), **tuples,
    )  # fmt: skip


def twin_name(test_file: Path) -> str:
    """The koan file a gate's variant stands for: `test_x__s003.py` (a generated fake),
    `test_x__f001.py`, `test_x__m0042.py`, `test_x__base.py` -> `test_x.py`; else its own name."""
    path = Path(test_file)
    return re.sub(r"__(base|[a-z]+\d+)$", "", path.stem) + path.suffix


@dataclass(frozen=True)
class Course:
    """One course on disk: this checkout, a fake one in tests, a copy being graded."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).resolve())

    @classmethod
    def here(cls) -> Course:
        """$JAXKOANS_ROOT, else the checkout this package lives in."""
        return cls(Path(os.environ.get(ROOT_ENV) or Path(__file__).resolve().parents[2]))

    @property
    def koans(self) -> Path:
        return self.root / "koans"

    @property
    def answers(self) -> Path:
        """The solved twins; absent from a student release."""
        return self.root / "answers"

    @property
    def state(self) -> Path:
        """The tool's own memory (.jaxkoans/, ignored by git)."""
        return self.root / ".jaxkoans"

    def relative(self, path: Path) -> Path:
        return Path(path).resolve().relative_to(self.root)

    def answer_of(self, test_file: Path) -> Path:
        return self.answers / Path(test_file).resolve().relative_to(self.koans)

    def koan_of(self, test_file: Path) -> Path:
        """koans/NN/test_x.py for answers/NN/test_x.py (or itself)."""
        path = Path(test_file).resolve()
        return self.koans / path.relative_to(self.answers) if self.answers in path.parents else path

    def chapters(self) -> list[Chapter]:
        """Every chapter, in the order of its directory's name."""
        return [load_chapter(m) for m in sorted(self.koans.glob(f"*/{MANIFEST}"))]

    def chosen(self, numbers: list[str]) -> list[Chapter]:
        """The chapters numbered `numbers` ("3" or "03"); every chapter when none is named."""
        wanted = {n.zfill(2) for n in numbers}
        return [c for c in self.chapters() if not wanted or c.number in wanted]

    def manifest(self) -> dict:
        """koans/course.toml, its one reader: the recommended `path` through the chapters and,
        in a student release, where the `answers` are; {} when missing or damaged."""
        try:
            return tomllib.loads((self.koans / "course.toml").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return {}

    def recommended_path(self) -> list[str]:
        """The chapters in the course's recommended order (course.toml), else their own."""
        path = self.manifest().get("path")
        return list(path) if isinstance(path, list) else [c.number for c in self.chapters()]

    def chapter_for(self, test_file: Path) -> Chapter | None:
        """A test file's chapter: its own directory's manifest, else its koans/ twin's."""
        directory = Path(test_file).resolve().parent
        for candidate in (directory / MANIFEST, self.koans / directory.name / MANIFEST):
            if candidate.is_file():
                return load_chapter(candidate)
        return None

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a pytest child on this course."""
        return {**os.environ, ROOT_ENV: str(self.root), **(extra or {})}

    # ---- the course as shipped (koans/.shipped.json): its one reader --------------------------

    def shipped(self) -> dict[str, dict]:
        """{"koans/NN/test_x.py": {"blob", "text", "predictions"}}; {} when missing or damaged."""
        from jaxkoans.course import shipped

        return shipped.read_manifest(self.koans)

    def shipped_text(self, relative: str) -> tuple[str, str] | None:
        """(where it came from, text) of the koan file `relative` as shipped, or None."""
        from jaxkoans.course import shipped

        entry = self.shipped().get(relative)
        text = entry.get("text") if isinstance(entry, dict) else None
        return (shipped.SOURCE, text) if isinstance(text, str) else None

    def predictions(self, relative: str) -> dict[tuple[int, int], str]:
        """{(line, column) of a shipped `__`: the kind of answer it takes} (course/predictions.py)."""
        from jaxkoans.course import shipped

        return shipped.kinds_of(self.shipped().get(relative) or {})

    def is_shipped(self, relative: str) -> bool:
        """True when the file at `relative` (under the root) is exactly as shipped."""
        entry = self.shipped().get(relative)
        wanted = entry.get("blob") if isinstance(entry, dict) else None
        try:
            stat = (self.root / relative).stat()
        except OSError:
            return False
        return wanted is not None and _blob_of(str(self.root / relative), stat.st_mtime_ns, stat.st_size) == wanted


@cache
def _blob_of(path: str, mtime_ns: int, size: int) -> str | None:
    from jaxkoans.course import shipped

    try:
        return shipped.blob_id(Path(path).read_bytes())
    except OSError:
        return None
