"""Fresh cases: a TODO run on inputs its test never showed, against its answer on the same ones.

The inputs are the koan's own call moved a little (every float array and every Python float
argument: a step size, a rate, a threshold; and, where the answer still runs and stays near
there, every Python int one up: a segment count, a number of steps), so a table of the test's
numbers, a hard-coded block count or step size, or a result right only on the tested values
gives another answer, while the inputs stay ones the problem allows (integer arrays, shapes and
keys are kept). Where JAX called the TODO on tracers the values are drawn (`drawn`), as small
as the answer needs to stay finite there. The answer's
outputs on them travel with its cost profile (`koans/NN/costs.json`) as a fingerprint: a few
seeded random projections of each output and its norm, never the values, so the file states no
answer. The TODO must match them within a tolerance that separates another result from
rounding (1e-3 of the output's norm).

A second case grows the call: every axis of one length is doubled (`grown`), so a block count,
a size table or a shape written into the TODO meets a shape the test never used. The answer's
profile names the length it grew (the first, largest first, on which the answer ran).

A third scales the call's floats down by TINY (`scaled`), where the answer's result scales
with them (by a power of TINY per output: no scale in the problem, a norm, a sum, a product),
so a threshold or an eps written into the TODO meets values below it. A fourth scales them up
by BOLD (`bold`), where the answer's result there is finite and well conditioned (every float
nudged by NUDGE moves it by less than the tolerance, so honest programs' rounding agrees): a
trick right over the test's range meets values past it.
"""

from __future__ import annotations

import math
import zlib

PROJECTIONS = 4
DIVERGED = 1e30  # an answer's moved result this large tells nothing: its iteration diverged
TAME = 1e6  # outputs this many times their inputs' size: drawn values the problem does not allow
RTOL = 1e-3


TINY = 2.0**-24  # the scaled case's factor: exact in binary, far below any written-in threshold
# the bold case's factor (exact in binary): a trick fitted to the range the test's values span
# (a fixed shift before exp, a series, a clamp) meets values past it
BOLD = 32.0
NUDGE = 1e-6  # kept where the answer's result there moves by less than RTOL under this nudge
POWERS = (0, 0.5, 1, 2)  # the powers of the factor an answer's result may scale with (a norm: 0.5)
SCALE = 0.05  # how far a fresh case moves each float (of its size plus one)
# how the answer's fresh case was moved, kept in its profile per koan (plugin/contracts.py)
MOVES = ("scale", "ints", "drawn")
DRAWN_AT = (1 / 32, 32.0)  # the further sizes a case's floats are drawn at (under shard_map)
NAMED = "fresh_"  # in front of every dict key of a case moved with `names` (renamed)


def diverged(printed) -> bool:
    """True when a fingerprint (`run`'s) holds an output past DIVERGED, not finite or with NaNs
    (an overflow's inf - inf): the move took the answer off its basin."""
    return isinstance(printed, list) and any(
        not math.isfinite(p[0]) or p[0] > DIVERGED or p[1] > 0 for p in printed
    )


def tame(printed, args, kwargs) -> bool:
    """True when a fingerprint (`run`'s) is finite, without NaNs and within TAME times the
    size of the float inputs it came from: values drawn for tracers that the problem allows."""
    import numpy as np

    if not isinstance(printed, list) or diverged(printed):
        return False
    size = math.sqrt(
        sum(float(np.sum(np.square(np.asarray(x, np.float64)))) for x in floats(args, kwargs))
    )
    return all(p[0] <= TAME * (1.0 + size) for p in printed)


def far(printed, base) -> bool:
    """True when the moved call's fingerprint (`printed`) is off its base's (the call unmoved):
    an output with more NaNs than there, past DIVERGED where it was not, or ten times larger
    (where it was not zero).
    An output the answer makes NaN or inf by design (a skipped step's marker) is not far."""
    if not isinstance(printed, list):
        return False
    if not isinstance(base, list) or len(base) != len(printed):
        return diverged(printed)

    def off(m, b) -> bool:
        if m[1] > b[1]:
            return True
        huge = not math.isfinite(m[0]) or m[0] > DIVERGED
        finite = math.isfinite(b[0]) and b[0] <= DIVERGED
        # ten times larger; an output zero unmoved (a step at a learning rate of zero) has no
        # size to be ten times of
        return (huge and finite) or (b[0] > 0 and m[0] > 10 * max(b[0], 1e-6))

    return any(off(m, b) for m, b in zip(printed, base, strict=True))


