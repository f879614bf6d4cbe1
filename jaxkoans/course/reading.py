"""A fill solves the problem, not the test: which fills read the test or switch its guard off.

Code a learner writes (course/fills.py) can pass a koan without the lesson by reading what the
test holds (closure cells, `__wrapped__`, `__globals__`, the caller's frame, `inspect`, `exec`,
the koan's own file) or by switching off the guard the lesson is about (`jax.transfer_guard`,
`jax.config.update`, `warnings.simplefilter`). Either is refused before the koan runs, with one
message in pytest, watch and progress, and is a finding in grade; a TODO whose own answer needs
one names it in its contract's `allow`. Read by syntax tree, through the file's import aliases.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from jaxkoans.course import koan_model, predictions
from jaxkoans.course.koan_model import MODULE, imports_in

MESSAGE = (
    "这段代码读取的是测试本身（闭包、帧、全局变量、本文件的源码）、关掉了本课要教的检查，\n"
    "或者在等时钟而不是等计算完成，而不是解决问题：请用本课的技术来计算结果。\n"
    "This code reads the test itself (closures, frames, globals, the koan's own file), switches\n"
    "off the check the lesson is about or waits on the clock instead of on the work, instead of\n"
    "solving the problem: compute the result with the lesson's technique."
)

# Attributes through which a value of the test is read instead of computed: category. The one
# table of these routes: grade's fill audit notes the frames among them, and the run-time
# boundary refuses those an audit event reports (plugin/boundary.py).
ATTRIBUTES = {
    "__closure__": "closure", "cell_contents": "closure", "__wrapped__": "wrapped",
    "__globals__": "globals", "__builtins__": "globals", "__code__": "code",
    "__defaults__": "code", "__kwdefaults__": "code", "co_consts": "code", "co_code": "code",
    "f_back": "frames", "f_globals": "frames", "f_locals": "frames", "f_code": "frames",
    "f_builtins": "frames", "tb_frame": "frames", "gi_frame": "frames", "cr_frame": "frames",
    "_getframe": "frames",
    "__self__": "closure", "__func__": "closure", "__dict__": "globals",
    "__traceback__": "frames", "tb_next": "frames", "gi_code": "code",
    # issue 55: the same kinds by every other route (plugin/boundary.py refuses them at run time)
    "_current_frames": "frames", "_current_exceptions": "frames", "ag_frame": "frames",
    "cr_code": "code", "ag_code": "code", "CodeType": "code", "FunctionType": "code",
    "FrameType": "frames", "__getattribute__": "code", "__setattr__": "code",
    "__delattr__": "code", "get_referrers": "inspect", "get_referents": "inspect",
}  # fmt: skip
# Builtins that read an attribute by a name computed at run time ("__clo" + "sure__"): what
# they read cannot be told from the text, so a computed name is refused like the attribute.
DYNAMIC = ("getattr", "setattr", "delattr", "hasattr", "attrgetter", "methodcaller")
# Modules whose use in a fill reads the program instead of the problem.
MODULES = {
    "inspect": "inspect", "traceback": "frames", "gc": "inspect", "ctypes": "inspect",
    "importlib": "globals", "dis": "code", "linecache": "file", "tokenize": "file",
    "builtins": "globals", "marshal": "code", "jaxkoans.plugin": "harness",
    "jaxkoans.grader": "harness", "_pytest": "harness", "pluggy": "harness",
    # another process or interpreter reads what this one may not (`cat` of the answer file)
    "subprocess": "exec", "runpy": "exec", "multiprocessing": "exec", "pty": "exec",
    **{f"os.{call}{tail}": "exec" for call in ("exec", "spawn")
       for tail in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")},
    **{f"os.{call}": "exec" for call in ("system", "popen", "fork", "forkpty", "posix_spawn",
                                        "posix_spawnp")},
}  # fmt: skip
# Calls of builtins that read the test: category.
BUILTINS = {
    "exec": "exec", "eval": "exec", "compile": "exec", "__import__": "globals",
    "globals": "globals", "locals": "frames", "vars": "globals",
    "breakpoint": "frames",
}  # fmt: skip
# Dotted calls (after aliases are resolved) that switch a guard or a flag off: category = name.
GUARDS = (
    "jax.transfer_guard", "jax.transfer_guard_host_to_device", "jax.transfer_guard_device_to_host",
    "jax.transfer_guard_device_to_device", "jax.config.update", "jax.debug_nans",
    "jax.debug_infs", "jax.disable_jit", "jax.checking_leaks", "jax.numpy_rank_promotion",
    "jax.numpy_dtype_promotion", "jax.log_compiles", "jax.explain_cache_misses",
    "warnings.simplefilter", "warnings.filterwarnings", "warnings.catch_warnings",
    "numpy.seterr", "numpy.errstate", "os.environ", "os.putenv", "sys.modules",
    "sys.settrace", "sys.setprofile", "pytest.skip", "pytest.xfail", "pytest.importorskip",
    "unittest.mock", "jax.config",
    # the harness's own instruments: contracts see calls through sys.monitoring, and the
    # watchdog's limits through signals and threads
    "sys.monitoring", "threading.settrace", "threading.setprofile", "signal.signal",
    "signal.alarm", "signal.setitimer", "signal.pthread_sigmask",
    # a wait on the clock where the lesson waits on the work (block_until_ready, an async
    # save's wait_until_finished): long enough here, too short on a slower machine
    "time.sleep", "asyncio.sleep",
)  # fmt: skip
NAMES = {"__file__": "file", "__spec__": "file", "__loader__": "file"}
# The last part of a dotted name that switches a guard wherever it is imported from
# (`jax._src.config.transfer_guard`, `from jax._src.api import disable_jit`).
GUARD_NAMES = {g.rsplit(".", 1)[-1] for g in GUARDS if g.startswith("jax.")} - {"config"}


def _plain_tail(named: ast.expr) -> bool:
    """An f-string name whose written end (`f"{part}_size_in_bytes"`) ends no name the tables
    above refuse, nor a dunder: whatever comes before it, the attribute read is an ordinary
    one (a `stats` field), not a frame, a closure or a module's globals."""
    tail = named.values[-1] if isinstance(named, ast.JoinedStr) and named.values else None
    if not (isinstance(tail, ast.Constant) and isinstance(tail.value, str)):
        return False
    end = tail.value
    tables = [*ATTRIBUTES, *MODULES, *BUILTINS, *GUARDS, *NAMES]
    protected = {n.rsplit(".", 1)[-1] for n in tables} | {"modules", "settrace", "setprofile"}
    return len(end) >= 3 and end[-1] != "_" and not any(p.endswith(end) for p in protected)


