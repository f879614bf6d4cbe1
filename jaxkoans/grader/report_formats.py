"""A grade as JSON (schema 2: docs/grading.md), Markdown for a CI summary, a CSV row, text,
and the payload of GitHub Classroom's autograding reporter: every writer takes the JSON document.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import dataclasses
import io
import json
import os
import tempfile
from pathlib import Path

from jaxkoans.grader.grading import Grade
from jaxkoans.plugin.results import KoanState

SCHEMA = 2
MARKS = {"passed": "✅", "failing": "❌", "not_started": "✍️", "tampered": "🚫"}
MARKS |= {"missing": "❓", "crashed": "💥"}
ZH = ("通过", "未通过", "未开始", "篡改", "缺失", "崩溃")
STATUSES = tuple(KoanState(s) for s in MARKS)  # a skip or a failed build is open (grading)
LABELS = {s: f"{MARKS[s]} {zh} / {s.replace('_', ' ')}" for s, zh in zip(STATUSES, ZH, strict=True)}
EXIT_CODES = {"graded": 0, "findings": 1, "incomplete": 3}  # 2: usage error, 130: interrupt


def _tally(koans: list[dict]) -> dict:
    counts = {status: sum(k["status"] == status for k in koans) for status in STATUSES}
    score = round(counts["passed"] / len(koans), 4) if koans else 0.0
    return {"passed": counts["passed"], "total": len(koans), "score": score, "counts": counts}


def as_json(grade: Grade) -> dict:
    """The report of `grade`: its status, exit code and totals from its koans, findings and run."""
    koans = [
        {"nodeid": k.nodeid, "chapter": grade.course.chapter_of(k.path), "file": k.path}
        | {"name": k.name, "status": k.state, "cause": k.cause, "line": k.line}
        | {"duration": k.duration, "message": k.note, "contracts": list(k.contracts)}
        for k in grade.koans
    ]
    incomplete = grade.run.get("stopped") or grade.run.get("isolated") is False
    status = "incomplete" if incomplete else "findings" if grade.findings else "graded"
    return {
        "schema": SCHEMA,
        "kind": "jax-koans-grade",
        "student": {"name": grade.student, "path": str(grade.student_path)},
        "course": {key: getattr(grade.course, key) for key in ("source", "commit", "dirty")},
        "versions": grade.versions,
        "graded_at": grade.graded_at,
        "duration_s": grade.duration_s,
        "status": status,
        "exit_code": EXIT_CODES[status],
        "total": _tally(koans),
        "chapters": [
            {"number": c.number, "title_zh": c.title_zh, "title_en": c.title_en}
            | _tally([k for k in koans if k["chapter"] == c.number])
            for c in grade.course.chapters
        ],
        "koans": koans,
        "findings": [{**dataclasses.asdict(f), "koans": list(f.koans)} for f in grade.findings],
        "notes": [{**dataclasses.asdict(f), "koans": list(f.koans)} for f in grade.notes],
        "problems": grade.problems,
        "run": grade.run,
    }


def to_json_text(document: dict) -> str:
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def headline(message: str) -> str:
    """The line of a koan's message that says the most: pytest's `E` lines, else the `>` line
    (a blank or a TODO), else the first."""
    lines = [line.strip() for line in (message or "").splitlines() if line.strip()]
    errors = [e for e in (line[1:].strip() for line in lines if line.startswith("E ")) if e]
    pointed = [line for line in lines if line.startswith("> ")]
    return " ".join(errors[:2]) if errors else (pointed + lines + [""])[0]


def _cell(text: str, limit: int = 140) -> str:
    first = ((text or "").strip().splitlines() or [""])[0]
    first = first if len(first) <= limit else first[: limit - 1] + "…"
    return first.replace("|", "\\|").replace("`", "'")


def _entry(item: dict, limit: int, md: bool) -> str:
    """One finding or note as a list item: where, its kind, the koans it names, its message."""
    where = item["file"] + (f":{item['line']}" if item["line"] else "")
    named = f" ({', '.join(item['koans'])})" if item["koans"] else ""
    if md:
        return f"- `{where}` **{item['kind']}**{named}: {_cell(item['message'], limit)}"
    return f"  - {where} {item['kind']}{named}: {_cell(item['message'], limit)}"


def _course(document: dict, quote: str) -> str:
    commit = (document["course"]["commit"] or "")[:12]
    source = f"{quote}{document['course']['source']}{quote}"
    return source + (f" @ {quote}{commit}{quote}" if commit else "")


def _no_sandbox(document: dict) -> str:
    sandbox = document["run"].get("sandbox") or {}
    return sandbox.get("reason", "") if sandbox and not sandbox.get("used") else ""


def markdown(document: dict) -> str:
    """A summary for a CI page ($GITHUB_STEP_SUMMARY): scores, findings, koans not passed."""
    total, v = document["total"], document["versions"]
    lines = [
        f"## 🎓 jax-koans 评分 / grade: {document['student']['name']}",
        "",
        f"**{total['passed']} / {total['total']}** koans 通过 / passed"
        f" ({100 * total['score']:.0f} %) · course {_course(document, '`')}"
        f" · Python {v['python']}, jax {v['jax']}, jaxlib {v['jaxlib']}",
        "",
        f"| 章 / chapter | {' | '.join(LABELS.values())} | 得分 / score |",
        "|---|" + "---:|" * (len(STATUSES) + 1),
    ]
    for chapter in document["chapters"]:
        counts = " | ".join(str(chapter["counts"][s]) for s in STATUSES)
        lines.append(
            f"| {chapter['number']} {chapter['title_zh']} / {chapter['title_en']} | {counts}"
            f" | {chapter['passed']}/{chapter['total']} |"
        )
    counts = " | ".join(f"**{total['counts'][s]}**" for s in STATUSES)
    lines.append(f"| **总计 / total** | {counts} | **{total['passed']}/{total['total']}** |")
    if document["findings"]:
        lines += ["", f"### ⚠️ 发现 / findings ({len(document['findings'])})", ""]
        lines += ["这些 koan 记零分 / the koans named score zero.", ""]
        lines += [_entry(finding, 300, md=True) for finding in document["findings"]]
    if document["notes"]:
        title = f"📝 备注 / notes ({len(document['notes'])}): 不扣分 / they cost nothing"
        lines += ["", f"<details><summary>{title}</summary>", ""]
        lines += [_entry(note, 300, md=True) for note in document["notes"]] + ["", "</details>"]
    if _no_sandbox(document):
        lines += ["", f"> ⚠️ 没有沙箱 / no sandbox: {_cell(_no_sandbox(document), 300)}"]
    if document["problems"]:
        lines += ["", "### 🛠️ 问题 / problems", ""]
        for problem in document["problems"]:
            where = f"`{problem['file']}`: " if problem["file"] else ""
            lines.append(f"- {where}{_cell(problem['message'], 300)}")
    open_koans = [k for k in document["koans"] if k["status"] != "passed"]
    if open_koans:
        title = f"未通过的 koan / koans not passed ({len(open_koans)})"
        lines += ["", f"<details><summary>{title}</summary>", ""]
        lines += ["| koan | 状态 / status | 行 / line | 说明 / message |", "|---|---|---:|---|"]
        for koan in open_koans:
            line = "" if koan["line"] is None else str(koan["line"])
            lines.append(
                f"| `{koan['nodeid']}` | {MARKS[koan['status']]} {koan['status']} | {line}"
                f" | {_cell(headline(koan['message']))} |"
            )
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def summary(document: dict) -> str:
    """What a person reads in the terminal."""
    total, notes = document["total"], document["notes"]
    lines = [f"jax-koans · 评分 / grade: {document['student']['name']}  (course {_course(document, '')})", ""]  # fmt: skip
    for chapter in document["chapters"]:
        marks = "  ".join(f"{MARKS[s]} {chapter['counts'][s]}" for s in STATUSES)
        lines.append(f"  {chapter['number']} {chapter['title_zh']} / {chapter['title_en']}")
        lines.append(f"     {chapter['passed']:>3}/{chapter['total']:<3}  {marks}")
    lines.append(
        f"\n  总计 / total  {total['passed']}/{total['total']} ({100 * total['score']:.0f} %)   "
        + "  ".join(LABELS.values())
    )
    if document["findings"]:
        count = len(document["findings"])
        lines.append(f"\n⚠️  发现 / findings ({count}): 这些 koan 记零分 / they score zero")
        lines += [_entry(finding, 200, md=False) for finding in document["findings"]]
    if notes:
        lines.append(f"\n📝 备注 / notes ({len(notes)}): 不扣分 / they cost nothing")
        lines += [_entry(note, 200, md=False) for note in notes[:20]]
        lines += [f"  … {len(notes) - 20} more (--json)"] if len(notes) > 20 else []
    if _no_sandbox(document):
        lines.append(f"\n⚠️  没有沙箱 / no sandbox: {_no_sandbox(document)}")
    for problem in document["problems"]:
        where = f"{problem['file']}: " if problem["file"] else ""
        lines.append(f"\n🛠️  {where}{problem['message']}")
    return "\n".join(lines) + "\n"


def classroom(document: dict, points: int = 1) -> dict:
    """The payload of `classroom-resources/autograding-grading-reporter` (docs/grading.md): one
    test per koan, each worth `points`, so its table and its recorded score agree."""
    tests = []
    for koan in document["koans"]:
        passed = koan["status"] == "passed"
        message = None if passed else _cell(f"{koan['status']}: {headline(koan['message'])}", 300)
        status = {"passed": "pass", "crashed": "error"}.get(koan["status"], "fail")
        tests.append(
            {"name": koan["nodeid"], "status": status, "message": message}
            | {"filename": koan["file"], "line_no": koan["line"] or 0}
            | {"score": points if passed else 0, "max_score": points}
            | {"execution_time": f"{koan['duration']:.2f}s"}
        )
    failed = document["findings"] or any(test["status"] != "pass" for test in tests)
    status = "error" if document["status"] == "incomplete" else "fail" if failed else "pass"
    payload = {"version": 1, "status": status, "max_score": points * len(tests), "tests": tests}
    return fit_payload(payload)


# base64 characters; this course's koans, all failing, need about 99 KB barest (docs/grading.md)
PAYLOAD_BUDGET = 120 << 10


class PayloadTooLarge(ValueError):  # even the barest payload is over the budget
    pass


def fit_payload(payload: dict, budget: int = PAYLOAD_BUDGET) -> dict:
    """`payload` cut until it fits `budget`: messages shorter, then gone; then each test's file,
    time and max_score; then the names' `koans/`. Scores, statuses and order never change."""

    def cut(test: dict, step: int | str) -> None:
        if isinstance(step, int):
            test["message"] = _cell(test["message"], step) if step and test["message"] else None
        elif step == "fields":
            for key in ("filename", "execution_time", "max_score", "message"):
                test.pop(key, None)
        else:
            test["name"] = test["name"].removeprefix("koans/")

    for step in (None, 120, 48, 0, "fields", "names"):
        if step is not None:
            for test in payload["tests"]:
                cut(test, step)
        if len(classroom_text(payload)) <= budget:
            return payload
    raise PayloadTooLarge(
        f"{len(payload['tests'])} tests need {len(classroom_text(payload))} base64 bytes"
        f" (budget {budget}): grade fewer chapters per runner (--chapter)"
    )


