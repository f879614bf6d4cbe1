"""What grade takes from a student's koan file: the *graded file*, the pristine file with the
student's fills (`fills.take`); each edit grade ignores is a note. Notes never cost a point;
findings need evidence and score the koans they name zero (docs/grading.md).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import inspect
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from jaxkoans import course
from jaxkoans.course import Course, fills, koan_model, predictions, reading
from jaxkoans.course.koan_model import MODULE
from jaxkoans.grader.fill_audit import audit, forbidden, parents_of, tautology

UNUSUAL = (
    "不常见的代码，仅供阅读（不扣分） / unusual for a koan, for a human to read (costs nothing)"
)
MAX_FILE_BYTES = 4 << 20  # a koan file is ~10 KB; long notes in it (290 KB seen) are no attack


@dataclass(frozen=True)
class Finding:  # evidence (a finding) or a note for a human reader
    kind: str
    file: str  # relative to the course's root
    line: int | None  # in the student's file
    koans: tuple[str, ...]  # the koans of `file` it concerns (findings: they score zero)
    message: str  # bilingual, one line


@dataclass
class FileCheck:
    path: str  # koans/NN/test_x.py
    koans: list[str]  # the pristine file's koans, in order
    def_lines: dict[str, int]  # koan -> its line (the student's where it exists)
    findings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    tampered: dict[str, Finding] = field(default_factory=dict)  # koan -> its first finding
    missing: set[str] = field(default_factory=set)  # koans the student's file lacks
    problem: str = ""  # the student's file could not be read or parsed
    # koan -> the student's definitions its run reaches; empty: the course's code only
    reached: dict[str, frozenset[str]] = field(default_factory=dict)
    graded: str | None = None  # the file that runs; None: nothing of it runs
    line_map: list[int | None] = field(default_factory=list)  # graded line -> student line

    def touch(self, finding: Finding) -> None:
        self.findings.append(finding)
        for koan in finding.koans:
            if koan not in self.missing:
                self.tampered.setdefault(koan, finding)


def read_text(path: Path) -> tuple[str | None, str]:
    """(text, problem) of a student's file; never follows a link or reads a FIFO."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None, "missing"
    except OSError as error:
        return None, f"无法读取 / cannot be read: {error.strerror}"
    if not stat.S_ISREG(info.st_mode):
        return None, "不是普通文件 / not a regular file (a link, a directory, a device?)"
    if info.st_size > MAX_FILE_BYTES:
        return None, f"文件过大 / too large: {info.st_size} bytes"
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as error:
        return None, f"无法读取 / cannot be read: {error.strerror}"
    except UnicodeDecodeError as error:
        return None, f"不是 UTF-8 文本 / not UTF-8 text (byte {error.start}: binary or corrupted?)"
    return text.replace("\r\n", "\n").replace("\r", "\n"), ""


def parse_problem(text: str) -> str:  # why `text` is not Python, or ""
    error = koan_model.parse(text).error
    if isinstance(error, SyntaxError):
        return f"无法解析 / does not parse: line {error.lineno}: {error.msg}"
    if isinstance(error, ValueError):  # e.g. null bytes
        return f"无法解析 / does not parse: {error}"
    return "无法解析 / does not parse: nested too deeply" if error else ""


