"""Is this machine ready for the course? Each failed check says how to fix it."""

from __future__ import annotations

import argparse

from jaxkoans.learner import doctor


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def run(args) -> int:
    results = doctor.checks(args.checkout)
    for check in results:
        print(("✅ " if check.ok else "❌ ") + check.line)
        if not check.ok and check.fix:
            print(f"   → {check.fix}")
    return 0 if all(c.ok for c in results) else 1