def keys(tree) -> set:
    """The string keys of every dict in `tree`, at any depth (where `renamed` reaches)."""
    found = set()
    if isinstance(tree, dict):
        found |= {k for k in tree if isinstance(k, str)}
        tree = list(tree.values())
    if isinstance(tree, list | tuple):
        for item in tree:
            found |= keys(item)
    return found


def renamed(tree, kept: frozenset = frozenset()):
    """`tree` with every string key of its dicts, at any depth (inside lists, tuples, named
    tuples), another name: NAMED, then each of its characters the next one (`kernel` is
    `fresh_lfsofm`). A table keyed by the test's names, or by a part of them (a suffix, a
    substring), meets names it never saw, while a rule that reads the tree does not care; the
    keys keep their order, and a key is renamed alike wherever it appears; those in `kept`
    are not (the names a learner's own code gave its state)."""
    if isinstance(tree, dict) and tree and all(isinstance(k, str) for k in tree):
        return type(tree)(
            (k if k in kept else NAMED + "".join(chr(ord(c) + 1) for c in k), renamed(v, kept))
            for k, v in tree.items()
        )
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(renamed(v, kept) for v in tree))
    if type(tree) in (list, tuple):
        return type(tree)(renamed(v, kept) for v in tree)
    return tree


def moved(
    args, kwargs, seed: int, scale: float = SCALE, ints: bool = False, signs: bool = False,
    names: bool = False, counters: bool = False, nudge: float = 1.0, kept: frozenset = frozenset(),
):
    """`args`/`kwargs` with float arrays and Python floats moved by a seeded step (`scale` of
    each value's size plus one), and with `ints` every Python int one up, every typed PRNG key
    another and every Mesh one device fewer along each axis (the arrays placed on it moved
    onto the smaller one). With `signs` a float array with no negative element stays so (its
    elements moved to their size: an optimizer's second moment, a variance); with `names`
    every dict key not in `kept` is `renamed` (the keyword names of the call are kept); with
    `counters` (and
    `ints`) every integer scalar array one up too (an optimizer's step count). Every moved
    float is then times `nudge` (1 + NUDGE: how much rounding moves the result, `floors`)."""
    import jax
    import numpy as np

    generator = np.random.default_rng(seed)
    leaves = jax.tree.leaves((args, kwargs))
    meshes = {id(m): fewer(m, leaves) for m in leaves if ints and isinstance(m, jax.sharding.Mesh)}

    def place(leaf, value):
        sharding = getattr(leaf, "sharding", None)
        if isinstance(sharding, jax.NamedSharding) and id(sharding.mesh) in meshes:
            return jax.device_put(
                value, jax.NamedSharding(meshes[id(sharding.mesh)], sharding.spec)
            )
        # where it lives, committed as it was: an uncommitted array may still follow the others
        return jax.device_put(value, sharding) if leaf.committed else jax.numpy.asarray(value)

    def move(leaf):
        if type(leaf) is float:
            return leaf * (1.0 + scale * generator.uniform(0.5, 1.0)) * nudge
        if type(leaf) is int and ints:  # not a bool: a flag is no count
            return leaf + 1
        if id(leaf) in meshes:
            return meshes[id(leaf)]
        dtype = getattr(leaf, "dtype", None)
        if ints and dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            data = jax.random.key_data(leaf)  # another key: a seed written in is wrong there
            return jax.random.wrap_key_data(data ^ 1, impl=jax.random.key_impl(leaf))
        if counters and ints and getattr(leaf, "shape", None) == () and _integer(dtype):
            return place(leaf, leaf + 1) if isinstance(leaf, jax.Array) else leaf + 1
        if dtype is None or not hasattr(leaf, "shape") or not _floating(dtype):
            # integers, booleans and keys are kept: the problem's own (on the smaller mesh)
            return place(leaf, leaf) if meshes and isinstance(leaf, jax.Array) else leaf
        value = np.asarray(leaf, dtype=np.float64)
        step = generator.standard_normal(value.shape) * scale * (1.0 + np.abs(value))
        # an inf or NaN the test hands in (a padded loss) stays: a learner's run treats the
        # warning that inf - inf gives as an error, and no fresh case would run at all
        step = np.where(np.isfinite(value), step, 0.0)
        out = (value + step) * nudge
        out = (np.abs(out) if signs and not np.any(value < 0) else out).astype(np.dtype(dtype))
        return place(leaf, out) if isinstance(leaf, jax.Array) else out

    if names:
        args, kwargs = renamed(args, kept), {k: renamed(v, kept) for k, v in kwargs.items()}
    return jax.tree.map(move, (args, kwargs))


