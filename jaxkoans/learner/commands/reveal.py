"""Predict, then see: show what a wrong prediction hides (the value JAX computed, the exception
raised), on the learner's request; a koan passed after that counts as passed (revealed).

The reveals are remembered in `.jaxkoans/reveals.jsonl`, one JSON line per reveal
(`{"nodeid": "koans/01/test_scan.py::test_x", "at": "…"}`), written by the plugin whenever a
run under `--koans-reveal` shows a koan's hidden value — by this command, by watch's `v` key or
by the learner's own `pytest --koans-reveal`. Appending one short line is atomic, so pytest-xdist
workers never lose each other's reveals.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from jaxkoans import course
from jaxkoans.api import REVEAL_ENV
from jaxkoans.learner import state

LOG = "reveals.jsonl"
RUN_TIMEOUT_S = 300


def koan_nodeid(path: Path, name: str) -> str:
    """The koan's id as progress.py names it: its file relative to the course, its test name."""
    try:
        relative = Path(path).resolve().relative_to(course.REPO).as_posix()
    except ValueError:
        relative = Path(path).as_posix()
    return f"{relative}::{name.split('[', 1)[0]}"


def record(nodeid: str) -> None:
    """Remember that the learner saw what koan `nodeid` hid."""
    line = json.dumps({"nodeid": nodeid, "at": datetime.now(UTC).isoformat(timespec="seconds")})
    directory = state.directory()
    try:
        directory.mkdir(exist_ok=True)
        with (directory / LOG).open("a", encoding="utf-8") as out:
            out.write(line + "\n")
    except OSError:  # a read-only checkout: the reveal still shows, it is just not remembered
        pass


def revealed(root: Path | None = None) -> set[str]:
    """The nodeids of every koan whose hidden value the learner has asked to see."""
    path = (root / ".jaxkoans" if root else state.directory()) / LOG
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    found = set()
    for line in lines:
        try:
            found.add(json.loads(line)["nodeid"])
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a torn line of an interrupted write
    return found


# What the learner asked to see comes whole: at -vv pytest neither shortens a comparison's
# values ("{'all-reduce'...}") nor cuts its explanation ("Use -v to get more diff").
WHOLE = ("-vv",)


def reveal_command(nodeid: str) -> list[str]:
    return [
        sys.executable, "-m", "pytest", nodeid, "--koans-reveal", *WHOLE,
        "-p", "jaxkoans.plugin.hooks", "-p", "no:cacheprovider", "-p", "no:xdist",
        "--import-mode=importlib", "--no-header",
    ]  # fmt: skip


def run_revealed(nodeid: str, timeout_s: float = RUN_TIMEOUT_S) -> tuple[int | None, str]:
    """Run one koan with its values shown; (pytest's exit code or None on a timeout, output)."""
    env = {**os.environ, REVEAL_ENV: "1"}
    try:
        done = subprocess.run(
            reveal_command(nodeid), cwd=course.REPO, env=env, capture_output=True,
            text=True, timeout=timeout_s,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"⏱️ 超时 / timed out after {timeout_s:.0f} s"
    return done.returncode, done.stdout + done.stderr


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("koan", help="test name, file.py::test_name, or its nodeid")
    parser.add_argument("--chapter", metavar="NN", help="look for the koan in this chapter")


def run(args) -> int:
    from jaxkoans.learner.commands.status import chosen_chapters
    from jaxkoans.learner.koan_runs import find_koan

    _, wanted = chosen_chapters(args)
    koan = find_koan(args.koan, wanted)
    if koan is None:
        print(f"找不到 koan / no such koan: {args.koan}")
        return 1
    print(
        f"👁 {koan.chapter.number} · {koan.path.name}::{koan.name}\n"
        "  揭晓：显示 JAX 算出的值。之后通过记为“揭晓后通过”。\n"
        "  Revealed: what JAX computed is shown; passing it now counts as passed (revealed).\n"
    )
    code, output = run_revealed(koan.nodeid)
    print(output.rstrip())
    if code == 0:
        print("\n✅ 这个 koan 已经通过，没有隐藏的值 / this koan passes: nothing was hidden")
    return 0 if code in (0, 1) else 1
