"""Does the technique carry the result? A TODO is run again with its technique's outputs observed
and then perturbed, one use at a time.

A contract's technique (its `on_path` primitives: a kernel, a collective, a custom rule, a
ragged dot) must (a) vary with the TODO's inputs: on the koan's own inputs and on the same
inputs moved a little, what it computes must differ and must not be all zeros; and (b) carry
the result: with its outputs changed, the TODO's outputs must change. Zeros fed to the
technique, an identity around it, or a computed `where` that selects it away fails (a) or (b),
whatever primitive does the work instead. (b) is measured: where the answer's technique,
perturbed, changes (nearly) every element of the result (its profile's `carried`, per koan), a
TODO's uses together must change at least `CARRIED` times as many, so the technique applied
to one row, one block or one head beside other work that makes the rest does not carry the
result. And (c) where every use of the answer's technique carries the result when its value is
resized (`_resized`: each element's size changed, its sign, order, zeros, infs and NaNs kept;
the profile's `carried["<name> idle"]` is 0), so must every use of the TODO's: the technique's
value used only through a property another route also keeps (its sign, a comparison, whether
it is NaN), or selected away by a computed `where` beside other work, fails. The runs
re-trace the TODO under a fresh `jax.make_user_context` value, so no trace cached before (a
nested jit) escapes the patch. Every perturbation of one technique runs one program, traced
and compiled once: each use asks the host which change to make (`_Perturber`), where a
program per change cost chapter 07 a compile per run (105 of its 250 s).
"""

from __future__ import annotations

import contextlib
import itertools

from jaxkoans.plugin import fresh

MAX_USES = 6  # uses of a technique perturbed one by one before giving up (the search ends
# once the uses perturbed so far carry enough of the result)
# Where the answer's technique, perturbed, changes at least WHOLE of the result, a TODO's must
# change at least CARRIED x the answer's share. A smaller share of the answer's is not held to:
# it may come from rounding alone (a softmax's shift, which cancels), and so differ between
# honest programs.
CARRIED, WHOLE = 0.8, 0.9
ROUNDING = 1e-5  # of an output's largest element: a change below it is rounding, not a use
# the bits an integer output is flipped by, the next tried where the last changed nothing: a
# platform's index moved to a branch of the same function (cpu and cuda both exact) is no test
FLIPS = (1, 2, 3)
# a profile's share with every use zeroed at once: `carried["exp together"]`
TOGETHER = "together"
EACH = "each output"  # that share per output leaf: `carried["exp each output"]` (a list)
# how many of the uses perturbed one by one change nothing when resized: `carried["exp idle"]`
IDLE = "idle"
_ROUND = itertools.count(1)
_EXECUTING = [0]  # primitives being run eagerly (compiled, lowered): their binds are JAX's
_FRESH = []  # the user context, made on first use (making one at import would import JAX)


def fresh_traces():
    """A block in which JAX traces anew: a user-context value no earlier trace was cached under
    (liveness's and trips' patched binds then reach every nested jit)."""
    import jax

    if not _FRESH:
        _FRESH.append(jax.make_user_context(None))
    return _FRESH[0](next(_ROUND))


# how a perturbed use is changed (`_Patch.codes`): kept, `_changed` with each of FLIPS, zeroed,
# `_resized`
KEEP, ZERO, RESIZE = 0, len(FLIPS) + 1, len(FLIPS) + 2


