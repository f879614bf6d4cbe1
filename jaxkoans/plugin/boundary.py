"""The boundary a koan's checks run behind. By value: the watched packages' namespaces, classes
and functions (code, defaults, closures), fingerprinted before any koan file is imported, are
compared at each check the koan calls once a learner's code ran, and after each phase; a
difference fails the koan, named, and is put back. By kind: an audit hook refuses the routes to
frames and code objects taken from a learner's line, less what the TODO's contract allows. grade
reads both as evidence: the koan is tampered.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import itertools
import operator
import os
import site
import sys
import sysconfig
import types
from collections.abc import Callable
from pathlib import Path

from jaxkoans.course import reading, twin_name

PACKAGES = ("numpy", "jax", "jaxlib", "ml_dtypes", "pytest", "_pytest", "pluggy", "xdist", "execnet", "jaxkoans")  # fmt: skip
TOOL, TOOL_NAME = 3, "jaxkoans boundary"  # sys.monitoring: 4 is contracts.py's, 5 result_types'
MODULES = ("builtins", "math", "operator", "functools", "sys", "inspect", "traceback", "types")
IGNORED = frozenset({"__warningregistry__", "__loader__", "__spec__"})
MESSAGE = (
    "这个 koan 运行时改变了检查所用的代码（函数的代码、默认值、闭包或模块里的名字），或者读取了程序本身"
    "（帧、代码对象、koan 或答案文件，另起的进程也算；或变换的 tracer 内部，例如 vmap 的整批数据）。"
    "检查要比较的是你算出的值，而不是被改过的检查：请用本课的技术计算结果。\n"
    "While this koan ran, code changed what its checks call (a function's code, defaults, closure "
    "or a module's names) or read the program itself (frames, code objects, a koan or answer "
    "file, by another process too; or a transformation's tracer inside, such as vmap's whole "
    "batch). The checks compare the values you compute, not a changed check: compute the result "
    "with the lesson's technique."
)
FUNCTION_STATE = ("__code__", "__defaults__", "__kwdefaults__")
_is, _MISSING, _contents = operator.is_, object(), operator.attrgetter("cell_contents")


def _held(cell) -> object:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _MISSING


def _label(holder, key) -> str:
    if isinstance(holder, dict):  # a module's namespace, a function's __dict__ or kwdefaults
        return f"{holder.get('__name__', 'a namespace')}.{key}"
    return f"{getattr(holder, '__module__', '?')}.{holder.__qualname__}.{key}"


class _Namespaces:
    """(namespace, key, value) entries, compared a namespace at a time at C speed; a class's
    namespace (`vars(cls)`) keeps its class, through which it is set back."""

    def __init__(self) -> None:
        self.groups: dict[int, list] = {}  # id(namespace) -> [namespace, keys, values, getter, cls]

    def add(self, holder, key, value, cls: type | None = None) -> None:
        group = self.groups.setdefault(id(holder), [holder, [], [], None, cls])
        group[1].append(key)
        group[2].append(value)
        group[3] = None

    def intact(self) -> bool:
        try:
            for group in self.groups.values():
                if group[3] is None:  # one more key: always a tuple
                    group[3] = operator.itemgetter(*group[1], group[1][0])
                if not all(map(_is, group[3](group[0]), group[2])):
                    return False
        except KeyError:  # a name deleted
            return False
        return True

    def restore(self, excused) -> list[str]:
        found = []
        for holder, keys, values, _, cls in self.groups.values():
            owner = holder if cls is None else cls
            for key, value in zip(keys, values, strict=True):
                if holder.get(key, _MISSING) is value or (id(owner), key) in excused:
                    continue
                found.append(_label(owner, key))
                if cls is None:
                    holder[key] = value
                else:
                    type.__setattr__(cls, key, value)
        return found

    def expect(self, holder, key, value) -> object:
        """`holder[key]` (a namespace, or a class's) is to be `value` from now on (the harness's
        own patch while a koan runs); the value expected before."""
        if isinstance(holder, type):
            holder = next((g[0] for g in self.groups.values() if g[4] is holder), None)
        _, keys, values, *_ = self.groups.get(id(holder), (None, [], []))
        if key in keys:
            index = keys.index(key)
            values[index], value = value, values[index]
        return value


class Fingerprint:
    """The state of every watched module, class and function, by value."""

    def __init__(self) -> None:
        self.names = _Namespaces()  # modules', classes', functions' __dict__ and __kwdefaults__
        self.cells: list[types.CellType] = []
        self.contents: list = []  # each cell's, as fingerprinted
        self.functions: list[tuple] = []  # (function, its __code__, __defaults__, __kwdefaults__)
        self.modules: dict[str, types.ModuleType] = {}
        self.seen: set[int] = set()
        for name, module in list(sys.modules.items()):
            if name in MODULES or name.partition(".")[0] in PACKAGES:
                self.add_module(name, module)
        self.trace = (sys.gettrace(), sys.getprofile())

    def _first(self, thing) -> bool:
        if id(thing) in self.seen:
            return False
        self.seen.add(id(thing))
        return True

    def add_module(self, name: str, module) -> None:
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict) or not self._first(namespace):
            return
        self.modules[name] = module
        for key, value in list(namespace.items()):
            if key in IGNORED or not (callable(value) or isinstance(value, types.ModuleType)):
                continue  # data: libraries keep caches in module globals
            if name == "sys" and key.endswith("hook"):
                continue  # pytest installs its own excepthook, unraisablehook
            self.names.add(namespace, key, value)
            if isinstance(value, types.FunctionType):
                self.add_function(value)
            elif isinstance(value, type) and self._first(value):
                self.add_class(value)

    def add_class(self, cls: type) -> None:
        if getattr(cls, "__module__", "").partition(".")[0] not in PACKAGES + MODULES:
            return
        proxy = vars(cls)
        for key, member in list(proxy.items()):
            if key in ("__dict__", "__weakref__", "__doc__"):
                continue
            if not (callable(member) or isinstance(member, (classmethod, property))):
                continue
            self.names.add(proxy, key, member, cls)
            if isinstance(member, (classmethod, staticmethod)):
                member = member.__func__
            inner = (member.fget, member.fset, member.fdel) if isinstance(member, property) else (member,)  # fmt: skip
            for function in inner:
                if isinstance(function, types.FunctionType):
                    self.add_function(function)

    def add_function(self, function: types.FunctionType) -> None:
        if not self._first(function):
            return
        kwdefaults = function.__kwdefaults__
        self.functions.append((function, function.__code__, function.__defaults__, kwdefaults))
        for key, value in (kwdefaults or {}).items():
            self.names.add(kwdefaults, key, value)
        for key, value in function.__dict__.items():
            if callable(value):  # `__wrapped__`, a rule; data there is a cache
                self.names.add(function.__dict__, key, value)
        for cell in function.__closure__ or ():
            if (contents := _held(cell)) is _MISSING:
                continue
            self.cells.append(cell)
            self.contents.append(contents)
            if isinstance(contents, types.FunctionType):
                self.add_function(contents)  # what a decorator wraps

    def intact(self) -> bool:
        """All but the functions' `__code__` and defaults, which change only through setters that
        raise an audit event: `restore(touched=True)` compares them where the hook saw one."""
        try:
            cells = all(map(_is, map(_contents, self.cells), self.contents))
        except ValueError:  # a cell emptied
            cells = False
        return (
            cells
            and self.names.intact()
            and all(sys.modules.get(n) is m for n, m in self.modules.items() if n in MODULES)
            and (sys.gettrace(), sys.getprofile()) == self.trace
        )

    def restore(self, touched: bool = True, excused: set = frozenset()) -> list[str]:
        """What differs from the fingerprint, named; each is put back. `touched`: a function's
        code or defaults was set (the audit hook saw it), so theirs are compared too."""
        if not touched and self.intact():
            return []
        found = []
        for function, *values in self.functions:
            for key, value in zip(FUNCTION_STATE, values, strict=True):
                if getattr(function, key) is not value:
                    found.append(_label(function, key))
                    setattr(function, key, value)
        found += self.names.restore(excused)
        for cell, value in zip(self.cells, self.contents, strict=True):
            if _held(cell) is not value:
                found.append(f"a closure cell holding {type(value).__qualname__}")
                cell.cell_contents = value
        for name, module in self.modules.items():
            if name in MODULES and sys.modules.get(name) is not module:
                found.append(f"sys.modules[{name!r}]")
                sys.modules[name] = module
        if (sys.gettrace(), sys.getprofile()) != self.trace:
            found.append("sys.settrace/setprofile")
            sys.settrace(self.trace[0])
            sys.setprofile(self.trace[1])
        return found


def monkeypatched(item) -> set[tuple[int, str]]:
    """(id of a namespace or class, name) for each name the koan's own `monkeypatch` fixture set
    and has not yet undone: the koan's, not the learner's."""
    fixture = getattr(item, "funcargs", {}).get("monkeypatch")
    found = {(id(target), name) for target, name, _ in getattr(fixture, "_setitem", ())}
    for target, name, _ in getattr(fixture, "_setattr", ()):
        found.add((id(target if isinstance(target, type) else vars(target)), name))
    return found


# ---- Refusals by kind: an audit hook --------------------------------------------------------

EVENTS = {
    "sys._getframe": "frames", "sys._current_frames": "frames",
    "sys._current_exceptions": "frames", "sys._getframemodulename": "frames",
    "code.__new__": "code", "marshal.loads": "code", "marshal.load": "code",
    "gc.get_referrers": "inspect", "gc.get_referents": "inspect", "gc.get_objects": "inspect",
    "sys.setprofile": "sys.settrace", "sys.settrace": "sys.settrace",
    # another process reads what this one may not (course/reading.py's "exec" modules)
    "subprocess.Popen": "exec", "os.system": "exec", "os.exec": "exec", "os.spawn": "exec",
    "os.posix_spawn": "exec", "os.fork": "exec", "os.forkpty": "exec",
}  # fmt: skip
# object.__getattr__/__setattr__/__delattr__, by the attribute's name (the course's one table)
ATTRIBUTES = {name: reading.ATTRIBUTES[name] for name in (*FUNCTION_STATE, "gi_frame", "cr_frame",
              "ag_frame", "tb_frame", "f_code", "gi_code", "cr_code", "ag_code")}  # fmt: skip
# A transformation's tracer holds more than the value its function is handed (a BatchTracer the
# whole batch): read from the learner's code, the problem is solved from the test's data.
# Its slots, and the methods that hand them out (`_contents`, `get_referent`: red team 12b),
# read from the learner's line; JAX's own reads and calls pass.
_SLOTS: dict = {}  # (tracer class, name) -> its member descriptor or method, as JAX made it
TRACER_SLOTS = {
    ("batching", "BatchTracer"): ("val", "batch_dim", "_contents", "full_lower", "get_referent"),
    ("ad", "JVPTracer"): ("primal", "tangent", "full_lower", "get_referent", "to_concrete_value"),
    ("core", "Tracer"): ("_contents",),
}
# ctypes reaching memory or a library of its own; not a symbol of the course's FFI library (05)
CTYPES = ("ctypes.dlopen", "ctypes.cdata", "ctypes.string_at", "ctypes.wstring_at", "ctypes.addressof", "ctypes.call_function")  # fmt: skip


def _category(event: str, args: tuple, course_files: frozenset = frozenset()) -> str | None:
    if event == "open":  # a koan file's text: its expected values read, not computed
        if isinstance(args[0], int):
            return None  # a descriptor already open
        name = os.path.basename(os.fsdecode(args[0]))
        if name.startswith("test_") and name.endswith(".py"):
            return "file"
        try:  # a link to a koan or answer file under another name (imported, say)
            found = os.stat(args[0])
        except (OSError, TypeError, ValueError):
            return None
        return "file" if (found.st_dev, found.st_ino) in course_files else None
    if event.startswith("object.__"):
        return ATTRIBUTES.get(args[1]) if isinstance(args[1], str) else None
    return EVENTS.get(event) or ("inspect" if event.startswith(CTYPES) else None)


def standard_library(filename: str, stdlib: str, packages: tuple[str, ...]) -> bool:
    """Code of the standard library (or generated, `<string>`): under `stdlib` and in none of the
    installed packages' directories, which conda and a bare Python put under it."""
    return filename.startswith((stdlib, "<")) and not filename.startswith(packages)


