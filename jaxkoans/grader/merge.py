"""`progress.py grade --merge REPORTS... --csv OUT.csv [--html OUT.html]`: the class's CSV and
page from students' JSON reports graded elsewhere (a GitHub Actions matrix, one job per
student: templates/grade-matrix.yml), without grading anything.

Each report is one student's `grade --json` (schema 1), named by its file (REPORTS/alice.json is
alice). No report is taken as given: its signature (report_formats.signature, keyed by
$JAXKOANS_GRADE_KEY) must match, its course (commit and digest) be the grading course's and its
koans the ones this merge's --chapter/--koans select of it, in order; its status and every
total are then recomputed from its koans. A report that fails any of these, or cannot be read,
is a row with status "error", as a copy `--batch` could not grade. --unsigned takes reports
whose signature cannot be checked (none, or no key here): for reports graded on the
instructor's own machine without a key, never for reports that passed through other hands.
"""

from __future__ import annotations

import hmac
import json
from pathlib import Path

from jaxkoans.grader import report_formats
from jaxkoans.grader.pristine_course import PristineCourse, UsageProblem


def read(paths: list[str]) -> tuple[dict[str, dict], dict[str, str]]:
    """(student -> report, student -> why it could not be read), in the order given."""
    documents, failed = {}, {}
    for given in paths:
        path = Path(given)
        name = path.stem
        if name in documents or name in failed:
            raise UsageProblem(f"--merge: 两份报告同名 / two reports named {name}")
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            failed[name] = f"{path}: {type(error).__name__}: {error}"[:500]
            continue
        if (
            not isinstance(document, dict)
            or document.get("kind") != "jax-koans-grade"
            or document.get("schema") != report_formats.SCHEMA
        ):
            failed[name] = f"{path}: 不是 grade 的 JSON 报告 / not a grade JSON report (schema 1)"
            continue
        documents[name] = document
    return documents, failed


def refusal(document: dict, course: tuple, koans: list, key: str | None, unsigned: bool) -> str:
    """Why `document` is not merged ("" when it is): its signature, its course (commit, digest)
    or its koans ((file, name, chapter) in order)."""
    signature = document.get("signature")
    if signature is not None and key:
        if not hmac.compare_digest(str(signature), report_formats.signature(document, key)):
            return "签名不符 / signature does not match: altered, or signed with another key"
    elif not unsigned:
        return "未签名 / unsigned (or no key here to check it): --unsigned takes it"
    found = (document["course"].get("commit"), document["course"].get("digest"))
    if found != course:
        shown = ", ".join(
            f"{str(a)[:12]} not {str(b)[:12]}" for a, b in zip(found, course, strict=True)
        )
        return f"另一个课程 / another course (commit, digest): {shown}"
    if [(k["file"], k["name"], k["chapter"]) for k in document["koans"]] != koans:
        return "koan 列表不同 / its koans are not the ones graded (--chapter, --koans)"
    if not all(k["status"] in report_formats.STATUSES for k in document["koans"]):
        return "未知状态 / a koan's status is not one grade writes"
    return ""


def outputs(
    paths: list[str],
    csv_path: str,
    html_path: str | None,
    course: PristineCourse,
    key: str | None,
    unsigned: bool = False,
) -> tuple[dict[str, str], int]:
    """The files to write and grade's exit code (as --batch: 3, else 1, else 0)."""
    from jaxkoans.grader import class_page

    documents, failed = read(paths)
    identity = (course.commit, report_formats.course_digest(course))
    koans = [(rel, name, course.chapter_of(rel)) for rel in course.files for name in course.koans[rel]]  # fmt: skip
    for name, document in list(documents.items()):
        try:
            why = refusal(document, identity, koans, key, unsigned)
            if not why:
                report_formats.retally(document, course.chapters)
        except (KeyError, TypeError, AttributeError) as error:
            why = f"报告格式不对 / malformed report: {type(error).__name__}: {error}"[:500]
        if why:
            failed[name] = f"{name}.json: {why}"
            del documents[name]
    numbers = [c.number for c in course.chapters]
    rows = [report_formats.csv_header(numbers)]
    codes = []
    for given in paths:
        name = Path(given).stem
        if name in documents:
            rows.append(report_formats.csv_row(name, documents[name], numbers))
            codes.append(report_formats.EXIT_CODES[documents[name]["status"]])
        else:
            rows.append(report_formats.csv_row(name, None, numbers, failed[name]))
            codes.append(3)
    written = {csv_path: report_formats.csv_text(rows)}
    if html_path:
        written[html_path] = class_page.page(documents, failed, course)
    code = 3 if 3 in codes else (1 if 1 in codes else 0)
    return written, code