def fewer(mesh, leaves=()):
    """`mesh` with fewer devices along each axis longer than one (its first devices, the same
    names and axis types): a device count written into a TODO is wrong there. Each axis gets
    the most devices below its own that still split every array of `leaves` placed along it
    (8 → 7, or 4 where 64 rows are split), so the call can run there."""
    import jax

    split = {name: [] for name in mesh.axis_names}  # lengths each axis splits
    for leaf in leaves:
        sharding = getattr(leaf, "sharding", None)
        if isinstance(sharding, jax.NamedSharding) and sharding.mesh is mesh:
            for length, entry in zip(leaf.shape, sharding.spec, strict=False):
                names = entry if isinstance(entry, tuple) else (entry,)
                others = math.prod(mesh.shape[n] for n in names if n is not None)
                for name in filter(None, names):
                    split[name].append(length // (others // mesh.shape[name]))
    shape = tuple(
        max(m for m in range(1, n) if all(length % m == 0 for length in split[name])) if n > 1 else n
        for name, n in zip(mesh.axis_names, mesh.axis_sizes, strict=True)
    )
    count = 1
    for n in shape:
        count *= n
    return jax.make_mesh(
        shape, mesh.axis_names, axis_types=mesh.axis_types, devices=jax.devices()[:count]
    )


def floats(args, kwargs) -> list:
    """The float arrays among `args`/`kwargs`: what a fresh case moves."""
    import jax

    return [
        leaf for leaf in jax.tree.leaves((args, kwargs)) if _array(leaf) and _floating(leaf.dtype)
    ]


def _integer(dtype) -> bool:
    import numpy as np

    return np.issubdtype(dtype, np.integer)


def _floating(dtype) -> bool:
    """A float dtype (a typed key's is no NumPy dtype at all)."""
    import jax.numpy as jnp

    return jnp.issubdtype(dtype, jnp.floating)


def doubled(length: int | list) -> tuple[str, str]:
    """(zh, en) naming the grown call's axes: one length, or every length at once."""
    if isinstance(length, list):
        named = ", ".join(map(str, length))
        return f"长度为 {named} 的轴全部加倍", f"every axis of length {named} doubled at once"
    return f"每个长度为 {length} 的轴加倍到 {2 * length}", (
        f"every axis of length {length} doubled to {2 * length}"
    )


def lengths(args, kwargs) -> list[int]:
    """The axis lengths (above 1) of the float arrays among `args`/`kwargs`, largest first: the
    lengths `grown` may double."""
    return sorted({n for leaf in floats(args, kwargs) for n in leaf.shape if n > 1}, reverse=True)


def _array(leaf) -> bool:
    """An array's shape and dtype (a Mesh has a `shape` too: a dict of its axes)."""
    return isinstance(getattr(leaf, "shape", None), tuple) and hasattr(leaf, "dtype")


def grown(args, kwargs, length: int | list, seed: int, ints: bool = False):
    """`args`/`kwargs` (concrete) with every axis of `length` (or of each length of a list:
    every length at once) doubled: each array repeated along it (so a mask, an index or a key
    stays one the problem allows), with `ints` every Python int equal to such a length doubled
    too (the length passed as a count), then the floats moved so that the two halves differ."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    wanted = set(length) if isinstance(length, list) else {length}

    def grow(leaf):
        if type(leaf) is int and ints and leaf in wanted:
            return 2 * leaf
        shape = getattr(leaf, "shape", None)
        if not _array(leaf) or not wanted & set(shape):
            return leaf
        keys = jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key)
        value = leaf if keys else np.asarray(leaf)
        for axis, n in enumerate(shape):
            if n in wanted:
                value = (jnp if keys else np).concatenate([value, value], axis=axis)
        sharding = getattr(leaf, "sharding", None)
        if isinstance(leaf, jax.Array) and isinstance(sharding, jax.NamedSharding):
            return jax.device_put(value, sharding)
        return jnp.asarray(value) if isinstance(leaf, jax.Array) else value

    return moved(*jax.tree.map(grow, (args, kwargs)), seed)


def drawn(args, kwargs, seed: int, size: float = 1.0, host: bool = False):
    """New values for the arrays among `args`/`kwargs` (shapes and dtypes as recorded): what no
    table in the test anticipates. Floats are normal times `size`, integers in [0, 4), booleans
    fair; each a jax.Array, as the tracers it stands for were (numpy cannot be indexed by a
    tracer), or with `host` the same values as NumPy arrays (typed keys stay jax.Arrays), for a
    caller that places them itself: placing a host array on a mesh compiles nothing, moving a
    device array there is a reshard compiled per shape."""
    import jax
    import numpy as np

    generator = np.random.default_rng(seed)
    meshes = [m for m in jax.tree.leaves((args, kwargs)) if isinstance(m, jax.sharding.Mesh)]

    def place(leaf, value):
        """Where the tracer lived: a value typed on an Explicit mesh goes on the Mesh the call
        was handed (a static argument, which a fresh case may move) or one like it."""
        sharding = leaf.sharding
        if not isinstance(sharding, jax.NamedSharding):
            return jax.numpy.asarray(value)
        mesh = sharding.mesh
        if isinstance(mesh, jax.sharding.AbstractMesh):
            mesh = next((m for m in meshes if m.abstract_mesh == mesh), None) or jax.make_mesh(
                mesh.axis_sizes, mesh.axis_names, axis_types=mesh.axis_types
            )
        return jax.device_put(value, jax.NamedSharding(mesh, sharding.spec, memory_kind=sharding.memory_kind))

    def draw(leaf):
        if not isinstance(leaf, jax.ShapeDtypeStruct):
            return leaf
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):  # typed keys: new ones
            keys = jax.random.split(
                jax.random.key(int(generator.integers(1 << 30))), max(leaf.size, 1)
            )
            return keys.reshape(leaf.shape) if leaf.shape else keys[0]
        dtype = np.dtype(leaf.dtype)
        if dtype == np.bool_:
            value = generator.random(leaf.shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            value = generator.integers(0, 4, leaf.shape).astype(dtype)
        else:
            value = (size * generator.standard_normal(leaf.shape)).astype(dtype)
        return value if host else place(leaf, value)

    return jax.tree.map(draw, (args, kwargs))


_PRIMAL = []  # the pytree class `opened` makes, defined on first use (JAX imported late)


def opened(args, kwargs):
    """`args`/`kwargs` with each CustomVJPPrimal (what a custom_vjp's fwd is handed under
    symbolic zeros: a value and whether it is perturbed) as a pytree of its value, so a fresh
    case moves, draws and scales it like any array (it was a leaf none of them reached). The
    class is a subclass: the TODO reads `.value` and `.perturbed` as before."""
    import dataclasses

    import jax
    from jax.custom_derivatives import CustomVJPPrimal

    if not _PRIMAL:

        @dataclasses.dataclass
        class Primal(CustomVJPPrimal):
            pass

        jax.tree_util.register_pytree_node(
            Primal, lambda p: ((p.value,), p.perturbed), lambda aux, kids: Primal(kids[0], aux)
        )
        _PRIMAL.append(Primal)
    primal = _PRIMAL[0]

    def open_one(leaf):
        if isinstance(leaf, CustomVJPPrimal) and not isinstance(leaf, primal):
            return primal(leaf.value, leaf.perturbed)
        return leaf

    return jax.tree.map(open_one, (args, kwargs))


def values_only(args, kwargs, drawn: bool = False) -> bool:
    """True when `args`/`kwargs` hold only values (numbers, flags, None, arrays: no function,
    no object, no path; a call that can be made again with nothing else), and with `drawn`
    types to draw values of (jax.ShapeDtypeStruct)."""
    import jax
    import numpy as np

    def value(leaf) -> bool:
        return (
            leaf is None
            or type(leaf) in (int, float, bool)
            or (isinstance(leaf, jax.Array | np.ndarray) and not isinstance(leaf, jax.core.Tracer))
            or (drawn and isinstance(leaf, jax.ShapeDtypeStruct))
        )

    return all(map(value, jax.tree.leaves((args, kwargs), is_leaf=lambda x: x is None)))


def movable(args, kwargs) -> bool:
    """True when a number or a float array among `args`/`kwargs` is one a move changes."""
    import jax

    return any(
        type(leaf) in (int, float) or (_array(leaf) and _floating(leaf.dtype))
        for leaf in jax.tree.leaves((args, kwargs))
    )


def _as_floats(leaf):
    import jax
    import numpy as np

    if isinstance(leaf, str | jax.sharding.PartitionSpec):  # compared exactly (bits 0)
        return np.array([float(zlib.crc32(repr(leaf).encode()))])

    if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
    value = np.asarray(leaf)
    if value.dtype == object:
        raise TypeError("not an array")
    return value.astype(np.float64).ravel()


def fingerprint(outputs, seed: int) -> list[list[float]]:
    """Per output leaf: [norm, NaN count, bits of its dtype, PROJECTIONS seeded projections]
    (NaN and inf read as 0)."""
    import jax
    import numpy as np

    found = []
    # a sparse matrix as the matrix it stands for: its entries' storage order is no result
    outputs = jax.tree.map(lambda x: x.todense() if _sparse(x) else x, outputs, is_leaf=_sparse)
    for i, leaf in enumerate(jax.tree.leaves(outputs)):
        if hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)  # a typed key's dtype is no NumPy dtype
        bits = (
            8 * np.dtype(getattr(leaf, "dtype", np.float64)).itemsize
            if hasattr(leaf, "dtype")
            else 0
            if isinstance(leaf, str | jax.sharding.PartitionSpec)
            else 64
        )
        value = _as_floats(leaf)
        nans = np.isnan(value)
        value = np.where(nans | np.isinf(value), 0.0, value)
        directions = np.random.default_rng(seed + i).standard_normal((PROJECTIONS, value.size))
        found.append(
            [
                float(np.linalg.norm(value)),
                float(nans.sum()),
                float(bits),
                *map(float, directions @ value),
            ]
        )
    return found


def _sparse(leaf) -> bool:
    return type(leaf).__module__.startswith("jax.experimental.sparse")


def _tolerance(bits: float) -> float:
    """Relative to the output's norm: rounding of another honest order of operations (none for
    a spec or a string, bits 0)."""
    if bits == 0:
        return 0.0
    return RTOL if bits >= 32 else 5e-2 if bits >= 16 else 2e-1


FLOOR = 1e-6  # the absolute tolerance of an output where the answer's profile keeps no floor
NOISE_TIMES = 1e3  # a floor this many times what a NUDGE moves the output, at most FLOOR
LEAST = 1e-8  # and at least this: another honest order of operations may round a zero otherwise


def floors(nudged: list, printed: list) -> list[float]:
    """Per output, the absolute tolerance the answer's run there allows: NOISE_TIMES what a
    NUDGE of every input moves it (`nudged` against `printed`), at most FLOOR. An output whose
    size comes from a small factor (an update at a learning rate of 1e-5) is compared at its
    own scale, not FLOOR's; one that rounding decides (a residual) keeps FLOOR."""

    def moved_by(n, p):  # its norm and projections (not its NaN count, not its dtype's bits)
        return max(abs(x - y) for x, y in zip(n[:1] + n[3:], p[:1] + p[3:], strict=True))

    return [
        min(FLOOR, NOISE_TIMES * moved_by(n, p))
        for n, p in zip(nudged, printed, strict=True)
    ]