class _Patch:
    """While active, each bind of the watched primitives is a numbered use: in "observe" mode
    its float outputs are sent to the host, in "perturb" mode each use's are changed as
    `codes` ({use: code}) says when the program runs (read at the bind where it runs eagerly
    or `baked`)."""

    def __init__(self, primitives, mode: str) -> None:
        self.primitives, self.mode = primitives, mode
        self.codes: dict[int, int] = {}
        self.baked = False  # the codes are written into the trace (one trace per run)
        self.signed: dict[int, bool] = {}  # whether a use's output is a signed integer
        self.uses = 0
        self.run = 0  # which run's values the host receives (observe: the inputs, then moved)
        self.seen: dict[tuple[int, int], list] = {}
        self.fed: dict[tuple[int, int], list] = {}  # what each use was given (observe)

    def _wrap(self, primitive, bind):
        def patched(*args, **params):
            if _EXECUTING[0]:  # bound by a primitive's own lowering (an eager scan's writes)
                return bind(*args, **params)
            out = bind(*args, **params)
            use = self.uses
            self.uses += 1
            outs = list(out) if primitive.multiple_results else [out]
            if self.mode == "observe":
                for a in args:
                    self._observe(self.fed, use, a)
            keep = _uncovered(primitive, args, outs[0]) if self.mode == "perturb" else None
            outs = [self._touch(use, o, keep) for o in outs]
            return outs if primitive.multiple_results else outs[0]

        return patched

    def _touch(self, use: int, value, keep=None):
        if _kind(value) is None:
            return value
        if self.mode == "perturb":
            jnp = jax_numpy()
            self.signed[use] = jnp.issubdtype(value.dtype, jnp.signedinteger)
            changed = _selected(value, self._code(use, value))
            return changed if keep is None else jnp.where(keep, value, changed)
        self._observe(self.seen, use, value)
        return value

    def _code(self, use: int, value):
        """How `use` is changed in this run: known now where it runs eagerly (or baked), else
        asked of the host each time the program runs."""
        import jax
        import numpy as np

        if self.baked or not isinstance(value, jax.core.Tracer):
            return self.codes.get(use, KEEP)
        return jax.pure_callback(
            lambda: np.int32(self.codes.get(use, KEEP)), jax.ShapeDtypeStruct((), np.int32)
        )

    def _observe(self, into: dict, use: int, value) -> None:
        import jax
        import numpy as np

        kind = _kind(value)
        if kind is None:
            return
        if kind == "key":
            value = jax.random.key_data(value)
        # the run is read when the value arrives: one compiled program serves both runs
        jax.debug.callback(
            lambda v: into.setdefault((self.run, use), []).append(np.asarray(v)), value
        )

    @contextlib.contextmanager
    def active(self):
        with rebinding({p: lambda bind, p=p: self._wrap(p, bind) for p in self.primitives}):
            yield self


def jax_numpy():
    import jax.numpy as jnp

    return jnp


def _uncovered(primitive, args, out):
    """Where a ragged dot's output is zero by its definition (the rows past the sum of its
    group sizes, which no group covers), or None: those stay as they are when it is perturbed,
    so the answer's share does not count rows an honest TODO may zero its own way (03
    `grouped_experts` masking them again was refused)."""
    if primitive.name != "ragged_dot_general" or len(args) < 3:
        return None
    lhs, sizes = args[0], args[2]
    if getattr(out, "ndim", 0) != 2 or getattr(sizes, "ndim", 0) != 1:
        return None
    if out.shape[0] != lhs.shape[0]:
        return None
    jnp = jax_numpy()
    return (jnp.arange(out.shape[0]) >= jnp.sum(sizes))[:, None]


def _kind(value) -> str | None:
    """What a technique's output is, for observing and changing it: "float", "int" (integers
    and booleans: indices, counts, masks), "key" (typed PRNG keys); None for anything else."""
    import jax
    import jax.numpy as jnp

    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return None
    if jnp.issubdtype(dtype, jax.dtypes.prng_key):
        return "key"
    if jnp.issubdtype(dtype, jnp.floating):
        return "float"
    if jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.bool_):
        return "int"
    return None


# a float's change per code, read at run time: value * (scale + resized * (1/4 + tanh(value)/4))
# + shift is `_changed` (flips alike) and `_resized` in one expression; arithmetic, so it is
# differentiated as they are (a select's transpose fails under shard_map's varying types)
_SCALE = (1.0, 1.5, 1.5, 1.5, 0.0, 1.0)
_SHIFT = (0.0, 0.25, 0.25, 0.25, 0.0, 0.0)
_RESIZED = (0.0, 0.0, 0.0, 0.0, 0.0, 1.0)


def _selected(value, code):
    """`value` changed as `code` says (KEEP, `_changed` by FLIPS[code - 1], ZERO, RESIZE); a
    code the host gives at run time selects among them (ZERO is always written in: a NaN or an
    inf times zero is no zero)."""
    import jax
    import jax.numpy as jnp

    def made(code: int):
        if code == KEEP:
            return value
        if code == ZERO:
            return _changed(value, zero=True)
        return _resized(value) if code == RESIZE else _changed(value, flip=FLIPS[code - 1])

    if isinstance(code, int):
        return made(code)
    if _kind(value) == "float":
        scale, shift, resized = (
            jnp.asarray(table, value.dtype)[code] for table in (_SCALE, _SHIFT, _RESIZED)
        )
        return value * (scale + resized * (0.25 + jnp.tanh(value) / 4)) + shift
    every = [made(c) for c in range(RESIZE + 1)]
    if _kind(value) == "key":
        impl = jax.random.key_impl(value)
        data = jax.lax.select_n(code, *(jax.random.key_data(v) for v in every))
        return jax.random.wrap_key_data(data, impl=impl)
    return jax.lax.select_n(code, *every)


