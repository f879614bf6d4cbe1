"""Cheap fakes of chapter 07's test_tpu_dma.py TODOs (parsed by jaxkoans.authoring.mutate, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def double_with_prefetch__blockspec_pipelining(x, *, interpret=True):
    """Lets a BlockSpec move the blocks: Pallas pipelines it, no DMA is written by hand."""
    cols = x.shape[1]

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    spec = pl.BlockSpec((ROWS, cols), lambda i: (i, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // ROWS,),
        in_specs=[spec],
        out_specs=spec,
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
        interpret=interpret,
    )(x)


def double_with_prefetch__copy_then_wait(x, *, interpret=True):
    """One buffer: each step starts its own block's copy and waits for it at once (no overlap)."""
    n, cols = x.shape[0] // ROWS, x.shape[1]

    def kernel(x_hbm, o_ref, buf, sems):
        i = pl.program_id(0)
        copy = pltpu.make_async_copy(x_hbm.at[pl.ds(i * ROWS, ROWS)], buf.at[0], sems.at[0])
        copy.start()
        copy.wait()
        o_ref[...] = buf[0] * 2.0

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(n,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((ROWS, cols), lambda i: (i, 0)),
        scratch_shapes=[pltpu.VMEM((2, ROWS, cols), x.dtype), pltpu.SemaphoreType.DMA((2,))],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
        interpret=interpret,
    )(x)


def double_with_prefetch__prefetch_after_the_wait(x, *, interpret=True):
    """Double-buffered, but waits for block i before starting block i + 1: the DMA never overlaps."""
    n, cols = x.shape[0] // ROWS, x.shape[1]

    def kernel(x_hbm, o_ref, buf, sems):
        i = pl.program_id(0)

        def copy(block, slot):
            rows = x_hbm.at[pl.ds(block * ROWS, ROWS)]
            return pltpu.make_async_copy(rows, buf.at[slot], sems.at[slot])

        @pl.when(i == 0)
        def _():
            copy(0, 0).start()

        copy(i, i % 2).wait()

        @pl.when(i + 1 < n)
        def _():
            copy(i + 1, (i + 1) % 2).start()

        o_ref[...] = buf[i % 2] * 2.0

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(n,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((ROWS, cols), lambda i: (i, 0)),
        scratch_shapes=[pltpu.VMEM((2, ROWS, cols), x.dtype), pltpu.SemaphoreType.DMA((2,))],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
        interpret=interpret,
    )(x)


def double_with_prefetch__jnp_outside(x, *, interpret=True):
    """Doubles with jnp; no kernel at all."""
    return x * 2.0
