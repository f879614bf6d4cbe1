"""A TODO is judged by the program it builds: its technique contract, read by the program reader.

A koan's asserts check what a TODO returns; its contract in chapter.toml
(`[contracts."file::function"]`) says how: what must lie on the path from the inputs to the
outputs (`on_path`), what must appear nowhere, dead code included (`absent`), and how large a
live intermediate may be (`max_intermediate`). While a koan runs, each call of a contracted
TODO records its arguments' shapes and dtypes and the mesh in force; once the koan's own asserts
have passed, the TODO is traced again on those (jax.make_jaxpr) and read by
jaxkoans/api/program.py. A broken contract fails the koan with what is missing, so a learner
who reached the right numbers another way (the library call the lesson replaces, a reference
inside a callback, the technique kept as dead code beside it) sees why it does not count.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import os
import sys
from dataclasses import dataclass, field, replace

from jaxkoans.plugin import compiles, costs, fresh, meshes

ASKS = ("on_path", "in_loop", "absent", "max_intermediate")  # what a contract asks of a program
# JAX is imported on first use: the learner's tools read ContractBroken's cause without it.

MAX_CALLS = 2  # distinct argument signatures read per TODO and koan
# an untraced TODO's calls on plain values are cheap to replay: more of them, so a clamp at the
# test's largest count (min(microbatches, 8)) meets that count moved (red team 9a)
UNTRACED_CALLS = 4
# how an untraced TODO's replay moved its call, kept per koan in its profile (fresh.moved)
REPLAYS = ("ints", "signs", "names")
# Authors: a file to append each TODO's program to (`python -m jaxkoans.authoring programs`).
PROGRAMS_ENV = "JAXKOANS_PROGRAMS"

HEADLINE = (
    "你的 TODO 算对了数，但它构建的程序没有用本课的技术 / your TODO gets the numbers right, but "
    "the program it builds does not use the lesson's technique"
)


class ContractBroken(AssertionError):
    """Raised after a koan's asserts pass when a TODO's program breaks its contract."""

    def __init__(self, function: str, problems: list[str]) -> None:
        self.function, self.problems = function, problems
        lines = [f"{HEADLINE}: {function}", *(f"  - {p}" for p in problems)]
        super().__init__("\n".join(lines))


@dataclass
class _Calls:
    """The calls of one contracted TODO during one koan."""

    name: str
    function: object
    contract: dict
    module: object = None  # the koan's module: where `fresh` finds its reference
    # (signature, the program read, or (function, args, kwargs, mesh) to read after the koan)
    seen: list = field(default_factory=list)
    values: dict = field(default_factory=dict)  # signature -> the call's own (args, kwargs)
    placed: dict = field(default_factory=dict)  # signature -> meshes.Placed (under shard_map)
    mesh_set: dict = field(default_factory=dict)  # signature -> the Mesh jax.set_mesh put in force
    ran: set = field(default_factory=set)  # the primitives the koan's own calls bound
    # those the TODO's own code bound (with what they hold), not a rule run inside a bind (an
    # eager scan's while, a jvp rule's products): what it bound that it must not is its own
    ran_own: set = field(default_factory=set)
    depth: int = 0  # the binds in progress when its last call started
    # an untraced TODO's result may hold callables (a schedule, a step function, an optimizer's
    # init and update): signature -> their code objects, and each code's calls by the koan,
    # replayed from the TODO's replayed result (_remade)
    returned: dict = field(default_factory=dict)  # signature -> [the functions returned]
    made: dict = field(default_factory=dict)  # id(function) -> [(args, kwargs)] of its calls
    last: str | None = None  # the signature of the call in progress, where it was recorded

    def pending(self, signature: str):
        """What was kept of the call of `signature`: the program read, or what to read it from."""
        return next(p for s, p in self.seen if s == signature)

    def record(self, args: tuple, kwargs: dict) -> None:
        import jax

        self.last = None
        untraced = self.contract.get("traced", True) is False
        if len(self.seen) >= (UNTRACED_CALLS if untraced else MAX_CALLS):
            return
        try:  # a dict keyed by devices cannot be flattened: such a call is not recorded
            args, kwargs = fresh.opened(args, kwargs)
            abstract = jax.tree.map(_spec, (args, kwargs))
            # the profiles' keys predate weak types in the read: a key names shapes and dtypes
            signature = repr(jax.tree.map(lambda x: x, abstract)).replace(", weak_type=True", "")
        except Exception:
            return
        from jax._src import core  # the named axes in scope: no public reader in 0.12

        if core.get_axis_env().axis_sizes:  # a call under named axes is another call than a
            # jit's of the same shapes (red team 7a: the jit's lost its fresh cases to it)
            signature += f" under {sorted(core.get_axis_env().axis_sizes.items())}"
        if any(signature == s for s, *_ in self.seen):
            return
        if untraced:
            if fresh.values_only(args, kwargs):  # called again on moved ones (_replayed)
                self.seen.append((signature, None))
                self.values[signature] = (args, kwargs)
                self.last = signature
            return
        mesh = (jax.sharding.get_abstract_mesh(), bool(jax.config.jax_enable_x64))
        from jax._src import sharding_impls  # the concrete mesh in force: no public reader
        # in 0.12 (get_mesh raises under jit)

        if not sharding_impls.get_concrete_mesh().empty:  # run again inside it (fresh cases)
            self.mesh_set[signature] = sharding_impls.get_concrete_mesh()

        static = [leaf for leaf in jax.tree.leaves((args, kwargs)) if not hasattr(leaf, "aval")]
        if core.get_axis_env().axis_sizes or any(_closes_over_tracer(leaf) for leaf in static):
            # under a named vmap axis or shard_map, or handed a function that closes over a
            # value being traced: only this context can trace it, so read it now (a second
            # trace, whose side effects the koan may see: keep contracts of such TODOs to
            # programs without them), on the tracers themselves: their types carry what shapes
            # do not (the manual axes a value varies along, which a loop's carry must keep)
            traced = jax.tree.map(
                lambda x: x if isinstance(x, jax.core.Tracer) else _spec(x), (args, kwargs)
            )
            self.seen.append((signature, _read(self.function, *traced, mesh)))
            manual = mesh[0].manual_axes
            sizes = {a: n for a, n in core.get_axis_env().axis_sizes.items() if a in manual}
            call = meshes.placed(args, kwargs, sizes, mesh[1]) if sizes else None
            if call is not None and not any(_closes_over_tracer(leaf) for leaf in static):
                self.placed[signature] = call  # to run again on a smaller mesh (fresh case)
        else:
            self.seen.append((signature, (self.function, *abstract, mesh)))
            if not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((args, kwargs))):
                self.values[signature] = (args, kwargs)  # concrete: to run again (liveness)


def _closes_over_tracer(value, depth: int = 2) -> bool:
    """True when `value` is a function whose closure (or a function in it) holds a tracer."""
    import jax

    cells = getattr(value, "__closure__", None) or ()
    inner = getattr(value, "func", None)  # a functools.partial
    found = [c.cell_contents for c in cells if _filled(c)] + ([inner] if inner else [])
    found += list(getattr(value, "args", ()) or ()) if inner else []
    return any(
        isinstance(x, jax.core.Tracer) or (depth > 0 and _closes_over_tracer(x, depth - 1))
        for x in found
    )


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _spec(leaf):
    """An array (concrete or traced) becomes its shape and dtype; anything else is static."""
    import jax
    import numpy as np

    if isinstance(leaf, jax.Array | np.ndarray) or hasattr(leaf, "aval"):
        sharding = None  # where the array lives matters only on a mesh of named axes
        memory = {}  # a value in host memory keeps its memory space in its type (compute_on)
        if isinstance(leaf, jax.core.Tracer):
            aval = jax.typeof(leaf)
            typed = getattr(aval, "sharding", None)  # an Explicit mesh's type
            if isinstance(typed, jax.NamedSharding) and (
                any(typed.spec) or jax.sharding.AxisType.Explicit in typed.mesh.axis_types
            ):
                sharding = typed  # replicated on an Explicit mesh is on its devices too
            if getattr(aval, "memory_space", None) == jax.memory.Space.Host:
                memory = {"_memory_space": jax.memory.Space.Host}
                if sharding is not None:  # a sharding's own memory kind wins over the space
                    sharding, memory = sharding.with_memory_kind("pinned_host"), {}
        elif isinstance(getattr(leaf, "sharding", None), jax.NamedSharding):
            sharding = leaf.sharding
        # a weakly typed value (a Python scalar through jit) is read as one: a TODO may tell
        weak = bool(getattr(jax.typeof(leaf) if hasattr(leaf, "aval") else leaf, "weak_type", 0))
        return jax.ShapeDtypeStruct(
            np.shape(leaf), leaf.dtype, sharding=sharding, weak_type=weak, **memory
        )
    return leaf


def contracted(chapter, filename: str, traced: bool = True) -> dict[str, dict]:
    """{TODO function: contract} of `filename`'s traced (or untraced) contracts."""
    found = {}
    for key, contract in chapter.contracts.items():
        file, _, name = key.partition("::")
        if file == filename and name != "regions" and contract.get("traced", True) is traced:
            found[name] = contract
    return found