def course_files(checkout) -> frozenset:
    """(device, inode) of every koan and answer file: a link to one is the file itself."""
    found = set()
    for path in (*checkout.koans.glob("*/test_*.py"), *checkout.answers.glob("*/test_*.py")):
        with contextlib.suppress(OSError):
            stat = path.stat()
            found.add((stat.st_dev, stat.st_ino))
    return frozenset(found)


def install(
    learner_at: Callable[[object, int], str | None],
    touched: list | None = None,
    course: frozenset = frozenset(),
) -> tuple[Callable, Callable]:
    """Add the audit hook; (arm, drain): `arm(nodeid or None)` starts or stops a koan's watch,
    `drain()` returns and forgets what it refused. `learner_at(code, offset)`: the categories
    allowed where that instruction is the learner's, else None. `touched` gets each object whose
    `__code__` or defaults are set, from anywhere (CPython's setters raise the event). `course`:
    the koan and answer files by inode (`course_files`)."""
    state: dict = {"koan": None, "busy": False, "found": []}
    getframe, stdlib = sys._getframe, os.path.dirname(os.__file__) + os.sep
    packages = tuple({os.path.join(p, "") for p in (*site.getsitepackages(), site.getusersitepackages(),
                      *(sysconfig.get_paths()[k] for k in ("purelib", "platlib")))})  # fmt: skip

    def note(what: str, category: str, frame) -> None:
        """Refuse `what` where the frame that asked (past the standard library) is the
        learner's and its contract does not allow `category`."""
        while frame is not None:  # through the standard library to who asked
            name = frame.f_code.co_filename
            if name == __file__ or (name.startswith("<frozen importlib") and category != "file"):
                return  # the boundary's own reads; an import statement's (marshal, open)
            if not standard_library(name, stdlib, packages):
                break
            frame = frame.f_back
        allowed = learner_at(frame.f_code, frame.f_lasti) if frame is not None else None
        if allowed is None or category in allowed.split():
            return
        base = os.path.basename(frame.f_code.co_filename)
        found = f"{what}: {category}, from the learner's code ({base}:{frame.f_lineno})"
        if found not in state["found"]:
            state["found"].append(found)

    def hook(event: str, args: tuple) -> None:
        if event == "object.__setattr__" and touched is not None and args[1] in FUNCTION_STATE:
            touched.append(args[0])  # armed or not: a fix region's code runs at import
        if state["koan"] is None or state["busy"]:
            return
        if not (event in EVENTS or event.startswith(("object.__", "ctypes.", "open"))):
            return
        state["busy"] = True
        try:
            category = _category(event, args, course)
            if category is not None:
                what = event if not event.startswith("object.") else f"{event}({args[1]!r})"
                note(what, category, getframe(1))
        except Exception:
            return
        finally:
            state["busy"] = False

    def read(owner: str, name: str, slot):
        """`slot` (a tracer's member descriptor or method) behind a descriptor that notes a
        learner's read."""

        class Watched:
            def __get__(self, tracer, kind=None):
                if tracer is not None and state["koan"] is not None and not state["busy"]:
                    frame = getframe(1)
                    if not frame.f_code.co_filename.startswith(packages):  # JAX's own reads
                        state["busy"] = True
                        try:
                            note(f"{owner}.{name}", "tracer", frame)
                        finally:
                            state["busy"] = False
                return slot.__get__(tracer, kind)

            def __set__(self, tracer, value):
                slot.__set__(tracer, value)

            def __delete__(self, tracer):
                slot.__delete__(tracer)

        return Watched()

    from jax._src import core as jax_core  # the tracers: no public names in 0.12
    from jax._src.interpreters import ad, batching

    for (module, owner), slots in TRACER_SLOTS.items():
        kind = getattr({"ad": ad, "batching": batching, "core": jax_core}[module], owner)
        for name in slots:  # the slot itself, also where a boundary was installed before
            slot = _SLOTS.setdefault((kind, name), vars(kind)[name])
            setattr(kind, name, read(owner, name, slot))

    def arm(koan: str | None) -> None:
        state["koan"] = koan

    def drain() -> list[str]:
        found, state["found"] = state["found"][:20], []
        return found

    sys.addaudithook(hook)
    return arm, drain