def check_file(
    rel: str, pristine: Path, student_text: str, allowed: dict[str, set[str]]
) -> FileCheck:
    """Check one student file (read and parseable) against the pristine one; `allowed`: owner
    -> the unusual constructs the course's answer uses itself."""
    p_text = pristine.read_text(encoding="utf-8")
    names = list(koan_model.parse(p_text).spans)
    check = FileCheck(rel, names, {})
    try:
        taken = fills.take(p_text, student_text)
        ast.parse(taken.graded)
    except (SyntaxError, RecursionError, MemoryError):  # fills that only parse in context
        check.graded, check.line_map = p_text, [None] * len(p_text.splitlines())
        message = (
            "无法单独使用空的内容，文件按原样运行 / the fills cannot be taken apart from the "
            "rest: the file runs as shipped"
        )
        check.notes.append(Finding("ignored_edit", rel, None, tuple(names), message))
        return check
    s_spans = koan_model.parse(student_text).spans
    check.def_lines = {k: s_spans.get(k, (None,))[0] for k in names}
    check.missing = {k for k in names if k not in s_spans}
    for name in (n for n in names if n in check.missing):
        message = f"删除或改名的 koan / deleted or renamed koan: {name}"
        check.notes.append(Finding("missing_test", rel, None, (name,), message))
    for name, (start, _) in ((n, span) for n, span in s_spans.items() if n not in names):
        message = f"课程里没有的测试（不运行） / a test the course does not have (not run): {name}"
        check.notes.append(Finding("added_test", rel, start, (), message))
    check.notes += _ignored_notes(rel, names, taken, check.missing, p_text, student_text)
    parents, modules = parents_of(taken.tree), _imported(ast.parse(p_text))
    reaching = koan_model.parse(student_text).koans_seeing  # line -> the koans it concerns
    unusual: dict[tuple[str, ...], dict[str, int]] = {}  # koans -> flag -> its first line
    costly: set[tuple[str, str]] = set()  # (owner, flag): a finding at its first line only
    for here, node, is_blank in taken.nodes:
        if here in check.missing:
            continue
        if is_blank and tautology(node, parents):
            message = "空里重复了断言检查的值 / a fill repeats what the assert checks"
            koans = tuple(names) if here == MODULE else (here,)
            check.touch(Finding("tautology", rel, node.lineno, koans, message))
        for flag in audit(node, parents, in_fill=is_blank, modules=modules):
            if flag in allowed.get(here, set()):
                continue
            line, koans = node.lineno, (here,) if here != MODULE else reaching(node.lineno)
            if not forbidden(flag):  # a note per koan naming every flag, for its reader
                for koan in koans:
                    unusual.setdefault((koan,), {}).setdefault(flag, line)
            elif (here, flag) not in costly:
                costly.add((here, flag))
                message = (
                    f"第 {line} 行 / line {line}: {forbidden(flag)} ({flag}); 没有 koan 需要它，"
                    "这个 koan 记零分 / no koan needs it: the koan scores zero"
                )
                check.touch(Finding("forbidden_code", rel, line, koans, message))
    for koans, found in unusual.items():
        message = f"{UNUSUAL}: {', '.join(found)}"
        check.notes.append(Finding("unusual_code", rel, min(found.values()), koans, message))
    for refusal in _reading_refusals(pristine, taken):
        excused = READS + refusal.category in allowed.get(refusal.owner, set())
        if excused or refusal.owner in check.missing:
            continue
        koans = (refusal.owner,) if refusal.owner in names else reaching(refusal.line)
        message = (
            f"第 {refusal.line} 行 / line {refusal.line}: 读取测试本身或关掉检查 / reads the "
            f"test or switches its guard off: {refusal.what} ({refusal.category})"
        )
        check.touch(Finding("reads_the_test", rel, refusal.line, koans, message))
    kinds = _prediction_kinds(rel, pristine)
    for fill, kind in predictions.refusals(taken, kinds):
        if fill.owner in check.missing:
            continue
        message = (
            f"预测空里写了计算 / a computation where a prediction is asked: `{fill.text}` "
            f"({predictions.WHAT_IT_TAKES[kind]})"
        )
        koans = tuple(names) if fill.owner == MODULE else (fill.owner,)
        check.touch(Finding("not_a_prediction", rel, fill.statement[0], koans, message))
    check.graded, check.line_map = taken.graded, taken.line_map
    reached = student_code_reached(p_text, taken.graded, names, kinds)
    alone = check.tampered.keys() | check.missing  # a flagged or missing koan runs alone
    check.reached = {koan: found for koan, found in reached.items() if koan not in alone}
    return check


def _reading_refusals(pristine: Path, taken) -> list:
    """The fills that read the test (course/reading.py), less what the chapter's contracts allow."""
    try:
        contracts = course.load_chapter(pristine.parent / course.MANIFEST).contracts
    except course.CourseDataError:
        contracts = {}
    try:
        return reading.refusals(taken, reading.allowed_by(contracts, pristine.name))
    except (RecursionError, ValueError):
        return []


def _prediction_kinds(rel: str, pristine: Path) -> dict[tuple[int, int], str]:
    """The prediction blanks of `rel` in the pristine course's manifest (koans/.shipped.json)."""
    root = pristine
    for _ in Path(rel).parts:  # up to the course's root (rel may be absolute: the root is /)
        root = root.parent
    return Course(root).predictions(rel)


def _imported(tree: ast.Module) -> set[str]:
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return {(a.asname or a.name).split(".")[0] for n in imports for a in n.names}


RESTRING = ("the value of a constant changed", "a TODO function's docstring changed")


def _strings(text: str) -> dict[int, set[str]]:
    """line -> the words of the strings that start or end on it (a docstring: on its def line)."""
    found: dict[int, set[str]] = {}
    with contextlib.suppress(SyntaxError, ValueError, RecursionError):
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                lines, value = {node.lineno, node.end_lineno or node.lineno}, node.value
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                lines, value = {node.lineno}, ast.get_docstring(node, clean=False)
            else:
                continue
            for line in lines if value is not None else ():
                found.setdefault(line, set()).add(" ".join(inspect.cleandoc(value).split()))
    return found


def _ignored_notes(
    rel: str, names: list[str], taken: fills.Taken, missing: set[str], p_text: str, text: str
) -> list[Finding]:
    """One note per edit outside the fills (by owner and line): grade ran the pristine code. A
    formatter's edit of a string (the same words) is none."""
    before, after = _strings(p_text), _strings(text)
    notes, seen = [], set()
    for edit in taken.ignored:
        key = (edit.owner, edit.student_line or edit.shipped_line)
        if edit.owner in missing or key in seen:  # missing: named by its missing_test note
            continue
        if edit.what in RESTRING and edit.shipped_line and edit.student_line:
            old, new = before.get(edit.shipped_line), after.get(edit.student_line)
            if old and new and new <= old:
                continue
        seen.add(key)
        where = f"line {edit.student_line}" if edit.student_line else f"course line {key[1]}"
        message = (
            f"grade 不使用 / ignored by grade: {edit.what} ({where}); "
            "评分时这里运行原始代码 / the course's own code runs there"
        )
        koans = tuple(names) if edit.owner == MODULE else (edit.owner,)
        notes.append(Finding("ignored_edit", rel, edit.student_line, koans, message))
    return notes


