"""`progress.py grade --merge REPORTS... --csv OUT.csv [--html OUT.html]`: the class's CSV and
page from students' JSON reports graded elsewhere (a GitHub Actions matrix, one job per
student: templates/grade-matrix.yml), without grading anything or building the course.

Each report is one student's `grade --json` (schema 1), named by its file (REPORTS/alice.json is
alice). The course of the page is read from the reports themselves: their chapters and koans in
course order. Reports of different courses (another source or commit) are not merged. A report
that cannot be read is a row with status "error", as a copy `--batch` could not grade.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from jaxkoans.grader import report_formats
from jaxkoans.grader.pristine_course import PristineCourse, UsageProblem


@dataclass(frozen=True)
class _Chapter:
    number: str
    title_zh: str
    title_en: str


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


def course_of(documents: dict[str, dict]) -> PristineCourse:
    """The course the reports were graded against, as the class page needs it."""
    sources = {(d["course"].get("source"), d["course"].get("commit")) for d in documents.values()}
    if len(sources) > 1:
        listed = ", ".join(f"{s}@{(c or '')[:12]}" for s, c in sorted(sources, key=str))
        raise UsageProblem(f"--merge: 报告来自不同的课程 / reports of different courses: {listed}")
    source, commit = next(iter(sources)) if sources else ("", None)
    chapters: dict[str, _Chapter] = {}
    koans: dict[str, list[str]] = {}
    for document in documents.values():
        for chapter in document["chapters"]:
            chapters.setdefault(
                chapter["number"],
                _Chapter(chapter["number"], chapter["title_zh"], chapter["title_en"]),
            )
        for koan in document["koans"]:
            names = koans.setdefault(koan["file"], [])
            if koan["name"] not in names:
                names.append(koan["name"])
    ordered = sorted(chapters)
    files = sorted(koans, key=lambda rel: ordered.index(rel.split("/")[1]))  # stable: in order
    return PristineCourse(
        root=Path("."),
        source=str(source),
        commit=commit,
        dirty=None,
        chapters=[chapters[n] for n in ordered],  # type: ignore[misc]
        files=files,
        koans={rel: koans[rel] for rel in files},
        shipped=frozenset(files),
    )


def outputs(paths: list[str], csv_path: str, html_path: str | None) -> tuple[dict[str, str], int]:
    """The files to write and grade's exit code (as --batch: 3, else 1, else 0)."""
    from jaxkoans.grader import class_page

    documents, failed = read(paths)
    course = course_of(documents)
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
