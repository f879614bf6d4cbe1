"""Did a student write only where the course lets them? And what runs when they did not?

A student's koan file is checked against the pristine one, koan by koan:

1. `twins.compare(pristine, student)` lists every line changed outside the blanks, TODO bodies
   and fix regions. A change touches the test whose lines it lies in; at module level or in a
   helper it touches every koan of the file (an edited assert, a skip marker, a changed
   fixture, a deleted or renamed test, a line of code added). Lines that hold no code (blank
   lines, comments) never run and are ignored.
2. The **graded file** is rebuilt from the pristine file with only the student's allowed edits
   (blank lines, TODO bodies, fix regions) of the koans that are not tampered: nothing else
   the student wrote ever runs. A tampered koan runs as shipped and scores zero.
3. `fill_audit` checks the rebuilt file: each `__` became one expression, and what the student
   wrote uses nothing the course does not allow, unless the course's own answer does too.

The grading run adds a runtime check (`grade_guard.py`) and process isolation for the rest.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from jaxkoans import twins
from jaxkoans.fill_audit import MODULE, flags_by_owner, owner

MAX_FILE_BYTES = 256 << 10  # a koan file is ~10 KB


@dataclass(frozen=True)
class Finding:
    """Something a student changed that the course does not let them change."""

    kind: str
    file: str  # relative to the course's root
    line: int | None  # in the student's file
    koans: tuple[str, ...]  # the koans of `file` it touches: they score zero
    message: str  # bilingual, one line


@dataclass
class FileCheck:
    path: str  # koans/NN/test_x.py
    koans: list[str]  # the pristine file's koans, in order
    def_lines: dict[str, int]  # koan -> its line (the student's where it exists)
    findings: list[Finding] = field(default_factory=list)
    tampered: dict[str, Finding] = field(default_factory=dict)  # koan -> its first finding
    missing: set[str] = field(default_factory=set)  # koans the student's file lacks
    whole_file: bool = False  # a module-level change: every koan is tampered
    problem: str = ""  # the student's file could not be read or parsed
    graded: str | None = None  # the file that runs; None: nothing of it runs
    line_map: list[int | None] = field(default_factory=list)  # graded line -> student line

    def touch(self, finding: Finding, whole: bool = False) -> None:
        self.findings.append(finding)
        self.whole_file |= whole
        for koan in self.koans if whole else finding.koans:
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
        data = path.read_bytes()
        text = data.decode("utf-8-sig")
    except OSError as error:
        return None, f"无法读取 / cannot be read: {error.strerror}"
    except UnicodeDecodeError as error:
        return None, f"不是 UTF-8 文本 / not UTF-8 text (byte {error.start}: binary or corrupted?)"
    return text.replace("\r\n", "\n").replace("\r", "\n"), ""


def parse_problem(text: str) -> str:
    """Why `text` is not Python, or ""."""
    try:
        ast.parse(text)
    except SyntaxError as error:
        return f"无法解析 / does not parse: line {error.lineno}: {error.msg}"
    except ValueError as error:  # e.g. null bytes
        return f"无法解析 / does not parse: {error}"
    except (RecursionError, MemoryError):
        return "无法解析 / does not parse: nested too deeply"
    return ""


def test_spans(tree: ast.Module) -> dict[str, tuple[int, int]]:
    """Each top-level test's lines (1-based, inclusive), decorators included."""
    spans = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
            "test"
        ):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            spans[node.name] = (start, node.end_lineno or node.lineno)
    return spans