# Calls are seen through sys.monitoring's PY_START event on each contracted TODO's code object,
# so a call made through any reference counts: the module's name, a function jit captured at
# import, a rule a custom_vjp or custom_vmap registered at import, a TODO handed to another.
_TOOL = 4  # a sys.monitoring tool id no standard tool takes (0 debugger … 5 optimizer)
_WATCHED: dict = {}  # code object -> its _Calls, while a koan runs
_READING = [False]  # the reader's own traces of a TODO are not calls of the koan


_RUNNING: list = []  # the _Calls of the TODOs running in the koan's own calls, innermost last
_DEPTH = [0]  # binds in progress (a bind inside another's rule is the rule's, not the TODO's)


# code object of a callable an untraced TODO returned -> [(the TODO's _Calls, the function)]:
# closures of one code (optax's chains, schedules) are told apart by their cells
_MADE: dict = {}


def _on_end(code, offset, value):
    calls = _WATCHED.get(code)
    if calls is not None and _RUNNING and _RUNNING[-1] is calls:
        _RUNNING.pop()
        if calls.last is not None and calls.last not in calls.returned and not _READING[0]:
            with contextlib.suppress(Exception):  # never an error in the koan's own call
                _watch_made(calls, value)


def _watch_made(calls: _Calls, value) -> None:
    """Watch the calls of each function an untraced TODO's call returned (`value`)."""
    calls.returned[calls.last] = functions = _callables(value)
    for function in functions:
        made = _code_of(function)
        if made in _WATCHED:
            continue
        if made not in _MADE:
            sys.monitoring.set_local_events(_TOOL, made, sys.monitoring.events.PY_START)
        _MADE.setdefault(made, []).append((calls, function))


def _is_running(function, code, frame) -> bool:
    """True when `frame` (a call of `code`) runs `function` itself: the same closure cells, and
    for a bound method the same object, not another function of that code."""
    import inspect

    inner = function
    for _ in range(8):  # under jit's and functools' wrappers, as _code_of
        if getattr(inner, "__code__", None) is code:
            break
        inner = getattr(inner, "__wrapped__", None) or getattr(inner, "fun", None)
    if inspect.ismethod(function) and code.co_argcount:
        if frame.f_locals.get(code.co_varnames[0]) is not function.__self__:
            return False
        inner = function.__func__
    cells = getattr(inner, "__closure__", None) or ()
    return all(
        _filled(cell) and frame.f_locals.get(name) is cell.cell_contents
        for name, cell in zip(code.co_freevars, cells, strict=False)
    )


def _callables(value, limit: int = 64) -> list:
    """The functions in a result (walked into tuples, lists and dicts), in order."""
    found, stack = [], [value]
    while stack and limit:
        value, limit = stack.pop(0), limit - 1
        if isinstance(value, (tuple, list)):
            stack += list(value)
        elif isinstance(value, dict):
            stack += list(value.values())
        elif callable(value) and not isinstance(value, type) and _code_of(value) is not None:
            found.append(value)
    return found


def _watching_binds(bind):
    """Primitive.bind that also notes, while a TODO runs in the koan's own call, what it binds
    (with the programs its higher-order primitives hold): the program the koan ran."""

    from jax._src import config

    from jaxkoans.api import program

    def watched(self, *args, **params):
        if _RUNNING and not _READING[0]:
            calls, names = _RUNNING[-1], {self.name} | program.held(params)
            calls.ran.update(names)
            # work folded into constants at trace time (ensure_compile_time_eval; a library's
            # own jit traced there) is in no program
            if _DEPTH[0] == calls.depth and not config.eager_constant_folding.value:
                calls.ran_own.update(names)
        _DEPTH[0] += 1
        try:
            return bind(self, *args, **params)
        finally:
            _DEPTH[0] -= 1

    return watched


def _on_start(code, offset):
    calls = _WATCHED.get(code)
    if _READING[0]:
        return None
    if calls is None:
        frame = sys._getframe(1)
        for maker, function in _MADE.get(code, ()):  # a callable a TODO returned: its calls
            made = maker.made.setdefault(id(function), [])
            with contextlib.suppress(Exception):  # never an error in the koan's own call
                if len(made) < UNTRACED_CALLS and _is_running(function, code, frame):
                    made += _values(*_arguments(code, frame))
        return None
    _RUNNING.append(calls)
    calls.depth = _DEPTH[0]
    calls.record(*_arguments(code, sys._getframe(1)))
    return None


def _values(args: tuple, kwargs: dict) -> list:
    """[(args, kwargs)] where they hold only values, a tracer kept as its type (a jitted
    function traced: values of that type are drawn to call it again); else []."""
    import jax

    kept = jax.tree.map(lambda x: _spec(x) if isinstance(x, jax.core.Tracer) else x,
                        (args, kwargs), is_leaf=lambda x: x is None)  # fmt: skip
    return [kept] if fresh.values_only(*kept, drawn=True) else []


