"""How long `progress.py grade` takes on a fully-solved copy, against `pytest answers -n 2`.

    .venv/bin/python tests/bench_grade.py                       # 3 rounds, the whole course
    .venv/bin/python tests/bench_grade.py --chapter 10 --runs 5

Issue 33's measure: grading a solved copy costs at most 1.3x the answer key's run, on the same
machine in the same run. Not collected by pytest (the name does not start with test_).

Each round runs both, answers first in odd rounds and grade first in even ones, so that a drift
in the machine's speed falls on both. Both use the course as committed (HEAD): the answers run in
grade's own export of it (JAXKOANS_ROOT; the checkout is never touched), with a build/ of its
own, so both compile chapter 05's C++. The solved copy is each koan file replaced by its answer. A grade that
does not pass every koan stops the benchmark: its time would measure something else.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jaxkoans.grader import grading

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 3600  # one run of either; the whole course takes minutes


def solved_copy(pristine, into: Path) -> None:
    """A student's copy in which every koan file is its answer."""
    for rel in pristine.files:
        answer = pristine.root / "answers" / Path(rel).relative_to("koans")
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(answer, into / rel)


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=TIMEOUT_S)
    took = time.perf_counter() - start
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).decode("utf-8", "replace")[-3000:]
        raise SystemExit(f"{' '.join(command[:4])} … exited {done.returncode}:\n{tail}")
    return took


def answers_run(course: Path, chapter: str | None) -> float:
    shutil.rmtree(course / "build", ignore_errors=True)  # its C++ built again, as grade's is
    target = f"answers/{chapter}" if chapter else "answers"
    env = {**os.environ, "JAXKOANS_ROOT": str(course)}
    command = [sys.executable, "-m", "pytest", target, "-n", "2", "-q", "-p", "no:cacheprovider"]
    return timed(command, course, env)


def grade_run(solved: Path, report: Path, chapter: str | None) -> float:
    command = [sys.executable, str(REPO / "progress.py"), "grade", str(solved), f"--json={report}"]
    took = timed(command + ([f"--chapter={chapter}"] if chapter else []), REPO, dict(os.environ))
    document = json.loads(report.read_text(encoding="utf-8"))
    total = document["total"]
    if total["passed"] != total["total"] or document["findings"]:
        raise SystemExit(f"the solved copy graded {total['passed']}/{total['total']}: see {report}")
    if not document["run"]["sandbox"]["used"]:
        print("  (no sandbox on this machine: grade ran without one)", flush=True)
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="rounds of both (default 3)")
    parser.add_argument("--chapter", help="one chapter, e.g. 10 (default: the whole course)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jaxkoans-bench-grade-") as scratch:
        pristine = grading.prepare_course("HEAD", Path(scratch))  # what grade grades against
        course, solved = pristine.root, Path(scratch) / "solved"
        solved_copy(pristine, solved)
        report = Path(scratch) / "grade.json"
        answers, grades = [], []
        for run in range(1, options.runs + 1):
            if run % 2:
                answers.append(answers_run(course, options.chapter))
            grades.append(grade_run(solved, report, options.chapter))
            if not run % 2:
                answers.append(answers_run(course, options.chapter))
            ratio = grades[-1] / answers[-1]
            print(
                f"round {run}: answers {answers[-1]:.1f} s   grade {grades[-1]:.1f} s   "
                f"{ratio:.2f}x",
                flush=True,
            )
    a, g = statistics.median(answers), statistics.median(grades)
    ratios = [g_ / a_ for g_, a_ in zip(grades, answers, strict=True)]
    print(
        f"median: answers {a:.1f} s, grade {g:.1f} s, {g / a:.2f}x "
        f"(per round {min(ratios):.2f}x to {max(ratios):.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
