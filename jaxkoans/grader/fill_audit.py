"""What is unusual in a student's fill, read as a syntax tree: most flags are notes; those
`forbidden` names change the graded run from inside and score the koan zero.
"""

from __future__ import annotations

import ast
import builtins
import re

from jaxkoans.course import reading

# Modules a student's code could reach the machine, the files or the test machinery through.
RISKY_MODULES = frozenset({
    "os", "sys", "subprocess", "signal", "ctypes", "cffi", "faulthandler", "threading",
    "multiprocessing", "_thread", "concurrent", "asyncio", "atexit", "gc", "shutil",
    "tempfile", "pathlib", "io", "socket", "pdb", "builtins", "importlib", "inspect",
    "types", "pickle", "marshal", "glob", "mmap", "codecs", "runpy", "zipfile", "tarfile",
    "gzip", "bz2", "lzma", "sqlite3", "urllib", "pytest", "_pytest", "unittest", "mock",
    "jaxkoans", "conftest", "xdist", "pluggy",
})  # fmt: skip
# the builtins and frame attributes that read the test: the course's one table (course/reading.py)
BANNED_NAMES = RISKY_MODULES | set(reading.BUILTINS) | set(reading.DYNAMIC) | {
    "Path", "open", "input", "exit", "quit", "KeyboardInterrupt", "SystemExit",
    "BaseException", "GeneratorExit", "monkeypatch",
}  # fmt: skip
FRAMES = {name for name, kind in reading.ATTRIBUTES.items() if kind == "frames"}
BANNED_ATTRIBUTES = (RISKY_MODULES - {"types", "io", "signal", "inspect"}) | FRAMES | {
    # a module reached through another (np.lib.npyio.os), files written or read
    "ctypeslib", "_exit", "system", "popen", "modules", "fromfile", "tofile", "loadtxt",
    "savetxt", "genfromtxt", "fromregex", "memmap", "DataSource", "save", "savez",
    "savez_compressed", "load", "dump", "open", "write_text", "write_bytes", "exit",
}  # fmt: skip
# What a TODO body may import (more only where the course's answer does).
ALLOWED_IMPORTS = frozenset({
    "jax", "jaxlib", "numpy", "ml_dtypes", "scipy", "flax", "optax", "orbax", "chex",
    "einops", "math", "cmath", "functools", "itertools", "collections", "dataclasses",
    "typing", "operator", "string", "re", "random", "statistics", "fractions", "decimal",
    "numbers", "enum", "abc", "heapq", "bisect", "copy", "textwrap", "time", "warnings",
    "contextlib", "struct", "array",
})  # fmt: skip
DUNDER = re.compile(r"__\w+__")
# What an object that "equals" anything, or an array subclass that answers its own
# comparisons, defines.
COMPARISON_DUNDERS = frozenset({
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__", "__hash__",
    "__array_ufunc__", "__array_function__", "__array_wrap__", "__array_finalize__",
    "__array_priority__", "__jax_array__",
})  # fmt: skip
_SENTENCES = {
    "globals": "`globals()` 改写 koan 模块的名字 / reaches the koan module's own names",
    "locals": "`locals()` 读写调用者的名字 / reaches the caller's names",
    "builtins": "builtins 改变每段代码看到的内置函数 / changes the builtins every koan sees",
    "modules": "`sys.modules` 替换运行用到的模块 / swaps a module the run uses",
    "exit": "在判定之前结束进程或运行 / ends the process or the run before its verdict",
    "setattr": "setattr/delattr 替换模块或函数的属性 / replaces an attribute of a module or function",
    "gc": "gc 按引用找到任何对象（包括评分器的）/ reaches any object by reference, the grader's too",
    "inspect": "inspect 读取调用栈和评分器的代码 / reads the call stack and the grader's code",
    "ctypes": "ctypes 直接写内存 / writes memory directly",
    "dunder write": "改写双下划线属性（函数的代码、默认值）/ rewrites a dunder attribute (a function's code, its defaults)",
    "module write": "给导入的模块赋值（换掉库函数）/ assigns into an imported module (a library function replaced)",
    "equals anything": "定义比较的对象（什么都“相等”）/ an object that answers its own comparisons (equal to anything)",
    "harness": "导入测试机制或评分器，或动态导入 / imports the test machinery or the grader, or imports by a string",
    "shadowing": "在模块层重新绑定内置名字或导入的模块 / rebinds a builtin or an imported module at module level",
}