def _arguments(code, frame) -> tuple[tuple, dict]:
    """The (args, kwargs) a call of `code` was made with, read from its frame as it starts."""
    names, flags = code.co_varnames, code.co_flags
    positional = [frame.f_locals[n] for n in names[: code.co_argcount]]
    at = code.co_argcount
    keywords = {n: frame.f_locals[n] for n in names[at : at + code.co_kwonlyargcount]}
    at += code.co_kwonlyargcount
    if flags & inspect.CO_VARARGS:
        positional += list(frame.f_locals[names[at]])
        at += 1
    if flags & inspect.CO_VARKEYWORDS:
        keywords |= frame.f_locals[names[at]]
    return tuple(positional), keywords


def _code_of(function):
    """The code object of `function` under jit's, functools' and custom rules' wrappers."""
    for _ in range(8):
        code = getattr(function, "__code__", None)
        if code is not None:
            return code
        function = getattr(function, "__wrapped__", None) or getattr(function, "fun", None)
        if function is None:
            return None
    return None


@contextlib.contextmanager
def recording(module, contracts: dict[str, dict], expect=None):
    """Record each call of `module`'s contracted TODOs while the block runs; yield the records.
    `expect(cls, key, value)` tells the boundary of the harness's own patch (Primitive.bind)."""
    records: list[_Calls] = []
    codes = []
    for name, contract in contracts.items():
        function = getattr(module, name, None)
        code = _code_of(function) if callable(function) else None
        if code is None or code in _WATCHED:
            continue
        calls = _Calls(name, function, contract, module)
        _WATCHED[code] = calls
        codes.append(code)
        records.append(calls)
    monitoring = sys.monitoring
    events = monitoring.events
    if codes and monitoring.get_tool(_TOOL) is None:
        monitoring.use_tool_id(_TOOL, "jaxkoans contracts")
        monitoring.register_callback(_TOOL, events.PY_START, _on_start)
        monitoring.register_callback(_TOOL, events.PY_RETURN, _on_end)
    for code in codes:
        monitoring.set_local_events(_TOOL, code, events.PY_START | events.PY_RETURN)
    bound = None
    if codes:
        from jax._src import core  # Primitive.bind: every primitive's one entry

        bound = core.Primitive.__dict__["bind"]
        core.Primitive.bind = _watching_binds(bound)
        if expect:
            expect(core.Primitive, "bind", core.Primitive.__dict__["bind"])
    try:
        yield records
    finally:
        if bound is not None:
            core.Primitive.bind = bound
            if expect:
                expect(core.Primitive, "bind", bound)
        for code in [*codes, *_MADE]:
            monitoring.set_local_events(_TOOL, code, 0)
            _WATCHED.pop(code, None)
        _MADE.clear()
        _RUNNING.clear()
        _DEPTH[0] = 0


def check(records: list[_Calls], koan: str = "", profiles: dict | None = None) -> list[str]:
    """Raise ContractBroken for the first TODO whose recorded program breaks its contract (its
    primitives, its costs against the answer's `profiles`, its results on fresh inputs, its
    technique's liveness); return the TODOs whose programs were read and met theirs."""

    with compiles.shared():  # the judge's runs compile each program once (plugin/compiles.py)
        return _check(records, koan, profiles)


def _check(records: list[_Calls], koan: str, profiles: dict | None) -> list[str]:
    met = []
    for calls in records:
        problems: list[str] = []
        for signature, pending in calls.seen:
            if calls.contract.get("traced", True) is False:
                answer = (profiles or {}).get(calls.name, {}).get(costs.signature_key(signature))
                problems += _replayed(calls, signature, koan, answer)
                continue
            read = _read(*pending) if isinstance(pending, tuple) else pending
            problems += broken(read, calls.contract) + not_run(read, calls)
            if problems or isinstance(read, str):
                _log(koan, calls.name, read, signature)
                continue
            key = costs.signature_key(signature)
            answer = (profiles or {}).get(calls.name, {}).get(key)
            # only a traced contract's TODO runs again (an author's run lists every TODO)
            case = (
                _fresh_case(calls, pending, signature, read, koan, answer) if calls.contract else {}
            )
            if os.environ.get(PROGRAMS_ENV):  # an author's run that records the answers' profiles
                if calls.contract.get("liveness", True) and _runs_again(calls, signature):
                    case["carried"] = {}  # the share of the result the technique carries
                    with _as_called(calls, signature), contextlib.suppress(Exception):
                        _liveness(calls, read, signature, koan, carried=case["carried"],
                                  size=case.get("drawn") or 1.0)  # fmt: skip
                _log(koan, calls.name, read, signature, case, technique(calls.contract))
                continue
            if answer is not None:
                overrides = calls.contract.get("costs", {})
                spent = read.costs(technique(calls.contract)).as_dict()
                problems += costs.exceeded(spent, answer, overrides)
                grown = (answer.get("grown") or {}).get(costs.koan_key(koan)) or {}
                mine = (case.get("grown") or {}).get("costs")
                if grown.get("costs") and mine:
                    zh, en = fresh.doubled(grown["length"])
                    problems += [
                        f"在更大的输入上（{zh}）/ on the grown call ({en}): {problem}"
                        for problem in costs.exceeded(mine, grown["costs"], overrides)
                    ]
            problems += _fresh_problems(case, answer, costs.koan_key(koan))
            if not _runs_again(calls, signature, answer, koan) or problems:
                continue
            with _as_called(calls, signature):
                # inputs of no array type to move: the asserts judged it
                with contextlib.suppress(Exception):
                    if calls.contract.get("liveness", True):
                        mine = costs.koan_key(koan)
                        shares = (answer or {}).get("carried") or {}
                        size = ((answer or {}).get("drawn") or {}).get(mine) or 1.0
                        problems += _liveness(
                            calls, read, signature, koan, shares.get(mine), size=size
                        )
                if calls.contract.get("fresh") and isinstance(pending, tuple) and not problems:
                    problems += disagreements(calls, pending[1], pending[2], koan)
        if problems:
            raise ContractBroken(calls.name, list(dict.fromkeys(problems)))
        if calls.seen and calls.contract and calls.contract.get("traced", True):
            met.append(calls.name)
    return met


