"""One model of a koan file, parsed once: its koans, blanks, TODO functions and fix regions.

Every tool that asks what a koan file holds reads it here (the plugin, progress, diff, twins,
fills and grade), so their answers cannot disagree. The meanings:

- a **koan**: a top-level `def test…`; its span runs from its first decorator to its last line;
- a **blank**: the name `__` in code (never in a string or a comment);
- a **TODO function**: a function, at any depth, whose own statements call `todo(...)`. A
  `todo()` inside a nested function makes the nested one the TODO function, not the one around
  it. Its body is every line after its docstring;
- a **fix region**: the lines between `# ✍️ BEGIN` and `# ✍️ END`.

A file that does not parse still has its koans (found by their `def` lines) and fix regions.
The syntax tree is shared by every reader of the same text: never change it.
"""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

MODULE = "<module>"  # the owner of module-level lines: every koan of the file
REGION_BEGIN, REGION_END = "# ✍️ BEGIN", "# ✍️ END"
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPES = (*FUNCTIONS, ast.Lambda, ast.ClassDef)  # a nested scope's statements are not its own
TEST_DEF = re.compile(r"^(?:async )?def (test\w*)\s*\(", re.MULTILINE)


@dataclass(frozen=True)
class KoanFunction:
    name: str
    line: int  # its `def` line
    span: tuple[int, int]  # 1-based first (decorators included) and last line
    docstring: str = ""


@dataclass(frozen=True)
class TodoFunction:
    name: str
    line: int  # its `def` line
    todo_line: int  # its first `todo(...)` call
    body: tuple[int, int]  # 0-based [start, end) lines: everything after its docstring


