"""Why did a koan fail? Its blank, its TODO, a timeout, the machine, or the learner's answer.

"Not started" only when a BlankError/TodoError caused it, when the failing statement of the koan's
file still holds `__` (JAX often wraps a blank in an error of its own), or when a fix region it
runs is still as shipped. A C++ build that fails (chapter 05) is the machine's: "environment".
"""

from __future__ import annotations

import ast
import enum
import functools
import io
import linecache
import tokenize
from dataclasses import dataclass
from pathlib import Path

from jaxkoans.api import cbuild
from jaxkoans.api.blanks import BlankError, TodoError
from jaxkoans.course import Course, koan_model, predictions, reading
from jaxkoans.course import fills as _fills
from jaxkoans.course.koan_model import REGION_BEGIN
from jaxkoans.plugin.contracts import ContractBroken
from jaxkoans.plugin.results import KoanState


class Cause(enum.StrEnum):
    BLANK = "blank"
    TODO = "todo"
    REGION = "region"  # a fix region the learner has not edited yet
    TIMEOUT = "timeout"
    WRONG = "wrong"  # an assertion or any other exception of the learner's code
    ENVIRONMENT = "environment"  # the C++ build failed or timed out (jaxkoans.api.cbuild)
    COMPUTED = "computed"  # a prediction blank filled with a computation: refused, not run
    READS_TEST = "reads_test"  # a fill reads the test or switches its guard: refused, not run
    CONTRACT = "contract"  # the asserts pass, the TODO's program breaks its technique contract


@dataclass(frozen=True)
class Attribution:
    cause: Cause
    path: Path | None = None  # where, in the koan's file
    lineno: int | None = None  # 1-based
    source: str = ""
    message: str = ""  # for ENVIRONMENT: what the build said

    @property
    def state(self) -> KoanState:
        if self.cause is Cause.ENVIRONMENT:
            return KoanState.ENVIRONMENT
        if self.cause in (Cause.BLANK, Cause.TODO, Cause.REGION):
            return KoanState.NOT_STARTED
        return KoanState.FAILING


def has_blank(source: str) -> bool:
    """`source` uses the name `__` (not in a string or comment); a statement cut out of a file
    may not tokenize whole (an unclosed bracket): the tokens before the error count."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.NAME and token.string == "__":
                return True
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return False


def attribute(excinfo, koan_file: Path, shipped_regions: tuple[str, ...] = ()) -> Attribution:
    """Attribute the failure in `excinfo` (a pytest ExceptionInfo) for a koan in `koan_file`;
    `shipped_regions`: the fingerprints of the file's fix regions as shipped (chapter.toml)."""
    koan_file, error = Path(koan_file).resolve(), excinfo.value
    if isinstance(error, predictions.NotAPrediction | reading.ReadsTheTest):
        computed = isinstance(error, predictions.NotAPrediction)
        line = error.refused[0][0].statement[0] if computed else error.refused[0].line
        cause = Cause.COMPUTED if computed else Cause.READS_TEST
        return Attribution(cause, koan_file, line, _line_of(koan_file, line))
    if isinstance(error, ContractBroken):
        line = koan_model.read(koan_file).definitions.get(error.function, (None,))[0]
        source = _line_of(koan_file, line) if line else ""
        return Attribution(Cause.CONTRACT, koan_file, line, source, message=str(error))
    chain, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        chain.append(error)
        error = error.__cause__ or error.__context__
    # pytest-timeout's signal method fails the test with "Timeout (>Ns) from pytest-timeout".
    timeout = excinfo.typename == "Failed" and "Timeout" in str(excinfo.value)[:40]
    entries = list(entries_in(excinfo, koan_file))
    places = [(Path(e.path), e.lineno + 1, _statement(e)) for e in entries]  # innermost last
    where = places[-1] if places else (None, None, "")
    built = [e for e in chain if isinstance(e, cbuild.BuildError | cbuild.CompilerNotFoundError)]
    in_build = timeout and any(  # pytest-timeout stopped a build
        e.name == "build" for e in entries_in(excinfo, Path(cbuild.__file__).resolve())
    )
    if built or in_build:
        message = str(built[0]) if built else "the build timed out (jaxkoans.api.cbuild.build)"
        return Attribution(Cause.ENVIRONMENT, *where, message=message)
    if timeout:
        return Attribution(Cause.TIMEOUT, *where)
    # The innermost statement of the koan's file holding a `todo(` call or a `__`, else where the
    # koan called a TODO stub.
    todo = next((p for p in reversed(places) if "todo(" in p[2]), where)
    blank = next((p for p in reversed(places) if has_blank(p[2])), None)
    if any(isinstance(e, TodoError) for e in chain):
        return Attribution(Cause.TODO, *todo)
    if blank is not None or any(isinstance(e, BlankError) for e in chain):
        return Attribution(Cause.BLANK, *(blank or where))
    koan = getattr(entries[0], "name", None) if entries else None  # the outermost frame's
    region = _untouched_region(koan_file, shipped_regions, koan)
    if region is not None:
        return Attribution(Cause.REGION, koan_file, region, REGION_BEGIN)
    return Attribution(Cause.WRONG, *where)