def _learners(position: tuple, found: tuple) -> bool:
    """Is the instruction at `position` (co_positions) the learner's: on a line of `found` (see
    `learner_lines_of`) or inside a blank's fill?"""
    line, end_line, col, end_col = position
    if line in found[0]:
        return True
    spans = found[1] if line is not None and col is not None else ()
    return any((a, b) <= (line, col) and (end_line, end_col) <= (c, d) for a, b, c, d in spans)


def learner_lines_of(checkout) -> Callable[[str], tuple | None]:
    """For `Watch`: a koan file's code the learner wrote, read against the file as shipped: (lines
    of its TODO bodies and fix regions, (line, col, end line, end col) of each blank's fill, what
    its contracts allow); None for a file that is not a koan file."""
    from jaxkoans.plugin import classify

    def lines(filename: str) -> tuple | None:
        path = Path(filename)
        chapter = checkout.chapter_for(path) if path.name.startswith("test_") else None
        if chapter is None:
            return None
        allowed = reading.allowed_by(chapter.contracts, twin_name(path)).values()
        learner = classify.taken(checkout, path)
        spans = tuple(
            (f.node.lineno, f.node.col_offset, f.node.end_lineno, f.node.end_col_offset)
            for f in (learner.blanks if learner is not None else ())
        )
        code = learner.code_lines() if learner is not None else frozenset()
        return code, spans, " ".join(sorted(set().union(*allowed)))

    return lines


