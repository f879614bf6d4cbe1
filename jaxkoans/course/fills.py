"""What a learner wrote where the course lets them write, and the file grade runs: the shipped
file with those fills put in.

The shipped and the learner's file are walked together as syntax trees (comments and layout
never count). The learner writes in a **blank** `__` (one expression), a **TODO body** (the
statements after its docstring), a **fix region** (the statements between `# ✍️ BEGIN` and
`# ✍️ END`) and a **helper** added at module level that a TODO body uses (graded with that
TODO). Every other difference is an edit outside the fills: grade runs the shipped code there
and `Taken.ignored` names it. Statement lists that differ are aligned by statement kind, so the
fills around an added import or a deleted line are still found.
"""

from __future__ import annotations

import ast
import difflib
import textwrap
from dataclasses import dataclass, field

from jaxkoans.course import koan_model
from jaxkoans.course.koan_model import (
    MODULE,
    REGION_BEGIN,
    REGION_END,
    has_docstring,
    owner,
    todo_calls,
)


def _bound_names(node: ast.AST) -> tuple[str, ...]:
    """The names a module-level statement binds, if it is one a helper can be: a def, a class,
    an import, or an assignment to plain names (a constant, a lambda)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (node.name,)
    if isinstance(node, ast.Import):
        return tuple((a.asname or a.name).split(".")[0] for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return tuple(a.asname or a.name for a in node.names if a.name != "*")
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else ([node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else [])
    )
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    return tuple(names) if names and len(names) == len(targets) else ()


@dataclass(frozen=True)
class Ignored:
    """An edit outside the fills: grade runs the shipped code there."""

    owner: str  # the koan whose lines hold it, or MODULE
    shipped_line: int | None
    student_line: int | None
    what: str  # plain English: "added an import", "a comparison became a constant", …


@dataclass(frozen=True)
class BlankFill:
    """What the learner wrote for one shipped `__`."""

    blank: tuple[int, int]  # the shipped `__`: 1-based line, 0-based column
    owner: str  # the koan whose lines hold it, or MODULE
    node: ast.expr  # the fill, in the learner's tree
    text: str  # its source, as written
    statement: tuple[int, int]  # the learner's lines (1-based, inclusive) of its statement


@dataclass
class Taken:
    graded: str  # the shipped file with the fills put in
    line_map: list[int | None]  # graded line (0-based index) -> the learner's line
    fills: dict[str, int] = field(default_factory=dict)  # owner -> how many fills were taken
    ignored: list[Ignored] = field(default_factory=list)
    nodes: list[tuple[str, ast.AST, bool]] = field(default_factory=list)  # owner, node, is blank
    tree: ast.Module | None = None  # the learner's file, which `nodes` belong to
    blanks: list[BlankFill] = field(default_factory=list)  # the filled ones, in shipped order

    def filled_lines(self) -> dict[int, tuple[str, ...]]:
        """The learner's line -> the fills of the statement through it: a fill wrapped over
        several lines, or a statement whose failing line is not the fill's, reads the same."""
        lines: dict[int, list[str]] = {}
        for fill in self.blanks:
            for line in range(fill.statement[0], fill.statement[1] + 1):
                lines.setdefault(line, []).append(fill.text)
        return {line: tuple(texts) for line, texts in lines.items()}

    def code_lines(self) -> frozenset[int]:
        """The learner's lines where they write code: TODO bodies and fix regions."""
        return frozenset(line for _, node, is_blank in self.nodes if not is_blank
                         for line in range(node.lineno, (node.end_lineno or node.lineno) + 1))  # fmt: skip


def _key(node: ast.AST) -> str:
    """What aligns two statement lists: the kind, and for definitions, imports and
    assignments what they name."""
    kind = type(node).__name__
    if isinstance(getattr(node, "name", None), str):
        return f"{kind}:{node.name}"
    if isinstance(node, ast.Import):
        return f"{kind}:{','.join(a.name for a in node.names)}"
    if isinstance(node, ast.ImportFrom):
        return f"{kind}:{node.module}"
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return f"{kind}:{','.join(ast.dump(t) for t in targets)}"
    return kind