@dataclass(frozen=True, eq=False)
class KoanFile:
    text: str
    tree: ast.Module | None  # None: the file does not parse (see `error`)
    error: Exception | None = None  # why it does not parse: SyntaxError, RecursionError, …
    koans: tuple[KoanFunction, ...] = ()
    regions: tuple[tuple[int, int], ...] = ()  # 1-based (BEGIN line, END line) of each

    # The rest is worked out on first use: listing a course's koans needs only `koans`.
    @cached_property
    def blanks(self) -> tuple[tuple[int, int], ...]:
        """(1-based line, column) of each `__`."""
        found = (n for n in self._nodes if isinstance(n, ast.Name) and n.id == "__")
        return tuple(sorted((n.lineno, n.col_offset) for n in found))

    @cached_property
    def todos(self) -> tuple[TodoFunction, ...]:
        found = (TodoFunction(node.name, node.lineno, calls[0], body_span(node)) for node in self._nodes
                 if isinstance(node, FUNCTIONS) and (calls := todo_calls(node)))  # fmt: skip
        return tuple(sorted(found, key=lambda todo: todo.line))

    @property
    def _nodes(self):
        return ast.walk(self.tree) if self.tree is not None else ()

    @property
    def _body(self) -> list[ast.stmt]:
        return self.tree.body if self.tree is not None else []

    @cached_property
    def top_level(self) -> dict[str, ast.AST]:
        """Each top-level function or class -> its node."""
        return {n.name: n for n in self._body if isinstance(n, (*FUNCTIONS, ast.ClassDef))}

    @cached_property
    def definitions(self) -> dict[str, tuple[int, int]]:
        """Each top-level function or class -> its lines (1-based, decorators included)."""
        return {name: definition_span(node) for name, node in self.top_level.items()}

    @cached_property
    def _tables(self) -> dict[str, ast.AST]:
        """Top-level names bound by an assignment (a table of the file's functions, say): a koan
        that reads one reaches what its value names."""
        found = {}
        for node in self._body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    found |= {n.id: node.value for n in ast.walk(target) if isinstance(n, ast.Name)}
        return found

    @cached_property
    def uses(self) -> dict[str, tuple[str, ...]]:
        """Each top-level function, class or assigned name -> the others it names."""
        return self._uses(fixtures=False)

    @cached_property
    def fixture_uses(self) -> dict[str, tuple[str, ...]]:
        """`uses`, and the fixtures pytest runs for it (an argument, a string that names one)."""
        return self._uses(fixtures=True)

    def _uses(self, fixtures: bool) -> dict[str, tuple[str, ...]]:
        nodes = self._tables | self.top_level
        return {name: tuple(dict.fromkeys(n for n in _names(node, fixtures) if n in nodes))
                for name, node in nodes.items()}  # fmt: skip

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @property
    def spans(self) -> dict[str, tuple[int, int]]:
        return {k.name: k.span for k in self.koans}

    @property
    def blank_lines(self) -> frozenset[int]:
        return frozenset(line for line, _ in self.blanks)

    def koan(self, name: str) -> KoanFunction | None:
        return next((k for k in self.koans if k.name == name), None)

    def owner(self, line: int) -> str:
        """The koan whose lines hold `line`, else MODULE."""
        return owner(self.spans, line)

    def reached(self, name: str, *, fixtures: bool = False) -> list[str]:
        """`name` and the top-level definitions it reaches through the names it uses (a koan's
        helpers, their helpers, the functions a module-level table holds, …; with `fixtures`,
        its fixtures too), in the order they are first reached."""
        uses = self.fixture_uses if fixtures else self.uses
        found, seen, frontier = [], set(), [name]
        while frontier:
            current = frontier.pop(0)
            if current in seen or current not in uses:
                continue
            seen.add(current)
            found += [current] if current in self.definitions else []
            frontier += uses[current]
        return found

    def first_blank_line(self, name: str) -> int | None:
        """Where koan `name` waits for the learner: its first blank or `todo()`, else that of
        the first helper it reaches that has one, else the file's first fix region."""
        waiting = [line for line, _ in self.blanks] + [t.todo_line for t in self.todos]
        for each in self.reached(name):
            start, end = self.definitions[each]
            own = [line for line in waiting if start <= line <= end]
            if own:
                return min(own)
        return self.regions[0][0] if self.regions and name in self.uses else None

    def koans_seeing(self, line: int) -> tuple[str, ...]:
        """The koans whose run reaches `line`: the one it is in, else those that reach the
        definition holding it through the file's helpers, else every koan (a module line)."""
        held = [name for name, (start, end) in self.definitions.items() if start <= line <= end]
        users = [k.name for k in self.koans if held and held[0] in self.reached(k.name)]
        return tuple(users) or tuple(k.name for k in self.koans)

    def body_of(self, name: str) -> tuple[int, int] | None:
        """0-based [start, end) lines of function `name`'s body (at any depth) after its docstring."""
        found = next((n for n in self._nodes if isinstance(n, FUNCTIONS) and n.name == name), None)
        return body_span(found) if found is not None else None

    def region_hashes(self) -> list[str]:
        """A fingerprint of each fix region's code, in file order (chapter.toml's [regions])."""
        code = ["\n".join(line.rstrip() for line in self.lines[b : e - 1]) for b, e in self.regions]
        return [hashlib.sha256(text.encode()).hexdigest()[:12] for text in code]

    def untouched_region(self, shipped: tuple[str, ...] | list[str]) -> int | None:
        """The BEGIN line of the first fix region still as shipped, else None."""
        pairs = zip(self.regions, self.region_hashes(), strict=True)
        return next((begin for (begin, _), digest in pairs if digest in shipped), None)


def owner(spans: dict[str, tuple[int, int]], line: int) -> str:
    """The koan whose lines (1-based, inclusive) hold `line`, else MODULE."""
    return next((name for name, (start, end) in spans.items() if start <= line <= end), MODULE)


def _names(node: ast.AST, fixtures: bool) -> Iterator[str]:
    for each in ast.walk(node):
        if isinstance(each, ast.Name):
            yield each.id
        elif fixtures and isinstance(each, ast.arg):
            yield each.arg
        elif fixtures and isinstance(each, ast.Constant) and isinstance(each.value, str):
            yield each.value


