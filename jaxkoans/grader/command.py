"""The instructor's grade: run a student's copy against the pristine course.

    python progress.py grade STUDENT_DIR [--course REF_OR_DIR] [--chapter 01,02] [--koans K,…]
                                         [--json FILE|-] [--markdown FILE]
                                         [--classroom FILE] [--timeout S] [--run-timeout S]
    python progress.py grade --batch DIR --csv OUT.csv [--jobs N] [--reports DIR]

The pristine course is a git ref of this repository (default HEAD, through `git archive`) or a
directory. Of the student's copy only the blanks, TODO bodies and fix regions of the koan
files are used, found by syntax tree (jaxkoans/course/fills.py): every other edit is ignored by grade
and named in a note. The run happens in a temporary workdir with the pristine harness, inside
a bubblewrap sandbox where there is one (jaxkoans/grader/sandbox.py; README says what the grade
guarantees without it). The student's copy is only read. Reports: a summary on stdout; --json
(schema 2, see jaxkoans/grader/report_formats.py), --markdown (e.g. $GITHUB_STEP_SUMMARY)
and --classroom (the base64 payload of GitHub Classroom's autograding reporter) are written
whole or not at all.

Exit codes:
    0   graded, no findings (notes cost nothing)
    1   graded, with findings: evidence that the graded run was changed (a replaced function,
        an action against the run, forged reports, a fill that repeats its assert); the koans
        named score zero
    2   usage error: bad arguments, STUDENT_DIR not a directory, --course neither a
        directory nor a git ref, an unknown chapter or koan, a report's directory missing
    3   could not grade, or only in part: the pristine course could not be built, pytest could
        not run it, the run did not use the pristine harness, --require-sandbox without a
        sandbox, or the run ended early (killed, signalled, stopped, no progress): the report
        is written and its unreported koans are crashed; or its koans could not each run in a
        process of their own (JAX initialised at import: run.isolated false)
    130 interrupted (Ctrl-C or SIGTERM): the workdir is removed, no report file is written
With --batch: 3 when some copy could not be graded (its CSV row says why, the others are
graded) or only in part, else 1 when some copy has findings, else 0.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import tempfile
from pathlib import Path

from jaxkoans.grader import grading, report_formats, sandbox
from jaxkoans.learner import runner

OK, FINDINGS, USAGE, COULD_NOT_GRADE, INTERRUPTED = 0, 1, 2, 3, 130


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0]
    parser.epilog = "Exit codes:" + __doc__.split("Exit codes:")[1]
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("student", nargs="?", metavar="STUDENT_DIR", help="the student's copy")
    parser.add_argument(
        "--course",
        metavar="REF_OR_DIR",
        help="the pristine course: a git ref of this repository (default HEAD) or a directory",
    )
    parser.add_argument(
        "--chapter", metavar="NN,…", help="grade only these chapters (an assignment): 01,02"
    )
    parser.add_argument(
        "--koans",
        metavar="K,…",
        help="grade only these koans: test_name, test_file.py::test_name (with --chapter: in it)",
    )
    parser.add_argument("--json", metavar="FILE", help="write the grade as JSON (- for stdout)")
    parser.add_argument("--markdown", metavar="FILE", help="write Markdown (CI summary page)")
    parser.add_argument(
        "--classroom",
        metavar="FILE",
        help="write the base64 payload of GitHub Classroom's autograding reporter",
    )
    parser.add_argument(
        "--points", type=int, default=1, metavar="N", help="Classroom points per koan (default 1)"
    )
    parser.add_argument(
        "--no-sandbox", action="store_true", help="run without bubblewrap (see README: what then)"
    )
    parser.add_argument(
        "--require-sandbox",
        action="store_true",
        help="exit 3 instead of grading when bubblewrap cannot run here",
    )
    parser.add_argument(
        "--timeout", type=float, metavar="S", help="per-koan time limit (default: the course's)"
    )
    parser.add_argument(
        "--run-timeout",
        type=float,
        default=grading.RUN_TIMEOUT_S,
        metavar="S",
        help=f"time limit of one copy's whole run (default {grading.RUN_TIMEOUT_S})",
    )
    parser.add_argument(
        "--stall-timeout",
        type=float,
        metavar="S",
        help="stop a run that reports nothing for S seconds (default: twice a koan's limit + 120)",
    )
    parser.add_argument(
        "--workers", type=int, default=2, metavar="N", help="pytest-xdist workers (default 2)"
    )
    parser.add_argument("--batch", metavar="DIR", help="grade every subdirectory of DIR")
    parser.add_argument("--csv", metavar="OUT.csv", help="with --batch: one row per student")
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="with --batch: copies graded at once (default: as many as the cores hold, "
        "cores / --workers)",
    )
    parser.add_argument("--reports", metavar="DIR", help="with --batch: each JSON as DIR/NAME.json")


def _names(text: str | None) -> list[str] | None:
    return [part for part in text.replace(" ", ",").split(",") if part] if text else None


def _usage(message: str) -> int:
    print(f"grade: {message}", file=sys.stderr)
    return USAGE


def _check_outputs(paths: list[str | None]) -> str:
    for target in paths:
        if target and target != "-" and not Path(target).resolve().parent.is_dir():
            return f"没有这个目录 / no such directory for {target}"
    return ""


def _grade_problem(args) -> str:
    if args.batch and args.student:
        return "STUDENT_DIR 与 --batch 只能选一个 / give STUDENT_DIR or --batch, not both"
    if not args.batch and not args.student:
        return "需要 STUDENT_DIR 或 --batch DIR / STUDENT_DIR or --batch DIR is needed"
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
    outputs = [args.json, args.markdown, args.csv, args.classroom]
    problem = _check_outputs(outputs)
    if not problem and args.reports:
        try:
            Path(args.reports).mkdir(parents=True, exist_ok=True)
        except OSError as error:
            return f"--reports {args.reports}: {error.strerror}"
    return problem


def run(args) -> int:
    problem = _grade_problem(args)
    if problem:
        return _usage(problem)
    if args.require_sandbox and not sandbox.probe().ok:
        print(
            f"grade: 无法评分 / could not grade: --require-sandbox: {sandbox.probe().reason}",
            file=sys.stderr,
        )
        return COULD_NOT_GRADE
    options = grading.Options(
        args.timeout,
        args.run_timeout,
        args.workers,
        sandbox=not args.no_sandbox,
        stall_timeout=args.stall_timeout,
    )
    grading.reset_cancel()
    with runner.stop_signals_leave():  # CI cancels with SIGTERM: the workdir is cleaned up
        try:
            with tempfile.TemporaryDirectory(prefix="jaxkoans-course-") as scratch:
                pristine = grading.prepare_course(
                    args.course,
                    Path(scratch),
                    getattr(args, "checkout", None) and args.checkout.root,
                )
                pristine = grading.select(pristine, _names(args.chapter), _names(args.koans))
                if args.batch:
                    return _batch(args, pristine, options)
                return _single(args, pristine, options)
        except grading.UsageProblem as error:
            return _usage(str(error))
        except grading.CouldNotGrade as error:
            print(f"grade: 无法评分 / could not grade: {error}", file=sys.stderr)
            return COULD_NOT_GRADE
        except (KeyboardInterrupt, SystemExit, grading.Cancelled):
            grading.stop_all()
            print("\n已中断 / interrupted: no report was written", file=sys.stderr)
            return INTERRUPTED
        except Exception as error:  # a bug or the machine: never exit 1, which means findings
            print(
                f"grade: 无法评分 / could not grade: {type(error).__name__}: {error}",
                file=sys.stderr,
            )
            return COULD_NOT_GRADE


def _single(args, pristine: grading.PristineCourse, options: grading.Options) -> int:
    grade = grading.grade(Path(args.student), pristine, options)
    document = report_formats.as_json(grade)
    outputs = {}
    if args.json:
        outputs[args.json] = report_formats.to_json_text(document)
    if args.markdown:
        outputs[args.markdown] = report_formats.markdown(document)
    if args.classroom:
        try:
            payload = report_formats.classroom(document, args.points)
            outputs[args.classroom] = report_formats.classroom_text(payload)
        except report_formats.PayloadTooLarge as error:  # the other reports are still written
            print(f"grade: --classroom 没有写 / not written: {error}", file=sys.stderr)
    report_formats.write_all(outputs)
    if args.json != "-":
        print(report_formats.summary(document), end="")
    return _code(document)


def _code(document: dict) -> int:
    return report_formats.EXIT_CODES[document["status"]]


def _batch(args, pristine: grading.PristineCourse, options: grading.Options) -> int:
    root = Path(args.batch)
    if not root.is_dir():
        raise grading.UsageProblem(f"不是目录 / not a directory: {root}")
    students = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    numbers = [c.number for c in pristine.chapters]
    rows: dict[str, list] = {}
    codes: list[int] = []
    documents: dict[str, str] = {}

    def one(student: Path) -> tuple[list, int]:
        try:
            document = report_formats.as_json(grading.grade(student, pristine, options))
            if args.reports:
                target = str(Path(args.reports) / f"{student.name}.json")
                documents[target] = report_formats.to_json_text(document)
        except (grading.UsageProblem, grading.CouldNotGrade) as error:
            text = " ".join(str(error).split())[:500]
            return report_formats.csv_row(student.name, None, numbers, text), COULD_NOT_GRADE
        except grading.Cancelled:
            raise
        except Exception as error:  # one broken copy must not stop the others
            text = f"{type(error).__name__}: {error}"[:500]
            return report_formats.csv_row(student.name, None, numbers, text), COULD_NOT_GRADE
        return report_formats.csv_row(student.name, document, numbers), _code(document)

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
        grading.stop_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    table = [report_formats.csv_header(numbers)] + [rows[s.name] for s in students]
    report_formats.write_all({**documents, args.csv: report_formats.csv_text(table)})
    print(f"grade: {len(students)} copies → {args.csv}")
    if COULD_NOT_GRADE in codes:
        return COULD_NOT_GRADE
    return FINDINGS if FINDINGS in codes else OK
