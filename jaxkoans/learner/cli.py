"""progress.py's command line: the status summary by default, one module per subcommand."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from jaxkoans.course import Course
from jaxkoans.learner import language
from jaxkoans.learner.commands import status

# Each command module has add_arguments(parser) and run(args) -> exit code. Only the
# command asked for is imported (the grader's modules cost a learner's `hint` a third of a second);
# its help line is here so that `progress.py --help` lists every command without importing it.
SUBCOMMANDS = {
    "hint": ("jaxkoans.learner.commands.hint", "the hint of the next (or a named) koan, one level more each time"),
    "reveal": ("jaxkoans.learner.commands.reveal", "show what JAX computed for a koan you answered wrongly (counts as revealed)"),
    "diff": ("jaxkoans.learner.commands.diff", "your file against its answer, once the koan passes"),
    "reset": ("jaxkoans.learner.commands.reset", "restore a koan file as shipped; your version is kept in .jaxkoans/backups/"),
    "doctor": ("jaxkoans.learner.doctor", "check Python, the pinned packages, JAX's devices and float64, a compiler"),
    "bench": ("jaxkoans.learner.commands.bench", "chapter 07's kernels compiled on a TPU, timed against XLA (--cpu-interpret: a smoke test)"),
    "watch": ("jaxkoans.learner.commands.watch", "run the koan you work on at every save (h hint, n next, r rerun, v reveal, q quit)"),
    "grade": ("jaxkoans.grader.command", "grade a student's copy against the pristine course (instructors)"),
    "release": ("jaxkoans.grader.release", "write the course a student gets, without answers/ (instructors)"),
}  # fmt: skip


def main(
    argv: list[str] | None = None, description: str = "", checkout: Course | None = None
) -> int:
    """Run the command `argv` names on `checkout` (default: $JAXKOANS_ROOT, else this one)."""
    argv = sys.argv[1:] if argv is None else argv
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        "progress.py", description=description, formatter_class=formatter
    )
    status.add_arguments(parser)
    lang = {"choices": ("zh", "en"), "help": "one language (default: both; hints: yours)"}
    parser.add_argument("--lang", **lang)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((word for word in argv if word in SUBCOMMANDS), None)  # its first word naming one
    module = status
    for name, (path, help_line) in SUBCOMMANDS.items():
        subparser = commands.add_parser(name, help=help_line)
        if name == chosen:
            module = importlib.import_module(path)
            module.add_arguments(subparser)
            subparser.add_argument("--lang", default=argparse.SUPPRESS, **lang)  # either place
    args = parser.parse_args(argv)
    args.checkout = checkout or Course.here()
    language.SPOKEN = args.lang
    try:
        return module.run(args)
    except KeyboardInterrupt:
        said = language.say("已中断：没有改动", "interrupted: nothing was changed")
        print(f"\n{said}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `progress.py | head`: the reader left, which is fine
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (stdout must stay open until exit)
        return 0