def code_lines(text: str) -> set[int]:
    """Lines that hold code (not only blanks or a comment); a string's lines all count."""
    lines: set[int] = set()
    quiet = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type not in quiet and token.type != tokenize.ENDMARKER:
                lines |= set(range(token.start[0], token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        return set(range(1, text.count("\n") + 2))
    return lines


@dataclass
class _Sides:
    p_lines: list[str]
    s_lines: list[str]
    p_spans: dict[str, tuple[int, int]]
    s_spans: dict[str, tuple[int, int]]
    p_code: set[int]
    s_code: set[int]
    fixtures: list[tuple[int, int]]

    @property
    def koans(self) -> list[str]:
        return list(self.p_spans)


def _sides(p_text: str, s_text: str) -> _Sides:
    p_tree = ast.parse(p_text)
    fixtures = [
        (min([n.lineno] + [d.lineno for d in n.decorator_list]), n.end_lineno or n.lineno)
        for n in p_tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any("fixture" in ast.unparse(d) for d in n.decorator_list)
    ]
    return _Sides(
        p_text.splitlines(),
        s_text.splitlines(),
        test_spans(p_tree),
        test_spans(ast.parse(s_text)),
        code_lines(p_text),
        code_lines(s_text),
        fixtures,
    )


def check_file(
    rel: str, pristine: Path, student_text: str, scratch: Path, allowed: dict[str, set[str]]
) -> FileCheck:
    """Check one student file (read and parseable) against the pristine one.

    `allowed`: owner -> flags the course's answer raises itself (see `answer_flags`)."""
    try:
        return _check_file(rel, pristine, student_text, scratch, allowed)
    except (RecursionError, MemoryError):  # too deeply nested to check: credit nothing
        names = list(test_spans(ast.parse(pristine.read_text(encoding="utf-8"))))
        check = FileCheck(rel, names, {})
        message = "嵌套太深，无法检查 / nested too deeply to check: nothing of it runs"
        check.touch(Finding("unsafe_code", rel, None, tuple(names), message), whole=True)
        return check


def _check_file(
    rel: str, pristine: Path, student_text: str, scratch: Path, allowed: dict[str, set[str]]
) -> FileCheck:
    p_text = pristine.read_text(encoding="utf-8")
    sides = _sides(p_text, student_text)
    koans = sides.koans
    check = FileCheck(rel, koans, {k: sides.p_spans[k][0] for k in koans})
    check.def_lines.update({k: v[0] for k, v in sides.s_spans.items() if k in check.def_lines})
    check.missing = {k for k in koans if k not in sides.s_spans}
    for name in koans:
        if name in check.missing:
            message = f"删除或改名的 koan / deleted or renamed koan: {name}"
            check.findings.append(Finding("missing_test", rel, None, (name,), message))
    for name, (start, _) in sides.s_spans.items():
        if name not in sides.p_spans:
            message = (
                "课程里没有的测试（不运行） / a test the course does not have (not run): " + name
            )
            check.findings.append(Finding("added_test", rel, start, (), message))

    scratch.mkdir(parents=True, exist_ok=True)
    student_copy = scratch / Path(rel).name
    student_copy.write_text(student_text, encoding="utf-8")
    report = twins.compare(pristine, student_copy)
    for k_lines, s_lines in report.problem_lines:
        found = _problem_finding(rel, sides, k_lines, s_lines)
        if found is not None:
            check.touch(*found)
    if check.whole_file:
        return check

    graded, line_map = rebuild(sides, report, check)
    for finding, whole in _audit_findings(rel, p_text, graded, sides, line_map, allowed):
        check.touch(finding, whole)
    if not check.whole_file:
        check.graded, check.line_map = rebuild(sides, report, check)
    return check


def answer_flags(pristine: Path, answer: Path) -> dict[str, set[str]]:
    """Owner -> the flags the course's own answer raises: the same is allowed to a student."""
    text, _ = read_text(answer)
    if text is None or parse_problem(text):
        return {}
    report = twins.compare(pristine, answer)
    if not report.ok:
        return {}
    p_text = pristine.read_text(encoding="utf-8")
    sides = _sides(p_text, text)
    graded, _ = rebuild(sides, report, FileCheck("", sides.koans, {}))
    _, flags = flags_by_owner(
        ast.parse(p_text),
        ast.parse(graded),
        sides.p_spans,
        _region_lines(sides.p_lines),
        _region_lines(graded.splitlines()),
    )
    return {name: set(found) for name, found in flags.items()}


def _shown(lines: list[str], numbers: list[int], limit: int = 2) -> str:
    shown = [lines[n - 1].strip()[:100] for n in numbers[:limit] if 0 < n <= len(lines)]
    more = f" (+{len(numbers) - limit})" if len(numbers) > limit else ""
    return " ".join(f"`{s}`" for s in shown) + more


def _problem_finding(
    rel: str, sides: _Sides, k_lines: list[int], s_lines: list[int]
) -> tuple[Finding, bool] | None:
    """A twins problem as (finding, touches the whole file), or None when it is harmless."""
    if not k_lines and not s_lines:
        whole, touched = True, set(sides.koans)
    else:
        k_code = [n for n in k_lines if n in sides.p_code]
        s_code = [n for n in s_lines if n in sides.s_code]
        if not k_code and not s_code:
            return None  # only blank lines or comments: nothing of it runs
        added = {n for n in sides.s_spans if n not in sides.p_spans}
        deleted = {k for k in sides.koans if k not in sides.s_spans}
        k_owners = {owner(sides.p_spans, n) for n in k_code}
        s_owners = {owner(sides.s_spans, n) for n in s_code}
        if k_owners <= deleted and s_owners <= added:
            return None  # a deleted or added test: named by its own finding
        touched = (k_owners | s_owners) - added
        whole = MODULE in touched
    kind, what = _kind(sides, k_lines, s_lines)
    change = (
        f"course {_shown(sides.p_lines, k_lines) or '(nothing)'}"
        f" → student {_shown(sides.s_lines, s_lines) or '(nothing)'}"
    )
    koans = tuple(sides.koans) if whole else tuple(k for k in sides.koans if k in touched)
    line = s_lines[0] if s_lines else None
    return Finding(kind, rel, line, koans, f"{what}: {change}"), whole


def _kind(sides: _Sides, k_lines: list[int], s_lines: list[int]) -> tuple[str, str]:
    texts = [sides.p_lines[n - 1].strip() for n in k_lines if 0 < n <= len(sides.p_lines)]
    texts += [sides.s_lines[n - 1].strip() for n in s_lines if 0 < n <= len(sides.s_lines)]
    if any(t.startswith("@") or "pytestmark" in t for t in texts):
        return "marker", "改动了装饰器或标记 / changed a decorator or marker (skip, xfail, …)"
    if any(start <= n <= end for n in k_lines for start, end in sides.fixtures):
        return "fixture", "改动了 fixture / changed a fixture"
    if any(re.match(r"(async\s+)?def\s+test", t) for t in texts):
        return "signature", "改动了 koan 的签名 / changed a koan's signature"
    if any("assert" in t or "raises" in t for t in texts):
        return "assert", "改动了断言 / changed an assertion"
    return "changed_code", "改动了空和 TODO 以外的代码 / changed code outside the blanks and TODOs"


def rebuild(sides: _Sides, report: twins.TwinReport, check: FileCheck) -> tuple[str, list]:
    """The pristine file with the student's allowed edits of the koans not tampered, and for
    each of its lines the student's line it came from (or None)."""
    if check.whole_file:
        return "\n".join(sides.p_lines) + "\n", [None] * len(sides.p_lines)
    blocked = set(check.tampered) | check.missing

    def allowed(pristine_line: int) -> bool:
        return owner(sides.p_spans, pristine_line) not in blocked

    replace: dict[int, tuple[int, list[tuple[str, int]]]] = {}
    for k, a in report.blank_lines:
        if allowed(k):
            replace[k - 1] = (k, [(sides.s_lines[a - 1], a)])
    for _label, (ks, ke), (as_, ae) in report.spans:
        if allowed(ks):  # 1-based line `ks` ends the docstring (or is the BEGIN marker)
            replace[ks] = (ke, [(sides.s_lines[j], j + 1) for j in range(as_, ae)])
    same = _equal_lines(sides.p_lines, sides.s_lines)
    out: list[str] = []
    origin: list[int | None] = []
    i = 0
    while i < len(sides.p_lines):
        if i in replace:
            end, lines = replace[i]
            out += [text for text, _ in lines]
            origin += [number for _, number in lines]
            i = end
        else:
            out.append(sides.p_lines[i])
            origin.append(same.get(i))
            i += 1
    return "\n".join(out) + "\n", origin


def _equal_lines(a: list[str], b: list[str]) -> dict[int, int]:
    """Pristine 0-based line -> the student's 1-based line, where both are the same."""
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return {
        i1 + n: j1 + n + 1
        for op, i1, i2, j1, _ in matcher.get_opcodes()
        if op == "equal"
        for n in range(i2 - i1)
    }


def _region_lines(lines: list[str]) -> set[int]:
    """1-based lines strictly between `# ✍️ BEGIN` and `# ✍️ END`."""
    inside: set[int] = set()
    start = None
    for number, line in enumerate(lines, start=1):
        if line.strip().startswith(twins.REGION_BEGIN):
            start = number
        elif line.strip().startswith(twins.REGION_END) and start is not None:
            inside |= set(range(start + 1, number))
            start = None
    return inside


def _audit_findings(
    rel: str,
    p_text: str,
    graded: str,
    sides: _Sides,
    line_map: list[int | None],
    allowed: dict[str, set[str]],
) -> list[tuple[Finding, bool]]:
    try:
        g_tree = ast.parse(graded)
    except SyntaxError as error:  # fills that parse only together with a tampered line
        message = (
            "空的内容跨越了多条语句 / the fills only parse together with tampered lines "
            f"(graded line {error.lineno})"
        )
        return [(Finding("fill_shape", rel, None, tuple(sides.koans), message), True)]
    mismatches, flags = flags_by_owner(
        ast.parse(p_text),
        g_tree,
        sides.p_spans,
        _region_lines(sides.p_lines),
        _region_lines(graded.splitlines()),
    )

    def student_line(graded_line: int) -> int | None:
        return line_map[graded_line - 1] if 0 < graded_line <= len(line_map) else None

    def koans_of(name: str) -> tuple[str, ...]:
        return tuple(sides.koans) if name == MODULE else (name,)

    found = []
    for name, line, what in mismatches:
        message = (
            f"空的内容超出了空本身 / a fill reaches beyond its blank (course line {line}: {what})"
        )
        found.append((Finding("fill_shape", rel, None, koans_of(name), message), name == MODULE))
    for name, by_flag in flags.items():
        unsafe = {f: line for f, line in by_flag.items() if f not in allowed.get(name, set())}
        if "tautology" in unsafe:
            message = "空里重复了断言检查的值 / a fill repeats what the assert checks"
            line = student_line(unsafe.pop("tautology"))
            found.append((Finding("tautology", rel, line, koans_of(name), message), False))
        if unsafe:
            message = "课程不允许的代码 / code the course does not allow: " + ", ".join(unsafe)
            line = student_line(min(unsafe.values()))
            finding = Finding("unsafe_code", rel, line, koans_of(name), message)
            found.append((finding, name == MODULE))
    return found


# ---- the rest of the student's copy ------------------------------------------------------------

HARNESS_FILES = ("conftest.py", "pyproject.toml", "pytest.ini", "tox.ini", "setup.cfg", "setup.py")
HARNESS_DIRS = ("jaxkoans", "csrc", "koans")
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
IGNORED_SUFFIXES = (".pyc", ".md")
MAX_ENTRIES = 5000
TEST_FILE = re.compile(r"koans/[^/]+/test_[^/]*\.py")


def harness_entries(root: Path, koan_files: set[str]) -> dict[str, str]:
    """Relative path -> digest of each harness file under `root` (the koan files excepted)."""
    candidates = [root / name for name in HARNESS_FILES]
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
        digest = _digest(path)
        if digest is not None:
            found[rel] = digest
    return found


def _digest(path: Path) -> str | None:
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
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as file:
            while chunk := file.read(1 << 16):
                digest.update(chunk.replace(b"\r\n", b"\n"))
    except OSError:
        return "unreadable"
    return digest.hexdigest()


def harness_findings(pristine: dict[str, str], student: dict[str, str]) -> list[Finding]:
    """The student's harness files that were added or changed: never used, always named."""
    findings = []
    for rel in sorted(set(pristine) | set(student)):
        if pristine.get(rel) == student.get(rel):
            continue
        if rel not in pristine and TEST_FILE.fullmatch(rel):
            kind = "added_file"
            text = "课程里没有的测试文件（不运行） / a test file the course does not have (not run)"
        elif rel not in pristine:
            kind, text = (
                "harness_file",
                "添加的课程工具文件（不使用） / an added harness file (not used)",
            )
        elif rel not in student:
            continue  # a copy without the harness grades the same: the course's is used
        else:
            kind, text = (
                "harness_file",
                "改动的课程工具文件（不使用） / a changed harness file (not used)",
            )
        findings.append(Finding(kind, rel, None, (), f"{text}: {rel}"))
    return findings
