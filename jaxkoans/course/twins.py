"""koans/ and answers/ are twins: a koan differs from its answer only where the learner writes.

Where the learner writes:
- a **blank line**: the koan's line contains `__`; the answer's line is the same line with each
  `__` replaced by an expression (one line for one line);
- a **TODO body**: a function whose koan body calls `todo(...)`; everything after its docstring
  may differ;
- a **fix region**: lines between `# ✍️ BEGIN` and `# ✍️ END` (same markers in both files).
Everything else (asserts, fixtures, imports, docstrings) must be identical.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from jaxkoans.course import koan_model
from jaxkoans.course.koan_model import REGION_BEGIN, REGION_END

BLANK = re.compile(r"(?<![\w.])__(?!\w)")


@dataclass
class TwinReport:
    """The twin check's verdict. What the answer wrote where (its fills' positions) is read
    by course/fills.py's `take`, the one reader of a fill; `todo_bodies` below."""

    koan: Path
    problems: list[str] = field(default_factory=list)
    todo_bodies: dict[str, str] = field(default_factory=dict)  # function -> answer body

    @property
    def ok(self) -> bool:
        return not self.problems


def _mask(lines: list[str], spans: dict[int, str]) -> tuple[list[str], list[int]]:
    """Replace each span (start -> (end, label)) by one placeholder line; keep line numbers."""
    out, numbers, i = [], [], 0
    while i < len(lines):
        if i in spans:
            end, label = spans[i]
            out.append(f"<{label}>")
            numbers.append(i + 1)
            i = end
        else:
            out.append(lines[i])
            numbers.append(i + 1)
            i += 1
    return out, numbers


def region_hashes(text: str) -> list[str]:
    """A fingerprint of each fix region's code, in file order (`KoanFile.region_hashes`)."""
    return koan_model.parse(text).region_hashes()


def blank_pattern(koan_line: str) -> re.Pattern[str]:
    parts = BLANK.split(koan_line)
    return re.compile("^" + "(.+?)".join(re.escape(p) for p in parts) + "$")


def compare(koan: Path, answer: Path) -> TwinReport:
    return compare_text(koan.read_text(encoding="utf-8"), answer.read_text(encoding="utf-8"), koan)


def compare_text(k_text: str, a_text: str, koan: Path) -> TwinReport:
    """`compare` of two texts; `koan` names the koan file in the report."""
    report = TwinReport(koan)
    k_file, a_file = koan_model.parse(k_text), koan_model.parse(a_text)
    error = k_file.error or a_file.error
    if error is not None:
        where = f"{getattr(error, 'filename', None) or koan}:{getattr(error, 'lineno', None)}"
        report.problems.append(f"{where}: SyntaxError: {getattr(error, 'msg', error)}")
        return report
    k_lines, a_lines = k_file.lines, a_file.lines

    k_spans: dict[int, tuple[int, str]] = {}
    a_spans: dict[int, tuple[int, str]] = {}
    for fn in k_file.todos:
        answer_body = a_file.body_of(fn.name)
        if answer_body is None:
            report.problems.append(f"{koan}:{fn.line}: TODO function {fn.name}() has no answer")
            continue
        (ks, ke), (as_, ae) = fn.body, answer_body
        k_spans[ks] = (ke, f"TODO body of {fn.name}")
        a_spans[as_] = (ae, f"TODO body of {fn.name}")
        report.todo_bodies[fn.name] = "\n".join(a_lines[as_:ae])
    k_regions, a_regions = k_file.regions, a_file.regions
    if len(k_regions) != len(a_regions):
        report.problems.append(f"{koan}: {REGION_BEGIN}/{REGION_END} regions differ in number")
        return report
    for n, ((kb, ke), (ab, ae)) in enumerate(zip(k_regions, a_regions, strict=True)):
        # 0-based [start, end) of the lines between the markers
        k_spans[kb] = (ke - 1, f"fix region {n}")
        a_spans[ab] = (ae - 1, f"fix region {n}")

    blank_lines = k_file.blank_lines
    k_masked, k_numbers = _mask(k_lines, k_spans)
    a_masked, _ = _mask(a_lines, a_spans)
    matcher = difflib.SequenceMatcher(a=k_masked, b=a_masked, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        if op != "replace" or i2 - i1 != j2 - j1:
            where = k_numbers[i1] if i1 < len(k_numbers) else len(k_lines)
            report.problems.append(
                f"{koan}:{where}: koan and answer differ outside blanks/TODO bodies "
                f"({op}: koan {k_masked[i1:i2]!r} vs answer {a_masked[j1:j2]!r})"
            )
            continue
        for k_line, a_line, number in zip(
            k_masked[i1:i2], a_masked[j1:j2], k_numbers[i1:i2], strict=True
        ):
            match = blank_pattern(k_line).match(a_line) if number in blank_lines else None
            if match is None or not all(g.strip() for g in match.groups()):
                report.problems.append(
                    f"{koan}:{number}: line differs from the answer but not only at `__`:\n"
                    f"    koan:   {k_line.strip()}\n    answer: {a_line.strip()}"
                )
    return report


def todo_spans(koan: Path, answer: Path) -> dict[str, tuple[int, int]]:
    """Each TODO function of `koan` -> its body's 0-based [start, end) lines in `answer`."""
    model = koan_model.read(answer)
    spans = {fn.name: model.body_of(fn.name) for fn in koan_model.read(koan).todos}
    return {name: span for name, span in spans.items() if span is not None}