class ReadsTheTest(AssertionError):
    """Raised in place of running a koan whose fill reads the test or switches its guard off."""

    def __init__(self, refused: list[Refusal]) -> None:
        self.refused = refused
        super().__init__(MESSAGE)


@dataclass(frozen=True)
class Refusal:
    """One place in a fill that reads the test."""

    line: int  # in the learner's file, 1-based
    owner: str  # the koan or TODO function whose fill holds it
    what: str  # the construct, as written: "fn.__closure__", "sys._getframe"
    category: str  # closure, wrapped, globals, code, frames, inspect, exec, file, or a guard name

    def describe(self) -> str:
        return f"line {self.line}: {self.what} ({self.category})"


_CANONICAL = {"np": "numpy", "jnp": "jax.numpy"}


def _dotted(node: ast.AST, names: dict[str, str]) -> str | None:
    """`predictions.dotted`, its first name resolved through `names` (the file's imports)."""
    head, dot, rest = (predictions.dotted(node) or "").partition(".")
    return names.get(head, _CANONICAL.get(head, head)) + dot + rest if head else None


def _guard(dotted: str) -> str | None:
    for guard in GUARDS:
        if dotted == guard or dotted.startswith(guard + "."):
            return guard
    parts = dotted.split(".")
    if parts[0] == "jax" and (set(parts[1:]) & GUARD_NAMES or parts[-1] == "update"):
        hit = next((p for p in parts[1:] if p in GUARD_NAMES), "config.update")
        return f"jax.{hit}"
    return None


def _module_category(module: str) -> str | None:
    """The category of a module (or a package of it: `jaxkoans.plugin.boundary`)."""
    parts = module.split(".")
    prefixes = (".".join(parts[:n]) for n in range(len(parts), 0, -1))
    return next((MODULES[p] for p in prefixes if p in MODULES), None)


