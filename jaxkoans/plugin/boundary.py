"""The boundary a koan's checks run behind: what they call is compared by value, and the
routes to frames and code objects are refused by kind, while the learner's code runs.

1. **State by value.** Before any koan file is imported, the watched packages (numpy, JAX,
   pytest, the harness; builtins, math, operator …) are fingerprinted: each module's and
   class's namespace (functions, classes, descriptors), and each function's `__code__`,
   `__defaults__`, `__kwdefaults__` items, callables in its `__dict__` and closure cells.
   A function keeps its identity when `marshal` builds its new `__code__`; not its
   fingerprint. The state is compared at each check the koan's code calls (once a learner's
   code ran since the last comparison: `sys.monitoring`) and after its call and teardown; a
   difference fails the koan, is named, and is put back. The koan's own module is compared
   per phase. `__code__` and the defaults change only through setters that raise an audit
   event, so those are compared where the hook saw one (reading them costs an event each).
2. **Refusals by kind.** An audit hook (it cannot be removed; its findings live in its
   closure) sees the routes to frames and code objects however they are spelled
   (`sys._getframe`, `sys._current_frames`, `gi_frame`/`tb_frame`, a function's `__code__`,
   `code.__new__`, `marshal.loads`, `gc.get_referrers`, ctypes reaching memory, a koan file
   opened) and refuses those made from a learner's line (a blank, a TODO body, a fix region),
   directly or through the standard library, less what the TODO's contract allows.

A difference or a refusal fails the koan in pytest and watch with one message, and grade
reads it (`grade_patched`, `grade_violation`) as evidence: the koan is tampered.
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
import operator
import os
import site
import sys
import sysconfig
import types
from collections.abc import Callable

from jaxkoans.course import reading

PACKAGES = ("numpy", "jax", "jaxlib", "ml_dtypes", "pytest", "_pytest", "pluggy", "xdist", "execnet", "jaxkoans")  # fmt: skip
STARTS = sys.monitoring.events.PY_START | sys.monitoring.events.PY_RESUME
TOOL, TOOL_NAME = 3, "jaxkoans boundary"  # sys.monitoring: 4 is contracts.py's, 5 result_types'
MODULES = ("builtins", "math", "operator", "functools", "sys", "inspect", "traceback", "types")
IGNORED = frozenset({"__warningregistry__", "__loader__", "__spec__"})
# A function whose state a library changes by itself (lazy caches in closures): none known.
MESSAGE = (
    "这个 koan 运行时改变了检查所用的代码（函数的代码、默认值、闭包或模块里的名字），或者读取了程序本身"
    "（帧、代码对象）。检查要比较的是你算出的值，而不是被改过的检查：请用本课的技术计算结果。\n"
    "While this koan ran, code changed what its checks call (a function's code, defaults, closure "
    "or a module's names) or read the program itself (frames, code objects). The checks compare "
    "the values you compute, not a changed check: compute the result with the lesson's technique."
)

_is, _MISSING = operator.is_, object()
_contents = operator.attrgetter("cell_contents")


class BoundaryCrossed(AssertionError):
    """A koan's run changed what its checks call, or read the program, from the learner's code."""

    def __init__(self, found: list[str]) -> None:
        self.found = found
        super().__init__(MESSAGE + "\n" + "\n".join(f"  - {f}" for f in found[:8]))


class _Namespaces:
    """(namespace, key, value) entries, compared a namespace at a time at C speed."""

    def __init__(self) -> None:
        self.groups: dict[int, list] = {}  # id(namespace) -> [namespace, keys, values, getter]

    def add(self, holder, key, value) -> None:
        group = self.groups.setdefault(id(holder), [holder, [], [], None])
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

    def changed(self) -> list[tuple[object, object, object]]:
        return [
            (holder, key, value)
            for holder, keys, values, _ in self.groups.values()
            for key, value in zip(keys, values, strict=True)
            if holder.get(key, _MISSING) is not value
        ]

    def expect(self, holder, key, value) -> object:
        """`holder[key]` is to be `value` from now on; the value expected before."""
        _, keys, values, _ = self.groups.get(id(holder), (None, [], [], None))
        if key in keys:
            index = keys.index(key)
            values[index], value = value, values[index]
        return value


def _label(holder, key) -> str:
    if isinstance(holder, dict):  # a module's namespace, a function's __dict__ or kwdefaults
        return f"{holder.get('__name__', 'a namespace')}.{key}"
    return f"{getattr(holder, '__module__', '?')}.{holder.__qualname__}.{key}"


class Fingerprint:
    """The state of every watched module, class and function, by value."""

    def __init__(self) -> None:
        self.names = _Namespaces()  # module namespaces, functions' __dict__ and __kwdefaults__
        self.classes = _Namespaces()  # vars(cls)
        self.cells: list[types.CellType] = []
        self.contents: list = []  # each cell's, as fingerprinted
        self.functions: list[types.FunctionType] = []
        self.codes: list = []  # each function's __code__, __defaults__, __kwdefaults__
        self.defaults: list = []
        self.kwdefaults: list = []
        self.modules: dict[str, types.ModuleType] = {}
        self.seen: set[int] = set()
        self.class_of: dict[int, type] = {}  # id(vars(cls)) -> cls
        for name, module in list(sys.modules.items()):
            if name in MODULES or name.partition(".")[0] in PACKAGES:
                self.add_module(name, module)
        self.trace = (sys.gettrace(), sys.getprofile())

    def add_module(self, name: str, module) -> None:
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict) or id(namespace) in self.seen:
            return
        self.seen.add(id(namespace))
        self.modules[name] = module
        for key, value in list(namespace.items()):
            if key in IGNORED or not (callable(value) or isinstance(value, types.ModuleType)):
                continue  # data: libraries keep caches in module globals
            if name == "sys" and key.endswith("hook"):
                continue  # pytest installs its own excepthook, unraisablehook
            self.names.add(namespace, key, value)
            self.add_value(value)

    def add_value(self, value) -> None:
        if isinstance(value, types.FunctionType):
            self.add_function(value)
        elif isinstance(value, type) and id(value) not in self.seen:
            self.seen.add(id(value))
            if getattr(value, "__module__", "").partition(".")[0] not in PACKAGES + MODULES:
                return
            proxy = vars(value)
            self.class_of[id(proxy)] = value
            for key, member in list(proxy.items()):
                if key in ("__dict__", "__weakref__", "__doc__") or not _is_code(member):
                    continue
                self.classes.add(proxy, key, member)
                for inner in _functions_of(member):
                    self.add_function(inner)

    def add_function(self, function: types.FunctionType) -> None:
        if id(function) in self.seen:
            return
        self.seen.add(id(function))
        self.functions.append(function)
        self.codes.append(function.__code__)
        self.defaults.append(function.__defaults__)
        self.kwdefaults.append(kwdefaults := function.__kwdefaults__)
        for key, value in (kwdefaults or {}).items():
            self.names.add(kwdefaults, key, value)
        for key, value in function.__dict__.items():
            if callable(value):  # `__wrapped__`, a rule; data there is a cache
                self.names.add(function.__dict__, key, value)
        for cell in function.__closure__ or ():
            try:
                contents = cell.cell_contents
            except ValueError:
                continue
            self.cells.append(cell)
            self.contents.append(contents)
            if isinstance(contents, types.FunctionType):
                self.add_function(contents)  # what a decorator wraps

    def expect(self, namespace: dict, key: str, value) -> object:
        """`namespace[key]` is to be `value` from now on (the harness's own patch while a koan
        runs: hooks.exact_raises_on_fills); the value expected before."""
        return self.names.expect(namespace, key, value)

    def expect_member(self, cls: type, key: str, value) -> object:
        """`cls.key` is to be `value` from now on (the harness's own patch while a koan runs:
        contracts.recording); the value expected before."""
        for holder, *_ in self.classes.groups.values():
            if self.class_of.get(id(holder)) is cls:
                return self.classes.expect(holder, key, value)
        return value

    def intact(self) -> bool:
        """Every namespace, function `__dict__`, `__kwdefaults__` item and closure cell as
        fingerprinted. A function's `__code__`, `__defaults__` and `__kwdefaults__` change only
        through their setters, and CPython raises an audit event in each: `Watch.touched`
        says when to compare those (reading `__code__` raises one per function, 18,000 here)."""
        try:
            cells = all(map(_is, map(_contents, self.cells), self.contents))
        except ValueError:  # a cell emptied
            cells = False
        return (
            self.names.intact()
            and self.classes.intact()
            and cells
            and all(sys.modules.get(n) is m for n, m in self.modules.items() if n in MODULES)
            and (sys.gettrace(), sys.getprofile()) == self.trace
        )

    def restore(self, touched: bool = True, excused: set = frozenset()) -> list[str]:
        """What differs from the fingerprint, named; each is put back. `touched`: a function's
        code or defaults was set (the audit hook saw it), so theirs are compared too."""
        if not touched and self.intact():
            return []
        found = []
        saved = zip(self.functions, self.codes, self.defaults, self.kwdefaults, strict=True)
        for function, *values in saved:
            for key, value in zip(
                ("__code__", "__defaults__", "__kwdefaults__"), values, strict=True
            ):
                if getattr(function, key) is not value:
                    found.append(_label(function, key))
                    setattr(function, key, value)
        for holder, key, value in self.names.changed():
            if (id(holder), key) in excused:
                continue
            found.append(_label(holder, key))
            holder[key] = value
        for proxy, key, value in self.classes.changed():
            owner = self.class_of[id(proxy)]
            if (id(owner), key) in excused:
                continue
            found.append(f"{owner.__module__}.{owner.__qualname__}.{key}")
            type.__setattr__(owner, key, value)
        for cell, value in zip(self.cells, self.contents, strict=True):
            if getattr(cell, "cell_contents", _MISSING) is not value:
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


def _is_code(member) -> bool:
    kinds = (types.FunctionType, classmethod, staticmethod, property, type)
    return isinstance(member, kinds) or callable(member)


def _functions_of(member) -> list[types.FunctionType]:
    if isinstance(member, (classmethod, staticmethod)):
        member = member.__func__
    if isinstance(member, property):
        return [f for f in (member.fget, member.fset, member.fdel) if isinstance(f, types.FunctionType)]  # fmt: skip
    return [member] if isinstance(member, types.FunctionType) else []


class KoanModule:
    """The koan's own module per phase: a name bound to another object, or a new name hiding a
    builtin (`global np`, `fn.__globals__.update(...)`). Names the koan's `monkeypatch` set are
    left to its teardown, which undoes them."""

    def __init__(self, module) -> None:
        self.namespace = vars(module) if module is not None else {}
        self.saved = dict(self.namespace)

    def restore(self, excused: set[str]) -> list[str]:
        found, current = [], self.namespace
        label = current.get("__name__", "the koan's module")
        for key, value in self.saved.items():
            if key in IGNORED or key in excused or current.get(key, _MISSING) is value:
                continue
            found.append(f"{label}.{key}")
            current[key] = value
        for key in sorted(set(current) - set(self.saved) - excused):
            if key in vars(builtins):
                found.append(f"{label}.{key} (hides the builtin)")
                del current[key]
        return found


def monkeypatched(item) -> set[tuple[int, str]]:
    """(id of a namespace or class, name) for each name the koan's own `monkeypatch` fixture
    set and has not yet undone (its teardown does): the koan's, not the learner's."""
    fixture = getattr(item, "funcargs", {}).get("monkeypatch")
    found = {(id(target), name) for target, name, _ in getattr(fixture, "_setitem", ())}
    for target, name, _ in getattr(fixture, "_setattr", ()):
        found.add((id(target if isinstance(target, type) else vars(target)), name))
    return found


# ---- Refusals by kind: an audit hook --------------------------------------------------------

# event -> category; object.__getattr__/__setattr__ by the attribute's name.
EVENTS = {
    "sys._getframe": "frames", "sys._current_frames": "frames",
    "sys._current_exceptions": "frames", "sys._getframemodulename": "frames",
    "code.__new__": "code", "marshal.loads": "code", "marshal.load": "code",
    "gc.get_referrers": "inspect", "gc.get_referents": "inspect", "gc.get_objects": "inspect",
    "sys.setprofile": "sys.settrace", "sys.settrace": "sys.settrace",
}  # fmt: skip
AUDITED = ("__code__", "__defaults__", "__kwdefaults__", "gi_frame", "cr_frame", "ag_frame",
           "tb_frame", "f_code", "gi_code", "cr_code", "ag_code")  # fmt: skip
ATTRIBUTES = {name: reading.ATTRIBUTES[name] for name in AUDITED}  # the course's one table
# ctypes reaching memory or a library of its own; not a symbol of the course's FFI library (05)
SETTERS = frozenset({"__code__", "__defaults__", "__kwdefaults__"})
PREFIXES = dict.fromkeys(
    ("ctypes.dlopen", "ctypes.cdata", "ctypes.string_at", "ctypes.wstring_at", "ctypes.addressof", "ctypes.call_function"),
    "inspect",
)  # fmt: skip


def _category(event: str, args: tuple) -> str | None:
    if event == "open":  # a koan file's text: its expected values read, not computed
        name = args[0] if isinstance(args[0], str) else ""
        return (
            "file" if os.path.basename(name).startswith("test_") and name.endswith(".py") else None
        )
    if event in EVENTS:
        return EVENTS[event]
    if event in ("object.__getattr__", "object.__setattr__", "object.__delattr__"):
        name = args[1] if len(args) > 1 else None
        category = ATTRIBUTES.get(name) if isinstance(name, str) else None
        return category
    return next((c for p, c in PREFIXES.items() if event.startswith(p)), None)


def standard_library(filename: str, stdlib: str, packages: tuple[str, ...]) -> bool:
    """Whether code in `filename` is the standard library's (or generated, `<string>`): under
    `stdlib` and in none of the installed packages' directories, which conda and a Python
    without a venv put under it (lib/python3.X/site-packages)."""
    return filename.startswith((stdlib, "<")) and not filename.startswith(packages)


def install(
    learner_at: Callable[[object, int], str | None], touched: list | None = None
) -> tuple[Callable, Callable]:
    """Add the audit hook; (arm, drain): `arm(nodeid or None)` starts or stops a koan's watch,
    `drain()` returns and forgets what it refused. `learner_at(code, offset)`: None where that
    instruction is not the learner's, else the categories it is allowed ("" for none). `touched`
    gets each object whose `__code__`, `__defaults__` or `__kwdefaults__` is set, from
    anywhere: CPython raises the event in those setters, the only way to change them."""
    state: dict = {"koan": None, "busy": False, "found": []}
    getframe, stdlib = sys._getframe, os.path.dirname(os.__file__) + os.sep
    # installed packages are no standard library, also where they live under it (conda, a
    # Python without a venv: lib/python3.13/site-packages)
    packages = tuple({os.path.join(p, "") for p in (*site.getsitepackages(), site.getusersitepackages(),
                      *(sysconfig.get_paths()[k] for k in ("purelib", "platlib")))})  # fmt: skip

    def hook(event: str, args: tuple) -> None:
        if event == "object.__setattr__" and touched is not None and args[1] in SETTERS:
            touched.append(args[0])  # armed or not: a fix region's code runs at import
        if state["koan"] is None or state["busy"]:
            return
        if not (event in EVENTS or event.startswith(("object.__", "ctypes.", "open"))):
            return
        state["busy"] = True
        try:
            category = _category(event, args)
            if category is None:
                return
            frame = getframe(1)
            while frame is not None:  # through the standard library to who asked
                name = frame.f_code.co_filename
                if name == __file__ or name.startswith("<frozen importlib"):
                    return  # the boundary's own reads; an import statement's (marshal, open)
                if not standard_library(name, stdlib, packages):
                    break
                frame = frame.f_back
            if frame is None:
                return
            allowed = learner_at(frame.f_code, frame.f_lasti)
            if allowed is None or category in allowed.split():
                return
            what = event if not event.startswith("object.") else f"{event}({args[1]!r})"
            base = os.path.basename(frame.f_code.co_filename)
            found = f"{what}: {category}, from the learner's code ({base}:{frame.f_lineno})"
            if found not in state["found"]:
                state["found"].append(found)
        except Exception:
            return
        finally:
            state["busy"] = False

    def arm(koan: str | None) -> None:
        state["koan"] = koan

    def drain() -> list[str]:
        found, state["found"] = state["found"][:20], []
        return found

    sys.addaudithook(hook)
    return arm, drain


class Watch:
    """One process's boundary: the fingerprint taken before any koan file is imported, the
    audit hook, and the koan now running. `learner_lines(file)`: the lines of a koan file the
    learner wrote and the categories its contracts allow ("code frames"), or None."""

    def __init__(self, learner_lines: Callable[[str], tuple | None]) -> None:
        import jax.numpy as jnp
        import numpy
        import numpy.testing  # numpy loads it on first use: the asserts
        import pytest

        self.fingerprint = Fingerprint()
        self.learner_lines, self.lines = learner_lines, {}
        self.touched: list = []  # functions whose code or defaults were set (the audit hook)
        self.written: dict = {}  # code object -> whether it holds the learner's code
        self.arm, self.drain = install(self.learner_at, self.touched)
        self.module: KoanModule | None = None
        self.item = None  # the koan whose call is watched
        self.known = len(sys.modules)
        self.code, self.busy, self.at_checks, self.calls_lines = None, False, [], {}
        self.learners: set = set()  # code objects holding a learner's line (PY_START)
        self.dirty = True  # a learner's code ran since the last comparison
        self.harness: tuple | None = None  # (namespace, key, value the fingerprint holds)
        checks = [*vars(numpy.testing).values(), pytest.approx, pytest.raises, numpy.allclose]
        checks += [numpy.array_equal, numpy.isclose, jnp.allclose, jnp.array_equal, jnp.isclose]
        self.checks = {id(f): f for f in checks if callable(f)}  # held: their ids stay theirs

    def learner_at(self, code, offset: int) -> str | None:
        """The categories allowed where `code`'s instruction at `offset` is the learner's (a
        TODO body or fix region line, or inside a blank's fill), else None."""
        found = self.learner_file(code.co_filename)
        if found is None:
            return None
        lines, spans, allowed = found
        position = next(itertools.islice(code.co_positions(), offset // 2, None), (None,) * 4)
        return allowed if position[0] in lines or _inside(position, spans) else None

    def learner_file(self, filename: str):
        if filename not in self.lines:
            self.lines[filename] = self.learner_lines(filename)
        return self.lines[filename]

    def written_by_learner(self, code) -> bool:
        """Does `code` hold an instruction the learner wrote?"""
        if code not in self.written:
            found = self.learner_file(code.co_filename)
            self.written[code] = found is not None and any(
                p[0] in found[0] or _inside(p, found[1]) for p in code.co_positions()
            )
        return self.written[code]

    def start(self, item) -> None:
        """A koan begins: modules imported since (JAX loads some on first use) join the
        fingerprint as they are now, and the audit hook watches."""
        self.catch_up()
        self.module = None
        self.arm(item.nodeid)

    def catch_up(self) -> None:
        """Modules imported since the fingerprint was taken join it as they are now (also
        before a koan: a process forked after holds them already, plugin/prewarm.py)."""
        if len(sys.modules) != self.known:
            for name, module in list(sys.modules.items()):
                if name.partition(".")[0] in PACKAGES and name not in self.fingerprint.modules:
                    self.fingerprint.add_module(name, module)
            self.known = len(sys.modules)

    def watch_module(self, item) -> None:
        """Before the koan's call: its module as its setup left it (a fix region run), and
        the calls its own code makes."""
        self.module, self.item = KoanModule(getattr(item, "module", None)), item
        self.code = getattr(getattr(item, "function", None), "__code__", None)
        self.at_checks, self.calls_lines, self.dirty = [], {}, True
        monitoring = sys.monitoring
        if self.code is not None and monitoring.get_tool(TOOL) in (None, TOOL_NAME):
            for start, end, line in self.code.co_lines():
                self.calls_lines.update(dict.fromkeys(range(start, end, 2), line))
            if monitoring.get_tool(TOOL) is None:
                monitoring.use_tool_id(TOOL, TOOL_NAME)
            monitoring.register_callback(TOOL, monitoring.events.CALL, self.on_call)
            monitoring.register_callback(TOOL, monitoring.events.PY_START, self.on_start)
            monitoring.register_callback(TOOL, monitoring.events.PY_RESUME, self.on_start)
            self.learners = self.learner_codes(getattr(item, "module", None))
            for code in self.learners:
                monitoring.set_local_events(TOOL, code, STARTS)
            monitoring.set_local_events(TOOL, self.code, monitoring.events.CALL)

    def learner_codes(self, module) -> set:
        """The code objects of the koan's module and its own code that hold a learner's line
        (TODO bodies, functions of a fix region, lambdas in a blank): when one starts, what
        the checks call may change, so the next check compares."""
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
        """A learner's code started: the next check compares (then it is watched again)."""
        self.dirty = True
        return sys.monitoring.DISABLE

    def on_call(self, code, offset: int, target, arg0) -> None:
        """A call the koan's own code makes: where it calls a check (an assert of numpy.testing,
        pytest.approx, allclose), calls code the learner wrote, or calls from a learner's line
        (a blank), everything its checks call must be as fingerprinted at that moment, so a
        change put back before the phase ends is seen too."""
        if code is not self.code or self.busy:
            return
        line = self.calls_lines.get(offset, 0)
        checked = id(target) in self.checks or self.learner_at(code, offset) is not None
        if not checked:
            function = getattr(target, "__func__", target)
            inner = getattr(function, "__code__", None)
            if inner is None and not isinstance(target, type):  # an object with __call__
                inner = getattr(vars(type(target)).get("__call__"), "__code__", None)
            checked = isinstance(inner, types.CodeType) and self.written_by_learner(inner)
        if not checked or not (self.touched or self.dirty):
            return  # no learner's code ran since the last comparison
        self.dirty = False
        sys.monitoring.restart_events()  # each learner's code object says it started again
        if self.harness is None:  # the harness's own patch during the call
            import pytest

            raises, plugin = vars(pytest).get("raises"), os.path.dirname(__file__) + os.sep
            own = getattr(getattr(raises, "__code__", None), "co_filename", "").startswith(plugin)
            self.harness = (vars(pytest), "raises", self.fingerprint.expect(vars(pytest), "raises", raises)) if own else ()  # fmt: skip
        if self.touched or not self.fingerprint.intact():
            self.busy = True
            try:
                name = getattr(target, "__qualname__", type(target).__qualname__)
                found = self.fingerprint.restore(bool(self.touched), monkeypatched(self.item))
                self.touched.clear()
                self.at_checks += [f"{f} (before the call of {name}, line {line})" for f in found]
            finally:
                self.busy = False

    def stop_calls(self) -> list[str]:
        """The call is over: what was found at its checks, and whether the watch was left on."""
        found, code = list(self.at_checks), self.code
        self.at_checks, self.code = [], None
        for learners in self.learners:
            sys.monitoring.set_local_events(TOOL, learners, 0)
        self.learners = set()
        if self.harness:
            self.fingerprint.expect(*self.harness)
        self.harness = None
        if code is None:
            return found
        monitoring = sys.monitoring
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
        if self.module is not None:
            excused = set() if when == "teardown" else monkeypatched(item)
            excused = {name for where, name in excused if where == id(self.module.namespace)}
            changed += self.module.restore(excused)
        if when != "setup" and not unchanged:
            self.arm(None)
            try:
                excused = set() if when == "teardown" else monkeypatched(item)
                changed += self.fingerprint.restore(bool(self.touched), excused)
                self.touched.clear()
            finally:
                self.arm(None if when == "teardown" else item.nodeid)
        return changed[:20], self.drain()


def _inside(position: tuple, spans: tuple) -> bool:
    line, end_line, col, end_col = position
    if line is None or col is None:
        return False
    return any((a, b) <= (line, col) and (end_line, end_col) <= (c, d) for a, b, c, d in spans)


def learner_lines_of(checkout) -> Callable[[str], tuple | None]:
    """For `Watch`: a koan file's code the learner wrote, read against the file as shipped:
    (lines of its TODO bodies and fix regions, (line, col, end line, end col) of each blank's
    fill, what its contracts allow); None for a file that is not a koan file."""
    from pathlib import Path

    from jaxkoans import course
    from jaxkoans.plugin import classify

    def lines(filename: str) -> tuple | None:
        path = Path(filename)
        chapter = checkout.chapter_for(path) if path.name.startswith("test_") else None
        if chapter is None:
            return None
        twin = course.twin_name(path)
        allowed = {
            category
            for key, contract in chapter.contracts.items()
            if key.partition("::")[0] == twin
            for category in contract.get("allow", ())
        }
        learner = classify.taken(checkout, path)
        spans = tuple(
            (f.node.lineno, f.node.col_offset, f.node.end_lineno, f.node.end_col_offset)
            for f in (learner.blanks if learner is not None else ())
        )
        code = learner.code_lines() if learner is not None else frozenset()
        return code, spans, " ".join(sorted(allowed))

    return lines


def judge(watch: Watch, item, when: str, report) -> bool:
    """After a phase: a koan whose run crossed the boundary fails with what it did, which grade
    reads as evidence (`grade_patched`, `grade_violation`). True where it did."""
    changed, refused = watch.check(item, when)
    if not (changed or refused):
        return False
    if changed:
        report.user_properties.append(("grade_patched", changed))
    if refused:
        report.user_properties.append(("grade_violation", refused))
    report.outcome = "failed"
    report.longrepr = str(BoundaryCrossed(changed + refused))
    report.user_properties += [("koan_state", "failing"), ("koan_cause", "reads_test")]
    return True
