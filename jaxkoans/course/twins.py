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

import ast
import difflib
import hashlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

BLANK = re.compile(r"(?<![\w.])__(?!\w)")
REGION_BEGIN, REGION_END = "# ✍️ BEGIN", "# ✍️ END"


@dataclass
class TwinReport:
    koan: Path
    problems: list[str] = field(default_factory=list)
    blanks: list[tuple[int, str]] = field(default_factory=list)  # (koan line, answer text)
    todo_bodies: dict[str, str] = field(default_factory=dict)  # function -> answer body
    regions: list[str] = field(default_factory=list)  # answers' fix regions
    # For tools that need positions (grading): per problem, in the order of `problems`, the
    # koan's and the answer's 1-based lines it involves (both empty: the whole file);
    # each accepted blank line as (koan line, answer line); each TODO body and fix region as
    # (label, koan [start, end), answer [start, end)) in 0-based lines.
    problem_lines: list[tuple[list[int], list[int]]] = field(default_factory=list)
    blank_lines: list[tuple[int, int]] = field(default_factory=list)
    spans: list[tuple[str, tuple[int, int], tuple[int, int]]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _todo_functions(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "todo"
            for n in ast.walk(node)
        ):
            found[node.name] = node
    return found


def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    return {
        n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _body_span(fn: ast.FunctionDef) -> tuple[int, int]:
    """0-based [start, end) lines of the body after the docstring."""
    body = fn.body
    first = body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first.end_lineno, fn.end_lineno  # from the line after the docstring
    return body[0].lineno - 1, fn.end_lineno


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


def _region_spans(lines: list[str]) -> list[tuple[int, int]]:
    spans, start = [], None
    for i, line in enumerate(lines):
        if line.strip().startswith(REGION_BEGIN):
            start = i + 1
        elif line.strip().startswith(REGION_END) and start is not None:
            spans.append((start, i))
            start = None
    return spans


def region_hashes(text: str) -> list[str]:
    """A fingerprint of each fix region's code, in file order.

    The koan's chapter.toml keeps the fingerprints of the regions as shipped: a failing koan
    whose region still matches has not been started (the learner has not edited it yet)."""
    lines = text.splitlines()
    return [
        hashlib.sha256("\n".join(line.rstrip() for line in lines[s:e]).encode()).hexdigest()[:12]
        for s, e in _region_spans(lines)
    ]


def untouched_region(text: str, shipped: tuple[str, ...] | list[str]) -> int | None:
    """The 1-based line of the first `# ✍️ BEGIN` whose region is still as shipped, else None."""
    if not shipped:
        return None
    lines = text.splitlines()
    for (start, _), digest in zip(_region_spans(lines), region_hashes(text), strict=True):
        if digest in shipped:
            return start  # the BEGIN marker is the line before the region: 1-based `start`
    return None


def blank_pattern(koan_line: str) -> re.Pattern[str]:
    parts = BLANK.split(koan_line)
    return re.compile("^" + "(.+?)".join(re.escape(p) for p in parts) + "$")


def compare(koan: Path, answer: Path) -> TwinReport:
    report = TwinReport(koan)
    k_text, a_text = koan.read_text(encoding="utf-8"), answer.read_text(encoding="utf-8")
    try:
        k_tree, a_tree = ast.parse(k_text), ast.parse(a_text)
    except SyntaxError as error:
        report.problems.append(f"{error.filename or koan}:{error.lineno}: SyntaxError: {error.msg}")
        report.problem_lines.append(([], []))
        return report
    k_lines, a_lines = k_text.splitlines(), a_text.splitlines()

    k_spans: dict[int, tuple[int, str]] = {}
    a_spans: dict[int, tuple[int, str]] = {}
    answer_functions = _functions(a_tree)
    for name, fn in _todo_functions(k_tree).items():
        if name not in answer_functions:
            report.problems.append(f"{koan}:{fn.lineno}: TODO function {name}() has no answer")
            report.problem_lines.append(([fn.lineno], []))
            continue
        ks, ke = _body_span(fn)
        as_, ae = _body_span(answer_functions[name])
        k_spans[ks] = (ke, f"TODO body of {name}")
        a_spans[as_] = (ae, f"TODO body of {name}")
        report.todo_bodies[name] = "\n".join(a_lines[as_:ae])
        report.spans.append((f"TODO body of {name}", (ks, ke), (as_, ae)))
    k_regions, a_regions = _region_spans(k_lines), _region_spans(a_lines)
    if len(k_regions) != len(a_regions):
        report.problems.append(f"{koan}: {REGION_BEGIN}/{REGION_END} regions differ in number")
        report.problem_lines.append(([], []))
        return report
    for n, ((ks, ke), (as_, ae)) in enumerate(zip(k_regions, a_regions, strict=True)):
        k_spans[ks] = (ke, f"fix region {n}")
        a_spans[as_] = (ae, f"fix region {n}")
        report.regions.append("\n".join(a_lines[as_:ae]))
        report.spans.append((f"fix region {n}", (ks, ke), (as_, ae)))

    k_masked, k_numbers = _mask(k_lines, k_spans)
    a_masked, a_numbers = _mask(a_lines, a_spans)
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
            report.problem_lines.append((k_numbers[i1:i2], a_numbers[j1:j2]))
            continue
        for k_line, a_line, number, a_number in zip(
            k_masked[i1:i2], a_masked[j1:j2], k_numbers[i1:i2], a_numbers[j1:j2], strict=True
        ):
            match = blank_pattern(k_line).match(a_line) if BLANK.search(k_line) else None
            if match is None or not all(g.strip() for g in match.groups()):
                report.problems.append(
                    f"{koan}:{number}: line differs from the answer but not only at `__`:\n"
                    f"    koan:   {k_line.strip()}\n    answer: {a_line.strip()}"
                )
                report.problem_lines.append(([number], [a_number]))
                continue
            report.blanks += [(number, g.strip()) for g in match.groups()]
            report.blank_lines.append((number, a_number))
    return report


def main(argv: list[str]) -> int:
    """`python -m jaxkoans.course.twins regions FILE…`: the [regions] table for a chapter.toml."""
    if len(argv) < 2 or argv[0] != "regions":
        print(
            "usage: python -m jaxkoans.course.twins regions koans/NN/test_file.py …",
            file=sys.stderr,
        )
        return 2
    print("[regions]")
    for name in argv[1:]:
        path = Path(name)
        digests = region_hashes(path.read_text(encoding="utf-8"))
        if digests:  # files without a fix region stay out of the table
            print(f'"{path.name}" = [' + ", ".join(f'"{d}"' for d in digests) + "]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