def answer_flags(pristine: Path, answer: Path) -> dict[str, set[str]]:
    """Owner -> the unusual constructs the course's own answer uses (a student may use them)."""
    text, _ = read_text(answer)
    if text is None or parse_problem(text):
        return {}
    p_text = pristine.read_text(encoding="utf-8")
    try:
        taken = fills.take(p_text, text)
    except (SyntaxError, RecursionError, MemoryError):
        return {}
    parents, modules = parents_of(taken.tree), _imported(ast.parse(p_text))
    flags: dict[str, set[str]] = {}
    for here, node, is_blank in taken.nodes:
        flags.setdefault(here, set()).update(audit(node, parents, is_blank, modules))
    for refusal in _reading_refusals(pristine, taken):  # what the answer itself reads
        flags.setdefault(refusal.owner, set()).add(READS + refusal.category)
    return flags


READS = "reads:"  # an answer flag: the answer reads the test this way (course/reading.py)


# Which koans run only the course's own code: a koan whose run reaches no fill but literal
# predictions runs nothing the student wrote, so the guard may run it in a shared process.
PREDICTION_NAMES = (predictions.DTYPE, predictions.EXCEPTION)


def student_code_reached(
    pristine_text: str, graded_text: str, koans: list[str], kinds: dict[tuple[int, int], str]
) -> dict[str, frozenset[str]]:
    """koan -> the top-level definitions of the graded file its run reaches (`KoanFile.reached`,
    fixtures too) that differ from the pristine ones but for literal predictions, and `MODULE`
    where the module-level code differs. Empty: course code only; left out: unknown. `kinds`:
    the pristine file's prediction blanks, (line, column) -> kind."""
    pristine, graded = koan_model.parse(pristine_text), koan_model.parse(graded_text)
    if pristine.tree is None or graded.tree is None:
        return {}
    p_defs, g_defs = pristine.top_level, graded.top_level
    trusted = _Trusted(kinds, graded.tree)
    same_module = trusted.same(_module_code(pristine.tree), _module_code(graded.tree))
    module = set() if same_module else {MODULE}
    changed = {name for name, node in g_defs.items() if not trusted.same(p_defs.get(name), node)}
    autouse = {name for name, node in g_defs.items() if _autouse(node)}
    return {
        koan: frozenset(((set(graded.reached(koan, fixtures=True)) | autouse) & changed) | module)
        for koan in koans
        if koan in g_defs
    }


def _module_code(tree: ast.Module) -> ast.Module:
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return ast.Module([n for n in tree.body if not isinstance(n, kinds)], [])


def _autouse(node: ast.AST) -> bool:
    """A fixture that runs for every koan of the file."""
    return any(
        isinstance(keyword.value, ast.Constant) and keyword.value.value is not False
        for decorator in getattr(node, "decorator_list", ())
        if isinstance(decorator, ast.Call)
        for keyword in decorator.keywords
        if keyword.arg == "autouse"
    )


class _Trusted:
    """Is a pristine node the same as its graded twin but for blanks holding literal predictions?"""

    def __init__(self, kinds: dict[tuple[int, int], str], graded: ast.Module) -> None:
        self.kinds = kinds
        self.modules = predictions.imports_in(graded)

    def same(self, p: ast.AST | None, g: ast.AST | None) -> bool:
        if p is None or g is None:
            return p is g
        if isinstance(p, ast.Name) and p.id == "__":
            return self.literal(g, self.kinds.get((p.lineno, p.col_offset)))
        if type(p) is not type(g):
            return False
        fields = [(getattr(p, f, None), getattr(g, f, None)) for f in p._fields if f != "ctx"]
        return all(self.same_value(a, b) for a, b in fields)

    def same_value(self, a: object, b: object) -> bool:
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(map(self.same_value, a, b))
        if isinstance(a, ast.AST) or isinstance(b, ast.AST):
            return isinstance(a, ast.AST) and isinstance(b, ast.AST) and self.same(a, b)
        return a == b and type(a) is type(b)

    def literal(self, node: ast.AST, kind: str | None) -> bool:
        """A value written down, or (where the blank asks for one) a builtin class or a dtype or
        exception named through the file's imports; never a call nor a name of the koan's."""
        if isinstance(node, ast.Call):
            return False  # float("nan") is a literal for a prediction, but no call runs here
        if predictions.is_prediction(predictions.ARITHMETIC, node, None):
            return True  # literals and arithmetic on them
        if kind not in PREDICTION_NAMES:
            return False
        if isinstance(node, ast.Name):  # a builtin class: ValueError, float
            return isinstance(getattr(builtins, node.id, None), type)
        name = predictions.dotted(node)  # jnp.int8, jax.errors.…: through the file's imports
        return isinstance(node, ast.Attribute) and (name or ".").split(".")[0] in self.modules
