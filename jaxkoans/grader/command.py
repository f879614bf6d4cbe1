"""The instructor's grade: a student's copy run against the pristine course (docs/instructor.md).

Of the copy only the fills of its koan files are used; the run happens in a temporary workdir
with the pristine harness, in the sandbox where there is one. Reports are written whole or not
at all: a summary on stdout, --json (docs/grading.md), --markdown, --classroom, --csv.

Exit codes:
    0   graded, no findings (notes cost nothing)
    1   graded, with findings: evidence that the graded run was changed; those koans score zero
    2   usage error: bad arguments, no such directory, ref, chapter or koan
    3   could not grade, or only in part: the report says why (run.stopped, run.isolated)
    130 interrupted (Ctrl-C or SIGTERM): the workdir is removed, no report file is written
With --batch: 3 when some copy could not be graded (its CSV row says why) or only in part,
else 1 when some copy has findings, else 0.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import tempfile
from pathlib import Path

from jaxkoans.grader import graded_run, grading, report_formats, sandbox
from jaxkoans.learner import runner

OK, FINDINGS, USAGE, COULD_NOT_GRADE, INTERRUPTED = 0, 1, 2, 3, 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0]
    parser.epilog = "Exit codes:" + __doc__.split("Exit codes:")[1]
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add = parser.add_argument
    add("student", nargs="?", metavar="STUDENT_DIR", help="the student's copy")
    add("--course", metavar="REF_OR_DIR", help="a git ref here (default HEAD) or a directory")
    add("--chapter", metavar="NN,…", help="grade only these chapters (an assignment): 01,02")
    add("--koans", metavar="K,…", help="only these koans: test_name, test_file.py::test_name")
    add("--json", metavar="FILE", help="write the grade as JSON (- for stdout)")
    add("--markdown", metavar="FILE", help="write Markdown (CI summary page)")
    add("--classroom", metavar="FILE", help="write GitHub Classroom's reporter payload (base64)")
    add("--points", type=int, default=1, metavar="N", help="Classroom points per koan (default 1)")
    add("--no-sandbox", action="store_true", help="run without bubblewrap (README: what then)")
    add("--require-sandbox", action="store_true", help="exit 3 where bubblewrap cannot run")
    add("--timeout", type=float, metavar="S", help="per-koan time limit (default: the course's)")
    limit = grading.Options.run_timeout
    add("--run-timeout", type=float, default=limit, metavar="S", help="per copy (%(default)s s)")
    add("--stall-timeout", type=float, metavar="S", help="stop a run silent for S s (2×limit+120)")
    add("--workers", type=int, default=2, metavar="N", help="pytest-xdist workers (default 2)")
    add("--batch", metavar="DIR", help="grade every subdirectory of DIR")
    add("--csv", metavar="OUT.csv", help="with --batch: one row per student")
    add("--jobs", type=int, metavar="N", help="with --batch: copies at once (cores / workers)")
    add("--reports", metavar="DIR", help="with --batch: each JSON as DIR/NAME.json")


def _names(text: str | None) -> list[str] | None:
    return [part for part in text.replace(" ", ",").split(",") if part] if text else None


def _stop(message: str, code: int = COULD_NOT_GRADE) -> int:
    could_not = "无法评分 / could not grade: " if code == COULD_NOT_GRADE else ""
    print(f"grade: {could_not}{message}", file=sys.stderr)
    return code


def _grade_problem(args) -> str:
    if bool(args.batch) == bool(args.student):
        return "需要 STUDENT_DIR 或 --batch DIR 之一 / give STUDENT_DIR or --batch DIR (one)"
    if args.batch and not args.csv:
        return "--batch 需要 --csv / --batch needs --csv OUT.csv"
    if args.student and not Path(args.student).is_dir():
        return f"不是目录 / not a directory: {args.student}"
    if args.jobs is None:
        args.jobs = max(1, (os.cpu_count() or 1) // max(1, args.workers))
    if args.workers < 1 or args.jobs < 1 or args.points < 1:
        return "--workers, --jobs and --points must be at least 1"
    if args.no_sandbox and args.require_sandbox:
        return "--no-sandbox 与 --require-sandbox 只能选一个 / not both"
    for target in (args.json, args.markdown, args.csv, args.classroom):
        if target and target != "-" and not Path(target).resolve().parent.is_dir():
            return f"没有这个目录 / no such directory for {target}"
    try:
        if args.reports:
            Path(args.reports).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"--reports {args.reports}: {error.strerror}"
    return ""


def run(args) -> int:
    problem = _grade_problem(args)
    if problem:
        return _stop(problem, USAGE)
    if args.require_sandbox and not sandbox.probe().ok:
        return _stop(f"--require-sandbox: {sandbox.probe().reason}")
    options = grading.Options(args.timeout, args.run_timeout, args.workers)
    options.sandbox, options.stall_timeout = not args.no_sandbox, args.stall_timeout
    graded_run.reset_cancel()
    with runner.stop_signals_leave():  # CI cancels with SIGTERM: the workdir is cleaned up
        try:
            with tempfile.TemporaryDirectory(prefix="jaxkoans-course-") as scratch:
                pristine = grading.prepare_course(args.course, Path(scratch), args.checkout.root)
                pristine = grading.select(pristine, _names(args.chapter), _names(args.koans))
                return (_batch if args.batch else _single)(args, pristine, options)
        except grading.UsageProblem as error:
            return _stop(str(error), USAGE)
        except grading.CouldNotGrade as error:
            return _stop(str(error))
        except (KeyboardInterrupt, SystemExit, graded_run.Cancelled):
            graded_run.stop_all()
            print("\n已中断 / interrupted: no report was written", file=sys.stderr)
            return INTERRUPTED
        except Exception as error:  # a bug or the machine: never exit 1, which means findings
            return _stop(f"{type(error).__name__}: {error}")


def _single(args, pristine: grading.PristineCourse, options: grading.Options) -> int:
    document = report_formats.as_json(grading.grade(Path(args.student), pristine, options))
    writers = {args.json: report_formats.to_json_text, args.markdown: report_formats.markdown}
    outputs = {target: write(document) for target, write in writers.items() if target}
    if args.classroom:
        try:
            payload = report_formats.classroom(document, args.points)
            outputs[args.classroom] = report_formats.classroom_text(payload)
        except report_formats.PayloadTooLarge as error:  # the other reports are still written
            print(f"grade: --classroom 没有写 / not written: {error}", file=sys.stderr)
    report_formats.write_all(outputs)
    if args.json != "-":
        print(report_formats.summary(document), end="")
    return document["exit_code"]


def _batch(args, pristine: grading.PristineCourse, options: grading.Options) -> int:
    root = Path(args.batch)
    if not root.is_dir():
        raise grading.UsageProblem(f"不是目录 / not a directory: {root}")
    students = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    numbers = [c.number for c in pristine.chapters]
    rows: dict[str, list] = {}
    codes: list[int] = []
    documents: dict[str, str] = {}  # --reports: path -> JSON

    def one(student: Path) -> tuple[list, int]:
        try:
            document = report_formats.as_json(grading.grade(student, pristine, options))
            if args.reports:
                target = str(Path(args.reports) / f"{student.name}.json")
                documents[target] = report_formats.to_json_text(document)
        except graded_run.Cancelled:
            raise
        except Exception as error:  # one broken copy must not stop the others
            known = isinstance(error, (grading.UsageProblem, grading.CouldNotGrade))
            text = " ".join(str(error).split()) if known else f"{type(error).__name__}: {error}"
            return report_formats.csv_row(student.name, None, numbers, text[:500]), COULD_NOT_GRADE
        return report_formats.csv_row(student.name, document, numbers), document["exit_code"]

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    try:
        futures = {pool.submit(one, student): student for student in students}
        for future in concurrent.futures.as_completed(futures):
            row, code = future.result()
            rows[futures[future].name] = row
            codes.append(code)
            shown = f"{row[2]}/{row[3]}" if row[1] != "error" else row[-1]
            print(f"  {row[0]}: {row[1]}  {shown}")
    except BaseException:
        graded_run.stop_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    table = [report_formats.csv_header(numbers)] + [rows[s.name] for s in students]
    report_formats.write_all({**documents, args.csv: report_formats.csv_text(table)})
    print(f"grade: {len(students)} copies → {args.csv}")
    if COULD_NOT_GRADE in codes:
        return COULD_NOT_GRADE
    return FINDINGS if FINDINGS in codes else OK
