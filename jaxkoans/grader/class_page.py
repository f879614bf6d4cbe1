"""The class report: one self-contained HTML page for a batch of grades (no server, no CDN,
no script): a student × koan heatmap by status, pass rates per koan and per chapter, the koans
the class fails (or reveals) most, and each student's findings and notes.

Every cell carries its status as `data-status` and a `title` (student, koan, status, the first
line of its message), so the page can be read by a person and checked by a browser test. A koan
passed after the student revealed what a wrong answer hid has a status of its own here,
"revealed" (it still counts as passed), and so has a pass that carries a note of what it ran,
"noted"; "attempted and failed most" leaves tampered koans out (findings say why); "revealed most" counts every koan a student's reveal log
names, passed or not. The log is the student's self-report (grader/reveals.py). Statuses are
shown by colour swatches and words, never by emoji: the page reads without an emoji font.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime

from jaxkoans.grader.pristine_course import PristineCourse
from jaxkoans.grader.report_formats import (
    LABELS,
    NOTED_LABEL,
    REVEALED_LABEL,
    SELF_REPORT,
    UNKNOWN_REVEALS,
    headline,
    reveals_unknown,
)

COLORS = {
    "passed": "#2e7d32",
    "revealed": "#81c784",
    "noted": "#c0ca33",
    "failing": "#c62828",
    "not_started": "#bdbdbd",
    "tampered": "#6a1b9a",
    "missing": "#ffffff",
    "crashed": "#ef6c00",
}
EXTRA_LABELS = {"revealed": REVEALED_LABEL, "noted": NOTED_LABEL}
TOP = 10  # rows of the "most failed" tables
STYLE = """
body { font: 14px/1.4 system-ui, "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei", "WenQuanYi Micro Hei", sans-serif; margin: 1.5em; color: #212121; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; }
th, td { padding: 2px 6px; border: 1px solid #e0e0e0; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.heatmap td.cell { width: 12px; height: 18px; padding: 0; border: 1px solid #fff; }
table.heatmap th.chapter { font-weight: normal; font-size: 12px; }
table.heatmap th.student { white-space: nowrap; }
.legend span { display: inline-block; margin-right: 1em; }
.swatch { display: inline-block; width: 12px; height: 12px; border: 1px solid #9e9e9e;
  vertical-align: middle; margin-right: 4px; }
.bar { display: inline-block; height: 10px; background: #2e7d32; vertical-align: middle; }
.muted { color: #757575; }
details { margin: 0.3em 0; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _label(status: str) -> str:
    return LABELS.get(status) or EXTRA_LABELS.get(status, status)


def _swatch(status: str) -> str:
    return f'<i class="swatch" style="background:{COLORS[status]}"></i>'


def shown_status(koan: dict) -> str:
    """The heatmap's status: "noted" for a pass that carries a note of what it ran (set apart
    from a clean pass), "revealed" for a pass after a reveal, else the grade's."""
    if koan["status"] == "passed" and koan.get("noted"):
        return "noted"
    return "revealed" if koan["status"] == "passed" and koan.get("revealed") else koan["status"]


def page(documents: dict[str, dict], failed: dict[str, str], course: PristineCourse) -> str:
    """The page for `documents` (student -> grade JSON) and the copies that could not be
    graded (student -> why)."""
    koans = [(rel, name) for rel in course.files for name in course.koans[rel]]
    chapter_of = {f"{rel}::{name}": course.chapter_of(rel) for rel, name in koans}
    status = {
        student: {k["nodeid"]: k for k in document["koans"]}
        for student, document in documents.items()
    }
    seen = {shown_status(k) for d in documents.values() for k in d["koans"]}
    statuses = [s for s in COLORS if s in seen or s in LABELS]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="zh-en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>jax-koans · 班级评分 / class grade</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>jax-koans · 班级评分 / class grade</h1>",
        _header(documents, failed, course),
        _legend(statuses),
        _chapter_table(documents, course),
        _heatmap(documents, course, koans, status),
        _most(documents, koans, chapter_of, status),
        _students(documents, failed),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _header(documents: dict, failed: dict, course: PristineCourse) -> str:
    commit = f" @ <code>{_e(course.commit[:12])}</code>" if course.commit else ""
    when = datetime.now(UTC).isoformat(timespec="seconds")
    graded = len(documents)
    scores = [d["total"]["score"] for d in documents.values()]
    mean = f"{100 * sum(scores) / len(scores):.0f} %" if scores else "–"
    return (
        f'<p id="summary">课程 / course <code>{_e(course.source)}</code>{commit} · '
        f'<span id="students">{graded}</span> 份已评分 / copies graded'
        f"{f' · {len(failed)} 份无法评分 / could not be graded' if failed else ''}"
        f' · 平均 / mean <b id="mean">{mean}</b> · {_e(when)}</p>'
    )


def _legend(statuses: list[str]) -> str:
    items = "".join(f"<span>{_swatch(s)}{_e(_label(s))}</span>" for s in statuses)
    return f'<p class="legend">{items}</p>'


def _rate(passed: int, total: int) -> str:
    percent = 100 * passed / total if total else 0
    return (
        f'<td class="num">{passed}/{total}</td><td class="num">{percent:.0f} %</td>'
        f'<td><span class="bar" style="width:{percent:.0f}px"></span></td>'
    )


def _chapter_table(documents: dict, course: PristineCourse) -> str:
    rows = []
    for chapter in course.chapters:
        passed = total = 0
        for document in documents.values():
            for entry in document["chapters"]:
                if entry["number"] == chapter.number:
                    passed += entry["passed"]
                    total += entry["total"]
        rows.append(
            f'<tr data-chapter="{_e(chapter.number)}"><td>{_e(chapter.number)} '
            f"{_e(chapter.title_zh)} / {_e(chapter.title_en)}</td>{_rate(passed, total)}</tr>"
        )
    return (
        "<h2>各章通过率 / pass rate per chapter</h2>"
        '<table id="chapters"><tr><th>章 / chapter</th><th>通过 / passed</th><th>%</th><th></th></tr>'
        + "".join(rows)
        + "</table>"
    )


def _heatmap(documents: dict, course: PristineCourse, koans: list, status: dict) -> str:
    spans = []
    for chapter in course.chapters:
        count = sum(1 for rel, _ in koans if course.chapter_of(rel) == chapter.number)
        if count:
            spans.append(
                f'<th class="chapter" colspan="{count}" title="{_e(chapter.title_en)}">'
                f"{_e(chapter.number)}</th>"
            )
    rows = [f"<tr><th></th>{''.join(spans)}<th>得分 / score</th></tr>"]
    for student, document in documents.items():
        cells = []
        for rel, name in koans:
            nodeid = f"{rel}::{name}"
            koan = status[student].get(nodeid)
            state = shown_status(koan) if koan else "missing"
            tip = f"{student} · {nodeid} · {_label(state)}"
            if koan and state != "passed" and koan.get("message"):
                tip += f" · {headline(koan['message'])[:200]}"
            cells.append(
                f'<td class="cell" data-status="{_e(state)}" data-koan="{_e(nodeid)}" '
                f'style="background:{COLORS.get(state, "#000")}" title="{_e(tip)}"></td>'
            )
        total = document["total"]
        rows.append(
            f'<tr data-student="{_e(student)}"><th class="student">{_e(student)}</th>'
            f'{"".join(cells)}<td class="num">{total["passed"]}/{total["total"]}</td></tr>'
        )
    passed_row = []
    for rel, name in koans:
        nodeid = f"{rel}::{name}"
        passed = sum(1 for s in documents if status[s].get(nodeid, {}).get("status") == "passed")
        share = passed / len(documents) if documents else 0
        shade = int(255 - 180 * share)
        passed_row.append(
            f'<td class="cell" data-rate="{share:.2f}" title="{_e(nodeid)}: {passed}/{len(documents)}"'
            f' style="background:rgb({shade},{255 - int(60 * share)},{shade})"></td>'
        )
    rows.append(f'<tr id="rates"><th>通过率 / pass rate</th>{"".join(passed_row)}<td></td></tr>')
    return (
        "<h2>学生 × koan / student × koan</h2>"
        '<table class="heatmap" id="heatmap">' + "".join(rows) + "</table>"
    )


def _most(documents: dict, koans: list, chapter_of: dict, status: dict) -> str:
    def table(element_id: str, title: str, counts) -> str:
        counted = []
        for rel, name in koans:
            nodeid = f"{rel}::{name}"
            hits = sum(1 for s in documents if counts(status[s].get(nodeid, {})))
            if hits:
                counted.append((hits, nodeid))
        counted.sort(key=lambda item: (-item[0], item[1]))
        if not counted:
            return f'<h2>{title}</h2><p class="muted" id="{element_id}">–</p>'
        rows = "".join(
            f'<tr data-koan="{_e(nodeid)}"><td>{_e(chapter_of[nodeid])}</td><td><code>{_e(nodeid)}'
            f'</code></td><td class="num">{hits}/{len(documents)}</td></tr>'
            for hits, nodeid in counted[:TOP]
        )
        return f'<h2>{title}</h2><table id="{element_id}">{rows}</table>'

    attempted = {"failing", "crashed"}  # not started, missing: no attempt; tampered: findings
    return (
        table(
            "most-failed",
            "最常尝试而未通过 / attempted and failed most",
            lambda k: k.get("status", "missing") in attempted,
        )
        + table("most-revealed", "最常揭晓 / revealed most", lambda k: bool(k.get("revealed")))
        + f'<p class="muted" id="self-report">{_e(SELF_REPORT)}</p>'
    )


def _students(documents: dict, failed: dict) -> str:
    blocks = ["<h2>每位学生 / each student</h2>"]
    for student, document in documents.items():
        findings, notes = document["findings"], document.get("notes", [])
        shown = bool(findings) or document["status"] != "graded"
        total = document["total"]
        items = "".join(
            f'<li class="finding">{_e(f["file"])}{":" + str(f["line"]) if f["line"] else ""} '
            f"<b>{_e(f['kind'])}</b> {_e(f['message'])}</li>"
            for f in findings
        )
        items += "".join(
            f'<li class="note muted">{_e(n["file"])}{":" + str(n["line"]) if n["line"] else ""} '
            f"{_e(n['kind'])}: {_e(n['message'])}</li>"
            for n in notes
        )
        items += "".join(
            f'<li class="problem">问题 / problem: {_e(p["message"])}</li>'
            for p in document["problems"]
        )
        unknown = (
            f'<span class="reveals-unknown" title="{_e(UNKNOWN_REVEALS)}">揭晓记录 / reveal log ?</span> · '
            if reveals_unknown(document)
            else ""
        )
        blocks.append(
            f'<details data-student="{_e(student)}"{" open" if shown else ""}><summary>'
            f"<b>{_e(student)}</b> · {total['passed']}/{total['total']} · "
            f'<span class="revealed">{_swatch("revealed")}揭晓 / revealed'
            f" {total.get('passed_revealed', 0)}</span> · "
            f'<span class="noted">{_swatch("noted")}备注 / noted {total.get("passed_noted", 0)}</span> · '
            f'<span class="status">{_e(document["status"])}</span> · '
            f"{unknown}"
            f"{len(findings)} 发现 / findings · {len(notes)} 备注 / notes</summary>"
            f"<ul>{items or '<li class=muted>–</li>'}</ul></details>"
        )
    for student, why in failed.items():
        blocks.append(
            f'<details data-student="{_e(student)}" open><summary><b>{_e(student)}</b> · '
            f'<span class="status">error</span></summary><ul><li class="problem">{_e(why)}</li>'
            "</ul></details>"
        )
    return "".join(blocks)
