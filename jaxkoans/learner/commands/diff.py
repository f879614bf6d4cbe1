"""Your file against its answer: shown once the koan passes (earlier only with --force)."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from jaxkoans.course import Course, koan_model
from jaxkoans.learner import memory
from jaxkoans.learner.koan_runs import Koan, file_missing, find_koan, measure
from jaxkoans.plugin.results import KoanState


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target", nargs="?", help="a koan (test name) or a koan file; default: the next koan"
    )
    parser.add_argument(
        "--force", action="store_true", help="show it before the koan passes (spoils it)"
    )


def resolve(checkout: Course, target: str | None) -> tuple[Path | None, Koan | None]:
    """(koan file, koan) named by `target`; the koan is None when a whole file was named.
    Without a target: the koan that passed last, else the next koan."""
    if target and Path(target).is_file():
        return Path(target).resolve(), None
    pattern = target if target and "/" in target else f"*/{target}"
    named = sorted(checkout.koans.glob(pattern)) if target and target.endswith(".py") else []
    if len(named) == 1:  # a koan file by its name alone (test_x.py, or 04/test_x.py)
        return named[0].resolve(), None
    just_passed = None if target else memory.last_passed(checkout)
    koan = find_koan(checkout, target or just_passed)
    if koan is None and just_passed:  # the koan that passed last is gone: the next one
        koan = find_koan(checkout, None)
    return (checkout.root / koan.path, koan) if koan else (None, None)


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


def syntax_error(path: Path) -> str | None:
    error = koan_model.read(path).error
    if error is None:
        return None
    where = f"{path.name}:{getattr(error, 'lineno', None) or '?'}"
    return (
        f"🛠️ 语法错误 / syntax error: {where}: {getattr(error, 'msg', error)}\n"
        "   先让文件能被解析，再比较 / make the file parse first, then compare"
    )


def unpassed(checkout: Course, koan_file: Path, koan: Koan | None) -> list[str]:
    """The koans of the file (or the one koan) that do not pass: only they run, if anything."""
    only = koan.nodeid if koan else koan_file.relative_to(checkout.root).as_posix()
    chapter = checkout.chapter_for(koan_file)
    progress = measure(checkout, chapter.number if chapter else None, only=only)
    return [k.name for k in progress.koans if k.state != KoanState.PASSED]


def answers_note(checkout: Course) -> str:
    """Where the answers are: what the student release says (koans/course.toml `answers`)."""
    note = checkout.manifest().get("answers")
    if isinstance(note, str) and note:
        return note
    return "这份副本里没有 answers/ / this copy has no answers/ (a student release, or deleted)"


def run(args) -> int:
    checkout = args.checkout
    koan_file, koan = resolve(checkout, args.target)
    if koan_file is None or checkout.koans not in koan_file.parents:
        print(f"找不到 koan 或文件 / no such koan or koan file: {args.target}", file=sys.stderr)
        return 2
    if not koan_file.is_file():
        print(f"🗑️ {file_missing(koan_file.relative_to(checkout.root).as_posix())}")
        return 1
    answer = checkout.answer_of(koan_file)
    if not answer.is_file():
        print(f"没有答案文件 / no answer file: {answer.relative_to(checkout.root)}")
        print(f"  {answers_note(checkout)}")
        return 1
    if not args.force:
        waiting = unpassed(checkout, koan_file, koan)
        if waiting:
            print(
                "还没通过，先不看答案 / not passed yet, so no answer for now:", ", ".join(waiting)
            )
            print("  --force 会剧透 / --force shows it anyway and spoils the exercise")
            return 1
    else:
        print("⚠️  剧透 / spoiler: 你要看的是答案 / this is the answer.\n")
    broken = syntax_error(koan_file)
    if broken:
        print(broken, file=sys.stderr)
        return 1
    if koan is not None:
        # a helper either side reaches is shown on both (an answer may use one the koan does not)
        shown = [*koan_model.read(koan_file).reached(koan.name)]
        shown += koan_model.read(answer).reached(koan.name)
        mine, theirs = koan_lines(koan_file, shown), koan_lines(answer, shown)
    else:
        mine = koan_file.read_text(encoding="utf-8").splitlines(keepends=True)
        theirs = answer.read_text(encoding="utf-8").splitlines(keepends=True)
    yours = f"{koan_file.relative_to(checkout.root).as_posix()} (yours / 你的)"
    theirs_label = f"{answer.relative_to(checkout.root).as_posix()} (answer / 答案)"
    lines = list(difflib.unified_diff(mine, theirs, yours, theirs_label))
    sys.stdout.writelines(lines or ["与答案一致 / identical to the answer\n"])
    return 0