def differs(mine: list, answer: list, floor: list | None = None) -> str:
    """Why `mine` is another result than `answer` (two fingerprints), or "": each output within
    the tolerance of its dtype, relative to its norm, plus its `floor` (FLOOR where none)."""
    if len(mine) != len(answer):
        return f"{len(mine)} outputs, the answer has {len(answer)}"
    for i, (m, a) in enumerate(zip(mine, answer, strict=True)):
        absolute = max(LEAST, floor[i]) if floor and len(floor) == len(answer) else FLOOR
        if not math.isfinite(a[0]) or a[0] > DIVERGED:
            continue  # the answer itself diverges there (an iteration moved off its basin)
        if m[1] != a[1]:
            return f"output {i}: {int(m[1])} NaN, the answer has {int(a[1])}"
        scale = _tolerance(a[2]) * max(a[0], 1e-6) + absolute
        if abs(m[0] - a[0]) > scale or any(
            abs(x - y) > scale for x, y in zip(m[3:], a[3:], strict=True)
        ):
            return f"output {i}: another result (norm {m[0]:.6g}, the answer's {a[0]:.6g})"
    return ""


def over_arrays(function, args, kwargs, kinds):
    """(`function` as a function of the leaves of `args`/`kwargs` that are instances of
    `kinds`, the rest closed over; those leaves): what jit or a trace is handed, where the
    call also holds meshes, ints and functions."""
    import jax

    leaves, tree = jax.tree.flatten((args, kwargs))
    at = [i for i, leaf in enumerate(leaves) if isinstance(leaf, kinds)]

    def rebuilt(*values):
        filled = list(leaves)
        for i, value in zip(at, values, strict=True):
            filled[i] = value
        a, k = jax.tree.unflatten(tree, filled)
        return function(*a, **k)

    return rebuilt, [leaves[i] for i in at]