@lru_cache(maxsize=256)  # asked per node of a file, and per file: shared, never modify it
def imports_in(node: ast.AST) -> dict[str, str]:
    """{name: the dotted path it names} for every import under `node` (`from a import b`: a.b;
    a relative `from . import b` names nothing)."""
    found = {}
    for inner in ast.walk(node):
        if isinstance(inner, ast.Import):
            for alias in inner.names:
                top = alias.name.split(".")[0]
                found[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(inner, ast.ImportFrom) and inner.module:
            for alias in inner.names:
                found[alias.asname or alias.name] = f"{inner.module}.{alias.name}"
    return found


def has_docstring(fn: ast.AST) -> bool:
    return ast.get_docstring(fn, clean=False) is not None


def todo_calls(fn: ast.AST) -> list[int]:
    """The lines where `fn`'s own statements (not a nested scope's) call `todo(...)`."""
    found, stack = [], list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "todo":  # a Name
            found.append(node.lineno)
        if not isinstance(node, SCOPES):
            stack.extend(ast.iter_child_nodes(node))
    return sorted(found)


def definition_span(node: ast.AST) -> tuple[int, int]:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start, node.end_lineno or node.lineno


def body_span(fn: ast.AST) -> tuple[int, int]:
    """0-based [start, end) of `fn`'s lines after its docstring."""
    if has_docstring(fn):
        return fn.body[0].end_lineno, fn.end_lineno  # from the line after the docstring
    return definition_span(fn.body[0])[0] - 1, fn.end_lineno


def _regions(lines: list[str]) -> tuple[tuple[int, int], ...]:
    """Each fix region as 1-based (BEGIN line, END line)."""
    found, start = [], None
    for number, line in enumerate(lines, start=1):
        if line.strip().startswith(REGION_BEGIN):
            start = number
        elif line.strip().startswith(REGION_END) and start is not None:
            found.append((start, number))
            start = None
    return tuple(found)


@lru_cache(maxsize=512)
def parse(text: str) -> KoanFile:
    """The model of a koan file's text (one parse per text)."""
    regions = _regions(text.splitlines())
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:  # nested too deeply
        # still count the koans of a file the learner broke
        lines = [(m.group(1), text.count("\n", 0, m.start()) + 1) for m in TEST_DEF.finditer(text)]
        koans = tuple(KoanFunction(name, line, (line, line)) for name, line in lines)
        return KoanFile(text, None, error, koans, regions)
    spans = {node.name: definition_span(node) for node in tree.body  # decorators included
             if isinstance(node, FUNCTIONS) and node.name.startswith("test")}  # fmt: skip
    koans = tuple(KoanFunction(node.name, node.lineno, spans[node.name], ast.get_docstring(node) or "")
                  for node in tree.body if getattr(node, "name", None) in spans)  # fmt: skip
    return KoanFile(text, tree, None, koans, regions)


def read(path: Path) -> KoanFile:
    """The model of the file at `path`, parsed again only when its mtime or size changes; an
    unreadable file is an empty one."""
    try:
        stat = Path(path).stat()
    except OSError:
        return parse("")
    return _read(Path(path), stat.st_mtime_ns, stat.st_size)


def splice_body(text: str, function: str, body: str) -> str:
    """`text` with the body (after the docstring) of `function` (at any depth) replaced by
    `body`, re-indented to the body's own indent: the one splicer of a TODO body (the gates'
    fakes and generated shortcuts, and the tests that write one)."""
    model = parse(text)
    start, end = model.body_of(function)
    lines = text.splitlines()
    fn = next(n for n in ast.walk(model.tree) if isinstance(n, FUNCTIONS) and n.name == function)
    first = next((line for line in lines[start:end] if line.strip()), "")
    indent = first[: len(first) - len(first.lstrip())] or " " * (fn.col_offset + 4)
    new = textwrap.indent(textwrap.dedent(body), indent).splitlines()
    return "\n".join([*lines[:start], *new, *lines[end:]]) + "\n"


@lru_cache(maxsize=1024)  # bounded: a long watch session re-reads changed files
def _read(path: Path, mtime_ns: int, size: int) -> KoanFile:
    try:
        return parse(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return parse("")