def not_run(read, calls: _Calls) -> list[str]:
    """The program read must be the program that ran: each technique the reader's trace of the
    TODO holds must have been bound while the koan itself ran the TODO (a TODO that shows the
    reader, or its later calls, another program than the koan's own calls does not count)."""
    if isinstance(read, str):
        return []
    shown = read.every()
    # a loop or call that only holds a program is left to the steps and costs: JAX may bind it
    # by another path under a transform (a forward-mode while)
    techniques = [n for n in calls.contract.get("on_path", ()) if n not in _STRUCTURE]
    missing = [n for n in techniques if shown[n] and n not in calls.ran]
    hidden = [n for n in calls.contract.get("absent", ()) if n in calls.ran_own and not shown[n]]
    said = {  # (zh, en) of what the read and the run disagree on
        "missing": ("读到的程序里有 {}，但 koan 自己调用这个 TODO 时从未用到它",
                    "the program read holds {}, which the koan's own calls of the TODO never bound"),
        "hidden": ("koan 自己调用这个 TODO 时用到了 {}（它不应出现），读到的程序里却没有",
                   "the koan's own calls of the TODO bound {}, which must not appear and which "
                   "the program read does not hold"),
    }  # fmt: skip
    problems = []
    for kind, found in (("missing", missing), ("hidden", hidden)):
        if found:
            names = ", ".join(f"`{n}`" for n in found)
            zh, en = (text.format(names) for text in said[kind])
            problems.append(
                f"{zh}：读到的程序不是运行的程序 / {en}: the program read is not the program "
                "that ran (a TODO that behaves otherwise when called again does not count)"
            )
    return problems


def _inputs(calls: _Calls, pending, signature: str, seed: int, size: float = 1.0):
    """The call's own (args, kwargs), or new values of its types where JAX called it on tracers
    (floats drawn times `size`)."""
    if signature in calls.values:
        return calls.values[signature]
    return fresh.drawn(pending[1], pending[2], seed, size)


DRAWN = (1.0, 0.1, 0.01)  # the sizes an author's run tries for values drawn in place of tracers


def _fresh_case(calls: _Calls, pending, signature: str, read, koan: str, answer) -> dict:
    """What the TODO gives on inputs the test never showed (plugin/fresh.py): its fingerprint on
    the call moved ("moved"), the steps its data-dependent loops took there ("steps",
    plugin/trips.py), and its fingerprint on the call grown along one length ("grown": the one
    the answer's profile names, or in an author's run the first length the answer runs at).
    How it was moved ("scale", "ints", "drawn") is the answer's: an author's run keeps the
    boldest move on which the answer still runs and stays near its unmoved result.
    A run that raises gives its error's first line; none runs where the TODO was read in place
    under shard_map."""
    import zlib

    seed = zlib.crc32(f"{calls.name}::{costs.signature_key(signature)}".encode())
    if calls.contract.get("batched_output"):  # compared with the batch axis in front
        calls = replace(calls, function=_batch_in_front(calls.function))
    wanted = os.environ.get(PROGRAMS_ENV) or ((answer or {}).get("mesh") or {}).get(
        costs.koan_key(koan)
    )
    if signature in calls.placed and wanted:  # the answer's profile keeps one per TODO
        return {"mesh": _on_a_mesh(calls, calls.placed[signature], seed, wanted)}
    if not isinstance(pending, tuple):
        return {}
    mine = costs.koan_key(koan)
    found: dict = {}
    _READING[0] = True
    try:
        with _as_called(calls, signature):
            if os.environ.get(PROGRAMS_ENV):
                found |= _boldest(calls, pending, signature, seed, read)
            else:
                kept = {k: ((answer or {}).get(k) or {}).get(mine) for k in fresh.MOVES}
                found |= {k: v for k, v in kept.items() if v is not None}
                args, kwargs = _inputs(calls, pending, signature, seed, kept["drawn"] or 1.0)
                scale = fresh.SCALE if kept["scale"] is None else kept["scale"]
                if not (kept["ints"] and _on_a_chip()):
                    found["moved"], found["steps"] = _moved_run(
                        calls.function, args, kwargs, seed, read, scale, bool(kept["ints"])
                    )
            if os.environ.get(PROGRAMS_ENV) or _spent((args, kwargs)):
                # drawn again alike (the same seed and size), unless the ones drawn above are
                # intact: a learner's run draws them for the moved call at the answer's size
                args, kwargs = _inputs(calls, pending, signature, seed, found.get("drawn") or 1.0)
            if os.environ.get(PROGRAMS_ENV):
                # every length at once first: a written-in size of any axis meets another size
                every = fresh.lengths(args, kwargs)
                tries = [(every, i) for i in (True, False)] if len(every) > 1 else []
                tries += [(n, i) for n in every[:3] for i in (True, False)]
            else:
                grown = ((answer or {}).get("grown") or {}).get(mine) or {}
                tries = [(grown.get("length"), bool(grown.get("ints")))]
            for length, ints in tries:
                if not length:
                    continue
                printed = _outcome(
                    lambda n=length, i=ints: fresh.run(
                        calls.function, args, kwargs, seed, n, ints=i
                    )
                )
                found["grown"] = {"length": length, "print": printed} | (
                    {"ints": True} if ints else {}
                )
                if isinstance(printed, list) or not os.environ.get(PROGRAMS_ENV):
                    break  # an author's run tries the next way where the answer raised
            if isinstance((found.get("grown") or {}).get("print"), list):
                found["grown"]["costs"] = _grown_costs(calls, args, kwargs, found["grown"],
                                                       seed, pending[3])  # fmt: skip
            found["scaled"] = _scaled_case(calls.function, args, kwargs, seed,
                                           ((answer or {}).get("scaled") or {}).get(mine))  # fmt: skip
            found["bold"] = _bold_case(calls.function, args, kwargs, seed,
                                       ((answer or {}).get("bold") or {}).get(mine), read)  # fmt: skip
    except Exception as error:
        found["moved"] = _first_line(error)
    finally:
        _READING[0] = False
    return found


def _scaled_case(function, args, kwargs, seed: int, answers: dict | None) -> dict | None:
    """The call with its floats scaled down (fresh.scaled), each output scaled back by the
    answer's power of the factor; in an author's run, the answer's powers where its result
    scales with its inputs (else None: no such case)."""
    printed = _outcome(lambda: fresh.scaled(function, args, kwargs, seed))
    if not os.environ.get(PROGRAMS_ENV):
        if not answers:
            return None
        if isinstance(printed, list) and len(printed) == len(answers["powers"]):
            printed = fresh.unscaled(printed, answers["powers"])
        return {"print": printed}
    base = _outcome(lambda: fresh.run(function, args, kwargs, seed, scale=0.0))
    if not isinstance(printed, list) or not isinstance(base, list):
        return None
    powers = fresh.powers(printed, base)
    return None if powers is None else {"powers": powers, "print": fresh.unscaled(printed, powers)}


def _bold_case(function, args, kwargs, seed: int, answers: dict | None, read) -> dict | None:
    """The call with its floats BOLD times larger (fresh.scaled); in an author's run kept where
    the answer's result there is finite and a NUDGE more moves it less than the tolerance, and
    where the answer has no loop whose trip count depends on the data (an adaptive step, a
    Newton iteration may not end on values 32 times larger)."""
    if not fresh.floats(args, kwargs) or not (answers or os.environ.get(PROGRAMS_ENV)):
        return None
    if not answers and read.costs().data_dependent_loops:
        return None
    printed = _outcome(lambda: fresh.scaled(function, args, kwargs, seed, fresh.BOLD))
    if not os.environ.get(PROGRAMS_ENV):
        return {"print": printed}
    factor = fresh.BOLD * (1 + fresh.NUDGE)
    nudged = _outcome(lambda: fresh.scaled(function, args, kwargs, seed, factor))
    if not (isinstance(printed, list) and isinstance(nudged, list)) or fresh.diverged(printed):
        return None
    return None if fresh.differs(nudged, printed) else {"print": printed}