def run(
    function, args, kwargs, seed: int, length: int = 0, scale: float = SCALE, ints: bool = False,
    signs: bool = False, names: bool = False, nudge: float = 1.0,
) -> list[list[float]]:
    """The fingerprint of `function` on the moved inputs (grown along `length`, when given)."""
    import jax

    args, kwargs = with_defaults(function, args, kwargs)
    new_args, new_kwargs = (
        grown(args, kwargs, length, seed, ints)
        if length
        else moved(args, kwargs, seed, scale, ints, signs, names, nudge=nudge)
    )
    return fingerprint(jax.block_until_ready(function(*new_args, **new_kwargs)), seed)


def with_defaults(function, args, kwargs):
    """The call with each number the caller left to a default passed explicitly, so the fresh
    case moves it as well: a count written in where the default stands meets another."""
    import inspect

    try:
        signature = inspect.signature(function)
        given = signature.bind(*args, **kwargs).arguments
    except (TypeError, ValueError):  # no signature to read (a builtin), or not this call's
        return args, kwargs
    left = {
        name: p.default
        for name, p in signature.parameters.items()
        if name not in given and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and type(p.default) in (int, float)  # not a bool: a flag is no count
    }  # fmt: skip
    return args, {**kwargs, **left}


def scaled(function, args, kwargs, seed: int, factor: float = TINY) -> list[list[float]]:
    """The fingerprint of `function` on `args`/`kwargs` with every float (array or Python
    float) times `factor` (TINY: the scaled case; BOLD: the bold case)."""
    import jax

    def shrink(leaf):
        if type(leaf) is float:
            return leaf * factor
        if not _array(leaf) or not _floating(leaf.dtype):
            return leaf
        return (leaf * factor).astype(leaf.dtype)  # where it lives

    new_args, new_kwargs = jax.tree.map(shrink, (args, kwargs))
    return fingerprint(jax.block_until_ready(function(*new_args, **new_kwargs)), seed)


def unscaled(printed: list, powers: list) -> list:
    """A scaled case's fingerprint with each output divided by TINY to its power."""
    return [
        [p[0] / TINY**k, p[1], p[2], *(x / TINY**k for x in p[3:])]
        for p, k in zip(printed, powers, strict=True)
    ]


def powers(printed: list, base: list) -> list[float] | None:
    """The power of TINY each output of a scaled case (`printed`) scales with against the
    unscaled call's (`base`), or None where one scales with none (a scale in the problem)."""
    if len(printed) != len(base) or diverged(base) or diverged(printed):
        return None
    found = []
    for p, b in zip(printed, base, strict=True):
        k = next((k for k in POWERS if not differs(unscaled([p], [k]), [b])), None)
        if k is None or (b[0] == 0.0 and p[0] != 0.0):
            return None
        found.append(k)
    return found