class _Walk:
    def __init__(self, p_text: str, s_text: str) -> None:
        self.p_text, self.s_text = p_text, s_text
        shipped, learner = koan_model.parse(p_text), koan_model.parse(s_text)
        if shipped.error or learner.error:
            raise shipped.error or learner.error
        self.p_tree, self.s_tree = shipped.tree, learner.tree
        self.p_lines, self.s_lines = shipped.lines, learner.lines
        self.spans, self.s_spans = shipped.spans, learner.spans
        self.p_regions, self.s_regions = shipped.regions, learner.regions
        self.p_in_region = {n for a, b in self.p_regions for n in range(a + 1, b)}
        self.s_in_region = {n for a, b in self.s_regions for n in range(a + 1, b)}
        # replacements of shipped text: (start line, col, end line, col) -> text, student line
        self.edits: list[tuple[tuple[int, int, int, int], str, int]] = []
        self.ignored: list[Ignored] = []
        self.fills: dict[str, int] = {}
        self.nodes: list[tuple[str, ast.AST, bool]] = []
        self.blanks: list[BlankFill] = []
        self.statement: tuple[int, int] | None = None  # the learner's statement being walked
        self.s_top = {id(n) for n in self.s_tree.body}
        # an added helper never rebinds a name the course binds (an import of `np` would reach
        # the tests that run after it)
        self.p_names = {name for n in self.p_tree.body for name in _bound_names(n)}
        self.p_names |= {t.id for n in self.p_tree.body if isinstance(n, ast.Assign)
                         for t in n.targets if isinstance(t, ast.Name)}  # fmt: skip
        self.added_helpers: list[ast.AST] = []

    def owner(self, line: int) -> str:
        return owner(self.spans, line)

    def ignore(self, p: ast.AST | None, s: ast.AST | None, what: str, line: int, s_line: int | None) -> None:
        p_line = getattr(p, "lineno", None) or line
        s_line = getattr(s, "lineno", None) or s_line
        self.ignored.append(Ignored(self.owner(p_line), p_line, s_line, what))

    def count_fill(self, here: str) -> None:
        self.fills[here] = self.fills.get(here, 0) + 1

    def walk(self, p: ast.AST, s: ast.AST, line: int, s_line: int | None = None) -> None:
        if isinstance(s, ast.stmt):
            outer, self.statement = self.statement, (s.lineno, s.end_lineno or s.lineno)
            try:
                self._walk(p, s, line, s_line)
            finally:
                self.statement = outer
            return
        self._walk(p, s, line, s_line)

    def fill(self, blank: ast.AST, here: str, node: ast.expr, text: str, shown: str) -> None:
        """`text` over the shipped `blank`: the learner's `node`, which reads as `shown`."""
        span = (blank.lineno, blank.col_offset, blank.end_lineno, blank.end_col_offset)
        self.edits.append((span, text, node.lineno))
        self.nodes.append((here, node, True))
        self.count_fill(here)
        if not _blank(node):  # else still open: nothing written there yet
            statement = self.statement or (node.lineno, node.end_lineno or node.lineno)
            self.blanks.append(BlankFill(span[:2], here, node, shown, statement))

    def _walk(self, p: ast.AST, s: ast.AST, line: int, s_line: int | None = None) -> None:
        line = getattr(p, "lineno", line)
        s_line = getattr(s, "lineno", s_line)
        here = self.owner(line)
        if isinstance(p, ast.Name) and p.id == "__":
            if not isinstance(s, ast.expr):
                self.ignore(p, s, "the fill is not one expression", line, s_line)
                return
            text = ast.get_source_segment(self.s_text, s, padded=False)
            if text is None:
                self.ignore(p, s, "the fill cannot be read", line, s_line)
                return
            shown = text if "\n" not in text else ast.unparse(s)
            if not isinstance(s, ast.Starred) and ("\n" in text or not _atomic(s)):
                text = f"({text})"
            self.fill(p, here, s, text, shown)
            return
        if type(p) is not type(s):
            self.ignore(p, s, f"{plain(p)} became {plain(s)}", line, s_line)
            return
        if p is None:  # both absent: a dict's `**` key, a keyword-only argument's default
            return
        if isinstance(p, ast.Call) and self.keyword_fills(p, s, line, s_line):
            return
        todo = isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) and todo_calls(p)
        for name in p._fields:
            if name == "ctx":
                continue
            a, b = getattr(p, name, None), getattr(s, name, None)
            if todo and name == "body":
                self.todo_body(p, s, here)
                continue
            if isinstance(a, list) and isinstance(b, list):
                self.walk_list(a, b, line, s_line, name)
            elif isinstance(a, ast.AST) and isinstance(b, ast.AST):
                self.walk(a, b, line, s_line)
            elif a != b or type(a) is not type(b):
                self.ignore(p, s, f"the {name} of {plain(p)} changed", line, s_line)

    def keyword_fills(self, p: ast.Call, s: ast.Call, line: int, s_line: int | None) -> bool:
        """`f(x, __)` filled as `f(x, name=value)`: a blank that stands for a keyword
        argument (positional arguments come first, so these are the last blanks)."""
        missing = len(p.args) - len(s.args)
        known = {k.arg for k in p.keywords}
        extra = [k for k in s.keywords if k.arg not in known]
        dropped = p.args[len(p.args) - missing :] if missing > 0 else []
        if not dropped or len(extra) != missing or not all(_blank(a) for a in dropped):
            return False
        self.walk(p.func, s.func, line, s_line)
        for x, y in zip(p.args[: len(s.args)], s.args, strict=True):
            self.walk(x, y, line, s_line)
        here = self.owner(line)
        for blank, keyword in zip(dropped, extra, strict=True):
            text = ast.get_source_segment(self.s_text, keyword)
            if text is None or "\n" in text:
                self.ignore(blank, keyword, "the fill cannot be read", line, s_line)
                continue
            self.fill(blank, here, keyword.value, text, text)  # one line: checked above
        kept = [k for k in s.keywords if k.arg in known]
        self.walk_list(p.keywords, kept, line, s_line, "keywords")
        return True

    def walk_list(self, a: list, b: list, line: int, s_line: int | None, name: str) -> None:
        if a and isinstance(a[0], ast.stmt):
            a = [n for n in a if n.lineno not in self.p_in_region]
            b = [n for n in b if n.lineno not in self.s_in_region]
        if len(a) == len(b):
            for x, y in zip(a, b, strict=True):
                if isinstance(x, ast.AST) and isinstance(y, ast.AST):
                    self.walk(x, y, line, s_line)
                elif x != y or type(x) is not type(y):
                    self.ignore(None, None, f"{name} changed", line, s_line)
            return
        matcher = difflib.SequenceMatcher(a=[_key(n) for n in a], b=[_key(n) for n in b], autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            pairs = list(zip(a[i1:i2], b[j1:j2], strict=False))
            if op == "equal" or (i2 - i1 == j2 - j1 and all(_key(x) == _key(y) for x, y in pairs)):
                for x, y in pairs:
                    self.walk(x, y, line, s_line)
                continue
            for x in a[i1:i2]:
                self.ignore(x, None, f"removed {plain(x)}", line, None)
            for y in b[j1:j2]:
                where = getattr(y, "lineno", line)
                if self.helper_candidate(y):
                    self.added_helpers.append(y)  # taken if a TODO uses it (`helpers`)
                    continue
                self.ignored.append(Ignored(self.s_owner(where), None, where, f"added {plain(y)}"))

    def helper_candidate(self, node: ast.AST) -> bool:
        """A function, class, import, constant or lambda the learner added at module level,
        under new names none of which is a test: a helper for a TODO, graded with it when the
        TODO uses it."""
        names = _bound_names(node)
        return (bool(names) and id(node) in self.s_top and not any(n.startswith("test") for n in names)
                and not set(names) & set(self.p_names))  # fmt: skip

    def helpers(self) -> None:
        """Take each added helper that the taken code uses (directly or through another taken
        helper): it goes into the graded file before the first TODO function that needs it,
        as part of that TODO. The others stay edits grade ignores."""
        if not self.added_helpers:
            return
        by_name = {name: h for h in self.added_helpers for name in _bound_names(h)}
        todos = {t.name: t for t in koan_model.parse(self.p_text).todos}
        p_defs = {n.name: n for n in self.p_tree.body if isinstance(n, koan_model.FUNCTIONS)}
        taken: dict[int, str] = {}  # id(helper) -> the TODO it is graded with
        s_defs = {n.name: n for n in self.s_tree.body if isinstance(n, koan_model.FUNCTIONS)}
        frontier = [(name, node) for name, node in s_defs.items() if name in todos]
        while frontier:
            todo, node = frontier.pop()
            for name in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}:
                if name in by_name and id(by_name[name]) not in taken:
                    taken[id(by_name[name])] = todo
                    frontier.append((todo, by_name[name]))
        for helper in self.added_helpers:
            if id(helper) not in taken:
                self.ignored.append(Ignored(MODULE, None, helper.lineno, f"added {plain(helper)}"))
                continue
            target = p_defs[taken[id(helper)]]
            at, first = koan_model.definition_span(target)[0], koan_model.definition_span(helper)[0]
            text = textwrap.dedent(_stripped(self.s_lines[first - 1 : helper.end_lineno]))
            self.edits.append(((at, 0, at, 0), text + "\n\n\n", first))
            here = self.owner(at)
            self.nodes.append((here, helper, False))
            self.count_fill(here)

    def s_owner(self, line: int) -> str:
        return owner(self.s_spans, line)

    def todo_body(self, p: ast.FunctionDef, s: ast.FunctionDef, here: str) -> None:
        skip = 1 if has_docstring(p) else 0
        if skip and has_docstring(s) and ast.dump(p.body[0]) != ast.dump(s.body[0]):
            self.ignore(p, s, "a TODO function's docstring changed", p.lineno, s.lineno)
            return
        body = s.body[1 if has_docstring(s) else 0 :]  # a deleted docstring is no edit
        if not body:
            return
        first = koan_model.definition_span(body[0])[0]
        text = textwrap.dedent(_stripped(self.s_lines[first - 1 : s.end_lineno]))
        indent = _indent(self.p_lines[p.body[skip].lineno - 1]) if len(p.body) > skip else "    "
        text = textwrap.indent(text, indent)
        p_first = p.body[skip].lineno if len(p.body) > skip else p.end_lineno + 1
        end_col = len(self.p_lines[p.end_lineno - 1].encode("utf-8"))
        self.edits.append(((p_first, 0, p.end_lineno, end_col), text, first))
        self.nodes += [(here, node, False) for node in body]
        self.count_fill(here)

    def regions(self) -> None:
        if len(self.p_regions) != len(self.s_regions):
            self.ignored.append(
                Ignored(MODULE, None, None, f"{REGION_BEGIN}/{REGION_END} markers changed")
            )
            return
        for (pb, pe), (sb, se) in zip(self.p_regions, self.s_regions, strict=True):
            here = self.owner(pb)
            if self.s_owner(sb) != here:
                self.ignored.append(Ignored(here, pb, sb, "a fix region moved"))
                continue
            if _region_code(self.p_tree, pb, pe) == _region_code(self.s_tree, sb, se):
                continue  # a formatter's change, comments: the code as shipped, no attempt
            text = textwrap.dedent(_stripped(self.s_lines[sb : se - 1]))
            text = textwrap.indent(text, _indent(self.p_lines[pb - 1]))
            end_col = len(self.p_lines[pe - 2].encode("utf-8")) if pe - 1 > pb else 0
            if pe - 1 > pb:
                self.edits.append(((pb + 1, 0, pe - 1, end_col), text, sb + 1))
            elif text.strip():  # an empty region as shipped: insert before END
                self.edits.append(((pe, 0, pe, 0), text + "\n", sb + 1))
            self.nodes += [(here, node, False) for node in ast.walk(self.s_tree)
                           if isinstance(node, ast.stmt) and sb < node.lineno < se]  # fmt: skip
            self.count_fill(here)


