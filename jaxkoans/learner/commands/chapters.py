"""The chapters a command's `--chapter` selects: one reading for status, hint and reveal."""

from __future__ import annotations

import sys

from jaxkoans import course


def chosen_chapters(args) -> tuple[list[course.Chapter], str | None]:
    """The chapters of `args.checkout` that `--chapter` selects (all without it); exits 2 on
    an unknown chapter."""
    wanted = args.chapter.zfill(2) if getattr(args, "chapter", None) else None
    chapters = [c for c in args.checkout.chapters() if wanted in (None, c.number)]
    if not chapters:
        print(f"没有这一章 / no such chapter: {args.chapter}", file=sys.stderr)
        raise SystemExit(2)
    return chapters, wanted