def _replayed(calls: _Calls, signature: str, koan: str, answer: dict | None) -> list[str]:
    """An untraced TODO called on plain values (numbers, shapes, arrays) is called again on
    them moved (floats, and where the answer gives the same result twice every int one up):
    a table of the test's values, a count written in, is wrong there. Each callable in its
    result (a schedule, a step function, an optimizer's update) is called as the koan called
    it, on those values moved alike. An author's run logs the answer's result there; a
    learner's run is held to it."""
    import zlib

    seed = zlib.crc32(f"{calls.name}::{costs.signature_key(signature)}".encode())
    args, kwargs = calls.values[signature]
    made = [calls.made.get(id(f)) or [] for f in calls.returned.get(signature) or []]
    if not fresh.movable(args, kwargs) and not any(made):
        return []  # nothing a move changes: the koan's own call was judged by its asserts
    mine = costs.koan_key(koan)

    def run(scale: float, *how: bool, nudge: float = 1.0, length: int | list = 0):  # how: ints,
        # signs, names
        function = _remade(calls.function, made, seed, scale, *how, nudge=nudge, length=length)
        printed = _outcome(
            lambda: fresh.run(function, args, kwargs, seed, 0, scale, *how, nudge=nudge)
        )
        layout[:] = [getattr(function, "layout", 0)]
        return printed

    layout = [0]  # the last run's leaves shaped as its calls' arguments (_remade)
    _READING[0] = True
    try:
        if not os.environ.get(PROGRAMS_ENV):
            expected = ((answer or {}).get("fresh") or {}).get(mine)
            if not isinstance(expected, list):
                return []
            scale = ((answer or {}).get("scale") or {}).get(mine)
            how = (bool(((answer or {}).get(k) or {}).get(mine)) for k in REPLAYS)
            moved, shaped = run(fresh.SCALE if scale is None else scale, *how), layout[0]
            longer = ((answer or {}).get("grown") or {}).get(mine) or {}
            grown = run(0.0, length=longer["length"]) if longer else None
            if any(made) and isinstance(moved, list) and len(moved) != len(expected):
                # its callables return another layout (an optimizer's state): honest; what is
                # shaped as their arguments (the updates) is still compared
                if not shaped or shaped != ((answer or {}).get("layout") or {}).get(mine):
                    return []
                floor = (((answer or {}).get("floors") or {}).get(mine) or [])[:shaped]
                answer = {"fresh": {mine: expected[:shaped]}, "floors": {mine: floor}} | (
                    {"grown": {mine: longer | {"print": longer["print"][:shaped]}}} if longer else {}
                )
                moved = moved[:shaped]
                grown = grown[:shaped] if isinstance(grown, list) else grown
            return _fresh_problems({"moved": moved, "grown": {"print": grown}}, answer, mine)
        base = run(0.0, False, False, False)
        # the boldest case the answer stays near its base on: dict keys renamed and ints one
        # up where it still runs; a non-negative array kept so only where moving it across
        # zero takes the answer off (an optimizer's zero second moment: its root is NaN); the
        # move shrunk where the values are far smaller than one (its moments, again)
        for scale, signs, names, ints in itertools.product(
            (fresh.SCALE, fresh.SCALE / 100, fresh.SCALE / 10_000), (False, True), (True, False),
            (True, False),
        ):
            printed = run(scale, ints, signs, names)
            again = run(scale, ints, signs, names)  # the same twice: no clock, no address
            if (
                isinstance(printed, list)
                and isinstance(again, list)
                and not fresh.differs(again, printed)
                and not fresh.far(printed, base)
            ):
                how = dict(zip(REPLAYS, (ints, signs, names), strict=True))
                shaped = layout[0]
                # how far rounding moves each output there: a small one is compared at its scale
                nudged = run(scale, ints, signs, names, nudge=1 + fresh.NUDGE)
                floor = (
                    fresh.floors(nudged, printed)
                    if isinstance(nudged, list) and len(nudged) == len(printed)
                    else None
                )
                _log_replayed(koan, calls.name, signature, printed, scale, how, shaped, floor,
                              _longer(run, made))  # fmt: skip
                break
        return []
    finally:
        _READING[0] = False


def _longer(run, made: list) -> dict:
    """An author's run: the callables' calls grown along every length of their arrays at once,
    else along one (largest first), where the answer gives one result twice: a size, count or
    cap written in for the test's calls (a scan over at most as many steps as the koan runs)
    meets a longer one."""
    lengths = sorted({n for calls in made for a, k in calls for n in fresh.lengths(a, k)})[::-1]
    for length in ([lengths] if len(lengths) > 1 else []) + lengths[:3]:
        printed, again = run(0.0, length=length), run(0.0, length=length)
        if isinstance(printed, list) and isinstance(again, list) and not fresh.differs(
            again, printed
        ):
            return {"length": length, "print": printed}
    return {}


def _remade(
    function, made: list, seed: int, scale: float, *how: bool, nudge: float = 1.0,
    length: int | list = 0,
):
    """`function` whose result's callables are each called as the koan called them (`made`:
    per callable, its (args, kwargs)), on those moved alike (with `length`, grown along it):
    the result's other leaves, then what each call returned (a value of no array type as its
    text). The elements of a call's output shaped as one of its arguments that no call made
    (an update's updates, shaped as the grads, not its state, shaped as what init made) come
    first; the function's `layout` is then how many leaves they hold. A dict key an earlier call's result held before any
    call was handed it (a named chain's step names, in the state init made) keeps its name."""
    if not any(made):
        return function

    def remade(*args, **kwargs):
        import inspect
        import re

        import jax

        out = function(*args, **kwargs)
        shaped, other = [], [leaf for leaf in jax.tree.leaves(out) if not callable(leaf)]
        made_here = set()  # the structures the calls made: a state, not a result
        handed, named = set(), set()  # dict keys handed to a call first, and given by one
        for i, (again, calls) in enumerate(zip(_callables(out), made, strict=False)):
            for j, (a, k) in enumerate(calls):
                a = a[1:] if inspect.ismethod(again) else a  # its frame's args hold self
                a, k = fresh.drawn(a, k, seed + 7 * i + j)  # where it was traced: new values
                seen = fresh.keys((a, k))
                kept = frozenset((seen & named) - handed)
                handed |= seen - kept
                a, k = fresh.grown(a, k, length, seed + 7 * i + j) if length else fresh.moved(
                    a, k, seed + 7 * i + j, scale, *how, counters=True, nudge=nudge, kept=kept
                )
                result = again(*a, **k)
                named |= fresh.keys(result)
                inputs = {jax.tree.structure(x) for x in (*a, *k.values())} - made_here
                made_here.add(jax.tree.structure(result))
                for element in result if type(result) is tuple else (result,):
                    like = jax.tree.structure(element)
                    into = shaped if like in inputs else other
                    made_here |= set() if like in inputs else {like}
                    into += [
                        leaf if isinstance(leaf, int | float | bool) or hasattr(leaf, "dtype")
                        else re.sub(r" at 0x[0-9a-f]+", "", repr(leaf))
                        for leaf in jax.tree.leaves(element)
                    ]  # fmt: skip
        remade.layout = len(shaped)
        return shaped + other

    return remade


