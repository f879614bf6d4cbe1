#!/usr/bin/env python3
"""JAX 进阶 Koans · 学习进度 / progress.

    python progress.py                 where you stand, and the next koan to work on
    python progress.py --chapter 03    one chapter only
    python progress.py --json          the same as JSON (schema 1), for scripts and CI
    python progress.py hint [KOAN]     the hint of the next (or named) koan, one level at a time
    python progress.py doctor          is this machine ready for the course?

It runs the koans in a separate process and never modifies your files.
"""

from __future__ import annotations

import argparse
import json
import locale
import os
import sys
from pathlib import Path

if sys.version_info < (3, 12):  # noqa: UP036 (run by a 3.11 `python` too: say what to do)
    sys.exit(
        "需要 Python ≥ 3.12 / needs Python >= 3.12: run `bash setup.sh`, then `source .venv/bin/activate`"
    )

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jaxkoans import course, doctor
from jaxkoans.classify import KoanState
from jaxkoans.progress import Koan, Progress, measure, recommended_path

MARKS = {
    KoanState.PASSED.value: "█",
    KoanState.FAILING.value: "▒",
    KoanState.NOT_STARTED.value: "░",
}
BAR_WIDTH = 24


def bar(koans: list[Koan]) -> str:
    if not koans:
        return "·" * BAR_WIDTH
    cells = []
    for state in MARKS:  # passed, then failing, then not started
        share = sum(k.state == state for k in koans) / len(koans)
        cells.append(round(share * BAR_WIDTH))
    cells[-1] = BAR_WIDTH - sum(cells[:-1])
    return "".join(mark * n for mark, n in zip(MARKS.values(), cells, strict=True))


def counts(koans: list[Koan]) -> dict[str, int]:
    return {state: sum(k.state == state for k in koans) for state in MARKS}


def show_summary(
    progress: Progress, chapters: list[course.Chapter], path: list[str], chapter: str | None
) -> None:
    print("JAX 进阶 Koans · 学习进度 / progress\n")
    for ch in chapters:
        own = progress.of(ch)
        c = counts(own)
        print(f"  {ch.number} {ch.title_zh} / {ch.title_en}")
        print(
            f"     {bar(own)}  {c['passed']:>3}/{len(own):<3}"
            f"  ✅ {c['passed']}  ❌ {c['failing']}  ✍️ {c['not_started']}"
        )
    total = counts(progress.koans)
    n = len(progress.koans) or 1
    print(
        f"\n  总计 / total  {bar(progress.koans)}  {total['passed']}/{len(progress.koans)} ({100 * total['passed'] // n} %)"
    )
    print("  ✅ 通过 / passed   ❌ 尝试中 / attempted   ✍️ 未开始 / not started")
    for problem in progress.problems:
        print(f"\n⚠️  {problem}")
    koan = progress.next_koan(path, chapter)
    if koan is None:
        print("\n🎉 全部通过！/ every koan passes!")
        return
    print(f"\n下一个 koan / next koan:  {koan.chapter.number} · {koan.path.name}::{koan.name}")
    print(f"  {koan.path.as_posix()}:{koan.line}" + (f"  ({koan.note})" if koan.note else ""))
    for line in koan.doc.splitlines():
        print(f"  │ {line}")
    print(f"  运行 / run:   pytest {koan.nodeid}")
    print(f"  提示 / hint:  python progress.py hint {koan.name}")


def as_json(
    progress: Progress, chapters: list[course.Chapter], path: list[str], chapter: str | None
) -> dict:
    def koan_dict(k: Koan) -> dict:
        return {
            "chapter": k.chapter.number,
            "nodeid": k.nodeid,
            "file": k.path.as_posix(),
            "name": k.name,
            "line": k.line,
            "state": k.state,
            "cause": k.cause,
            "note": k.note,
        }

    following = progress.next_koan(path, chapter)
    return {
        "schema": 1,
        "chapters": [
            {
                "number": c.number,
                "title_zh": c.title_zh,
                "title_en": c.title_en,
                "total": len(progress.of(c)),
                **counts(progress.of(c)),
            }
            for c in chapters
        ],
        "total": {"total": len(progress.koans), **counts(progress.koans)},
        "next": koan_dict(following) if following else None,
        "koans": [koan_dict(k) for k in progress.koans],
        "problems": progress.problems,
    }


def default_language() -> str:
    lang = os.environ.get("LANG") or (locale.getlocale()[0] or "")
    return "zh" if lang.lower().startswith("zh") else "en"


def find_koan(progress: Progress, wanted: str | None, path: list[str]) -> Koan | None:
    if not wanted:
        return progress.next_koan(path)
    for koan in progress.koans:
        if wanted in (koan.name, koan.nodeid, f"{koan.path.name}::{koan.name}"):
            return koan
    return None


def show_hint(koan: Koan, lang: str, level: int) -> int:
    hint = koan.chapter.hint(koan.path.name, koan.name)
    if hint is None:
        print(f"没有提示 / no hint for {koan.name}")
        return 1
    levels = hint.zh if lang == "zh" else hint.en
    level = max(1, min(level, len(levels)))
    print(f"💡 {koan.chapter.number} · {koan.path.name}::{koan.name}  ({level}/{len(levels)})")
    for i, text in enumerate(levels[:level], start=1):
        print(f"  {i}. {text}")
    if level < len(levels):
        print(f"  更多 / more:  python progress.py hint {koan.name} --level {level + 1}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chapter", metavar="NN", help="only this chapter (e.g. 03)")
    parser.add_argument("--json", action="store_true", help="print the progress as JSON")
    sub = parser.add_subparsers(dest="command")
    hint = sub.add_parser("hint", help="show the hint of the next or a named koan")
    hint.add_argument("koan", nargs="?", help="test name, or file.py::test_name")
    hint.add_argument("--lang", choices=("zh", "en"), default=default_language())
    hint.add_argument("--level", type=int, default=1, help="how many hint levels to reveal")
    sub.add_parser("doctor", help="check Python, the pinned packages, JAX's devices, a compiler")
    args = parser.parse_args(argv)

    if args.command == "doctor":
        results = doctor.checks()
        for ok, line in results:
            print(("✅ " if ok else "❌ ") + line)
        return 0 if all(ok for ok, _ in results) else 1

    chapters = [
        c for c in course.all_chapters() if not args.chapter or c.number == args.chapter.zfill(2)
    ]
    if not chapters:
        print(f"没有这一章 / no such chapter: {args.chapter}", file=sys.stderr)
        return 2
    chapter = args.chapter.zfill(2) if args.chapter else None
    path = recommended_path()

    if args.command == "hint":
        if args.koan:  # naming a koan needs no run: the inventory is enough
            from jaxkoans.progress import inventory

            progress = Progress(inventory(course.KOANS, chapters))
        else:
            progress = measure(chapter)
        koan = find_koan(progress, args.koan, path)
        if koan is None:
            print(
                f"找不到 koan / no such koan: {args.koan}"
                if args.koan
                else "🎉 全部通过 / all passed"
            )
            return 1
        return show_hint(koan, args.lang, args.level)

    progress = measure(chapter)
    if args.json:
        print(json.dumps(as_json(progress, chapters, path, chapter), ensure_ascii=False, indent=2))
    else:
        show_summary(progress, chapters, path, chapter)
    return 0


if __name__ == "__main__":
    sys.exit(main())
