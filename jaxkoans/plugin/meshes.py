"""A fresh case for a TODO that runs inside shard_map: the same call on a smaller mesh (a ring of 8
written in, or a table of the test's device count, is right on the test's mesh only). `placed`
keeps what a call was (its blocks and the manual axes each varies along); `run` halves every axis
of even size, draws global inputs of the call's global shapes (its blocks times the axes they vary
along, split along their first axis over those axes, so each device's block grows and the values
the call does not split keep theirs), or where the answer cannot run so, of its blocks' shapes
(two operands split alike shrink together), runs the TODO there and fingerprints every device's
outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jaxkoans.plugin import fresh


@dataclass(frozen=True)
class Placed:
    """A call of a TODO inside shard_map, as the reader saw it."""

    leaves: tuple  # ShapeDtypeStructs of the blocks, and the call's static leaves
    varying: tuple  # per leaf: the manual axes it varies along, in the mesh's order
    tree: object
    sizes: tuple  # ((axis name, size), ...) of the manual axes in scope
    x64: bool  # float64 in force at the call


def placed(args, kwargs, axis_sizes: dict, x64: bool) -> Placed | None:
    """What a call on tracers under shard_map was, or None where it cannot be run again (a
    block of rank 0 that varies, a function that closes over a tracer)."""
    import jax

    leaves, tree = jax.tree.flatten((args, kwargs))
    kept, varying = [], []
    for leaf in leaves:
        aval = jax.typeof(leaf) if isinstance(leaf, jax.core.Tracer) else None
        manual = getattr(aval, "manual_axis_type", None)
        axes = tuple(a for a in axis_sizes if a in getattr(manual, "varying", ()))
        if axes and not aval.shape:
            return None
        kept.append(leaf if aval is None else jax.ShapeDtypeStruct(aval.shape, aval.dtype))
        varying.append(axes)
    return Placed(tuple(kept), tuple(varying), tree, tuple(axis_sizes.items()), x64)


def smaller(sizes: tuple) -> dict[str, int]:
    return {name: n // 2 if n % 2 == 0 else n for name, n in sizes}  # each even axis halved


def mapped(
    function, call: Placed, seed: int, sizes: dict[str, int] | None = None, blocks: bool = False,
    size: float = 1.0,
):
    """(a jitted function of global arrays that runs `function` under shard_map on a mesh of
    `sizes` (default: the call's own, and the varying axes checked as the koan's shard_map
    checks them by default: its collectives are the same primitives) and stacks every
    device's outputs, drawn global arrays of the call's global shapes, or with `blocks` of
    its blocks' shapes: each array's rows then shrink with its axes; floats drawn times
    `size`)."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    sizes = sizes or dict(call.sizes)
    count = math.prod(sizes.values())
    mesh = jax.make_mesh(tuple(sizes.values()), tuple(sizes), devices=jax.devices()[:count])
    arrays = [i for i, leaf in enumerate(call.leaves) if isinstance(leaf, jax.ShapeDtypeStruct)]
    specs, shapes = [], []
    for i in arrays:
        block, axes = call.leaves[i], call.varying[i]
        times = math.prod((sizes if blocks else dict(call.sizes))[a] for a in axes)
        shapes.append(jax.ShapeDtypeStruct((block.shape[0] * times, *block.shape[1:]), block.dtype)
                      if axes else block)  # fmt: skip
        specs.append(P(axes) if axes else P())
    drawn = fresh.drawn(tuple(shapes), {}, seed, size, host=True)[0]
    values = [jax.device_put(v, NamedSharding(mesh, s)) for v, s in zip(drawn, specs, strict=True)]  # fmt: skip

    def body(*blocks):
        leaves = list(call.leaves)
        for i, block in zip(arrays, blocks, strict=True):
            leaves[i] = block
        args, kwargs = jax.tree.unflatten(call.tree, leaves)
        return jax.tree.map(lambda out: out[None], function(*args, **kwargs))

    every = P(tuple(sizes))  # each device's outputs along a new first axis
    program = jax.shard_map(
        body, mesh=mesh, in_specs=tuple(specs), out_specs=every, check_vma=sizes == dict(call.sizes)
    )
    return jax.jit(program), values


def run(
    function, call: Placed, seed: int, blocks: bool = False, same: bool = False,
    size: float = 1.0,
) -> list[list[float]]:
    """The fingerprint of `function` run under shard_map on the smaller mesh (`mapped`), or with
    `same` on the call's own mesh (new values only), its floats drawn times `size`."""
    import jax

    with jax.enable_x64(call.x64):
        sizes = dict(call.sizes) if same else smaller(call.sizes)
        program, values = mapped(function, call, seed, sizes, blocks, size)
        outputs = jax.block_until_ready(program(*values))
        return fresh.fingerprint(outputs, seed)  # a key among them read as its data