def _log_replayed(
    koan: str, name: str, signature: str, printed: list, scale: float, how: dict, layout: int,
    floor: list | None, longer: dict,
) -> None:
    import json

    mine = costs.koan_key(koan)
    kept = {k: {mine: True} if on else {} for k, on in how.items()}
    entry = {"koan": koan, "todo": name, "signature": costs.signature_key(signature),
             "costs": {"fresh": {mine: printed}, "scale": {} if scale == fresh.SCALE else {mine: scale},
                       "layout": {mine: layout} if layout else {},
                       "floors": {mine: floor} if floor else {},
                       "grown": {mine: longer} if longer else {}, **kept}}  # fmt: skip
    with open(os.environ[PROGRAMS_ENV], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def _spent(values) -> bool:
    """True when an array among `values` was deleted (donated to a call that ran)."""
    import jax

    return any(
        isinstance(leaf, jax.Array) and leaf.is_deleted() for leaf in jax.tree.leaves(values)
    )


def _batch_in_front(rule):
    """A batching rule whose (output, batch axis) comes back as the output with that axis first:
    a rule that leaves the batch axis elsewhere, and says so, computes the same."""

    def canonical(*args, **kwargs):
        import jax.numpy as jnp

        out, axis = rule(*args, **kwargs)
        return out if axis is None else jnp.moveaxis(out, axis, 0)

    return canonical


def _grown_costs(calls: _Calls, args, kwargs, grown: dict, seed: int, mesh) -> dict | None:
    """What the program costs on the grown call (read by the one reader, as the koan's own call
    is): work that grows faster than the answer's (a dense matrix for a scan, rows one at a
    time) shows there even where the test's size hides it in the bound's slack."""
    import jax

    new = fresh.grown(args, kwargs, grown["length"], seed, bool(grown.get("ints")))
    read = _read(calls.function, *jax.tree.map(_spec, new), mesh)
    return None if isinstance(read, str) else read.costs(technique(calls.contract)).as_dict()


def _on_a_mesh(calls: _Calls, call, seed: int, wanted) -> dict:
    """The TODO's fingerprint on another mesh, each axis halved (plugin/meshes.py), and on
    its floats drawn smaller and larger there, with the sizes it ran at: the call's global
    shapes kept, or its blocks' where the answer's profile says so (an author's run keeps the first way the answer runs). Where the contract says why
    the problem has no answer on a smaller mesh, on the koan's own mesh with new values."""
    ways = [False, True] if os.environ.get(PROGRAMS_ENV) else [bool(wanted.get("blocks"))]
    same = bool(calls.contract.get("smaller_mesh"))

    def run(size: float = 1.0):
        return _outcome(lambda: meshes.run(calls.function, call, seed, blocks, same, size))

    _READING[0] = True
    try:
        for blocks in ways:
            printed = run()
            if isinstance(printed, list):
                break
        # its floats drawn far smaller and far larger (the same program, run again): a trick
        # right only over the range of the values drawn at size one (a floored gate, a clamp);
        # an author's run keeps a size where the answer is finite and a NUDGE moves it less
        # than the tolerance
        sized = {}
        for size in fresh.DRAWN_AT if isinstance(printed, list) else ():
            key = f"{size:g}"
            if not os.environ.get(PROGRAMS_ENV):
                sized[key] = run(size) if key in (wanted.get("sized") or {}) else None
                continue
            at, nudged = run(size), run(size * (1 + fresh.NUDGE))
            if isinstance(at, list) and isinstance(nudged, list) and not fresh.diverged(at) \
                    and not fresh.differs(nudged, at):  # fmt: skip
                sized[key] = at
    finally:
        _READING[0] = False
    sizes = dict(call.sizes) if same else meshes.smaller(call.sizes)
    return {"sizes": sizes, "print": printed} | ({"blocks": True} if blocks else {}) | (
        {"same": True} if same else {}
    ) | ({"sized": {k: v for k, v in sized.items() if v is not None}} if sized else {})


def _on_a_chip() -> bool:
    """A TPU or GPU run: counts moved on the CPU interpreter (a block size one up) may be
    shapes the chip's compiler refuses, so that fresh case is the CPU's alone."""
    import jax

    return jax.default_backend() in ("tpu", "gpu")


def _boldest(calls: _Calls, pending, signature: str, seed: int, read) -> dict:
    """An author's run: the answer's fresh case at the boldest move it stays near its unmoved
    result on (an iteration off its basin, an explicit step past its stability limit, a count
    its inputs do not allow are not fresh cases): values drawn for tracers as large as stays
    finite, every int one up where the answer still runs, then the floats' move shrunk, at last
    to none (the steps its loops take on the koan's own inputs are still compared)."""
    for size in (*(DRAWN if signature not in calls.values else ()), 1.0):
        args, kwargs = _inputs(calls, pending, signature, seed, size)
        base = _outcome(lambda a=args, k=kwargs: fresh.run(calls.function, a, k, seed, scale=0.0))
        if fresh.tame(base, args, kwargs):
            break  # else at last the koan's own values, or drawn as large as the test's type
    scale = fresh.SCALE
    while True:  # at each move of the floats, every int one up first (a count written in)
        for ints in (True, False):
            printed, steps = _moved_run(calls.function, args, kwargs, seed, read, scale, ints)
            if not isinstance(printed, list):
                if ints:
                    continue
                break  # the floats' move alone raises: kept as it is
            if fresh.far(printed, base):
                continue
            if not ints:
                break
            # a count moved past what the inputs allow may leave memory unwritten (a block size
            # that no longer divides the length): such a case is not the same twice
            again = _outcome(
                lambda s=scale: fresh.run(calls.function, args, kwargs, seed, scale=s, ints=True)
            )
            if isinstance(again, list) and not fresh.differs(again, printed):
                break
        else:
            if scale > 0:
                scale = scale / 10 if scale > fresh.SCALE / 50 else 0.0  # at last: unmoved
                continue
        break
    return {
        "moved": printed,
        "steps": steps,
        "scale": scale if scale != fresh.SCALE else None,
        "ints": ints or None,
        "drawn": size if size != 1.0 else None,
    }


def _moved_run(function, args, kwargs, seed: int, read, scale: float, ints: bool = False):
    """The fingerprint on the moved call, and the steps taken by data-dependent loops there
    (None when the program has none)."""
    import jax

    def run():
        return fresh.run(function, args, kwargs, seed, scale=scale, ints=ints)

    if not read.costs().data_dependent_loops:
        return _outcome(run), None
    from jaxkoans.plugin import trips

    try:
        with trips.counting() as steps:
            printed = run()
            jax.effects_barrier()
        return printed, sum(steps)
    except Exception:  # a loop the counter cannot rewrite: the fingerprint alone
        return _outcome(run), None


def _outcome(run):
    try:
        return run()
    except Exception as error:
        return _first_line(error)


def _first_line(error: Exception) -> str:
    return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}"