# The test machinery and the grader's own modules: no koan imports them in a fill.
HARNESS_MODULES = frozenset(
    {"jaxkoans", "_jaxkoans_grade_guard", "conftest", "pytest", "_pytest", "xdist", "pluggy",
     "execnet", "importlib"}
)  # fmt: skip


# A flag's start -> its sentence (the first that matches)
_PREFIXES = {
    ("assignment to a dunder", "setattr of a dunder"): "dunder write",
    ("assignment to ",): "module write",
    ("setattr on ", "delattr on ", "vars on "): "setattr",
    ("type() with", "a comparison dunder"): "equals anything",
    ("rebinds ",): "shadowing",
}
# A name, import or attribute -> its sentence
_NAMES = {name: name for name in ("globals", "locals", "gc", "inspect", "ctypes", "modules")}
_NAMES |= {"builtins": "builtins", "__builtins__": "builtins"}
_NAMES |= dict.fromkeys(("_exit", "exit", "quit", "abort", "kill", "killpg"), "exit")


def forbidden(flag: str) -> str | None:
    """The plain sentence for a construct that scores its koan zero, else None (a note)."""
    for prefixes, sentence in _PREFIXES.items():
        if flag.startswith(prefixes):
            return _SENTENCES[sentence]
    kind, _, what = flag.partition(" ")
    name = what.lstrip(".")
    harness = kind == "import" and name.split(".")[0] in HARNESS_MODULES
    if harness or (kind == "name" and name in ("__import__", "importlib")):
        return _SENTENCES["harness"]
    known = kind in ("name", "import", "attribute") and name in _NAMES
    return _SENTENCES[_NAMES[name]] if known else None


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, *COMPREHENSIONS)
ASSERT_LIKE = {"allclose", "array_equal", "array_equiv", "isclose", "equal"}


