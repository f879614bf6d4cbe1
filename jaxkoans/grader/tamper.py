"""What grade takes from a student's koan file, and what it tells the instructor about the rest.

The *graded file* is the pristine file with the student's blanks, TODO bodies and fix regions put
in (`fills.take`): nothing else the student wrote runs, and each edit grade ignores is a note.
Notes (ignored edits, deleted or added tests, harness files, unusual code) never cost a point.
Findings need evidence and score the koans they name zero: a fill that repeats its assert, a
computation where a prediction is asked, a fill that reads the test, a construct no koan needs
that changes the run from inside (`fill_audit.forbidden`); the run adds its own (`run_guard.py`).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from jaxkoans import course
from jaxkoans.course import Course, fills, koan_model, predictions, reading
from jaxkoans.course.koan_model import MODULE
from jaxkoans.grader import course_code, released
from jaxkoans.grader.fill_audit import audit, forbidden, parents_of, tautology

MAX_FILE_BYTES = 4 << 20  # a koan file is ~10 KB; long notes in it (290 KB seen) are no attack


@dataclass(frozen=True)
class Finding:
    """Something about a student's copy: evidence (a finding) or a note for a human reader."""

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
    # koan -> the student's definitions its run reaches (course_code.py); empty: course code only
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


def parse_problem(text: str) -> str:
    """Why `text` is not Python, or ""."""
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
    for name, (start, _) in s_spans.items():
        if name not in names:
            message = (
                f"课程里没有的测试（不运行） / a test the course does not have (not run): {name}"
            )
            check.notes.append(Finding("added_test", rel, start, (), message))
    ignored = _not_reformatting(taken.ignored, p_text, student_text)
    check.notes += _ignored_notes(rel, names, ignored, check.missing)
    parents, modules = parents_of(taken.tree), _imported(ast.parse(p_text))
    unusual: dict[str, dict[str, list[int]]] = {}
    for here, node, is_blank in taken.nodes:
        if here in check.missing:
            continue
        if is_blank and tautology(node, parents):
            message = "空里重复了断言检查的值 / a fill repeats what the assert checks"
            koans = tuple(names) if here == MODULE else (here,)
            check.touch(Finding("tautology", rel, node.lineno, koans, message))
        for flag in audit(node, parents, in_fill=is_blank, modules=modules):
            if flag not in allowed.get(here, set()):
                unusual.setdefault(here, {}).setdefault(flag, []).append(node.lineno)
    reaching = _reaching(p_text, student_text, names)
    for here, flags in unusual.items():
        costly = {flag: lines[0] for flag, lines in flags.items() if forbidden(flag)}
        for flag, line in costly.items():
            koans = (here,) if here != MODULE else reaching(line)
            message = (
                f"第 {line} 行 / line {line}: {forbidden(flag)} ({flag}); 没有 koan 需要它，"
                "这个 koan 记零分 / no koan needs it: the koan scores zero"
            )
            check.touch(Finding("forbidden_code", rel, line, koans, message))
        # One note per koan (a TODO body's or module code's flags belong to the koans that
        # reach them), every flag named: a note is for a human reading that koan's pass.
        by_koans: dict[tuple[str, ...], dict[str, int]] = {}
        for flag, lines in flags.items():
            if flag in costly:
                continue
            for line in lines:
                koans = (here,) if here != MODULE else reaching(line)
                for koan in koans or ("",):
                    by_koans.setdefault((koan,) if koan else (), {}).setdefault(flag, line)
        for koans, found in by_koans.items():
            message = (
                "不常见的代码，仅供阅读（不扣分） / unusual for a koan, for a human to read "
                "(costs nothing): " + ", ".join(found)
            )
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
    reached = course_code.student_code_reached(p_text, taken.graded, names, kinds)
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


def _reaching(p_text: str, student_text: str, names: list[str]):
    """line -> the koans code at that line of the student's file concerns: those that reach its
    definition (koan_model.reached), or every koan for other module code."""
    student, pristine = koan_model.parse(student_text), koan_model.parse(p_text)
    reached = {name: set(pristine.reached(name)) | set(student.reached(name)) for name in names}

    def koans(line: int) -> tuple[str, ...]:
        holder = next((n for n, (a, b) in student.definitions.items() if a <= line <= b), None)
        if holder is None:
            return tuple(names)
        found = tuple(k for k in names if holder in reached[k])
        return found or tuple(names)

    return koans


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