# the cases of the test's inputs scaled (fresh.scaled): what a wrong result there shows
_SCALED_CASES = {
    "scaled": (
        "在缩小 2^24 倍的输入上（结果按参考答案的方式放大回来）结果与参考答案不同：阈值或 eps "
        "这样的尺度被写进了代码",
        "on the test's inputs scaled down by 2^-24 (the result scaled back as the answer's scales) "
        "the result is not the answer's: {why}; a scale written in (a threshold, an eps) meets "
        "values below it",
    ),
    "bold": (
        "在放大 32 倍的输入上结果与参考答案不同：只在测试数值的范围里成立的写法（固定的平移、"
        "级数、截断）到了范围之外",
        "on the test's inputs scaled up by 32 the result is not the answer's: {why}; a way right "
        "only over the range the test's values span (a fixed shift, a series, a clamp) meets "
        "values past it",
    ),
}


def _fresh_problems(case: dict, answer: dict | None, koan: str) -> list[str]:
    """Where the TODO's fresh case is not the answer's: another result on the moved call or the
    grown one, or more loop steps."""
    answer = answer or {}
    problems = []
    expected = (answer.get("fresh") or {}).get(koan)  # this koan's call, moved
    why = _why(case.get("moved"), expected, (answer.get("floors") or {}).get(koan))
    if why:
        problems.append(
            f"在测试没有见过的输入上（同一个调用，数值略作移动）结果与参考答案不同 / on inputs the "
            f"test never showed (its own call, the numbers moved a little) the result is not the "
            f"answer's: {why}"
        )
    grown = (answer.get("grown") or {}).get(koan)
    why = _why((case.get("grown") or {}).get("print"), (grown or {}).get("print"))
    if why:
        zh, en = fresh.doubled(grown["length"])
        problems.append(
            f"在更大的输入上（{zh}）结果与参考答案不同 / on a larger input the test never showed "
            f"({en}) the result is not the answer's: {why}"
        )
    on_mesh = (answer.get("mesh") or {}).get(koan) or {}
    why = _why((case.get("mesh") or {}).get("print"), on_mesh.get("print"))
    for size, theirs in (on_mesh.get("sized") or {}).items():
        mine = ((case.get("mesh") or {}).get("sized") or {}).get(size)
        more = _why(mine if mine is not None else "no result", theirs)
        why = why or (more and f"{more} (its floats drawn times {size})")
    if why:
        sizes = ", ".join(f"{a}={n}" for a, n in on_mesh["sizes"].items())
        zh, en = ("同一个网格、新的数值", "new values on the koan's own mesh") if on_mesh.get(
            "same"
        ) else ("更小的网格", "a smaller mesh the test never used")
        problems.append(f"在{zh}上（{sizes}）结果与参考答案不同 / on {en} ({sizes}) the result "
                        f"is not the answer's: {why}")  # fmt: skip
    for key, (zh, en) in _SCALED_CASES.items():
        theirs = ((answer.get(key) or {}).get(koan) or {}).get("print")
        why = _why((case.get(key) or {}).get("print"), theirs)
        if why:
            problems.append(f"{zh} / {en.format(why=why)}")
    steps = (answer.get("steps") or {}).get(koan)
    problems += costs.more_steps(case.get("steps"), steps)
    return problems


def _why(mine, expected, floor: list | None = None) -> str:
    if not isinstance(expected, list):
        return ""  # no answer's run to compare with (or the answer could not run there)
    return mine if isinstance(mine, str) else fresh.differs(mine, expected, floor) if mine else ""


def _liveness(
    calls: _Calls,
    read,
    signature: str,
    koan: str,
    answer: dict | None = None,
    carried: dict | None = None,
    size: float = 1.0,
) -> list[str]:
    """The contract's technique, run on the koan's own inputs, must vary with them and carry
    as much of the result as the answer's (`answer`: its shares; plugin/liveness.py); the
    shares carried are written to `carried`."""
    import zlib

    from jaxkoans.plugin import liveness

    techniques = {n: read.primitive(n) for n in perturbed(calls.contract)}
    techniques = {n: p for n, p in techniques.items() if p is not None}
    every, live = read.every(), read.live()
    dead = {n: every[p.name] - live[p.name] for n, p in techniques.items()}  # dead code
    pending = calls.pending(signature)
    seed = zlib.crc32(costs.koan_key(koan).encode())  # the same in a gate's copy of the file
    _READING[0] = True
    try:
        if signature in calls.placed:  # under shard_map: run there, on the call's own mesh
            function, args = meshes.mapped(calls.function, calls.placed[signature], seed)
            return liveness.problems(function, techniques, args, {}, seed, answer, carried, dead)
        args, kwargs = _inputs(calls, pending, signature, seed, size)  # drawn as the fresh case's
        return liveness.problems(calls.function, techniques, args, kwargs, seed, answer, carried,
                                 dead)  # fmt: skip
    finally:
        _READING[0] = False


# Primitives that only hold a program (their outputs are their body's): the body's technique,
# not the holder, is perturbed.
_STRUCTURE = ("pjit", "jit", "closed_call", "remat2", "checkpoint", "custom_jvp_call",
              "custom_vjp_call", "shard_map", "scan", "while", "cond")  # fmt: skip
# holders whose bodies do a technique's work (plugin/costs.py: its place)
_HOLDS_WORK = ("scan", "while", "cond", "remat2", "checkpoint", "custom_jvp_call",
               "custom_vjp_call", "shard_map", "call_hi_primitive", "custom_linear_solve")  # fmt: skip
# holders whose outputs liveness may change: not a while (changed, its outputs may steer
# another loop that then never ends)
_LOOPS = ("scan", "cond", "remat2", "shard_map")


def perturbed(contract: dict) -> list[str]:
    """The contract's techniques liveness changes the outputs of: those inside a holder; where
    it names only holders (a scan that accumulates, a while that searches), the loops."""
    named = contract.get("on_path", ())
    return [n for n in named if n not in _STRUCTURE] or [n for n in named if n in _LOOPS]


def jax_x64(on: bool):
    import jax

    return jax.enable_x64(on)


