"""`python -m jaxkoans.authoring check|stamp`: the one entry point above check.py and gates.py,
so that neither imports the other's command (check reads the gates' record; stamp runs the
checks first)."""

from __future__ import annotations

import argparse
import sys
import time

from jaxkoans import course
from jaxkoans.authoring import check, gates
from jaxkoans.course import shipped as as_shipped


def stamp(checkout: course.Course, chapters: list[course.Chapter], args) -> int:
    """`stamp`: the static checks of the chapters, then every gate of what is stale."""
    if not args.full and not args.chapter:
        chapters = [s.chapter for s in gates.stale(checkout, chapters) if s.any]
        if not chapters and not as_shipped.stale(checkout.root):
            print("每章的记录都是最新的 / every chapter's record is current")
            return 0
    chosen = tuple(args.gates.split(",")) if args.gates else gates.GATES
    unknown = set(chosen) - set(gates.GATES)
    if unknown:
        print(f"no such gate: {', '.join(sorted(unknown))} (gates: {', '.join(gates.GATES)})")
        return 2
    static = [gates.Failure(chapter.number, "check", problem) for chapter in chapters
              for problem in check.check(checkout, [chapter], whole=False, records=False)]  # fmt: skip
    failures = gates.stamp(checkout, chapters, args.full, args.workers, chosen, static)
    if failures:
        print("\n未通过 / failed:" + "".join(f"\n❌ {failure}" for failure in failures), file=sys.stderr)
        return 1
    print(f"✅ {len(chapters)} chapter(s): every gate passed")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jaxkoans.authoring")
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("check", help="the static authoring gate (no JAX, seconds)")
    one.add_argument("--chapter", action="append", default=[], metavar="NN")
    gate = commands.add_parser("stamp", help="run every gate of the stale chapters (or of --chapter NN), "
                               "write the manifest and tests/gate_record.toml, print what failed")
    gate.add_argument("--chapter", action="append", default=[], metavar="NN")
    gate.add_argument("--full", action="store_true", help="every gate on every file, not only what is stale")
    gate.add_argument("--gates", metavar="G,G",
                      help="with --full: run only these gates on every file (mutation, fakes, shortcuts)")
    gate.add_argument("-n", "--workers", type=int, default=2)  # fmt: skip
    args = parser.parse_args(argv)
    checkout = course.Course.here()
    chapters = checkout.chosen(args.chapter)
    unknown = {c.zfill(2) for c in args.chapter} - {c.number for c in chapters}
    if unknown:
        print(f"no such chapter: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if args.command == "stamp":
        return stamp(checkout, chapters, args)
    started = time.monotonic()
    problems = check.check(checkout, chapters, whole=not args.chapter)
    files = sum(len(list((checkout.koans / c.number).glob("test_*.py"))) for c in chapters)
    print("".join(f"❌ {problem}\n" for problem in problems), end="")
    seconds = time.monotonic() - started
    if problems:
        print(f"\n{len(problems)} problem(s) in {len(chapters)} chapter(s), {files} files ({seconds:.1f} s)")
        return 1
    print(f"✅ {len(chapters)} chapter(s), {files} koan files: no problem ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