def _strings(text: str) -> dict[int, list[str]]:
    """line -> the string constants that start or end on it."""
    found: dict[int, list[str]] = {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return found
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for line in {node.lineno, node.end_lineno or node.lineno}:
                found.setdefault(line, []).append(node.value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:  # a function's docstring, by its def line
                found.setdefault(node.lineno, []).append(docstring)
    return found


def _words(text: str) -> str:
    return " ".join(inspect.cleandoc(text).split())


def _not_reformatting(
    ignored: list[fills.Ignored], p_text: str, student_text: str
) -> list[fills.Ignored]:
    """The edits outside the fills less a formatter's to a string (the same words: no note)."""
    if not any(edit.what in RESTRING for edit in ignored):
        return ignored
    before, after = _strings(p_text), _strings(student_text)
    kept = []
    for edit in ignored:
        if edit.what in RESTRING and edit.shipped_line and edit.student_line:
            old = {_words(v) for v in before.get(edit.shipped_line, [])}
            new = {_words(v) for v in after.get(edit.student_line, [])}
            if old and new and new <= old:
                continue
        kept.append(edit)
    return kept


def _ignored_notes(
    rel: str, names: list[str], ignored: list[fills.Ignored], missing: set[str]
) -> list[Finding]:
    """One note per edit outside the fills (by owner and line): grade ran the pristine code."""
    notes, seen = [], set()
    for edit in ignored:
        if edit.owner in missing:
            continue  # named by its missing_test note
        key = (edit.owner, edit.student_line or edit.shipped_line)
        if key in seen:
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


HARNESS_DIRS = ("jaxkoans", "csrc", "koans")
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
IGNORED_SUFFIXES = (".pyc", ".md")
# Under koans/ only what a pytest run loads counts (a notes.txt beside the koans does not).
LOADED_SUFFIXES = (".py", ".toml", ".ini", ".cfg", ".pth", ".json")
MAX_ENTRIES = 5000
TEST_FILE = re.compile(r"koans/[^/]+/test_[^/]*\.py")


def harness_entries(root: Path, koan_files: set[str]) -> dict[str, str]:
    """Relative path -> digest of each harness file under `root` (the koan files excepted)."""
    candidates = [root / name for name in course.HARNESS_FILES]
    for directory in HARNESS_DIRS:
        base = root / directory
        if base.is_symlink() or not base.is_dir():
            candidates.append(base)
            continue
        for current, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
            candidates += [Path(current) / f for f in sorted(files)]
            if len(candidates) > MAX_ENTRIES:
                break
    found: dict[str, str] = {}
    for path in candidates[:MAX_ENTRIES]:
        rel = path.relative_to(root).as_posix()
        if rel in koan_files or path.name.endswith(IGNORED_SUFFIXES):
            continue
        loaded = path.is_dir() or path.name.endswith(LOADED_SUFFIXES)
        digest = _digest(path, rel) if loaded or not rel.startswith("koans/") else None
        if digest is not None:
            found[rel] = digest
    return found


def _digest(path: Path, rel: str) -> str | None:
    """A file's digest, where release rewrites it in its released form (a copy of a release
    matches the course it came from)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "link:" + os.readlink(path)
    if stat.S_ISDIR(info.st_mode):
        return None
    if not stat.S_ISREG(info.st_mode):
        return "special file"
    if released.changed_by_release(rel):
        with contextlib.suppress(OSError, UnicodeDecodeError, ValueError, RecursionError):
            text = path.read_bytes().decode("utf-8").replace("\r\n", "\n")
            return hashlib.sha256(released.released_text(rel, text).encode("utf-8")).hexdigest()
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as file:
            while chunk := file.read(1 << 16):
                digest.update(chunk.replace(b"\r\n", b"\n"))
    except OSError:
        return "unreadable"
    return digest.hexdigest()


ADDED_TEST = "课程里没有的测试文件（不运行） / a test file the course does not have (not run)"
ADDED = "添加的课程工具文件（不使用） / an added harness file (not used)"
CHANGED = "改动的课程工具文件（不使用） / a changed harness file (not used)"


def harness_notes(pristine: dict[str, str], student: dict[str, str]) -> list[Finding]:
    """The student's harness files that were added or changed: never used, always named (a
    copy without one grades the same: the course's is used)."""
    notes = []
    for rel in sorted(student):
        if rel in pristine:
            kind, text = "harness_file", CHANGED
        elif TEST_FILE.fullmatch(rel):
            kind, text = "added_file", ADDED_TEST
        else:
            kind, text = "harness_file", ADDED
        if pristine.get(rel) != student[rel]:
            notes.append(Finding(kind, rel, None, (), f"{text}: {rel}"))
    return notes