def _changed(value, zero: bool = False, flip: int = 1):
    """`value` perturbed: a float scaled and shifted, a signed integer's lowest bit flipped (an
    index moves by one), an unsigned one's every bit (random bits: a float drawn from them uses
    the high ones), a boolean negated, a key's data flipped like unsigned bits. With `zero`
    (every use at once) a number is zeroed: uses that cancel (a pair subtracted, `r(2u) - 2
    r(u)`) stay cancelled, as under any scaling, while a ratio of two uses (a sum over a
    count), which a common scaling leaves as it was, does not survive its parts zeroed."""
    import jax
    import jax.numpy as jnp

    kind = _kind(value)
    if zero and kind in ("float", "int"):
        return jnp.zeros_like(value)
    if kind == "float":
        return value * 1.5 + 0.25
    if kind == "key":
        data = jax.random.key_data(value)
        return jax.random.wrap_key_data(~data, impl=jax.random.key_impl(value))
    if jnp.issubdtype(value.dtype, jnp.bool_) or jnp.issubdtype(value.dtype, jnp.unsignedinteger):
        return ~value
    return value ^ jnp.full_like(value, flip)


def _resized(value):
    """`value` with each float element's size changed and what an honest route may read of it
    alone kept: v (1.25 + tanh(v) / 4) is increasing, so signs, order (an argmax), zeros, infs
    and NaNs stay, and not homogeneous, so a value over its own sum changes too. A use whose
    value matters only through such a property, or that a computed where selects away, changes
    nothing. Integers, booleans and keys are changed as `_changed` does."""
    import jax.numpy as jnp

    if _kind(value) != "float":
        return _changed(value)
    return value * (1.25 + jnp.tanh(value) / 4)


@contextlib.contextmanager
def rebinding(wraps: dict):
    """While the block runs, in traces made anew (`fresh_traces`), each primitive's `bind` is
    `wrap(its bind)` ({primitive: wrap}); put back after, whatever was there before."""
    saved = {}
    from jax._src import core

    for primitive, wrap in wraps.items():
        saved[primitive] = primitive.__dict__.get("bind")  # a patch of its own, or the class's
        primitive.bind = wrap(primitive.bind)
    process = core.EvalTrace.process_primitive

    def executing(self, primitive, args, params, /):  # the TODO's code was traced before
        _EXECUTING[0] += 1
        try:
            return process(self, primitive, args, params)
        finally:
            _EXECUTING[0] -= 1

    core.EvalTrace.process_primitive = executing
    try:
        with fresh_traces():
            yield
    finally:
        core.EvalTrace.process_primitive = process
        for primitive, bind in saved.items():
            if bind is None:
                del primitive.bind
            else:
                primitive.bind = bind


# What an eager run refuses that jit runs: an eager shard_map closing over Explicit-sharded
# values (the watch's callbacks), a watched value in host memory
EAGER_ONLY = ((NotImplementedError, "Explicit"), (ValueError, "Memory kind mismatch"))


def _watched(function, primitive, args, kwargs, moved):
    """(the watch, the function it ran, its outputs) with `primitive` observed over a run on
    `args`/`kwargs`, then on `moved` (one trace and compile, two runs); None where the TODO
    cannot be run twice. Under jit where the eager run refuses the watch (`EAGER_ONLY`: red team
    11b's 05 leaky_sum_per_shard and 06 host_adam_step, whose liveness never ran); only there:
    under jit a program of unreduced axes crashes XLA (03 sum_of_products)."""
    running = function
    while True:
        try:
            with _Patch([primitive], "observe").active() as watch:
                base = _run(running, args, kwargs)
                watch.run = 1
                _run(running, *moved)
            return watch, running, base
        except Exception as error:
            if running is not function or not any(
                isinstance(error, kind) and words in str(error) for kind, words in EAGER_ONLY
            ):
                return None
            running = _jitted(function)


