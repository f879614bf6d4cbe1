"""Hints on request, one level more each time you ask, in Chinese or English."""

from __future__ import annotations

import argparse

from jaxkoans.course import Course
from jaxkoans.learner import language, state
from jaxkoans.learner.koan_runs import Koan, chosen_chapters, find_koan

SEEN = "hints.json"  # {nodeid: levels revealed so far}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("koan", nargs="?", help="test name, file.py::test_name, or its nodeid")
    parser.add_argument("--level", type=int, help="reveal exactly this many levels")
    parser.add_argument("--chapter", metavar="NN", help="the next koan of this chapter")


def reveal(checkout: Course, koan: Koan, level: int | None = None, again: str = "") -> list[str]:
    """The lines to show: one more level than last time (or `level` levels), remembered;
    `again` says how to see the next level."""
    hint = koan.chapter.hint(koan.path.name, koan.name)
    if hint is None:
        return [language.say(f"没有提示 {koan.name}", f"no hint for {koan.name}")]
    levels = hint.zh if (language.SPOKEN or language.default_language()) == "zh" else hint.en
    seen = state.load(checkout.state, SEEN)
    before = seen.get(koan.nodeid, 0)
    before = before if type(before) is int else 0  # a hand-edited store may hold anything
    shown = max(1, min(before + 1 if level is None else level, len(levels)))
    seen[koan.nodeid] = max(shown, before)
    state.save(checkout.state, SEEN, seen)
    lines = [f"💡 {koan.chapter.number} · {koan.path.name}::{koan.name}  ({shown}/{len(levels)})"]
    lines += [f"  {i}. {text}" for i, text in enumerate(levels[:shown], start=1)]
    more = again or "  " + language.say("再运行一次看下一层", "run it again for the next level")
    return lines + ([more] if shown < len(levels) else [])


def run(args) -> int:
    _, wanted = chosen_chapters(args)
    koan = find_koan(args.checkout, args.koan, wanted)
    if koan is None:
        none = f"{language.say('找不到 koan', 'no such koan')}: {args.koan}"
        print(none if args.koan else "🎉 " + language.say("全部通过", "all passed"))
        return 1
    print("\n".join(reveal(args.checkout, koan, args.level)))
    return 0
