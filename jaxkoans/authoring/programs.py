"""What each TODO's answer builds, for writing its technique contract: a chapter's answers run
with every TODO recorded (plugin/contracts.py's PROGRAMS_ENV), and per TODO the primitives on its
live path, those only in dead code, its largest live intermediate; `--toml` prints a
`[contracts]` table to start from, `--costs` writes koans/NN/costs.json.

    python -m jaxkoans.authoring.programs --chapter NN [--toml | --costs] [answers/NN/test_x.py …]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from jaxkoans import course
from jaxkoans.learner import runner
from jaxkoans.plugin import costs
from jaxkoans.plugin.contracts import PROGRAMS_ENV

# Primitives that name a technique (worth requiring on the path), as opposed to arithmetic.
TECHNIQUES = (
    "while", "scan", "cond", "pallas_call", "custom_jvp_call", "custom_vjp_call", "shard_map",
    "psum", "pmax", "all_gather", "all_to_all", "ppermute", "psum_scatter", "reduce_scatter",
    "checkpoint", "remat", "custom_lin", "linear_solve", "custom_root", "sort", "top_k",
    "scatter-add", "segment_sum", "dot_general", "ragged_dot_general", "associative_scan",
    "pure_callback", "io_callback", "ffi_call", "custom_call", "cumsum", "triangular_solve",
    "tridiagonal_solve", "fft", "eigh", "svd", "qr", "lu", "cholesky", "rng_bit_generator",
    "random_bits", "threefry2x32", "select_n", "dynamic_update_slice", "gather", "scatter",
)  # fmt: skip


def collect(checkout: course.Course, paths: list[str]) -> list[dict]:
    """Run `paths` (answer files or directories) with every TODO recorded: the log's entries."""
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "programs.jsonl"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths]
        runner.run_in_group(command, 3600, cwd=checkout.root, env={**os.environ, PROGRAMS_ENV: str(log)})
        return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.is_file() else []


def summary(entries: list[dict]) -> dict[str, dict]:
    """{TODO: {"live": set, "dead": set, "largest": int, "errors": [..], "koans": set}}."""
    found: dict[str, dict] = {}
    for entry in entries:
        todo = f"{entry['koan'].split('::')[0].rsplit('/', 1)[-1]}::{entry['todo']}"
        item = found.setdefault(todo, {"live": set(), "every": set(), "largest": 0, "errors": [], "koans": set()})
        item["koans"].add(entry["koan"].split("::", 1)[1])
        if "error" in entry:
            item["errors"].append(entry["error"])
            continue
        item["live"] |= set(entry["live"])
        item["every"] |= set(entry["every"])
        item["largest"] = max(item["largest"], entry["largest_live"])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jaxkoans.authoring.programs")
    parser.add_argument("paths", nargs="*", help="answer files (default: the chapters' answers)")
    parser.add_argument("--chapter", action="append", default=[])
    parser.add_argument("--toml", action="store_true", help="print a [contracts] table to edit")
    parser.add_argument("--costs", action="store_true", help="write each chapter's koans/NN/costs.json (the answers' cost profiles)")
    args = parser.parse_args(argv)
    paths = args.paths + [f"answers/{n}" for n in args.chapter]
    if not paths:
        parser.error("name a chapter (--chapter NN) or answer files")
    checkout = course.Course.here()
    if args.costs:
        lost = []
        for number in args.chapter:
            lost += [f"koans/{number}/{costs.FILE}: {gone}" for gone in
                     costs.write(checkout.koans / number, collect(checkout, [f"answers/{number}"]))]  # fmt: skip
            print(f"koans/{number}/{costs.FILE}: written")
        if lost:  # a renamed or removed TODO or koan loses its profile; anything else is a failed run
            print("lost since the last write (an answer that failed in this run?):", *lost,
                  sep="\n  ", file=sys.stderr)  # fmt: skip
        return 1 if lost else 0
    for todo, item in sorted(summary(collect(checkout, paths)).items()):
        dead = sorted(item["every"] - item["live"])
        if args.toml:
            on_path = sorted(p for p in item["live"] if p in TECHNIQUES)
            print(f'[contracts."{todo}"]')
            if item["errors"] and not item["live"]:
                print(f'traced = false\nwhy = "{item["errors"][0][:80]}"\n')
                continue
            print(f'on_path = {json.dumps(on_path)}\nabsent = ["pure_callback", "io_callback"]\n'
                  f'why = ""  # largest live intermediate: {item["largest"]}\n')  # fmt: skip
            continue
        print(f"{todo}  ({len(item['koans'])} koans)\n  live: {' '.join(sorted(item['live']))}\n"
              f"  dead only: {' '.join(dead) or '-'}\n  largest live intermediate: {item['largest']}")  # fmt: skip
        print("".join(f"  not traced: {error}\n" for error in dict.fromkeys(item["errors"])), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
