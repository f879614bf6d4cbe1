"""Predict, then see: on request, what a wrong prediction hides (the value JAX computed, the
exception raised) and the answer of each blank not filled yet; a koan passed after that counts
as passed (revealed), as remembered by plugin/results.py (record_reveal)."""

from __future__ import annotations

import argparse
import re

from jaxkoans.api import REVEAL_ENV
from jaxkoans.course import Course, fills, koan_model
from jaxkoans.learner import runner
from jaxkoans.learner.commands.diff import answers_note
from jaxkoans.learner.koan_runs import Koan, chosen_chapters, file_missing, find_koan
from jaxkoans.learner.language import lines_of, say
from jaxkoans.plugin.results import record_reveal

RUN_TIMEOUT_S = 300


# What the learner asked to see comes whole (at -vv pytest shortens no comparison), but the
# "where …" lines of every intermediate value (an Adam state: a hundred lines of zeros) are
# cut as pytest does without -vv: each value to 240 characters (saferepr's maxsize).
WHOLE = ("-vv",)
REPR_MAX = 240
WHERE = re.compile(r"^E\s+\+\s+where ")


def shorten_values(output: str) -> str:
    """`output` with each "where …" line longer than two values cut in the middle."""
    head, tail = (2 * REPR_MAX - 3) // 2, 2 * REPR_MAX - 3 - (2 * REPR_MAX - 3) // 2
    cut = [
        line[:head] + "..." + line[-tail:]
        if WHERE.match(line) and len(line) > 2 * REPR_MAX
        else line
        for line in output.split("\n")
    ]
    return "\n".join(cut)


def open_blanks(checkout: Course, koan: Koan) -> str:
    """The answer of each blank `koan` reaches that is not filled yet (an open blank raises before
    JAX computes anything: its answer is what there is to see), the reveal remembered."""
    _, shipped = checkout.shipped_text(koan.path.as_posix()) or (None, "")
    answer = checkout.answer_of(checkout.root / koan.path)
    try:
        current = (checkout.root / koan.path).read_text(encoding="utf-8")
        filled = {fill.blank for fill in fills.take(shipped, current).blanks}
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
        return ""  # a file that does not parse: the run says what is wrong
    model = koan_model.parse(shipped)
    spans = [model.definitions[name] for name in model.reached(koan.name)]
    waiting = [b for b in model.blanks if b not in filled and any(s <= b[0] <= e for s, e in spans)]
    if waiting and not answer.is_file():
        return f"👁 {say('还没填的空', 'blanks not filled yet')}: {len(waiting)}\n  {answers_note(checkout)}"
    if not waiting:
        return ""
    answers = {f.blank: f.text for f in fills.take(shipped, answer.read_text("utf-8")).blanks}
    lines = [f"👁 {say('还没填的空的答案', 'the answer of each blank not filled yet')}:"]
    for line, column in waiting:
        lines += [
            f"   > {model.lines[line - 1].strip()}",
            f"     __ = {answers.get((line, column), '?')}",
        ]
    record_reveal(checkout, koan.nodeid)
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("koan", help="test name, file.py::test_name, or its nodeid")
    parser.add_argument("--chapter", metavar="NN", help="look for the koan in this chapter")


def run(args) -> int:
    _, wanted = chosen_chapters(args)
    koan = find_koan(args.checkout, args.koan, wanted)
    if koan is None:
        print(f"{say('找不到 koan', 'no such koan')}: {args.koan}")
        return 1
    if not (args.checkout.root / koan.path).is_file():
        print(f"🗑️ {file_missing(koan.path.as_posix())}")
        return 1
    print(f"👁 {koan.chapter.number} · {koan.path.name}::{koan.name}")
    said = (
        "  揭晓：显示 JAX 算出的值。之后通过记为“揭晓后通过”。\n"
        "  Revealed: what JAX computed is shown; passing it now counts as passed (revealed)."
    )
    print("\n".join(lines_of(said)) + "\n")
    options = ("--koans-reveal", *WHOLE, "-p", "no:xdist")  # one koan, its values shown
    code, output = runner.run_in_group(
        runner.pytest_command([koan.nodeid], options=options), RUN_TIMEOUT_S,
        cwd=args.checkout.root, env=args.checkout.env({REVEAL_ENV: "1"}), keep_stdout=True,
    )  # fmt: skip
    timed_out = f"⏱️ 超时 / timed out after {RUN_TIMEOUT_S:.0f} s"
    print(timed_out if code is None else shorten_values(output).rstrip())
    answers = open_blanks(args.checkout, koan)
    if answers:
        print("\n" + answers)
    elif code == 0:
        print("\n✅ " + say("这个 koan 已经通过，没有隐藏的值", "this koan passes: nothing hidden"))
    return 0 if code in (0, 1) else 1
