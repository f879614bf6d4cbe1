"""progress.py's command line: the status summary by default, one module per subcommand."""

from __future__ import annotations

import argparse
import os
import sys

from jaxkoans.grader import command as grade
from jaxkoans.learner.commands import diff, doctor, hint, reset, reveal, status, watch

# Each command module has NAME, HELP, add_arguments(parser) and run(args) -> exit code.
SUBCOMMANDS = (hint, reveal, diff, reset, doctor, watch, grade)


def main(argv: list[str] | None = None, description: str = "") -> int:
    parser = argparse.ArgumentParser(
        prog="progress.py",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    status.add_arguments(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add_arguments(commands.add_parser(module.NAME, help=module.HELP))
    args = parser.parse_args(argv)
    module = next((m for m in SUBCOMMANDS if m.NAME == args.command), status)
    try:
        return module.run(args)
    except KeyboardInterrupt:
        print("\n已中断 / interrupted: nothing was changed", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `progress.py | head`: the reader left, which is fine
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (stdout must stay open until exit)
        return 0