def _jitted(function):
    """`function` under jit over the arrays it is handed (the rest closed over), one compile
    per structure: a TODO whose eager run cannot be watched (red team 11b: an eager shard_map
    over Explicit-sharded inputs refuses the watch's callbacks, and its liveness never ran)."""
    import jax

    compiled: dict = {}

    def run(*args, **kwargs):
        leaves, tree = jax.tree.flatten((args, kwargs))
        rebuilt, arrays = fresh.over_arrays(function, args, kwargs, jax.Array)
        key = (tree, tuple(id(leaf) for leaf in leaves if not isinstance(leaf, jax.Array)))
        if key not in compiled:  # the same closed-over values: one compile
            compiled[key] = jax.jit(rebuilt)
        return compiled[key](*arrays)

    return run


def _run(function, args, kwargs):
    import jax
    import numpy as np

    out = jax.tree.leaves(jax.block_until_ready(function(*args, **kwargs)))
    jax.effects_barrier()  # every observed value has reached the host before the next run
    return [np.asarray(x) for x in out]


def _same(a: list, b: list) -> bool:
    import numpy as np

    return len(a) == len(b) and all(
        x.shape == y.shape and np.array_equal(x, y, equal_nan=True)
        for x, y in zip(a, b, strict=True)
    )


def problems(
    function,
    primitives: dict,
    args,
    kwargs,
    seed: int,
    answer: dict | None = None,
    carried: dict | None = None,
    dead: dict | None = None,
) -> list[str]:
    """What shows that `primitives` ({name: Primitive}) do not carry `function`'s result on
    `args`/`kwargs`; [] when some use of each varies with the inputs and its uses carry some of
    the result (at least `CARRIED` x the answer's share where the answer's carry nearly all of
    it; `answer`: {name: share}), or when the TODO cannot be run again (then its asserts and
    program are the judges). The share each technique's uses carried is written to `carried`.
    `dead`: {name: how many of its equations no output depends on} in the program read."""
    found = []
    try:
        moved = fresh.moved(args, kwargs, seed, scale=0.5)  # far enough to move a round
    except Exception:
        return []  # inputs that cannot be moved (not arrays): the asserts judged the TODO
    for name, primitive in primitives.items():
        watched = _watched(function, primitive, args, kwargs, moved)
        if watched is None:
            continue  # a program that cannot be run twice: the asserts judged it
        watch, running, base = watched
        if not watch.uses:
            found.append(
                f"TODO 在它自己的输入上运行时从未用到 `{name}`：读到的程序不是运行的程序 / the "
                f"TODO run on its own inputs never uses `{name}`: the program read is not the "
                "program that ran (a TODO that behaves otherwise on concrete values, or when "
                "called again, does not count)"
            )
            continue
        varies = bool(fresh.floats(args, kwargs))  # integer-only inputs cannot be nudged
        # a use is informative when it computes something (not all zeros) from what varies
        # with the TODO's inputs: its results change, or what it was given does (a round, a
        # sign, a comparison keeps its result under a small move)
        informative = sorted(
            use for (run, use), values in watch.seen.items()
            if run == 0 and (not watch.fed.get((0, use))  # fed nothing: a platform's index
                             or any(v.any() for v in values + watch.seen.get((1, use), []))
                             and (not varies or not _same(values, watch.seen.get((1, use), []))
                                  or not _same(watch.fed.get((0, use), []), watch.fed.get((1, use), []))))
        )  # fmt: skip
        if not watch.seen:
            continue  # no output to watch (a token, a tuple of nothing)
        if not informative:
            found.append(
                f"`{name}` 的输出不随输入变化（它算的是常数或零）/ what `{name}` computes does "
                "not change with the TODO's inputs (it is fed zeros or constants): the work is "
                "done elsewhere"
            )
            continue
        expected = (answer or {}).get(name)
        need = CARRIED * expected if expected and expected >= WHOLE else 0.0
        with _Perturber(running, primitive, args, kwargs) as perturb:
            found += _carry(name, perturb, informative, base, answer, carried, need, expected,
                            (dead or {}).get(name, 0))  # fmt: skip
    return found


