"""Cheap fakes of chapter 07's test_tpu_memory.py TODOs (parsed by jaxkoans.authoring.mutate, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def append_to_cache__no_alias(cache, row, pos, *, interpret=True):
    """The right kernel and blocks, but a fresh output buffer: the blocks not written are garbage."""
    d = cache.shape[1]

    def kernel(pos_ref, row_ref, cache_ref, o_ref):
        rows = jax.lax.broadcasted_iota(jnp.int32, (ROWS, d), 0)
        o_ref[...] = jnp.where(rows == pos_ref[0] % ROWS, row_ref[...], cache_ref[...])

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(1,),
        in_specs=[
            pl.BlockSpec((1, d), lambda i, p: (0, 0)),
            pl.BlockSpec((ROWS, d), lambda i, p: (p[0] // ROWS, 0)),
        ],
        out_specs=pl.BlockSpec((ROWS, d), lambda i, p: (p[0] // ROWS, 0)),
    )
    return pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct(cache.shape, cache.dtype),
        interpret=interpret,
    )(pos, row, cache)


def append_to_cache__whole_cache_in_vmem(cache, row, pos, *, interpret=True):
    """Aliased, but the whole cache is one block: every call moves the entire cache through VMEM."""
    length, d = cache.shape

    def kernel(pos_ref, row_ref, cache_ref, o_ref):
        rows = jax.lax.broadcasted_iota(jnp.int32, (length, d), 0)
        o_ref[...] = jnp.where(rows == pos_ref[0], row_ref[...], cache_ref[...])

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(1,),
        in_specs=[
            pl.BlockSpec((1, d), lambda i, p: (0, 0)),
            pl.BlockSpec((length, d), lambda i, p: (0, 0)),
        ],
        out_specs=pl.BlockSpec((length, d), lambda i, p: (0, 0)),
    )
    return pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct(cache.shape, cache.dtype),
        input_output_aliases={2: 0},
        interpret=interpret,
    )(pos, row, cache)


def append_to_cache__scatter_then_aliased_copy(cache, row, pos, *, interpret=True):
    """The row set outside with .at[].set, then an aliased kernel that copies the target block."""
    d = cache.shape[1]
    updated = cache.at[pos[0]].set(row[0])

    def kernel(pos_ref, row_ref, cache_ref, o_ref):
        o_ref[...] = cache_ref[...]

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(1,),
        in_specs=[
            pl.BlockSpec((1, d), lambda i, p: (0, 0)),
            pl.BlockSpec((ROWS, d), lambda i, p: (p[0] // ROWS, 0)),
        ],
        out_specs=pl.BlockSpec((ROWS, d), lambda i, p: (p[0] // ROWS, 0)),
    )
    return pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct(cache.shape, cache.dtype),
        input_output_aliases={2: 0},
        interpret=interpret,
    )(pos, row, updated)


def double_on_both_cores__parallel(x, *, interpret=True):
    """The same grid with its first axis "parallel": Mosaic records no core_parallel axis."""
    rows, cols = x.shape
    per_core = rows // (2 * ROWS)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    spec = pl.BlockSpec((ROWS, cols), lambda c, i: (c * per_core + i, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(2, per_core),
        in_specs=[spec],
        out_specs=spec,
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=interpret,
    )(x)


def double_on_both_cores__one_flat_axis(x, *, interpret=True):
    """One core_parallel axis over all the row blocks: no (core, step) grid."""
    rows, cols = x.shape

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    spec = pl.BlockSpec((ROWS, cols), lambda i: (i, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(rows // ROWS,),
        in_specs=[spec],
        out_specs=spec,
        compiler_params=pltpu.CompilerParams(dimension_semantics=(pltpu.CORE_PARALLEL,)),
        interpret=interpret,
    )(x)


def double_on_both_cores__both_cores_same_half(x, *, interpret=True):
    """The core index left out of the index map: both cores walk the first half's blocks."""
    rows, cols = x.shape
    per_core = rows // (2 * ROWS)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    spec = pl.BlockSpec((ROWS, cols), lambda c, i: (i, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(2, per_core),
        in_specs=[spec],
        out_specs=spec,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=(pltpu.CORE_PARALLEL, pltpu.ARBITRARY)
        ),
        interpret=interpret,
    )(x)
