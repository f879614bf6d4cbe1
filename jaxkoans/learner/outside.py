"""What grade will not take from a learner's koan files (it runs the course's file with only the
fills put in): edits outside the blanks, TODO bodies and fix regions, with file and line.
Comments, blank lines and reformatting are not edits."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jaxkoans import course
from jaxkoans.course import Course, fills, koan_model
from jaxkoans.course.koan_model import MODULE
from jaxkoans.learner.language import say
from jaxkoans.plugin.results import KoanState

MAX_SHOWN = 8  # warnings in the summary; the rest are counted


@dataclass(frozen=True)
class Outside:
    file: Path  # the learner's koan file
    line: int | None  # in the learner's file
    koan: str  # the koan whose lines hold it ("<module>": every koan of the file)
    what: str


def edits_outside(checkout: Course, koan_file: Path) -> list[Outside]:
    """The edits of `koan_file` that grade ignores (none when the shipped file is unknown)."""
    found = checkout.shipped_text(checkout.relative(koan_file).as_posix())
    try:
        current = Path(koan_file).read_text(encoding="utf-8")
        taken = fills.take(found[1], current) if found and current != found[1] else None
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
        return []  # the run says what is wrong with the file
    ignored = taken.ignored if taken else []
    return [Outside(Path(koan_file), e.student_line, e.owner, e.what) for e in ignored]


def edits(checkout: Course, chapters: list[course.Chapter]) -> list[Outside]:
    """Every edit of the chosen chapters' koan files that grade ignores (a file identical to the
    shipped one has none, known from its blob id alone)."""
    paths = [checkout.koans / c.number / name for c in chapters for name in c.files]
    return [
        edit
        for path in paths
        if path.is_file() and not checkout.is_shipped(checkout.relative(path).as_posix())
        for edit in edits_outside(checkout, path)
    ]


def mark(checkout: Course, koans: list, found: list[Outside]) -> None:
    """Note on each passed koan the edits of `found` grade ignores in its lines or in a helper it
    reaches (one elsewhere at module level: every koan): it passes here with them, grade runs it
    without them, so progress does not call it a plain pass."""
    for koan in (k for k in koans if k.state == KoanState.PASSED):
        koan_file = checkout.root / koan.path
        seeing = koan_model.read(koan_file).koans_seeing
        koan.ignored_edits = [
            f"{where(checkout, e)}: {e.what}"
            for e in found
            if e.file == koan_file
            and (
                e.koan == koan.name
                or (e.koan == MODULE and (not e.line or koan.name in seeing(e.line)))
            )
        ]


def where(checkout: Course, edit: Outside) -> str:
    """file:line of an edit, relative to the course."""
    root = checkout.root
    path = edit.file.relative_to(root) if edit.file.is_relative_to(root) else edit.file
    return f"{path.as_posix()}:{edit.line}" if edit.line else path.as_posix()


def warnings(checkout: Course, found: list[Outside]) -> list[str]:
    """A line per edit that grade will not use, for the summary (the koan it is in, whose pass
    with it is counted ⚠️, not ✅)."""
    zh = "grade 不会使用这些改动（空、TODO 和修复区以外；靠它通过的 koan 记为 ⚠️，不是 ✅）"
    en = "grade will not use these edits (outside the blanks, TODOs and fix regions; a pass that"
    en += " needs one counts ⚠️, not ✅)"
    lines = [f"{say(zh, en)}: {len(found)}"] if found else []
    lines += [f"   {where(checkout, e)} ({e.koan}): {e.what}" for e in found[:MAX_SHOWN]]
    return lines + ([f"   … {len(found) - MAX_SHOWN} more"] if len(found) > MAX_SHOWN else [])