def _carry(
    name: str, perturb: "_Perturber", informative: list, base: list, answer, carried,
    need: float, expected, dead: int = 0,
) -> list[str]:
    """(b) and (c) for one technique whose `informative` uses vary with the inputs."""
    # per output (each use alone, every use tried): a technique that makes one output (a
    # cache written and returned) while other work makes another the answer's makes (the
    # attention read from it)
    each_theirs = (answer or {}).get(f"{name} {EACH}") or []
    held_each = len(informative) <= MAX_USES and any(t >= WHOLE for t in each_theirs)
    share, each = _share(perturb, informative[:MAX_USES], base,
                         0.0 if held_each else need, each=True)  # fmt: skip
    # every use at once: uses that cancel one another each seem to carry the result alone
    # (measured for the answer's profile; held where it is whole). Zeroed, a sum that
    # cancels (r(2u) - 2 r(u)) stays zero, where an honest ratio of two uses (a sum over a
    # count) does not survive its parts zeroed. (Moved alike at once, a value over itself
    # would stay one, but so did an honest quantize_mx by frexp in its koan: not held.)
    # One use may be every call of a cached jit.
    held_each = held_each and bool(share)
    theirs = (answer or {}).get(f"{name} {TOGETHER}")
    held = bool(theirs and theirs >= WHOLE and share)
    together = share
    if carried is not None or held:
        uses = [tuple(informative)]
        together = _share(perturb, uses, base, 0.0, zero=True)
    if carried is not None:
        carried[name] = round(share, 4)
        carried[f"{name} {TOGETHER}"] = round(together, 4)
        carried[f"{name} {EACH}"] = [round(e, 4) for e in each]
    short = [
        i for i, (mine, t) in enumerate(zip(each, each_theirs, strict=False))
        if t >= WHOLE and mine < CARRIED * t
    ]  # fmt: skip
    if held_each and len(each) == len(each_theirs) and short:
        outputs = ", ".join(map(str, short))
        return [
            f"改变 `{name}` 的输出几乎不改变输出 {outputs}，参考答案的却全变 / changing what "
            f"`{name}` computes leaves output {outputs} (nearly) as it was, where the "
            "answer's changes all of it: the technique makes another output (a cache "
            "written and returned) and other work makes this one"
        ]
    if held and together < CARRIED * theirs:
        return [
            f"同时把 `{name}` 的每一处输出置零，结果只改变 {together:.0%}，参考答案改变 "
            f"{theirs:.0%} / zeroing every use of `{name}` at once changes {together:.0%} of "
            f"the TODO's result where the answer's changes {theirs:.0%}: its uses cancel one "
            "another (a pair subtracted), and other work makes the result"
        ]
    if share == 0 and expected != 0:  # the answer's own may change only rounding (a shift)
        return [
            f"改变 `{name}` 的输出不改变结果 / changing what `{name}` computes does not "
            "change the TODO's result: it is selected away, scaled to nothing or beside the "
            "work that counts"
        ]
    if share < need:
        return [
            f"改变 `{name}` 的输出只改变结果的 {share:.0%}，参考答案改变 {expected:.0%} / "
            f"changing what `{name}` computes changes {share:.0%} of the TODO's result "
            f"where the answer's changes {expected:.0%}: the technique makes a part (a row, "
            "a block, a head) and other work makes the rest"
        ]
    return _idle(name, perturb, informative[:MAX_USES], base, answer, carried, need, dead)


def _idle(
    name, perturb: "_Perturber", uses: list, base: list, answer, carried, need: float,
    dead: int = 0,
):
    """(c): where each use of the answer's technique, resized (`_resized`), changes the result
    (its profile's idle count is 0), each of the TODO's `uses` must too, less its `dead` ones
    (dead code, no output depends on it: red team 12a's params resharded for an Adam update
    that never reads them); a computed where keeps what it selects away live. An author's run
    writes the count to `carried` (every use tried). A lone use held to `need` is left to it:
    no other use can make the result, and a value read through its sign or selected away
    changes a share of it far below the answer's (a run saved per TODO)."""
    if carried is None and (answer or {}).get(f"{name} {IDLE}") != 0:
        return []  # the answer's own has a use that changes nothing so (or no such profile)
    if carried is None and len(uses) == 1 and need:
        return []
    idle = []
    for use in uses:
        if _share(perturb, [use], base, 0.0, resize=True) == 0:
            idle.append(use)
            if carried is None and len(idle) > dead:
                break
    if carried is not None:
        carried[f"{name} {IDLE}"] = len(idle)
        return []
    if len(idle) <= dead:
        return []
    return [
        f"`{name}` 的第 {idle[-1] + 1} 处输出改变大小（符号、顺序、零和 NaN 不变）不改变结果，参考"
        f"答案的每一处都改变它 / resizing what use {idle[-1] + 1} of `{name}` computes (its "
        "signs, order, zeros and NaNs kept) leaves the TODO's result as it was, where every "
        "use of the answer's changes it: that value counts only through a property another "
        "route also keeps (a sign, a comparison, whether it is NaN) or a computed where selects "
        "it away, and other work makes the result"
    ]