def parents_of(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _bound(scope: ast.AST) -> set[str]:
    """Names a function, lambda or comprehension binds for itself."""
    if isinstance(scope, COMPREHENSIONS):
        targets = [generator.target for generator in scope.generators]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    args = scope.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    names = {arg.arg for arg in every if arg is not None}
    body = scope.body if isinstance(scope.body, list) else [scope.body]
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue  # its body is its own scope
        elif isinstance(node, (ast.Lambda, *COMPREHENSIONS)):
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return names


def _enclosing(node: ast.AST, parents: dict[int, ast.AST]):
    """The scopes around `node`, innermost first."""
    while id(node) in parents:
        node = parents[id(node)]
        if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
            yield node


def is_local(name: ast.Name, parents: dict[int, ast.AST], bound: dict[int, set[str]]) -> bool:
    """True when an enclosing function, lambda or comprehension binds the name (`bound`: a
    cache of each scope's names)."""
    for scope in (s for s in _enclosing(name, parents) if not isinstance(s, ast.ClassDef)):
        if id(scope) not in bound:
            bound[id(scope)] = _bound(scope)
        if name.id in bound[id(scope)]:
            return True
    return False


def audit(
    node: ast.AST, parents: dict[int, ast.AST], in_fill: bool, modules: set[str]
) -> list[str]:
    """What under `node` the course does not allow, one short label each."""
    flags = []
    bound: dict[int, set[str]] = {}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            banned = sub.id in BANNED_NAMES or DUNDER.fullmatch(sub.id)
            if banned and not is_local(sub, parents, bound):
                flags.append(f"name {sub.id}")
        elif isinstance(sub, ast.Attribute) and (
            sub.attr in BANNED_ATTRIBUTES or DUNDER.fullmatch(sub.attr)
        ):
            flags.append(f"attribute .{sub.attr}")
        elif isinstance(sub, ast.Import):
            roots = [a.name.split(".")[0] for a in sub.names]
            flags += [f"import {r}" for r in roots if r not in ALLOWED_IMPORTS]
        elif isinstance(sub, ast.ImportFrom):
            root = (sub.module or "").split(".")[0] if not sub.level else "."
            flags += [f"import {root}"] if root not in ALLOWED_IMPORTS else []
            names = [a.name for a in sub.names]
            flags += [f"import {n}" for n in names if n in BANNED_ATTRIBUTES or n == "*"]
        elif isinstance(sub, (ast.Global, ast.Nonlocal)):
            flags.append(f"{type(sub).__name__.lower()} statement")
        elif isinstance(sub, ast.NamedExpr) and in_fill:
            flags.append("assignment (:=) in a blank")
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            if DUNDER.search(sub.value):
                flags.append("a dunder name in a string")
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
            if sub.func.id == "type" and len(sub.args) == 3:
                flags.append("type() with 3 arguments")
            if sub.func.id in ("setattr", "delattr") and sub.args:
                flags += _setattr_flags(sub, modules)
            if sub.func.id == "vars" and sub.args and _root_name(sub.args[0]) in modules:
                flags.append(f"vars on {_root_name(sub.args[0])}.…")
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if sub.name in COMPARISON_DUNDERS:
                flags.append("a comparison dunder")
            elif DUNDER.fullmatch(sub.name):
                flags.append(f"def {sub.name}")
        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = sub.targets if isinstance(sub, (ast.Assign, ast.Delete)) else [sub.target]
            for target in targets:
                root = _root_name(target)
                if isinstance(target, ast.Attribute) and DUNDER.fullmatch(target.attr):
                    flags.append(f"assignment to a dunder (.{target.attr})")
                elif isinstance(target, ast.Name) and target.id in COMPARISON_DUNDERS:
                    flags.append("a comparison dunder")
                elif root in modules and not isinstance(target, ast.Name):
                    flags.append(f"assignment to {root}.…")
        flags += _shadowing(sub, parents, modules)
    return list(dict.fromkeys(flags))


def _setattr_flags(call: ast.Call, modules: set[str]) -> list[str]:
    """setattr/delattr on an imported module (or what it holds), or of a dunder attribute."""
    found = []
    name = call.args[1] if len(call.args) > 1 else None
    text = name.value if isinstance(name, ast.Constant) else None
    if isinstance(text, str) and DUNDER.fullmatch(text):
        found.append(f"setattr of a dunder ({text})")
    if _root_name(call.args[0]) in modules:
        found.append(f"{call.func.id} on {_root_name(call.args[0])}.…")
    return found


BUILTIN_NAMES = frozenset(n for n in dir(builtins) if not n.startswith("_"))


def _shadowing(node: ast.AST, parents: dict[int, ast.AST], modules: set[str]) -> list[str]:
    """A module-level binding of a builtin's name (`all = …`) or an imported module (`np = …`)."""
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        stored = (n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        names = [n.id for n in stored if isinstance(n.ctx, ast.Store)]  # not `a.x`, `a[i]`
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names = [node.name]
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [(a.asname or a.name).split(".")[0] for a in node.names]
        names = [n for n in names if n in BUILTIN_NAMES]  # re-importing a module is fine
    else:
        return []
    hit = [n for n in names if n in BUILTIN_NAMES or n in modules]
    at_module_level = next(_enclosing(node, parents), None) is None
    return [f"rebinds {n}" for n in hit] if hit and at_module_level else []


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def tautology(fill: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """True when one side of the fill's assert comparison (or `assert_*` call) holds the other."""
    node = fill
    while id(node) in parents:
        parent = parents[id(node)]
        operands: list[ast.AST] = []
        if (
            isinstance(parent, ast.Compare)
            and len(parent.comparators) == 1
            and isinstance(_statement(parent, parents), ast.Assert)
        ):
            operands = [parent.left, parent.comparators[0]]
        elif isinstance(parent, ast.Call) and _assert_like(parent.func) and len(parent.args) >= 2:
            operands = list(parent.args[:2])
        if any(op is node for op in operands):
            other = operands[1] if operands[0] is node else operands[0]
            return _contains(node, other) or _contains(other, node)
        if isinstance(parent, ast.stmt):
            return False
        node = parent
    return False


def _statement(node: ast.AST, parents: dict[int, ast.AST]) -> ast.AST | None:
    while id(node) in parents and not isinstance(node, ast.stmt):
        node = parents[id(node)]
    return node if isinstance(node, ast.stmt) else None


def _assert_like(func: ast.AST) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name.startswith("assert") or name in ASSERT_LIKE


def _contains(outer: ast.AST, inner: ast.AST) -> bool:
    if not any(isinstance(n, ast.Name) for n in ast.walk(inner)):
        return False  # a constant is not a repetition
    sizes = _sizes(outer)
    size = _sizes(inner)[id(inner)]
    if sizes[id(outer)] < size:
        return False
    wanted = ast.dump(inner)
    return any(
        sizes[id(n)] == size and type(n) is type(inner) and ast.dump(n) == wanted
        for n in ast.walk(outer)
    )


def _sizes(root: ast.AST) -> dict[int, int]:
    """Node -> how many nodes its subtree holds (without recursion: fills may be deep)."""
    sizes: dict[int, int] = {}
    for node in reversed(list(ast.walk(root))):  # children before their parents
        sizes[id(node)] = 1 + sum(sizes[id(c)] for c in ast.iter_child_nodes(node))
    return sizes
