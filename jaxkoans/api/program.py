"""The one program reader: what a JAX program computes, read from its jaxpr or compiled HLO.

A technique check asks whether a primitive lies on the path from a program's inputs to its
outputs, not whether its name appears in the printed text. So the reader walks every
sub-program (jit/pjit bodies, both branches of `cond`, `while`/`scan` bodies, custom_jvp/vjp
rules, `shard_map`, `checkpoint`, Pallas kernels) and follows the data backwards from the
outputs. An equation is *live* when an output needs it. A value that is known to be zero (a
literal zero, a product with one, `x - x`) or a select whose predicate is a literal carries
nothing, so `x + 0.0 * kernel(x)` leaves the kernel dead, as does a loop whose result is
discarded. JAX's own `dce_jaxpr` keeps such a product (it is used), hence this reader's own cut.

Compiled HLO is read the same way (`hlo_ops`): instructions reachable from ENTRY's ROOT through
their operands, descending into the computations a live instruction calls (fusions, `to_apply`,
`called_computations`, loop bodies), never a count of a substring.

What a program costs (`Program.costs`) is read from the same walk, every loop body times its
trip count and a kernel body times its grid (a `pl.when` whose choice the grid decides only
at the grid points that take it: `kernel_branches`); flops per primitive come from
`jax.experimental.roofline`'s rules. The koans' instruments that read programs live here too
(`jaxkoans.api.probes` re-exports them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import re
import sys
import weakref
from collections import Counter
from dataclasses import dataclass, field

import jax
import numpy as np
from jax.extend import core as jex

from jaxkoans.api import kernel_branches

# Equations whose sub-program maps its inputs and outputs one to one onto the equation's.
_CALLS = ("jit", "pjit", "closed_call", "core_call", "remat", "checkpoint", "shard_map",
          "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "custom_lin",
          "xla_call", "named_call", "remat2")  # fmt: skip
_HOLDERS = (*_CALLS, "scan", "while", "cond")  # equations that hold sub-programs
# a view of its operand, no new buffer (XLA makes it a bitcast): an input reshaped is no
# intermediate, and an intermediate reshaped was counted where it was made
_VIEWS = ("reshape", "squeeze")
_PASS_ZERO = ("broadcast_in_dim", "convert_element_type", "reshape", "squeeze", "transpose",
              "expand_dims", "copy", "copy_p", "neg", "reduce_sum", "slice", "dynamic_slice",
              "rev", "reduce_precision")  # fmt: skip


@dataclass(frozen=True)
class Equation:
    """One equation of the program, at any depth."""

    primitive: str
    live: bool  # some output of the whole program depends on it
    depth: int  # 0: the top level
    sizes: tuple[int, ...]  # elements of each of its outputs
    params: dict = field(compare=False, repr=False)
    in_loop: bool = False  # inside a while or scan body: run once per iteration
    times: int = 1  # how often it runs: the product of the enclosing trip counts and grids
    place: str = "outside"  # "kernel" (inside a pallas_call), "host" (compute_on), "outside"
    flops: int = 0  # one run's flops (roofline's rule; 0 where it has none)
    out_bytes: int = 0  # bytes of its outputs
    moved: int = 0  # for a collective: bytes it moves per device, one run
    trips: int = 0  # for a loop: its trip count (0: depends on the data); for a kernel: its grid
    eqn: object = field(default=None, compare=False, repr=False)  # the jaxpr equation read
    within: tuple[str, ...] = ()  # the primitives of the equations holding it, outermost first


COLLECTIVE_KINDS = {  # primitive -> (kind, bytes moved per device per byte of payload, ring)
    "psum": ("all-reduce", 2), "psum_invariant": ("all-reduce", 2), "pmax": ("all-reduce", 2),
    "pmin": ("all-reduce", 2), "all_gather": ("all-gather", 1), "all_gather_invariant":
    ("all-gather", 1), "reduce_scatter": ("reduce-scatter", 1), "all_to_all": ("all-to-all", 1),
    "ragged_all_to_all": ("all-to-all", 1), "ppermute": ("collective-permute", 1),
}  # fmt: skip
# primitives that do another's work, its input scaled: a contract naming the one is met by the
# other (FlashAttention-2's exp2 of scores scaled by log2(e) is the softmax's exp)
SAME_WORK = {"exp": {"exp", "exp2"}}
OPAQUE = ("pure_callback", "io_callback", "ffi_call", "custom_call", "debug_callback")
_HOST = ("pure_callback", "io_callback", "debug_callback")  # their operands go to the host


def _defined_outside_jax(primitive) -> bool:
    """A primitive made with jax.extend.core.Primitive (its impl or abstract-eval rule is code
    outside JAX): its work is as hidden from the reader as a callback's, so its binds count."""
    rules = [getattr(primitive, "impl", None), getattr(primitive, "abstract_eval", None)]
    seen = set()
    while rules:
        rule = rules.pop()
        if id(rule) in seen or not callable(rule):
            continue
        seen.add(id(rule))
        if isinstance(rule, functools.partial):
            rules.append(rule.func)
            continue
        with contextlib.suppress(ValueError):  # an empty cell
            rules += [cell.cell_contents for cell in getattr(rule, "__closure__", None) or ()]
        module = getattr(rule, "__module__", None) or ""
        if module and not module.startswith(("jax", "functools", "builtins")):
            return True
    return False