def _line_of(path: Path, line: int) -> str:
    linecache.checkcache(str(path))  # the learner's file as it is now
    return linecache.getline(str(path), line).strip()


def _statement(entry) -> str:
    try:
        return str(entry.statement).strip()
    except Exception:  # source not available
        return ""


def _untouched_region(path: Path, shipped: tuple[str, ...], koan: str | None) -> int | None:
    """The BEGIN line of a fix region still as shipped that `koan` reaches (through the
    definitions inside it; a region holding none reaches every koan), else None: a koan that
    never runs the region fails for its own answer."""
    model = koan_model.read(path)
    begin = model.untouched_region(shipped) if shipped else None
    if begin is None or koan is None:
        return begin
    end = next(e for b, e in model.regions if b == begin)
    inside = [n for n, (s, e) in model.definitions.items() if begin <= s and e <= end]
    return begin if not inside or set(inside) & set(model.reached(koan)) else None


def entries_in(excinfo, koan_file: Path):
    """The traceback's entries in `koan_file` (a resolved path), outermost first."""
    for entry in excinfo.traceback:
        try:
            if Path(entry.path).resolve() == koan_file:
                yield entry
        except (TypeError, OSError):
            continue


# ---- The learner's fills: what the learner wrote, read against the file as shipped ----------


def relative(checkout: Course, koan_file: Path) -> str | None:
    """ "koans/NN/test_x.py" for a koan file or its answers/ twin of `checkout`; else None."""
    koan_file = Path(koan_file).resolve()
    for tree in (checkout.koans, checkout.answers):
        if koan_file.is_relative_to(tree):
            return (Path("koans") / koan_file.relative_to(tree)).as_posix()
    return None


def shipped_text(checkout: Course, koan_file: Path) -> str | None:
    """The koan file (or an answer's koan twin) as shipped; None when unknown (no fills then)."""
    found = checkout.shipped_text(relative(checkout, koan_file) or "")
    return found[1] if found else None


def taken(checkout: Course, koan_file: Path, twin: Path | None = None) -> _fills.Taken | None:
    """The one reading of what the learner wrote (course/fills.py): `koan_file` against the
    shipped text of `twin` (the koan file a gate's variant stands for), else of itself. None
    when the shipped file is unknown or the learner's does not parse."""
    shipped = shipped_text(checkout, Path(twin or koan_file))
    try:
        return _taken(shipped, Path(koan_file).read_text(encoding="utf-8")) if shipped else None
    except Exception:  # whatever the learner's text makes the reader raise: no fills known
        return None


@functools.lru_cache(maxsize=64)
def _taken(shipped: str, current: str) -> _fills.Taken:
    return _fills.take(shipped, current)


# ---- Where a failing statement's values come from: a prediction, the learner's code, both ----


@dataclass(frozen=True)
class Origins:
    # The prediction fills read, or of calls made for their effect before it; each once, in order.
    fills: tuple[_fills.BlankFill, ...] = ()
    code: tuple[str, ...] = ()  # the learner's code reached: TODO functions, helpers, fix regions


def origins(found: _fills.Taken | None, koan: str, lines: list[int]) -> Origins | None:
    """Where the failing statement of `koan` (the innermost of `lines`, the traceback's lines of
    the koan file, inside its function) got its values; None when that cannot be told."""
    body = found.tree.body if found is not None and found.tree is not None else []
    function = next((n for n in body if isinstance(n, koan_model.FUNCTIONS) and n.name == koan), None)  # fmt: skip
    inside = [n for n in lines if function and function.lineno <= n <= function.end_lineno]
    if not inside:
        return None
    end = lambda node: node.end_lineno or node.lineno  # noqa: E731
    holding = [
        n
        for n in ast.walk(function)
        if isinstance(n, ast.stmt) and n is not function and n.lineno <= inside[-1] <= end(n)
    ]
    statement = min(holding, key=lambda n: end(n) - n.lineno, default=None)  # the innermost
    return _DataWalk(found, function).origins(statement) if statement else None