def _region_code(tree: ast.Module, begin: int, end: int) -> list[str]:
    """The statements between a region's markers, by syntax tree (no lines, no comments)."""
    return [ast.dump(node) for node in ast.walk(tree) if isinstance(node, ast.stmt) and begin < node.lineno < end]


# What a person calls each kind of node (the notes grade and progress.py print).
PLAIN = {
    "FunctionDef": "a function", "AsyncFunctionDef": "a function", "ClassDef": "a class",
    "Import": "an import", "ImportFrom": "an import", "Assign": "an assignment",
    "AugAssign": "an assignment", "AnnAssign": "an assignment", "Assert": "an assert",
    "Expr": "a statement (a call such as print)", "Return": "a return", "If": "an if",
    "For": "a for loop", "While": "a while loop", "With": "a with block", "Try": "a try block",
    "Raise": "a raise", "Delete": "a del", "Pass": "a pass", "Global": "a global statement",
    "Compare": "a comparison", "Call": "a call", "Constant": "a constant", "Name": "a name",
    "Attribute": "an attribute", "Subscript": "an index", "BinOp": "arithmetic",
    "UnaryOp": "arithmetic", "BoolOp": "and/or", "Lambda": "a lambda", "List": "a list",
    "Tuple": "a tuple", "Dict": "a dict", "Set": "a set", "ListComp": "a comprehension",
    "IfExp": "a conditional expression", "keyword": "a keyword argument", "arg": "an argument",
    "arguments": "the arguments", "Starred": "a starred expression", "decorator": "a decorator",
}  # fmt: skip


