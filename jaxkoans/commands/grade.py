"""The instructor's grade: run a student's copy against the pristine course.

    python progress.py grade STUDENT_DIR [--course REF_OR_DIR] [--json FILE|-] [--junit FILE]
                                         [--markdown FILE] [--timeout S] [--run-timeout S]
    python progress.py grade --batch DIR --csv OUT.csv [--jobs N] [--reports DIR]

The pristine course is a git ref of this repository (default HEAD, through `git archive`) or a
directory. Only the student's koan files are used, and of them only the blanks, TODO bodies
and fix regions of koans the student did not tamper with (see jaxkoans/tamper.py); the run
happens in an isolated temporary workdir with the pristine harness (see jaxkoans/grading.py).
The student's copy is only read. Reports: a summary on stdout; --json (schema 1, see
jaxkoans/grade_reports.py), --junit, --markdown (e.g. $GITHUB_STEP_SUMMARY) are written whole
or not at all.

Exit codes:
    0   graded, no findings
    1   graded, with tamper findings (edited asserts, deleted tests, markers, harness files, …:
        the koans named score zero)
    2   usage error: bad arguments, STUDENT_DIR not a directory, --course neither a
        directory nor a git ref, a report's directory missing
    3   could not grade: the pristine course could not be built, pytest could not run it, the
        run did not use the pristine harness
    130 interrupted (Ctrl-C or SIGTERM): the workdir is removed, no report file is written
With --batch: 3 when some copy could not be graded (its CSV row says why, the others are
graded), else 1 when some copy has findings, else 0.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import signal
import sys
import tempfile
import threading
from pathlib import Path

from jaxkoans import grade_reports, grading

NAME, HELP = "grade", "grade a student's copy against the pristine course (instructors)"
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
    parser.add_argument("--json", metavar="FILE", help="write the grade as JSON (- for stdout)")
    parser.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    parser.add_argument("--markdown", metavar="FILE", help="write Markdown (CI summary page)")
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
        "--workers", type=int, default=2, metavar="N", help="pytest-xdist workers (default 2)"
    )
    parser.add_argument("--batch", metavar="DIR", help="grade every subdirectory of DIR")
    parser.add_argument("--csv", metavar="OUT.csv", help="with --batch: one row per student")
    parser.add_argument(
        "--jobs", type=int, default=1, metavar="N", help="with --batch: copies graded at once"
    )
    parser.add_argument(
        "--reports", metavar="DIR", help="with --batch: each copy's JSON report as DIR/NAME.json"
    )


def _usage(message: str) -> int:
    print(f"grade: {message}", file=sys.stderr)
    return USAGE


def _check_outputs(paths: list[str | None]) -> str:
    for target in paths:
        if target and target != "-" and not Path(target).resolve().parent.is_dir():
            return f"没有这个目录 / no such directory for {target}"
    return ""


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """CI cancels with SIGTERM: treat it like Ctrl-C, so the workdir is cleaned up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(args) -> int:
    if args.batch and args.student:
        return _usage("STUDENT_DIR 与 --batch 只能选一个 / give STUDENT_DIR or --batch, not both")
    if not args.batch and not args.student:
        return _usage("需要 STUDENT_DIR 或 --batch DIR / STUDENT_DIR or --batch DIR is needed")
    if args.batch and not args.csv:
        return _usage("--batch 需要 --csv / --batch needs --csv OUT.csv")
    if args.student and not Path(args.student).is_dir():
        return _usage(f"不是目录 / not a directory: {args.student}")
    if args.reports and not Path(args.reports).is_dir():
        return _usage(f"不是目录 / not a directory: {args.reports}")
    if args.workers < 1 or args.jobs < 1:
        return _usage("--workers and --jobs must be at least 1")
    problem = _check_outputs([args.json, args.junit, args.markdown, args.csv])
    if problem:
        return _usage(problem)
    options = grading.Options(args.timeout, args.run_timeout, args.workers)
    grading.reset_cancel()
    with _sigterm_as_interrupt():
        try:
            with tempfile.TemporaryDirectory(prefix="jaxkoans-course-") as scratch:
                pristine = grading.prepare_course(args.course, Path(scratch))
                if args.batch:
                    return _batch(args, pristine, options)
                return _single(args, pristine, options)
        except grading.UsageProblem as error:
            return _usage(str(error))
        except grading.CouldNotGrade as error:
            print(f"grade: 无法评分 / could not grade: {error}", file=sys.stderr)
            return COULD_NOT_GRADE
        except (KeyboardInterrupt, grading.Cancelled):
            grading.stop_all()
            print("\n已中断 / interrupted: no report was written", file=sys.stderr)
            return INTERRUPTED
        except Exception as error:  # a bug or the machine: never exit 1, which means findings
            print(
                f"grade: 无法评分 / could not grade: {type(error).__name__}: {error}",
                file=sys.stderr,
            )
            return COULD_NOT_GRADE


def _single(args, pristine: grading.Course, options: grading.Options) -> int:
    document = grade_reports.as_json(grading.grade(Path(args.student), pristine, options))
    outputs = {}
    if args.json:
        outputs[args.json] = grade_reports.to_json_text(document)
    if args.junit:
        outputs[args.junit] = grade_reports.junit(document)
    if args.markdown:
        outputs[args.markdown] = grade_reports.markdown(document)
    grade_reports.write_all(outputs)
    if args.json != "-":
        print(grade_reports.summary(document), end="")
    return FINDINGS if document["findings"] else OK


def _batch(args, pristine: grading.Course, options: grading.Options) -> int:
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
            document = grade_reports.as_json(grading.grade(student, pristine, options))
            if args.reports:
                target = str(Path(args.reports) / f"{student.name}.json")
                documents[target] = grade_reports.to_json_text(document)
        except (grading.UsageProblem, grading.CouldNotGrade) as error:
            text = " ".join(str(error).split())[:500]
            return grade_reports.csv_row(student.name, None, numbers, text), COULD_NOT_GRADE
        except grading.Cancelled:
            raise
        except Exception as error:  # one broken copy must not stop the others
            text = f"{type(error).__name__}: {error}"[:500]
            return grade_reports.csv_row(student.name, None, numbers, text), COULD_NOT_GRADE
        code = FINDINGS if document["findings"] else OK
        return grade_reports.csv_row(student.name, document, numbers), code

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
    table = [grade_reports.csv_header(numbers)] + [rows[s.name] for s in students]
    grade_reports.write_all({**documents, args.csv: grade_reports.csv_text(table)})
    print(f"grade: {len(students)} copies → {args.csv}")
    if COULD_NOT_GRADE in codes:
        return COULD_NOT_GRADE
    return FINDINGS if FINDINGS in codes else OK