@dataclass(frozen=True)
class Costs:
    """What a program costs, every loop body times its trip count (see `Program.costs`)."""

    flops: dict[str, int]  # by place: "outside", "kernel", "host", "technique"
    opaque_calls: int  # callbacks, FFI calls and binds of primitives defined outside JAX run
    # (their work is not visible as flops)
    collective_bytes: dict[str, int]  # by HLO kind: bytes moved per device
    bytes_accessed: int  # outside kernels: each live equation's inputs and outputs (unfused)
    largest_intermediate: int  # bytes of the largest array a live equation makes
    serial_steps: int  # loop iterations run one after another, nested ones included
    data_dependent_loops: int  # while loops whose trip count is not a constant
    kernel_launches: int
    grids: tuple[tuple[int, ...], ...]
    equations: int = 0  # the program's size: live equations at every depth (a Python-unrolled
    # loop repeats its body; compile time grows with it)
    collective_calls: int = 0  # collectives run, each a latency whatever its payload
    host_bytes: int = 0  # bytes handed to host callbacks (pure, io, debug), every run
    technique_steps: int = 0  # serial steps of the loops that are, or sit in, the technique

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "grids": [list(g) for g in self.grids]}


@dataclass(frozen=True)
class Program:
    """Every equation of a program with its liveness; built by `read` or `of`."""

    equations: tuple[Equation, ...]
    source: object = field(default=None, compare=False, repr=False)  # the jaxpr read

    @property
    def outputs(self) -> tuple[Program, ...]:
        """Each output's own program (read on demand), when there are several."""
        inner = getattr(self.source, "jaxpr", self.source)
        count = len(inner.outvars) if inner is not None else 0
        return tuple(read(self.source, i) for i in range(count)) if count > 1 else ()

    def on_path(self, primitive: str) -> bool:
        """True when an equation of `primitive` (or of one doing its work, SAME_WORK) lies on
        the path from the inputs to the outputs."""
        named = SAME_WORK.get(primitive, {primitive})
        return any(e.live and e.primitive in named for e in self.equations)

    def in_loop(self, primitive: str) -> bool:
        """True when a live equation of `primitive` (or of one doing its work, SAME_WORK) runs
        inside a loop body (while, scan)."""
        named = SAME_WORK.get(primitive, {primitive})
        return any(e.live and e.in_loop and e.primitive in named for e in self.equations)

    def anywhere(self, primitive: str) -> bool:
        """True when `primitive` appears at any depth, dead code included."""
        return any(e.primitive == primitive for e in self.equations)

    def live(self) -> Counter:
        """{primitive: how many live equations}, every depth."""
        return Counter(e.primitive for e in self.equations if e.live)

    def every(self) -> Counter:
        """{primitive: how many equations}, every depth, dead ones included."""
        return Counter(e.primitive for e in self.equations)

    def largest_live(self) -> int:
        """Elements of the largest array a live equation makes, at any depth."""
        return max((s for e in self.equations if e.live for s in e.sizes), default=0)

    def primitive(self, name: str):
        """The Primitive object of the equations named `name`, else of one doing its work
        (SAME_WORK); None when there is none."""
        named = [name, *sorted(SAME_WORK.get(name, set()) - {name})]
        return next(
            (e.eqn.primitive for n in named for e in self.equations if e.primitive == n), None
        )

    def costs(self, technique: tuple[str, ...] = ()) -> Costs:
        """Flops by place, collective bytes by kind, the largest live intermediate (bytes),
        serial loop steps and kernel launches of the live equations, each counted as often as
        it runs. Flops outside kernels and the host but inside an equation of a `technique`
        primitive (a contract's scan, custom_root, shard_map) are its place, "technique"."""
        flops: Counter = Counter({"outside": 0})
        moved: Counter = Counter()
        live = [e for e in self.equations if e.live]
        for e in live:
            held = e.place == "outside" and set(e.within) & set(technique)
            flops["technique" if held else e.place] += e.flops * e.times
            if e.primitive in COLLECTIVE_KINDS:
                moved[COLLECTIVE_KINDS[e.primitive][0]] += e.moved * e.times
        loops = [e for e in live if e.primitive in ("scan", "while")]
        own = [e for e in loops if e.primitive in technique or set(e.within) & set(technique)]
        kernels = [e for e in live if e.primitive == "pallas_call"]
        return Costs(
            flops=dict(flops),
            opaque_calls=sum(
                e.times
                for e in live
                if e.primitive in OPAQUE or _defined_outside_jax(getattr(e.eqn, "primitive", None))
            ),
            collective_bytes=dict(moved),
            bytes_accessed=sum(
                e.times * (e.out_bytes + e.params.get("_in_bytes", 0))
                for e in live
                if e.place == "outside" and e.primitive not in _HOLDERS  # cost: their bodies
            ),
            largest_intermediate=max(
                (e.out_bytes for e in live if e.primitive not in _VIEWS), default=0
            ),
            serial_steps=sum(e.times * max(e.trips, 1) for e in loops),
            data_dependent_loops=sum(1 for e in loops if e.trips == 0),
            kernel_launches=sum(e.times for e in kernels),
            grids=tuple(tuple(e.params["grid_mapping"].grid) for e in kernels),
            equations=len(live),
            collective_calls=sum(e.times for e in live if e.primitive in COLLECTIVE_KINDS),
            host_bytes=sum(e.times * e.params["_in_bytes"] for e in live if e.primitive in _HOST),
            technique_steps=sum(e.times * max(e.trips, 1) for e in own),
        )


