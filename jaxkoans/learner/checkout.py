"""The course a learner's command works on, as one object passed down from the command line.

`cli.main(argv, checkout)` hands it to the command, which hands it on: nothing in the learner's
tools reads a course root fixed at import, so the commands' own tests run them in one process
on a course of their own (tests/fakecourse.py). A pytest child learns it from `JAXKOANS_ROOT`
(`env`), which the harness's plugin reads (`jaxkoans.course.REPO`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from jaxkoans import course
from jaxkoans.course import pristine


@dataclass(frozen=True)
class Checkout:
    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).resolve())

    @classmethod
    def here(cls) -> Checkout:
        """$JAXKOANS_ROOT, else the checkout this package lives in."""
        return cls(course.REPO)

    @property
    def koans(self) -> Path:
        return self.root / "koans"

    @property
    def answers(self) -> Path:
        return self.root / "answers"

    @property
    def state(self) -> Path:
        """The tool's own memory (.jaxkoans/, ignored by git)."""
        return self.root / ".jaxkoans"

    def relative(self, path: Path) -> Path:
        return Path(path).resolve().relative_to(self.root)

    def answer_of(self, test_file: Path) -> Path:
        """answers/NN/test_x.py for koans/NN/test_x.py."""
        return self.answers / self.relative(test_file).relative_to("koans")

    def chapters(self) -> list[course.Chapter]:
        return course.all_chapters(self.koans)

    def chapter_for(self, test_file: Path) -> course.Chapter | None:
        """A test file's chapter: its own directory's manifest, else its koans/ twin's."""
        directory = Path(test_file).resolve().parent
        for candidate in (
            directory / course.MANIFEST,
            self.koans / directory.name / course.MANIFEST,
        ):
            if candidate.is_file():
                return course.load_chapter(candidate)
        return None

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a pytest child on this course."""
        return {**os.environ, "JAXKOANS_ROOT": str(self.root), **(extra or {})}

    # ---- the course as shipped (koans/.shipped.json) ------------------------------------------

    def shipped_text(self, relative: str) -> tuple[str, str] | None:
        """(where it came from, text) of the koan file `relative` as shipped, or None."""
        entry = pristine.read_manifest(self.koans).get(relative)
        if not isinstance(entry, dict) or not isinstance(entry.get("text"), str):
            return None
        return pristine.SOURCE, entry["text"]

    def is_shipped(self, relative: str) -> bool:
        """True when the file at `relative` (under the root) is exactly as shipped."""
        entry = pristine.read_manifest(self.koans).get(relative)
        wanted = entry.get("blob") if isinstance(entry, dict) else None
        path = self.root / relative
        try:
            stat = path.stat()
        except OSError:
            return False
        return wanted is not None and _blob_of(str(path), stat.st_mtime_ns, stat.st_size) == wanted


@cache
def _blob_of(path: str, mtime_ns: int, size: int) -> str | None:
    try:
        return pristine.blob_id(Path(path).read_bytes())
    except OSError:
        return None