def _runs_again(calls: _Calls, signature: str, answer: dict | None = None, koan: str = "") -> bool:
    """The judge can run the TODO's call again: read after the koan, or read in place under
    shard_map where the call can be placed on a mesh (plugin/meshes.py); in a learner's run,
    such a call only in the koan whose smaller mesh the answer's profile keeps (each costs
    compiles: one koan per TODO holds it)."""
    pending = calls.pending(signature)
    if signature not in calls.placed or os.environ.get(PROGRAMS_ENV):
        return isinstance(pending, tuple) or signature in calls.placed
    return bool(((answer or {}).get("mesh") or {}).get(costs.koan_key(koan)))


def _as_called(calls: _Calls, signature: str) -> contextlib.ExitStack:
    """Float64 on or off, and the mesh `jax.set_mesh` put in force, as at the koan's call:
    the judge's runs (fresh cases, liveness) happen after the koan left its blocks."""
    import jax

    stack = contextlib.ExitStack()
    pending = calls.pending(signature)
    placed = calls.placed.get(signature)
    stack.enter_context(jax_x64(placed.x64 if placed else pending[3][1]))
    if signature in calls.mesh_set:
        stack.enter_context(jax.set_mesh(calls.mesh_set[signature]))
    return stack


def disagreements(calls: _Calls, args, kwargs, koan: str) -> list[str]:
    """The TODO called on fresh inputs must agree with the koan file's reference named by its
    contract's `fresh`: a TODO that reads the test's own data instead of its arguments does not."""
    import zlib

    import jax
    import numpy as np

    reference = getattr(calls.module, calls.contract["fresh"], None)
    if not callable(reference):
        return [f"`fresh` names no function of the koan's file: {calls.contract['fresh']}"]
    new_args, new_kwargs = fresh.drawn(args, kwargs, zlib.crc32(koan.encode()))
    _READING[0] = True
    try:
        got = jax.tree.map(np.asarray, calls.function(*new_args, **new_kwargs))
        expected = jax.tree.map(np.asarray, reference(*new_args, **new_kwargs))
        jax.tree.map(
            lambda g, e: np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5), got, expected
        )
    except Exception as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return [
            f"在测试没有见过的新输入上与参考实现 {calls.contract['fresh']} 不一致 / on new inputs "
            f"the test never showed, it disagrees with the reference {calls.contract['fresh']}: "
            f"{first}"
        ]
    finally:
        _READING[0] = False
    return []


def technique(contract: dict) -> tuple[str, ...]:
    """The holders a contract names as its technique: work inside them is the technique's (a
    scatter's or a reduction's combiner is not work it holds)."""
    named = (*contract.get("on_path", ()), *contract.get("in_loop", ()))
    return tuple(n for n in named if n in _HOLDS_WORK)


def _log(
    koan: str, name: str, read, signature: str = "", case: dict | None = None, held: tuple = ()
) -> None:
    import json

    path = os.environ.get(PROGRAMS_ENV)
    if not path:
        return
    entry = {"koan": koan, "todo": name, "signature": costs.signature_key(signature)}
    if isinstance(read, str):
        entry["error"] = read
    else:
        mine, case = costs.koan_key(koan), case or {}
        ran = {  # the answer's fresh case, where it ran (costs.json: per koan)
            "fresh": case.get("moved") if isinstance(case.get("moved"), list) else None,
            "grown": case.get("grown") if isinstance((case.get("grown") or {}).get("print"), list) else None,
            "steps": case.get("steps"),
            "carried": case.get("carried") or None,
            "mesh": case.get("mesh") if isinstance((case.get("mesh") or {}).get("print"), list) else None,
            "scaled": case.get("scaled") or None,
            "bold": case.get("bold") or None,
        } | {k: case.get(k) for k in fresh.MOVES}  # fmt: skip
        entry |= {"live": dict(read.live()), "every": dict(read.every()),
                  "largest_live": read.largest_live(),
                  "costs": read.costs(held).as_dict()
                  | {k: {mine: v} if v is not None else {} for k, v in ran.items()}}  # fmt: skip
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def to_read(chapter, filename: str, todos) -> dict[str, dict]:
    """The TODO functions to record in `filename`: the contracted ones, and with PROGRAMS_ENV
    set every TODO function (`todos`: their names) with an empty contract."""

    found = contracted(chapter, filename) | contracted(chapter, filename, traced=False)
    if os.environ.get(PROGRAMS_ENV):
        found = {name: {} for name in todos} | found
    return found


def _read(function, args, kwargs, mesh):
    """The program `function` builds on `args` (shapes, or the tracers of the trace in progress),
    or why it cannot be traced."""
    import jax

    from jaxkoans.api import program as program_reader

    rebuilt, specs = fresh.over_arrays(
        function, args, kwargs, jax.ShapeDtypeStruct | jax.core.Tracer
    )
    mesh, x64 = mesh  # as in force at the call: the mesh and float64 (jax.enable_x64 blocks)
    context = jax.sharding.use_abstract_mesh(mesh) if mesh.axis_names else contextlib.nullcontext()
    _READING[0] = True
    try:
        with context, jax.enable_x64(x64):
            return program_reader.read(jax.make_jaxpr(rebuilt)(*specs))
    except Exception as error:
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    finally:
        _READING[0] = False


def broken(read, contract: dict) -> list[str]:
    """What `read` (a program, or why none could be traced) lacks of `contract`, in words."""
    if not any(contract.get(k) is not None for k in ASKS):
        return []  # nothing asked of the program (an author's PROGRAMS_ENV run logs it)
    if isinstance(read, str):
        return [f"无法追踪成一个 JAX 程序 / it cannot be traced into a JAX program ({read})"]
    problems = []
    for name in contract.get("on_path", ()):
        if not read.on_path(name):
            where = (
                "只在不影响结果的死代码里 / only in code no output depends on"
                if read.anywhere(name)
                else "没有出现 / it does not appear"
            )
            problems.append(
                f"`{name}` 必须在从输入到输出的路径上 / must lie on the path from the inputs "
                f"to the outputs: {where}"
            )
    for i, each in enumerate(read.outputs if contract.get("each_output") else ()):
        for name in contract.get("on_path", ()):
            if not each.on_path(name):
                problems.append(
                    f"输出 {i} 不经过 `{name}` / output {i} does not go through `{name}`: every "
                    "output must come from it"
                )
    for name in contract.get("in_loop", ()):
        if not read.in_loop(name):
            problems.append(
                f"`{name}` 必须在循环体里（每一步都算）/ must run inside a loop body, once per "
                "step (a scan or while_loop), not once outside it"
            )
    for name in contract.get("absent", ()):
        if read.anywhere(name):
            problems.append(
                f"`{name}` 不应出现（它替代了本课的技术）/ must not appear (it stands in for the "
                "lesson's technique)"
            )
    limit = contract.get("max_intermediate")
    if limit is not None and read.largest_live() > limit:
        problems.append(
            f"最大的中间数组有 {read.largest_live()} 个元素，上限 {limit} / the largest "
            f"intermediate holds {read.largest_live()} elements, more than {limit}"
        )
    return problems