class Watch:
    """One process's boundary: the fingerprint taken before any koan file is imported, the audit
    hook, and the koan now running. `learner_lines(file)`: see `learner_lines_of`."""

    def __init__(
        self, learner_lines: Callable[[str], tuple | None], course: frozenset = frozenset()
    ) -> None:
        import jax.numpy as jnp
        import numpy
        import numpy.testing  # numpy loads it on first use: the asserts
        import pytest

        self.learner_file = functools.cache(learner_lines)
        self.touched: list = []  # functions whose code or defaults were set (the audit hook)
        self.written: dict = {}  # code object -> whether it holds the learner's code
        self.arm, self.drain = install(self.learner_at, self.touched, course)
        self.fingerprint = Fingerprint()  # after install: the tracers' watched methods are JAX's
        self.module: tuple[dict, dict] | None = None  # the koan's namespace, and as setup left it
        self.item, self.known = None, len(sys.modules)  # the koan whose call is watched
        self.code, self.busy, self.at_checks = None, False, []
        self.learners: set = set()  # code objects holding a learner's line (PY_START)
        self.dirty = True  # a learner's code ran since the last comparison
        checks = [*vars(numpy.testing).values(), pytest.approx, pytest.raises, numpy.allclose]
        checks += [numpy.array_equal, numpy.isclose, jnp.allclose, jnp.array_equal, jnp.isclose]
        self.checks = {id(f): f for f in checks if callable(f)}  # held: their ids stay theirs

    def learner_at(self, code, offset: int) -> str | None:
        """The categories allowed where `code`'s instruction at `offset` is the learner's (a TODO
        body or fix region line, or inside a blank's fill), else None."""
        found = self.learner_file(code.co_filename)
        if found is None:
            return None
        position = next(itertools.islice(code.co_positions(), offset // 2, None), (None,) * 4)
        return found[2] if _learners(position, found) else None

    def written_by_learner(self, code) -> bool:
        if code not in self.written:
            found = self.learner_file(code.co_filename)
            self.written[code] = found is not None and any(
                _learners(p, found) for p in code.co_positions()
            )
        return self.written[code]

    def start(self, item) -> None:
        self.catch_up()
        self.module = None
        self.arm(item.nodeid)

    def catch_up(self) -> None:
        """Modules imported since the fingerprint was taken join it as they are now (also before
        a koan: a process forked after holds them already, hooks.prewarm)."""
        if len(sys.modules) != self.known:
            for name, module in list(sys.modules.items()):
                if name.partition(".")[0] in PACKAGES and name not in self.fingerprint.modules:
                    self.fingerprint.add_module(name, module)
            self.known = len(sys.modules)

    def watch_module(self, item) -> None:
        """Before the koan's call: its module as its setup left it, and the calls its code makes."""
        module = getattr(item, "module", None)
        namespace = vars(module) if module is not None else {}
        self.module, self.item = (namespace, dict(namespace)), item
        self.code = getattr(getattr(item, "function", None), "__code__", None)
        self.at_checks, self.dirty = [], True
        monitoring, events = sys.monitoring, sys.monitoring.events
        if self.code is not None and monitoring.get_tool(TOOL) in (None, TOOL_NAME):
            if monitoring.get_tool(TOOL) is None:
                monitoring.use_tool_id(TOOL, TOOL_NAME)
            monitoring.register_callback(TOOL, events.CALL, self.on_call)
            monitoring.register_callback(TOOL, events.PY_START, self.on_start)
            monitoring.register_callback(TOOL, events.PY_RESUME, self.on_start)
            self.learners = self.learner_codes(module)
            for code in self.learners:
                monitoring.set_local_events(TOOL, code, events.PY_START | events.PY_RESUME)
            monitoring.set_local_events(TOOL, self.code, events.CALL)

    def learner_codes(self, module) -> set:
        """The code objects of the koan's module and its own code that hold a learner's line (TODO
        bodies, functions of a fix region, lambdas in a blank): when one starts, what the checks
        call may change, so the next check compares."""
        stack = [self.code]
        for value in list(vars(module).values()) if module is not None else ():
            with contextlib.suppress(Exception):  # a blank refuses every attribute
                wrapped = value if isinstance(value, types.FunctionType) else value.__wrapped__
                stack.append(wrapped.__code__)
        found, seen = set(), set()
        while stack:
            code = stack.pop()
            if not isinstance(code, types.CodeType) or code in seen:
                continue
            seen.add(code)
            stack += [c for c in code.co_consts if isinstance(c, types.CodeType)]
            if self.written_by_learner(code):
                found.add(code)
        found.discard(self.code)
        return found

    def on_start(self, code, offset: int):
        self.dirty = True  # a learner's code started: the next check compares
        return sys.monitoring.DISABLE

    def on_call(self, code, offset: int, target, arg0) -> None:
        """A call of the koan's own code: where it calls a check (numpy.testing, pytest.approx …),
        code the learner wrote, or from a blank, all its checks call must be as fingerprinted."""
        if code is not self.code or self.busy:
            return
        checked = id(target) in self.checks or self.learner_at(code, offset) is not None
        if not checked:
            inner = getattr(getattr(target, "__func__", target), "__code__", None)
            if inner is None and not isinstance(target, type):  # an object with __call__
                inner = getattr(vars(type(target)).get("__call__"), "__code__", None)
            checked = isinstance(inner, types.CodeType) and self.written_by_learner(inner)
        if not checked or not (self.touched or self.dirty):
            return  # no learner's code ran since the last comparison
        self.dirty = False
        sys.monitoring.restart_events()  # each learner's code object says it started again
        if self.touched or not self.fingerprint.intact():
            self.busy = True
            try:
                name = getattr(target, "__qualname__", type(target).__qualname__)
                line = next((n for s, e, n in code.co_lines() if s <= offset < e), 0)
                found = self.fingerprint.restore(bool(self.touched), monkeypatched(self.item))
                self.touched.clear()
                self.at_checks += [f"{f} (before the call of {name}, line {line})" for f in found]
            finally:
                self.busy = False

    def stop_calls(self) -> list[str]:
        """The call is over: what was found at its checks, and whether the watch was left on."""
        found, code, monitoring = self.at_checks, self.code, sys.monitoring
        self.at_checks, self.code = [], None
        for learners in self.learners:
            monitoring.set_local_events(TOOL, learners, 0)
        self.learners = set()
        if code is not None:
            if monitoring.get_tool(TOOL) != TOOL_NAME or not (
                monitoring.get_local_events(TOOL, code) & monitoring.events.CALL
            ):
                found.append("sys.monitoring (the watch on the koan's calls was switched off)")
            with contextlib.suppress(ValueError):
                monitoring.set_local_events(TOOL, code, 0)
        return found

    def check(self, item, when: str) -> tuple[list[str], list[str]]:
        """After a phase: (what changed, what was refused); each change is put back. After the
        call, where no learner's code ran since the last comparison, there is nothing new."""
        unchanged = when == "call" and self.code is not None and not (self.dirty or self.touched)
        changed = self.stop_calls() if when == "call" else []
        excused = set() if when == "teardown" else monkeypatched(item)
        if self.module is not None:
            own = {name for where, name in excused if where == id(self.module[0])}
            changed += _restore_module(*self.module, own)
        if when != "setup" and not unchanged:
            self.arm(None)
            try:
                changed += self.fingerprint.restore(bool(self.touched), excused)
                self.touched.clear()
            finally:
                self.arm(None if when == "teardown" else item.nodeid)
        return changed[:20], self.drain()


def _restore_module(current: dict, saved: dict, excused: set[str]) -> list[str]:
    """The koan's own module: a name bound to another object, or a new name hiding a builtin
    (`global np`, `fn.__globals__.update(...)`), each put back."""
    found, label = [], current.get("__name__", "the koan's module")
    for key, value in saved.items():
        if key not in IGNORED and key not in excused and current.get(key, _MISSING) is not value:
            found.append(f"{label}.{key}")
            current[key] = value
    for key in sorted(set(current) - set(saved) - excused):
        if key in vars(builtins):
            found.append(f"{label}.{key} (hides the builtin)")
            del current[key]
    return found


def judge(watch: Watch, item, when: str, report) -> bool:
    """After a phase: a koan whose run crossed the boundary fails with what it did, which grade
    reads as evidence (`grade_patched`, `grade_violation`). True where it did."""
    changed, refused = watch.check(item, when)
    if not (changed or refused):
        return False
    report.user_properties += [("grade_patched", changed)] if changed else []
    report.user_properties += [("grade_violation", refused)] if refused else []
    report.outcome = "failed"
    report.longrepr = MESSAGE + "\n" + "\n".join(f"  - {f}" for f in (changed + refused)[:8])
    report.user_properties += [("koan_state", "failing"), ("koan_cause", "reads_test")]
    return True