class _Perturber:
    """The TODO run with every use of `primitive` changed as each run asks (`run`), in one
    trace and compile: a pure callback per use reads the change from the host. Where a later
    run binds the primitive again (eager code, some binds or all), or the callbacks cannot run
    there (an export, a kernel's body), each run is traced anew with its changes written in."""

    def __init__(self, function, primitive, args, kwargs) -> None:
        self.function, self.args, self.kwargs = function, args, kwargs
        self.patch = _Patch([primitive], "perturb")
        self.binds: int | None = None  # the first run's binds
        self.stack = contextlib.ExitStack()

    def __enter__(self):
        self.stack.enter_context(self.patch.active())
        return self

    def __exit__(self, *exc) -> None:
        self.stack.close()

    def run(self, codes: dict[int, int]) -> tuple[list, bool]:
        """The TODO's outputs with `codes` ({use: code}), and whether a changed use's output is
        a signed integer."""
        self.patch.codes = codes
        signed = lambda: any(self.patch.signed.get(use) for use in codes)  # noqa: E731
        if ZERO in codes.values() and not self.patch.baked:
            self.patch.baked = True
            try:
                with fresh_traces():
                    self.patch.uses = 0
                    return _run(self.function, self.args, self.kwargs), signed()
            finally:
                self.patch.baked = False
        if not self.patch.baked:
            try:
                self.patch.uses = 0
                out = _run(self.function, self.args, self.kwargs)
                first, self.binds = self.binds is None, self.binds or self.patch.uses
                if self.patch.uses in (0, self.binds):
                    # bound again, nothing was cached (eager code): a trace per run costs no
                    # more, and writes in only the change it makes
                    self.patch.baked = bool(self.patch.uses) and not first
                    return out, signed()
            except Exception:
                pass  # tried again with the changes written in: an error of its own is kept
            self.patch.baked = True
        with fresh_traces():
            self.patch.uses = 0
            return _run(self.function, self.args, self.kwargs), signed()


def _share(
    perturb: _Perturber,
    uses: list,
    base: list,
    need: float,
    zero: bool = False,
    each: bool = False,
    resize: bool = False,
):
    """The share of the output elements that perturbing `uses` (one at a time; a tuple of uses
    at once) changes, together; the search stops once it is more than `need`. With `each`,
    (that share, the share of each output leaf)."""
    import numpy as np

    total = sum(x.size for x in base) or 1
    changed = [np.zeros(x.shape, bool) for x in base]
    share = 0.0
    for use in uses:
        try:
            targets = use if isinstance(use, tuple) else (use,)
            for flip in range(1, len(FLIPS) + 1):  # an index moved to another branch may
                code = ZERO if zero else RESIZE if resize else flip  # pick the same function
                after, ints = perturb.run(dict.fromkeys(targets, code))
                if not ints or not _same(after, base):
                    break
        except Exception:  # the perturbed run could not finish: the value was used
            return (1.0, [1.0] * len(base)) if each else 1.0
        if len(after) != len(base) or any(
            a.shape != b.shape for a, b in zip(after, base, strict=False)
        ):
            return (1.0, [1.0] * len(base)) if each else 1.0
        for mask, a, b in zip(changed, after, base, strict=True):
            same = a == b
            if a.dtype.kind in "fc":  # a change is more than rounding of the output's size
                finite = np.abs(b[np.isfinite(b)])
                noise = ROUNDING * float(finite.max()) if finite.size else 0.0
                with np.errstate(invalid="ignore"):
                    same |= (np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= noise)
            mask |= ~same
        share = sum(int(m.sum()) for m in changed) / total
        if share >= 1.0 or (need and share >= need):
            break
    if each:
        return share, [float(m.sum()) / (m.size or 1) for m in changed]
    return share