def of(fn, *args, **kwargs) -> Program:
    """The program `fn(*args, **kwargs)` builds, traced with jax.make_jaxpr."""
    return read(jax.make_jaxpr(fn)(*args, **kwargs))


def read(jaxpr, output: int | None = None) -> Program:
    """The program of a Jaxpr or ClosedJaxpr, every output needed (or only `output`)."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    found: list[Equation] = []
    needed = [output is None or i == output for i in range(len(inner.outvars))]
    _NEEDS.clear()
    _ROUTE.clear()
    _GRID_PICKS.clear()
    from jax._src import core  # the named axes in scope (a read under shard_map): no public reader

    _AXES[:] = [dict(core.get_axis_env().axis_sizes)]
    try:
        _walk(inner, needed, 0, True, found)
    finally:
        _NEEDS.clear()
    return Program(tuple(found), jaxpr if output is None else None)


# ---- the walk ------------------------------------------------------------------------------------


def _is_var(atom) -> bool:
    return not isinstance(atom, jex.Literal)


def _literal_value(atom):
    return atom.val if isinstance(atom, jex.Literal) else None


def _all_zero(value) -> bool:
    try:
        return value is not None and not isinstance(value, str) and not np.any(np.asarray(value))
    except (TypeError, ValueError):
        return False


def _zeros(jaxpr, seed: set) -> set:
    """The variables of `jaxpr` known to hold zeros whatever the inputs (`seed`: its inputs
    known to be zero)."""
    zero: set = set(seed)

    def is_zero(atom) -> bool:
        return (atom in zero) if _is_var(atom) else _all_zero(_literal_value(atom))

    for eqn in jaxpr.eqns:
        name, ins = eqn.primitive.name, eqn.invars
        if (
            (name == "mul" and any(is_zero(a) for a in ins))
            or (name in _PASS_ZERO and ins and all(is_zero(a) for a in ins[:1]))
            or (name in ("sub", "add") and len(ins) == 2 and all(is_zero(a) for a in ins))
            or (name == "sub" and len(ins) == 2 and _is_var(ins[0]) and ins[0] is ins[1])
            or (name == "select_n" and len(ins) > 1 and all(is_zero(a) for a in ins[1:]))
            or (name in ("zeros_like", "broadcast_in_dim") and not ins)
        ):
            zero.update(v for v in eqn.outvars if _is_var(v))
    return zero


def _constant_predicate(jaxpr, seed: dict) -> dict:
    """Variables of `jaxpr` that hold one known value everywhere (a broadcast literal; `seed`:
    its inputs known so)."""
    known: dict = dict(seed)
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("broadcast_in_dim", "convert_element_type", "reshape"):
            source = eqn.invars[0] if eqn.invars else None
            value = (
                _literal_value(source)
                if source is not None and not _is_var(source)
                else (known.get(source) if source is not None else None)
            )
            if value is not None and np.ndim(value) == 0:
                known[eqn.outvars[0]] = value
    return known


def _needed_inputs(eqn, needed_out: list[bool], zero: set, known: dict) -> list[bool]:
    """Which inputs of a live `eqn` its needed outputs depend on (zeros carry nothing)."""
    ins = eqn.invars
    if eqn.primitive.name == "select_n" and ins:
        predicate = _literal_value(ins[0]) if not _is_var(ins[0]) else known.get(ins[0])
        if predicate is not None and np.ndim(predicate) == 0:
            chosen = int(predicate) + 1
            return [i == chosen for i in range(len(ins))]
    return [_is_var(a) and a not in zero for a in ins]


_LOOPS = [0]  # how many loop bodies the marking walk is inside
_KERNELS = [0]  # inside a kernel or rule body: every equation lives with the equation holding it
_TIMES = [1]  # how often the body being walked runs: enclosing trip counts times grids
_PLACE = ["outside"]  # "kernel" inside a pallas_call's body
_WITHIN: list[str] = []  # the primitives of the equations whose sub-programs are being walked
_AXES: list[dict] = [{}]  # the mesh axis sizes in scope (shard_map's mesh)
_NEEDS: dict = {}  # one read's memo of needs-only walks: (jaxpr, outputs, seeds) -> inputs
_ROUTE: list = []  # the ids of the equations whose sub-programs are being walked (and branches)
# per kernel being walked: (kernel_branches.counts, where its route starts, the times outside it)
_GRID_PICKS: list[tuple[dict | None, int, int]] = []


def _walk(
    jaxpr, needed_out: list[bool], depth: int, reachable: bool, found: list | None, args=None
) -> list[bool]:
    """Mark the equations of `jaxpr` whose results its `needed_out` outputs depend on; append
    every equation (live or not) to `found` (None: only which inputs are needed, remembered for
    the rest of the read, so nested calls and loop fixpoints cost one walk each); return which
    of its inputs are needed. `args`: the calling equation's (zero, known) facts about the atoms
    bound to its inputs, if it maps them one to one."""
    seed_zero, seed_known = set(), {}
    if args is not None:
        outer_zero, outer_known, atoms = args
        for var, atom in zip(jaxpr.invars, atoms, strict=False):
            value = outer_known.get(atom) if _is_var(atom) else _literal_value(atom)
            if (atom in outer_zero) if _is_var(atom) else _all_zero(value):
                seed_zero.add(var)
            if value is not None and np.ndim(value) == 0:
                seed_known[var] = value
    key = None
    if found is None:
        seeds = tuple(sorted(jaxpr.invars.index(v) for v in seed_zero))
        values = tuple(sorted((jaxpr.invars.index(v), repr(x)) for v, x in seed_known.items()))
        key = (id(jaxpr), tuple(needed_out), reachable, seeds, values, _KERNELS[0] > 0)
        if key in _NEEDS:
            return _NEEDS[key]
    zero, known = _zeros(jaxpr, seed_zero), _constant_predicate(jaxpr, seed_known)
    needed: set = {
        v
        for v, n in zip(jaxpr.outvars, needed_out, strict=True)
        if n and _is_var(v) and v not in zero
    }
    marks: list[tuple[object, list[bool], bool]] = []
    for eqn in reversed(jaxpr.eqns):
        outs = [v in needed for v in eqn.outvars]
        live = reachable and (any(outs) or bool(eqn.effects) or _KERNELS[0] > 0)
        if live and not any(outs):
            outs = [True] * len(eqn.outvars)  # an effect (a print, a ref write) is its own use
        marks.append((eqn, outs if live else [False] * len(eqn.outvars), live))
        if live:
            uses = _call_needs(eqn, outs, (zero, known, eqn.invars), depth)
            uses = uses if uses is not None else _needed_inputs(eqn, outs, zero, known)
            for atom, use in zip(eqn.invars, uses, strict=True):
                if use and _is_var(atom):
                    needed.add(atom)
    if found is None:
        _NEEDS[key] = [v in needed for v in jaxpr.invars]
        return _NEEDS[key]
    by_eqn = {id(eqn): (outs, live) for eqn, outs, live in marks}
    for eqn in jaxpr.eqns:
        outs, live = by_eqn[id(eqn)]  # live: an equation with no outputs (a ref write) too
        params = dict(eqn.params)
        params["_in_bytes"] = sum(_bytes(v) for v in eqn.invars)
        found.append(
            Equation(
                eqn.primitive.name,
                live,
                depth,
                tuple(_size(v) for v in eqn.outvars),
                params,
                _LOOPS[0] > 0,
                _TIMES[-1],
                _PLACE[-1],
                _flops(eqn) if live else 0,
                sum(_bytes(v) for v in eqn.outvars),
                _moved(eqn),
                _trips(eqn),
                eqn,
                tuple(_WITHIN),
            )
        )
        _descend(eqn, outs, live, depth, found, (zero, known, eqn.invars))
    return [v in needed for v in jaxpr.invars]


def _programs_in(params: dict) -> list:
    """Every jaxpr an equation's params hold: JAX's own `jaxprs_in_params`, and those a
    higher-order primitive keeps on its rule object (`call_hi_primitive`'s CustomRoot:
    `solve_jaxpr`, …)."""
    subs = [getattr(j, "jaxpr", j) for j in jex.jaxprs_in_params(params)]
    if not subs:
        for value in params.values():
            for held in vars(value).values() if hasattr(value, "__dict__") else ():
                inner = getattr(held, "jaxpr", held)
                if hasattr(inner, "eqns") and hasattr(inner, "outvars"):
                    subs.append(inner)
    return subs


def _call_needs(eqn, outs: list[bool], facts, depth: int) -> list[bool] | None:
    """Which inputs a call-like equation needs, read from its one sub-program; None otherwise."""
    if eqn.primitive.name not in _CALLS:
        return None
    subs = _programs_in(eqn.params)
    if (
        len(subs) != 1
        or len(subs[0].outvars) != len(outs)
        or len(subs[0].invars) != len(eqn.invars)
    ):
        return None
    return _walk(subs[0], outs, depth + 1, True, None, facts)


def _bytes(atom) -> int:
    aval = getattr(atom, "aval", None)
    dtype = getattr(aval, "dtype", None)
    try:
        return _size(atom) * np.dtype(dtype).itemsize if dtype is not None else 0
    except TypeError:  # an extended dtype (PRNG keys): its words
        return _size(atom) * 8


def _flops(eqn) -> int:
    """One run's flops of a leaf equation, by roofline's rule for its primitive (0: none, or an
    equation that holds sub-programs, whose flops are its body's)."""
    import jax.experimental.roofline  # noqa: F401 - registers the rules
    from jax.experimental.roofline import roofline as _  # noqa: F401

    rl = sys.modules["jax.experimental.roofline.roofline"]  # the package shadows the module

    if eqn.primitive.name == "ragged_dot_general":  # roofline has no rule for it
        numbers = eqn.params["ragged_dot_dimension_numbers"]
        contracted, batch = (dims[1] for dims in numbers.dot_dimension_numbers)  # the rhs's
        kept = set(contracted) | set(batch) | set(numbers.rhs_group_dimensions)
        rhs = [n for axis, n in enumerate(_aval(eqn.invars[1]).shape) if axis not in kept]
        # each lhs element meets one group's rhs, not every group's (XLA's CPU loop does G×)
        with contextlib.suppress(TypeError):  # a symbolic dimension: no count
            return 2 * _size(eqn.invars[0]) * math.prod(int(n) for n in rhs)
        return 0
    rule = rl._rooflines.get(eqn.primitive)
    if rule is None or eqn.primitive.name in _HOLDERS:
        return 0
    try:
        shapes = [rl.RooflineShape.from_aval(_aval(a)) for a in eqn.invars]
        context = rl.RooflineRuleContext(
            name_stack=None, primitive=eqn.primitive, avals_in=[_aval(a) for a in eqn.invars],
            avals_out=[v.aval for v in eqn.outvars], jaxpr_eqn_ctx=eqn.ctx, mesh=None,
            pin_lhs_in_vmem=False, pin_rhs_in_vmem=False)  # fmt: skip
        result = rule(context, *shapes, **eqn.params)
        counted = max(int(result.flops), int(result.unfused_flops))
    except Exception:  # a rule that needs a mesh, or an aval it does not take
        counted = 0
    if counted or eqn.primitive.name in _MOVES_DATA or eqn.primitive.name in COLLECTIVE_KINDS:
        return counted
    return sum(_size(v) for v in eqn.outvars)  # arithmetic roofline has no rule for (tanh, …)


# Primitives that only move, reshape or select data (no arithmetic flops).
_MOVES_DATA = frozenset((
    "reshape", "broadcast_in_dim", "transpose", "slice", "dynamic_slice", "dynamic_update_slice",
    "concatenate", "squeeze", "expand_dims", "convert_element_type", "copy", "copy_p", "select_n",
    "iota", "gather", "pad", "rev", "device_put", "pvary", "sharding_constraint", "bitcast_convert_type",
    "stop_gradient", "optimization_barrier", "split", "tile", "random_wrap", "random_unwrap",
    "get", "swap", "load", "store", "program_id", "num_programs", "empty", "zeros_like", "mesh_cast",
    "reshard", "name", "platform_index", "create_token", "after_all", "dma_start", "dma_wait",
    "semaphore_signal", "semaphore_wait", "broadcast", "squeeze_p", "clamp", "with_memory_space_constraint",
    "pure_callback", "io_callback", "ffi_call", "custom_call", "debug_callback", "random_seed",
))  # fmt: skip


def _aval(atom):
    return atom.aval if _is_var(atom) else jax.typeof(atom.val)


def _moved(eqn) -> int:
    """Bytes a collective moves per device, one run: its payload (an all-gather's result, any
    other's operand) times the ring's factor (an all-reduce moves it twice) times (n-1)/n over
    the named axes' n devices, where the axes' sizes are known."""
    kind = COLLECTIVE_KINDS.get(eqn.primitive.name)
    if kind is None:
        return 0
    payload = sum(_bytes(v) for v in (eqn.outvars if kind[0] == "all-gather" else eqn.invars))
    names = eqn.params.get("axis_name", eqn.params.get("axes", ()))
    names = names if isinstance(names, tuple | list) else (names,)
    sizes = [_AXES[-1].get(n) for n in names]
    if kind[0] == "collective-permute" or not sizes or None in sizes:
        return payload * kind[1]
    n = math.prod(sizes)
    return payload * kind[1] * (n - 1) // max(n, 1)


def _trips(eqn) -> int:
    """A loop's trip count (0 when the data decides it); a kernel's grid size."""
    p = eqn.params
    if eqn.primitive.name == "scan":
        return int(p["length"])
    if eqn.primitive.name == "pallas_call":
        return math.prod(int(g) for g in p["grid_mapping"].grid)
    if eqn.primitive.name == "while":
        return _constant_trips(eqn)
    return 0


def _constant_trips(eqn) -> int:
    """`while i < N` with a literal start, a literal N and `i + 1` in the body (how fori_loop
    lowers when its bounds are not static): N - start; 0 otherwise."""
    p = eqn.params
    cond, body = p["cond_jaxpr"].jaxpr, p["body_jaxpr"].jaxpr
    if len(cond.eqns) != 1 or cond.eqns[0].primitive.name != "lt":
        return 0
    counter, bound = cond.eqns[0].invars
    if not _is_var(counter) or _is_var(bound) or counter not in cond.invars:
        return 0
    at = cond.invars.index(counter) - p["cond_nconsts"]
    start = eqn.invars[p["cond_nconsts"] + p["body_nconsts"] + at]
    step = next((e for e in body.eqns if body.outvars[at] in e.outvars), None)
    steps_by_one = (
        step is not None and step.primitive.name == "add"
        and body.invars[p["body_nconsts"] + at] in step.invars
        and any(not _is_var(a) and _literal_value(a) == 1 for a in step.invars)
    )  # fmt: skip
    if _is_var(start) or not steps_by_one:
        return 0
    return max(int(_literal_value(bound)) - int(_literal_value(start)), 0)


def _size(var) -> int:
    shape = getattr(getattr(var, "aval", None), "shape", ())
    try:
        return math.prod(int(d) for d in shape)
    except TypeError:  # a symbolic dimension
        return 0


def _descend(eqn, outs: list[bool], live: bool, depth: int, found: list, facts) -> None:
    """Walk the sub-programs of `eqn`, mapping which of their outputs are needed."""
    subs = _programs_in(eqn.params)
    if not subs:
        return
    _WITHIN.append(eqn.primitive.name)
    _ROUTE.append(id(eqn))
    try:
        _descend_held(eqn, subs, outs, live, depth, found, facts)
    finally:
        _WITHIN.pop()
        _ROUTE.pop()


def _descend_held(eqn, subs, outs: list[bool], live: bool, depth: int, found: list, facts) -> None:
    name, p = eqn.primitive.name, eqn.params
    if name == "cond":
        runs = _branch_runs(len(subs))
        for b, branch in enumerate(subs):
            _ROUTE.append(b)
            try:
                with _scope(1, None, at=runs[b] if runs else None):
                    _walk(branch, outs if len(branch.outvars) == len(outs) else [live] * len(branch.outvars),
                          depth + 1, live and (not runs or runs[b] > 0), found)  # fmt: skip
            finally:
                _ROUTE.pop()
        return
    if name == "scan":
        consts, carry, _ = p["ft_in"].unpack()  # jax 0.12: flat trees (consts, carry, xs)
        with _scope(int(p["length"]), None):
            _fixpoint(subs[0], len(list(consts.vals)), len(list(carry.vals)), outs, depth, live,
                      found)  # fmt: skip
        return
    if name == "while":
        body, cond = p["body_jaxpr"].jaxpr, p["cond_jaxpr"].jaxpr
        carry = len(body.outvars)
        # the trip count needs the condition, and the condition needs the carry it reads
        cond_needs = _walk(cond, [live], depth + 1, live, found)[p["cond_nconsts"] :]
        wanted = [o or c for o, c in zip(outs, cond_needs, strict=True)]
        with _scope(_constant_trips(eqn) or 1, None):
            _fixpoint(body, p["body_nconsts"], carry, wanted, depth, live, found)
        return
    kernel = name == "pallas_call"  # compute_on (jax.experimental): its body runs on the host
    host = name == "compute_on" and "host" in str(p.get("compute_type", ""))
    place = "kernel" if kernel else ("host" if host else None)
    axes = dict(getattr(p.get("mesh"), "shape", {}) or {}) if name == "shard_map" else {}
    if kernel:
        grid = tuple(p["grid_mapping"].grid)
        picks = kernel_branches.counts(subs[0], grid) if len(subs) == 1 else None
        _GRID_PICKS.append((picks, len(_ROUTE), _TIMES[-1]))
    try:
        with _scope((_trips(eqn) or 1) if kernel else 1, place, axes):
            _descend_subs(eqn, subs, outs, live, depth, found, facts)
    finally:
        if kernel:
            _GRID_PICKS.pop()


def _branch_runs(branches: int) -> list[int] | None:
    """How often each branch of the cond being walked runs, where the grid decides it: a
    `pl.when` on program_id (a causal kernel's blocks on and below the diagonal) runs at the grid
    points that pick it, times what runs the kernel, not at every point. None (every branch as
    often as the cond) outside kernels, inside a kernel's loop body, or on a grid too large to
    evaluate. Where the index reads data `kernel_branches` counts every branch at every point
    that reaches the cond, as this reader always has: which branch runs is unknown, and a bound
    from above (the flops bounds, the koans' kernel-flops bounds) stays one; the flops floor
    (`costs.LEAST`) reads only work outside kernels. The answer's profile and a TODO's are read
    by this same rule."""
    if not _GRID_PICKS:
        return None
    picks, start, outside = _GRID_PICKS[-1]
    taken = (picks or {}).get(tuple(_ROUTE[start:]))
    if taken is None or len(taken) != branches:
        return None
    return [outside * t for t in taken]


@contextlib.contextmanager
def _scope(times: int, place: str | None, axes: dict | None = None, at: int | None = None):
    """Equations walked inside run `times` times as often (or `at` times in all), in `place`
    (None: unchanged), with the mesh `axes` (shard_map's) in scope too."""
    _TIMES.append(_TIMES[-1] * times if at is None else at)
    _PLACE.append(place or _PLACE[-1])
    _AXES.append({**_AXES[-1], **(axes or {})})
    try:
        yield
    finally:
        _TIMES.pop()
        _PLACE.pop()
        _AXES.pop()


def _descend_subs(eqn, subs, outs, live, depth, found, facts) -> None:
    name = eqn.primitive.name
    for sub in subs:
        if len(sub.outvars) == len(outs) and name in _CALLS:
            mapped = facts if len(sub.invars) == len(eqn.invars) else None
            _walk(sub, outs, depth + 1, live, found, mapped)
        else:  # a kernel (its outputs are refs it writes), a rule: all of it lives with it
            _KERNELS[0] += 1
            try:
                _walk(sub, [live] * len(sub.outvars), depth + 1, live, found)
            finally:
                _KERNELS[0] -= 1


def _fixpoint(body, consts: int, carry: int, wanted, depth: int, live: bool, found) -> None:
    """A loop body: its carry outputs feed its carry inputs, so the needed outputs grow until
    they are stable; then the body is walked once for `found`."""
    wanted = list(wanted) + [False] * (len(body.outvars) - len(wanted))
    for _ in range(len(body.outvars) + 1):
        needs = _walk(body, wanted, depth + 1, live, None)
        carried = needs[consts : consts + carry]
        grown = [w or (i < carry and carried[i]) for i, w in enumerate(wanted)]
        if grown == wanted:
            break
        wanted = grown
    _LOOPS[0] += 1
    try:
        _walk(body, wanted, depth + 1, live, found)
    finally:
        _LOOPS[0] -= 1


# ---- compiled HLO -------------------------------------------------------------------------------

_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s([\w\-]+)\((.*)$")
_CALLED = re.compile(r"(?:calls|to_apply|body|condition|called_computations|branch_computations)="
                     r"\{?([%\w.\-, ]+)\}?")  # fmt: skip


def hlo_ops(hlo_text: str) -> Counter:
    """{opcode: count} of the instructions a compiled HLO module's ENTRY result depends on,
    descending into every computation a live instruction calls (fusions, reductions, loops)."""
    computations: dict[str, dict] = {}
    entry = None
    current = None
    for line in hlo_text.splitlines():
        header = _COMPUTATION.match(line)
        if header and "=" not in line.split("{")[0]:
            current = header.group(2)
            computations[current] = {"root": None, "ops": {}}
            entry = current if header.group(1) else entry
            continue
        found = _INSTRUCTION.match(line) if current else None
        if found:
            root, name, _, opcode, rest = found.groups()
            operands = re.findall(r"%([\w.\-]+)", rest.split("),")[0])
            called = [c.strip().lstrip("%") for m in _CALLED.findall(rest) for c in m.split(",")]
            computations[current]["ops"][name] = (opcode, operands, called)
            if root:
                computations[current]["root"] = name
    counts: Counter = Counter()
    seen: set = set()

    def visit(computation: str) -> None:
        if computation in seen or computation not in computations:
            return
        seen.add(computation)
        ops = computations[computation]["ops"]
        stack = [computations[computation]["root"]]
        reached: set = set()
        while stack:
            name = stack.pop()
            if name in reached or name not in ops:
                continue
            reached.add(name)
            opcode, operands, called = ops[name]
            counts[opcode] += 1
            stack.extend(operands)
            for sub in called:
                visit(sub)

    if entry:
        visit(entry)
    return counts


# ---- the koans' instruments (jaxkoans.api.probes re-exports them) -------------------------------


def primitives(jaxpr) -> set[str]:
    """jaxpr 里出现的每个原语的名字（包括嵌套的 jaxpr）。
    Every primitive name in a jaxpr, nested jaxprs included."""
    return set(read(jaxpr).every())


def held(params: dict) -> set[str]:
    """Every primitive of the programs an equation's `params` hold, at any depth, dead code
    included (what binding the equation runs). Each program is walked once: a cached nested
    jit bound again is a lookup."""
    found: set[str] = set()
    for sub in _programs_in(params):
        names = _HELD.get(sub)
        if names is None:
            names = set()
            for eqn in sub.eqns:
                names.add(eqn.primitive.name)
                names |= held(eqn.params)
            _HELD[sub] = names
        found |= names
    return found


_HELD: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # jaxpr -> held's names


def equations(primitive: str, fn, *args) -> list:
    """fn(*args) 的 jaxpr 里名为 primitive 的每个方程（包括嵌套的 jaxpr，按出现顺序）。
    Every equation of the primitive named `primitive` in fn(*args)'s jaxpr, nested jaxprs
    included, in order."""
    return [e.eqn for e in of(fn, *args).equations if e.primitive == primitive]


def pallas_call_structure(fn, *args) -> dict:
    """fn(*args) 的 jaxpr 里唯一的 pallas_call 的结构（可以在 jit 里）：grid、每个 BlockSpec 的
    块形状（先输入后输出）、scratch 的 (形状, dtype)、dimension_semantics（"parallel" 这样的
    字符串，pltpu 的枚举也读成它的值；没给就是空元组）、内核里的原语和内核外的原语。
    The structure of the one pallas_call in fn(*args)'s jaxpr (it may sit inside a jit): its
    grid, every BlockSpec's block shape (inputs, then outputs), the scratch (shape, dtype)s, the
    dimension_semantics (strings such as "parallel"; pltpu's enums read as their value; () when
    none is given), the primitives inside the kernel and those outside it."""
    found = of(fn, *args).equations
    calls = [e.eqn for e in found if e.primitive == "pallas_call"]
    assert len(calls) == 1, f"expected one pallas_call, found {len(calls)}"
    mapping, params = calls[0].params["grid_mapping"], calls[0].params["compiler_params"]
    semantics = getattr(params, "dimension_semantics", None) or ()
    return {
        "grid": tuple(mapping.grid),
        "blocks": [
            tuple(getattr(d, "block_size", d) for d in b.block_shape)
            for b in mapping.block_mappings
        ],
        "scratch": [(tuple(a.shape), a.dtype) for a in mapping.scratch_avals],
        "semantics": tuple(getattr(s, "value", s) for s in semantics),
        "kernel_ops": {e.primitive for e in found if e.place == "kernel"},
        "outside_ops": {e.primitive for e in found if e.place == "outside"} - {"pallas_call"},
    }


HLO_COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


def collectives(hlo_text: str) -> dict[str, list[str]]:
    """编译后 HLO 里的集合通信：{指令: [结果类型, ...]}，例如 {"all-reduce": ["f32[16,32]"]}
    （类型去掉布局 {1,0}；合并成元组的算一条）。
    The compiled HLO's collectives: {instruction: [result type, ...]} (types without their
    {1,0} layout; a tuple counts once)."""
    found = {}
    for kind in HLO_COLLECTIVES:
        types = re.findall(rf"^\s*(?:ROOT )?%\S+ = (.*?) {kind}(?:-start)?\(", hlo_text, re.M)
        if types:
            found[kind] = [re.sub(r"\{[\d,]*\}", "", t) for t in types]
    return found