def plain(node: ast.AST | None) -> str:
    name = type(node).__name__
    return PLAIN.get(name, f"a {name} node")


def _blank(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "__"


def _atomic(node: ast.expr) -> bool:
    """Safe to put in without parentheses: names, constants, calls, subscripts, attributes."""
    return isinstance(
        node,
        (ast.Name, ast.Constant, ast.Call, ast.Attribute, ast.Subscript, ast.List, ast.Tuple,
         ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
         ast.JoinedStr, ast.Starred),
    )  # fmt: skip


def _stripped(lines: list[str]) -> str:
    return "\n".join(line.rstrip() for line in lines)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def take(p_text: str, s_text: str) -> Taken:
    """The graded file (shipped + the learner's fills) and what else the learner changed.
    Raises SyntaxError when the learner's file does not parse."""
    walk = _Walk(p_text, s_text)
    walk.walk(walk.p_tree, walk.s_tree, 1)
    walk.regions()
    walk.helpers()
    graded, line_map = _apply(walk.p_lines, walk.edits, _same_lines(walk.p_lines, walk.s_lines))
    blanks = sorted(walk.blanks, key=lambda fill: fill.blank)
    return Taken(graded, line_map, walk.fills, walk.ignored, walk.nodes, walk.s_tree, blanks)


def _same_lines(a: list[str], b: list[str]) -> dict[int, int]:
    """Shipped 0-based line -> the learner's 1-based line, where the text is the same."""
    matcher = difflib.SequenceMatcher(a=[x.strip() for x in a], b=[x.strip() for x in b], autojunk=False)
    return {i1 + n: j1 + n + 1 for op, i1, i2, j1, _ in matcher.get_opcodes() if op == "equal" for n in range(i2 - i1)}


def _apply(
    lines: list[str], edits: list[tuple[tuple[int, int, int, int], str, int]], same: dict
) -> tuple[str, list[int | None]]:
    """Put each edit's text over its shipped span (1-based lines, 0-based columns, UTF-8
    byte offsets as ast gives them); returns the text and each line's learner line."""
    encoded = [line.encode("utf-8") for line in lines]
    out: list[str] = []
    origin: list[int | None] = []
    edits = sorted(edits, key=lambda e: e[0])
    row, col = 1, 0  # where the shipped text not yet copied starts
    pending = b""
    from_fill: int | None = None  # the learner's line of a fill on the line being built

    def flush_until(end_row: int, end_col: int) -> None:
        nonlocal row, col, pending, from_fill
        while row < end_row:
            pending += encoded[row - 1][col:]
            out.append(pending.decode("utf-8"))
            origin.append(from_fill if from_fill is not None else same.get(row - 1))
            pending, row, col, from_fill = b"", row + 1, 0, None
        pending += encoded[row - 1][col:end_col] if row <= len(encoded) else b""
        col = end_col

    for (sr, sc, er, ec), text, student_line in edits:
        if (sr, sc) < (row, col):
            continue  # overlapping spans: keep the first
        flush_until(sr, sc)
        pieces = text.split("\n")
        for number, piece in enumerate(pieces):
            pending += piece.encode("utf-8")
            if number < len(pieces) - 1:
                out.append(pending.decode("utf-8"))
                origin.append(student_line + number if from_fill is None else from_fill)
                pending, from_fill = b"", None
        from_fill = student_line + len(pieces) - 1 if from_fill is None else from_fill
        row, col = er, ec
    flush_until(len(encoded), len(encoded[-1]) if encoded else 0)
    out.append(pending.decode("utf-8"))
    origin.append(from_fill if from_fill is not None else same.get(len(encoded) - 1))
    return "\n".join(out) + "\n", origin