def in_node(node: ast.AST, names: dict[str, str]) -> list[tuple[int, str, str]]:
    """(line, what, category) of each construct in `node` that reads the test or switches a
    guard; `names` are the file's imports (imports_in)."""
    found: list[tuple[int, str, str]] = []
    local = {**names, **imports_in(node)}
    for sub in ast.walk(node):
        line = getattr(sub, "lineno", getattr(node, "lineno", 0))
        if isinstance(sub, ast.Attribute) and sub.attr in ATTRIBUTES:
            found.append((line, ast.unparse(sub), ATTRIBUTES[sub.attr]))
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            hit = next((a for a in ATTRIBUTES if a in sub.value), None)
            if hit and sub.value.strip() == sub.value and " " not in sub.value:
                found.append((line, repr(sub.value), ATTRIBUTES[hit]))
            elif re.search(r"test_[\w*?\[\]]*\.py|(^|/)(koans|answers)(/|$)", sub.value):
                found.append((line, repr(sub.value), "file"))  # a koan file, read as text
        elif isinstance(sub, ast.Name):
            target = local.get(sub.id, sub.id)
            module = target.split(".")[0]
            if sub.id in NAMES:
                found.append((line, sub.id, NAMES[sub.id]))
            elif module in MODULES and (sub.id in local or sub.id == module):
                found.append((line, sub.id, MODULES[module]))
            elif target.split(".")[-1] in ATTRIBUTES and sub.id in local:
                found.append((line, sub.id, ATTRIBUTES[target.split(".")[-1]]))
            elif sub.id in BUILTINS and sub.id not in local:
                found.append((line, sub.id, BUILTINS[sub.id]))
            elif (guard := _guard(target)) and sub.id in local:
                found.append((line, sub.id, guard))
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            module = (sub.module or "") if isinstance(sub, ast.ImportFrom) else sub.names[0].name
            full = [f"{module}.{a.name}" if isinstance(sub, ast.ImportFrom) else a.name for a in sub.names]  # fmt: skip
            category = next(filter(None, map(_module_category, [module, *full])), None)
            if category:
                found.append((line, f"import {module}", category))
        if isinstance(sub, ast.Call):
            callee = _dotted(sub.func, local) or ""
            named = sub.args[1] if len(sub.args) > 1 else None
            if callee.rsplit(".", 1)[-1] in ("attrgetter", "methodcaller"):
                named = sub.args[0] if sub.args else None
            computed = named is not None and not (isinstance(named, ast.Constant) and isinstance(named.value, str))
            if callee.rsplit(".", 1)[-1] in DYNAMIC and computed and not _plain_tail(named):
                found.append((line, ast.unparse(sub)[:60], "inspect"))
        if isinstance(sub, (ast.Attribute, ast.Call)):
            dotted = _dotted(sub.func if isinstance(sub, ast.Call) else sub, local)
            guard = _guard(dotted) if dotted else None
            if guard:
                found.append((line, dotted, guard))
            elif dotted and (category := _module_category(dotted)):
                found.append((line, dotted, category))  # `os.system`: a module's one call
    unique = {}
    for line, what, category in found:
        unique.setdefault((line, category), (line, what, category))
    # one guard named once per line: `jax.config.update` says all that `jax.config` says
    return sorted((line, what, category) for line, what, category in unique.values()
                  if not any(other != category and other.startswith(category + ".")
                             for (other_line, other) in unique if other_line == line))  # fmt: skip


def refusals(taken, allowed: dict[str, set[str]] | None = None) -> list[Refusal]:
    """Each construct of the learner's fills (course/fills.Taken) that reads the test, less what
    the contract of its TODO allows (`allowed`: owner -> categories or guard names)."""
    if taken.tree is None:
        return []
    names = imports_in(taken.tree)
    allowed = allowed or {}
    found = []
    for owner, node, _is_blank in taken.nodes:
        line0 = getattr(node, "lineno", 0)
        defs = (n for n in taken.tree.body if isinstance(n, (*koan_model.FUNCTIONS, ast.ClassDef)))
        held = (n.name for n in defs if n.lineno <= line0 <= n.end_lineno)  # a module-level fill
        where = owner if owner != MODULE else next(held, MODULE)
        permitted = allowed.get(where, set()) | allowed.get("*", set())
        if owner != MODULE and not _is_blank:  # a fix region inside a koan
            permitted |= allowed.get("regions", set())
        for line, what, category in in_node(node, names):
            if category not in permitted:
                found.append(Refusal(line, where, what, category))
    unique = {(r.line, r.category): r for r in found}
    return sorted(unique.values(), key=lambda r: r.line)


def allowed_by(contracts: dict[str, dict], filename: str) -> dict[str, set[str]]:
    """{TODO function or "regions" → the categories its contract allows} for one file."""
    return {key.partition("::")[2]: set(contract.get("allow", ()))
            for key, contract in contracts.items() if key.partition("::")[0] == filename}  # fmt: skip
