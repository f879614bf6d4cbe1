"""koans/ and answers/ are twins: a koan differs from its answer only where the learner writes
(blanks, TODO bodies, fix regions), read as course/fills.py reads a learner's file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from jaxkoans.course import fills, koan_model


@dataclass
class TwinReport:
    """The twin check's verdict (what the answer wrote where: fills.take)."""

    koan: Path
    problems: list[str] = field(default_factory=list)
    todo_bodies: dict[str, str] = field(default_factory=dict)  # function -> answer body

    @property
    def ok(self) -> bool:
        return not self.problems


def region_hashes(text: str) -> list[str]:
    """A fingerprint of each fix region's code, in file order (`KoanFile.region_hashes`)."""
    return koan_model.parse(text).region_hashes()


def compare(koan: Path, answer: Path) -> TwinReport:
    return compare_text(koan.read_text(encoding="utf-8"), answer.read_text(encoding="utf-8"), koan)


def compare_text(k_text: str, a_text: str, koan: Path) -> TwinReport:
    """`compare` of two texts, the answer read as a learner's file (fills.take): every edit it
    would ignore, helper it would add and blank not filled on its own line is a problem."""
    report = TwinReport(koan)
    k_file, a_file = koan_model.parse(k_text), koan_model.parse(a_text)
    error = k_file.error or a_file.error
    if error is not None:
        where = f"{getattr(error, 'filename', None) or koan}:{getattr(error, 'lineno', None)}"
        report.problems.append(f"{where}: SyntaxError: {getattr(error, 'msg', error)}")
        return report
    for fn in k_file.todos:
        body = a_file.body_of(fn.name)
        if body is None:
            report.problems.append(f"{koan}:{fn.line}: TODO function {fn.name}() has no answer")
        else:
            report.todo_bodies[fn.name] = "\n".join(a_file.lines[slice(*body)])
    taken = fills.take(k_text, a_text)
    regions = {line for begin, end in a_file.regions for line in range(begin + 1, end)}
    added = [n for _, n, blank in taken.nodes if not blank and n.lineno not in regions
             and any(n is top for top in taken.tree.body)]  # fmt: skip
    one_line = {f.blank for f in taken.blanks if f.node.lineno == f.node.end_lineno}
    report.problems += [
        *(f"{koan}:{e.shipped_line or e.student_line}: koan and answer differ outside blanks, "
          f"TODO bodies and fix regions: {e.what}" for e in taken.ignored),
        *(f"{koan}:{n.lineno}: the answer adds {fills.plain(n)}" for n in added),
        *(f"{koan}:{line}: the answer must fill this `__` on its line"
          for line, column in k_file.blanks if (line, column) not in one_line),
    ]  # fmt: skip
    return report


def todo_spans(koan: Path, answer: Path) -> dict[str, tuple[int, int]]:
    """Each TODO function of `koan` -> its body's 0-based [start, end) lines in `answer`."""
    model = koan_model.read(answer)
    spans = {fn.name: model.body_of(fn.name) for fn in koan_model.read(koan).todos}
    return {name: span for name, span in spans.items() if span is not None}
