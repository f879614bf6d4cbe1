"""Start over: `reset KOAN` puts back as shipped every blank, TODO and fix region the koan
reaches, says which, and keeps the rest of your file; `reset FILE` brings the whole file back.
Your version is kept first in .jaxkoans/backups/ (ignored by git)."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections import Counter

from jaxkoans.course import fills, koan_model, unfill
from jaxkoans.course import shipped as as_shipped
from jaxkoans.learner.koan_runs import locate

YES = ("y", "yes", "是")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        help="a koan (only its blanks and TODOs) or a koan file (all of it; also a deleted one)",
    )
    parser.add_argument("--yes", action="store_true", help="do not ask first")


def reset_reached(shipped: str, current: str, koan: str) -> tuple[str, list[str]]:
    """(the learner's text with `koan` as shipped, the places put back in words: its blanks, each
    TODO it reaches that the learner wrote, each helper's filled blanks, its fix regions).
    Raises SyntaxError when the learner's file does not parse."""
    text, helper_blanks = unfill.reset_koan(shipped, current, koan)
    theirs, mine = koan_model.parse(shipped), koan_model.parse(current)
    own = [koan for fill in fills.take(shipped, current).blanks if fill.owner == koan]
    spans = [theirs.definitions.get(name, (0, -1)) for name in theirs.reached(koan)]

    def body(model: koan_model.KoanFile, name: str) -> str | None:
        lines = model.body_of(name)
        return lines and "\n".join(t.rstrip() for t in model.lines[lines[0] : lines[1]]).strip()

    places = []
    for name, count in Counter(own).items():  # the koan's own blanks first
        places.append(f"{name} ({count} 个空 / blank{'s' if count > 1 else ''})")
    for todo in theirs.todos:  # in the koan or a helper it reaches, written by the learner
        yours, as_shipped = body(mine, todo.name), body(theirs, todo.name)
        if (
            any(s <= todo.line <= e for s, e in spans)
            and yours
            and as_shipped
            and yours != as_shipped
        ):
            places.append(f"{todo.name} (TODO)")
    for name, count in Counter(helper_blanks).items():
        places.append(f"{name} ({count} 个空 / blank{'s' if count > 1 else ''})")
    span = mine.spans.get(koan)
    if span and any(span[0] <= begin <= span[1] for begin, _ in mine.regions):
        places.append(f"{koan} ({koan_model.REGION_BEGIN} … {koan_model.REGION_END})")
    return text, places


def run(args) -> int:
    checkout = args.checkout
    koan_file, koan = locate(checkout, args.target)
    if koan_file is None or checkout.koans not in koan_file.parents:
        print(f"找不到 koan 或文件 / no such koan or koan file: {args.target}", file=sys.stderr)
        return 2
    relative = koan_file.relative_to(checkout.root).as_posix()
    found = checkout.shipped_text(relative)
    if found is None:
        print(f"找不到原始文件 / no pristine copy of {koan_file.name} in {as_shipped.SOURCE}")
        return 1
    ref, text = found
    if not koan_file.exists():  # deleted: nothing of the learner's to keep
        koan_file.parent.mkdir(parents=True, exist_ok=True)
        koan_file.write_text(text, encoding="utf-8")
        print(f"✅ {relative} ← {ref} (已恢复 / restored)")
        return 0
    current = koan_file.read_text(encoding="utf-8", errors="replace")
    what, places = relative, []
    if koan is not None:  # one koan: the rest of the file stays the learner's
        try:
            text, places = reset_reached(text, current, koan.name)
        except (SyntaxError, ValueError, RecursionError):
            print(
                f"{relative} 无法解析，不能只重置一个 koan / does not parse, so one koan cannot be "
                f"reset alone: fix it, or reset the whole file (python progress.py reset {relative})"
            )
            return 1
        what = f"{relative}::{koan.name}"
    if current == text:
        print(f"{what} 已是原始版本 / is already as shipped ({ref})")
        return 0
    backup = checkout.state / "backups" / f"{relative}.{time.strftime('%Y%m%d-%H%M%S')}.bak"
    kept = backup.relative_to(checkout.root).as_posix()
    question = f"重置 / reset {what} to {ref}? 你的版本将保存为 / yours would be saved as {kept}"
    if not args.yes:
        if not sys.stdin.isatty():
            print(question + " — 需要 --yes / needs --yes when not run in a terminal")
        if not sys.stdin.isatty() or input(question + " [y/N] ").strip().lower() not in YES:
            print("没有改动 / nothing changed")
            return 1
    try:
        backup.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(koan_file, backup)
        koan_file.write_text(text, encoding="utf-8")
    except OSError as error:
        print(
            f"无法写入 / cannot write {error.filename or relative}: {error.strerror}"
            " — 文件没有改动 / your file is unchanged (a read-only checkout?)"
        )
        return 1
    print(f"✅ {what} ← {ref};  你的版本 / yours: {kept}")
    if places:
        print("   恢复原样 / put back as shipped: " + ", ".join(places))
    return 0
