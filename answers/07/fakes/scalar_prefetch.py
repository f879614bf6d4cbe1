"""Cheap fakes of chapter 07's test_scalar_prefetch.py TODOs (parsed by jaxkoans.authoring.mutate, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def grouped_matmul__gather_outside(x, w, group_ids, *, interpret=True):
    """Gathers each block's weights outside the kernel, then a plain grid: no scalar prefetch."""
    m, k = x.shape
    n = w.shape[2]
    per_block = w[group_ids]

    def kernel(x_ref, w_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    return pl.pallas_call(
        kernel,
        grid=(m // BM,),
        in_specs=[
            pl.BlockSpec((BM, k), lambda i: (i, 0)),
            pl.BlockSpec((None, k, n), lambda i: (i, 0, 0)),
        ],
        out_specs=pl.BlockSpec((BM, n), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        interpret=interpret,
    )(x, per_block)


def grouped_matmul__whole_stack_in_vmem(x, w, group_ids, *, interpret=True):
    """Prefetches the ids but moves the whole weight stack each step and indexes it in the kernel."""
    m, k = x.shape
    e, _, n = w.shape

    def kernel(ids_ref, x_ref, w_ref, o_ref):
        expert = ids_ref[pl.program_id(0)]
        o_ref[...] = jnp.dot(x_ref[...], w_ref[expert], preferred_element_type=jnp.float32)

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(m // BM,),
        in_specs=[
            pl.BlockSpec((BM, k), lambda i, ids: (i, 0)),
            pl.BlockSpec((e, k, n), lambda i, ids: (0, 0, 0)),
        ],
        out_specs=pl.BlockSpec((BM, n), lambda i, ids: (i, 0)),
    )
    return pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        interpret=interpret,
    )(group_ids, x, w)


def grouped_matmul__dense_outside(x, w, group_ids, *, interpret=True):
    """Computes the dense reference with jnp and copies it through a kernel."""
    m = x.shape[0]
    out = jnp.einsum("mk,mkn->mn", x, w[jnp.repeat(group_ids, BM)])
    spec = pl.BlockSpec((BM, out.shape[1]), lambda i: (i, 0))

    def kernel(o_in, o_ref):
        o_ref[...] = o_in[...]

    return pl.pallas_call(
        kernel,
        grid=(m // BM,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(out.shape, jnp.float32),
        interpret=interpret,
    )(out)


def grouped_matmul__block_index_as_expert(x, w, group_ids, *, interpret=True):
    """Prefetches the ids but the weight's index map uses the block index, wrapped to the experts."""
    m, k = x.shape
    e, _, n = w.shape

    def kernel(ids_ref, x_ref, w_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(m // BM,),
        in_specs=[
            pl.BlockSpec((BM, k), lambda i, ids: (i, 0)),
            pl.BlockSpec((None, k, n), lambda i, ids: (i % e, 0, 0)),
        ],
        out_specs=pl.BlockSpec((BM, n), lambda i, ids: (i, 0)),
    )
    return pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        interpret=interpret,
    )(group_ids, x, w)


def grouped_matmul__first_expert_only(x, w, group_ids, *, interpret=True):
    """Reads the prefetched Ref, but always its first entry: every block gets block 0's expert."""
    m, k = x.shape
    n = w.shape[2]

    def kernel(ids_ref, x_ref, w_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(m // BM,),
        in_specs=[
            pl.BlockSpec((BM, k), lambda i, ids: (i, 0)),
            pl.BlockSpec((None, k, n), lambda i, ids: (ids[0], 0, 0)),
        ],
        out_specs=pl.BlockSpec((BM, n), lambda i, ids: (i, 0)),
    )
    return pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        interpret=interpret,
    )(group_ids, x, w)