def _roots(target: ast.AST) -> list[str]:
    """The names an assignment target binds or changes (`a`, `a, b`, `a[i]`, `a.x`, `*a`)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _roots(element)]
    if isinstance(target, (ast.Subscript, ast.Attribute, ast.Starred)):
        return _roots(target.value)
    return []


def _bindings(node: ast.AST) -> list[tuple[list[str], list[ast.AST]]]:
    """(names bound or changed, the expressions they are computed from) for one statement (or
    walrus) of a function."""
    if isinstance(node, ast.Assign):
        return [([n for t in node.targets for n in _roots(t)], [node.value])]
    if isinstance(node, ast.AugAssign):
        return [(_roots(node.target), [node.value, node.target])]
    if isinstance(node, ast.NamedExpr) or (isinstance(node, ast.AnnAssign) and node.value):
        return [(_roots(node.target), [node.value])]
    if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        return [(_roots(node.target), [node.iter])]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [(_roots(i.optional_vars), [i.context_expr]) for i in node.items if i.optional_vars]
    if isinstance(node, (*koan_model.FUNCTIONS, ast.ClassDef)):
        return [([node.name], [node])]
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func  # `found.append(value)`, `d.update(...)`: the object changes
        if isinstance(func, ast.Attribute):
            return [(_roots(func.value), [node.value])]
    return []


class _DataWalk:
    """A backwards walk over the learner's syntax tree, flow-insensitive within the koan's
    function (a loop may feed an earlier line), from one statement to the fills and the code
    its values were computed from."""

    def __init__(self, taken: _fills.Taken, function: ast.AST) -> None:
        tree, self.function = taken.tree, function
        self.fills = {_position(f.node): f for f in taken.blanks}
        self.code_lines = taken.code_lines()
        self.module: dict[str, list[ast.AST]] = {}  # module-level name -> what defines it
        self.module_level = set(tree.body)
        for node in tree.body:
            for names, _ in _bindings(node) if not isinstance(node, ast.Expr) else ():
                for name in names:
                    self.module.setdefault(name, []).append(node)
        self.local: dict[str, list[ast.AST]] = {}  # the koan's own assignments
        changes = []  # `found.append(x)`: counts only for a name the koan binds itself
        own = list(_own_nodes(function))
        for node, guards in own:
            for names, sources in _bindings(node):
                for name in names:
                    if isinstance(node, ast.Expr):
                        changes.append((name, [*sources, *guards]))
                    else:
                        self.local.setdefault(name, []).extend([*sources, *guards])
        for name, sources in changes:
            if name in self.local:
                self.local[name].extend(sources)
        # Calls made for their effect (a lowering registered, a config switched, a state updated
        # in place): whatever ran after them may depend on them; a check (assert_allclose) has none.
        self.effects = [
            node
            for node in [*tree.body, *(node for node, _ in own)]
            if isinstance(node, ast.Expr) and "assert" not in _called(node.value).lower()
        ]

    def _fills_in(self, node: ast.AST, into: dict) -> None:
        for part in ast.walk(node):
            fill = self.fills.get(_position(part))
            if fill is not None:
                into[fill.blank] = fill

    def origins(self, statement: ast.stmt) -> Origins:
        found: dict[tuple, _fills.BlankFill] = {}
        code: dict[str, None] = {}
        seen_local, seen_module = set(), set()
        work: list[tuple[ast.AST, bool]] = [(statement, True)]  # (node, in the koan's scope)
        while work:
            node, local = work.pop()
            if not local or node is statement:
                self._code_in(node, code)
            self._fills_in(node, found)
            for name in (part.id for part in ast.walk(node) if isinstance(part, ast.Name)):
                if local and name in self.local and name not in seen_local:
                    seen_local.add(name)
                    for source in self.local[name]:
                        self._code_in(source, code)
                        work.append((source, True))
                elif name in self.module and not (
                    name in seen_module or (local and name in self.local)
                ):
                    seen_module.add(name)  # a helper, fixture or constant of the file
                    work += [(definition, False) for definition in self.module[name]]
        for node in self.effects:
            if node.lineno < statement.lineno or node in self.module_level:
                self._fills_in(node, found)
        return Origins(tuple(found[key] for key in sorted(found)), tuple(code))

    def _code_in(self, node: ast.AST, code: dict[str, None]) -> None:
        """Note the learner's code (TODO body, fix region, added helper) among `node`'s lines."""
        if not hasattr(node, "lineno") or node is self.function:
            return
        lines = [n for n in range(node.lineno, (node.end_lineno or node.lineno) + 1) if n in self.code_lines]  # fmt: skip
        if lines:
            name = getattr(node, "name", None)
            code[name if isinstance(name, str) else f"{REGION_BEGIN} … (line {lines[0]})"] = None


def _own_nodes(function: ast.AST, guards: tuple = ()):
    """(node, guards) for each statement (and walrus, comprehension) of `function`, nested
    definitions included as statements but not walked into; `guards`: the expressions of the
    `with` items, `if` and `while` tests around it, which what it binds depends on too."""
    for node in ast.iter_child_nodes(function):
        yield node, guards
        if isinstance(node, (*koan_model.FUNCTIONS, ast.ClassDef)):
            continue
        inner = guards
        if isinstance(node, (ast.With, ast.AsyncWith)):  # a raises check computes nothing
            checks = [item.context_expr for item in node.items]
            inner = (*guards, *(c for c in checks if _called(c) not in ("raises", "raises_exactly")))  # fmt: skip
        elif isinstance(node, (ast.If, ast.While)):
            inner = (*guards, node.test)
        yield from _own_nodes(node, inner)


def _called(call: ast.AST) -> str:
    """The name `call` calls (`f(…)`, `a.b.f(…)`), "" when it is no call."""
    func = call.func if isinstance(call, ast.Call) else None
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _position(node: ast.AST) -> tuple | None:
    if not isinstance(node, ast.expr):
        return None
    return (type(node).__name__, node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)
