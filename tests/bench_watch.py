"""How long from a save to the verdict in `progress.py watch`, on the real chapter 01.

    .venv/bin/python tests/bench_watch.py            # 7 sessions, the first koan of test_scan.py
    .venv/bin/python tests/bench_watch.py --runs 3 --poll
    .venv/bin/python tests/bench_watch.py --think 0    # save the moment a verdict shows

Not collected by pytest (the name does not start with test_). The course is copied to a
temporary directory (JAXKOANS_ROOT), so the checkout's koans are never touched. Each session
starts `progress.py watch KOAN`, waits for the blank's ✍️, saves a wrong answer (timed to ❌),
then the answer (timed to ✅): the time from the write's return to the verdict's line. Before
each save it waits `--think` seconds, as a learner reads a verdict before the next edit.
"""

from __future__ import annotations

import argparse
import ast
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KOAN = "test_scan.py::test_scan_returns_final_carry_and_stacked_outputs"


def function_span(source: str, name: str) -> tuple[int, int]:
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node.lineno - 1, node.end_lineno
    raise LookupError(name)


def with_function(source: str, donor: str, name: str) -> str:
    """`source` with function `name` taken from `donor`."""
    lines, theirs = source.splitlines(keepends=True), donor.splitlines(keepends=True)
    (a, b), (c, d) = function_span(source, name), function_span(donor, name)
    return "".join(lines[:a] + theirs[c:d] + lines[b:])


def wrong(source: str, name: str) -> str:
    """The koan with its blanks filled by 0: a wrong answer."""
    lines = source.splitlines(keepends=True)
    a, b = function_span(source, name)
    return "".join(lines[:a] + [line.replace("__", "0") for line in lines[a:b]] + lines[b:])


class Session:
    def __init__(self, root: Path, args: list[str]) -> None:
        env = {**os.environ, "JAXKOANS_ROOT": str(root), "PYTHONIOENCODING": "utf-8"}
        self.process = subprocess.Popen(
            [sys.executable, str(REPO / "progress.py"), "watch", *args],
            cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, encoding="utf-8", bufsize=1,
        )  # fmt: skip
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.seen: list[str] = []  # for the message when a mark never comes
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put((time.perf_counter(), line))

    def wait_for(self, mark: str, timeout: float = 120.0) -> float:
        deadline = time.monotonic() + timeout
        while True:
            try:
                stamp, line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no {mark} in {timeout} s:\n{''.join(self.seen)}") from None
            self.seen.append(line)
            if mark in line:
                return stamp

    def quit(self) -> None:
        self.process.stdin.write("q\n")
        self.process.stdin.flush()
        self.process.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--koan", default=KOAN, help="file.py::name in chapter 01")
    parser.add_argument("--poll", action="store_true")
    parser.add_argument(
        "--think", type=float, default=2.0, metavar="S", help="seconds from a verdict to a save"
    )
    options = parser.parse_args()
    filename, name = options.koan.split("::")
    with tempfile.TemporaryDirectory(prefix="jaxkoans-bench-") as scratch:
        root = Path(scratch)
        shutil.copytree(REPO / "koans" / "01", root / "koans" / "01")
        for kept in ("conftest.py", "pyproject.toml"):
            shutil.copy(REPO / kept, root / kept)
        koan_file = root / "koans" / "01" / filename
        blank = koan_file.read_text(encoding="utf-8")
        solved = with_function(
            blank, (REPO / "answers" / "01" / filename).read_text(encoding="utf-8"), name
        )
        to_wrong, to_pass = [], []
        for run in range(options.runs):
            koan_file.write_text(blank, encoding="utf-8")
            session = Session(root, [f"koans/01/{filename}::{name}"] + ["--poll"] * options.poll)
            try:
                session.wait_for("✍️")
                time.sleep(options.think)
                koan_file.write_text(wrong(blank, name), encoding="utf-8")
                saved = time.perf_counter()
                to_wrong.append(session.wait_for("❌") - saved)
                time.sleep(options.think)
                saved = time.perf_counter()
                koan_file.write_text(solved, encoding="utf-8")
                to_pass.append(session.wait_for("✅") - saved)
                session.quit()
            finally:
                session.process.kill()
            print(f"run {run + 1}: ❌ {to_wrong[-1]:.3f} s   ✅ {to_pass[-1]:.3f} s", flush=True)
    print(
        f"save → ✅ median {statistics.median(to_pass):.3f} s (min {min(to_pass):.3f}, "
        f"max {max(to_pass):.3f});  save → ❌ median {statistics.median(to_wrong):.3f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
