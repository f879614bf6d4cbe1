"""Your file against its answer: shown once the koan passes (earlier only with --force)."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from jaxkoans.course import Course, koan_model
from jaxkoans.learner.koan_runs import file_missing, locate, measure
from jaxkoans.plugin.results import KoanState


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", nargs="?", help="a koan (test name) or a koan file; default: the next koan"
    )
    parser.add_argument(
        "--force", action="store_true", help="show it before the koan passes (spoils it)"
    )


def koan_lines(path: Path, names: list[str]) -> list[str]:
    """The lines of the functions and classes of `path` that `names` name or reach (a koan and
    the TODO helpers a learner writes), in file order, each after the blank lines that set it
    apart in the file (but the first)."""
    model = koan_model.read(path)
    chosen = {each for name in names for each in model.reached(name)}
    lines = model.text.splitlines(keepends=True)
    shown: list[str] = []
    for start, end in sorted(model.definitions[n] for n in chosen):
        gap = start - 1
        while shown and gap > 0 and not lines[gap - 1].strip():
            gap -= 1
        shown += lines[gap:end]
    return shown


def answers_note(checkout: Course) -> str:
    """Where the answers are: what the student release says (koans/course.toml `answers`)."""
    note = checkout.manifest().get("answers")
    if isinstance(note, str) and note:
        return note
    return "这份副本里没有 answers/ / this copy has no answers/ (a student release, or deleted)"


def run(args) -> int:
    checkout = args.checkout
    koan_file, koan = locate(checkout, args.target)
    if koan_file is None or checkout.koans not in koan_file.parents:
        print(f"找不到 koan 或文件 / no such koan or koan file: {args.target}", file=sys.stderr)
        return 2
    relative, answer = koan_file.relative_to(checkout.root), checkout.answer_of(koan_file)
    if not koan_file.is_file():
        print(f"🗑️ {file_missing(relative.as_posix())}")
        return 1
    if not answer.is_file():
        print(f"没有答案文件 / no answer file: {answer.relative_to(checkout.root)}")
        print(f"  {answers_note(checkout)}")
        return 1
    if args.force:
        print("⚠️  剧透 / spoiler: 你要看的是答案 / this is the answer.\n")
    else:  # only the koans of the file (or the one koan) that do not pass yet run, if any
        chapter = checkout.chapter_for(koan_file)
        only = koan.nodeid if koan else relative.as_posix()
        progress = measure(checkout, chapter.number if chapter else None, only=only)
        waiting = [k.name for k in progress.koans if k.state != KoanState.PASSED]
        if waiting:
            print(
                "还没通过，先不看答案 / not passed yet, so no answer for now:", ", ".join(waiting)
            )
            print("  --force 会剧透 / --force shows it anyway and spoils the exercise")
            return 1
    error = koan_model.read(koan_file).error
    if error is not None:
        where = f"{koan_file.name}:{getattr(error, 'lineno', None) or '?'}"
        print(
            f"🛠️ 语法错误 / syntax error: {where}: {getattr(error, 'msg', error)}", file=sys.stderr
        )
        print(
            "   先让文件能被解析，再比较 / make the file parse first, then compare", file=sys.stderr
        )
        return 1
    if koan is not None:
        # a helper either side reaches is shown on both (an answer may use one the koan does not)
        shown = [*koan_model.read(koan_file).reached(koan.name)]
        shown += koan_model.read(answer).reached(koan.name)
        mine, theirs = koan_lines(koan_file, shown), koan_lines(answer, shown)
    else:
        mine = koan_file.read_text(encoding="utf-8").splitlines(keepends=True)
        theirs = answer.read_text(encoding="utf-8").splitlines(keepends=True)
    labels = (
        f"{relative.as_posix()} (yours / 你的)",
        f"{answer.relative_to(checkout.root).as_posix()} (answer / 答案)",
    )
    lines = list(difflib.unified_diff(mine, theirs, *labels))
    sys.stdout.writelines(lines or ["与答案一致 / identical to the answer\n"])
    return 0