def classroom_text(payload: dict) -> str:
    """The payload as the runner's `result` output holds it: base64 of the JSON, one line."""
    raw = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(raw).decode("ascii") + "\n"


def csv_header(chapters: list[str]) -> list[str]:
    totals = ["student", "status", "passed", "total", "score"]
    return [*totals, *[f"ch{n}" for n in chapters], "findings", "problems", "error"]


def csv_row(name: str, document: dict | None, chapters: list[str], error: str = "") -> list:
    """One student's row; a copy that could not be graded has status "error" and the reason."""
    if document is None:
        return [name, "error", "", "", "", *["" for _ in chapters], "", "", error]
    passed = {c["number"]: c["passed"] for c in document["chapters"]}
    total = [document["total"][key] for key in ("passed", "total", "score")]
    counts = [len(document["findings"]), len(document["problems"])]
    return [name, document["status"], *total, *[passed.get(n, "") for n in chapters], *counts, ""]


def csv_text(rows: list[list]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def write_all(outputs: dict[str, str]) -> None:
    """Write each file whole or not at all: to a temporary file beside it, then rename.
    "-" is stdout; a FIFO or device (/dev/stdout) is written directly."""
    for target, text in outputs.items():
        path = Path(target)
        if target == "-":
            print(text, end="")
        elif path.exists() and not path.is_file():
            path.write_text(text, encoding="utf-8")
        else:
            handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    out.write(text)
                mask = os.umask(0o022)
                os.umask(mask)
                os.chmod(temporary, 0o666 & ~mask)  # mkstemp's 0600 would hide a report
                os.replace(temporary, path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)  # gone once renamed
