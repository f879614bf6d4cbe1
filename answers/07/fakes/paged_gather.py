"""Cheap fakes of chapter 07's test_paged_gather.py TODOs (parsed by jaxkoans.authoring.mutate, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def paged_scores__gather_outside(q, pages, page_table, *, interpret=True):
    """Gathers the keys by the page table outside, then an ordinary BlockSpec pipeline."""
    s, h, c = q.shape
    keys = pages[page_table].reshape(s, -1, c)

    def kernel(q_ref, k_ref, o_ref):
        dims = (((1,), (1,)), ((), ()))
        o_ref[...] = jax.lax.dot_general(
            q_ref[...], k_ref[...], dims, preferred_element_type=jnp.float32
        )

    return pl.pallas_call(
        kernel,
        grid=(s,),
        in_specs=[
            pl.BlockSpec((None, h, c), lambda i: (i, 0, 0)),
            pl.BlockSpec((None, keys.shape[1], c), lambda i: (i, 0, 0)),
        ],
        out_specs=pl.BlockSpec((None, h, keys.shape[1]), lambda i: (i, 0, 0)),
        out_shape=jax.ShapeDtypeStruct((s, h, keys.shape[1]), jnp.float32),
        interpret=interpret,
    )(q, keys)


def paged_scores__scratch_shapes(q, pages, page_table, *, interpret=True):
    """The same DMAs, but the buffer and semaphores come from scratch_shapes, not run_scoped."""
    npages, c = page_table.shape[1], q.shape[2]

    def kernel(table_ref, q_ref, pages_hbm, o_ref, buf, sems):
        seq = pl.program_id(0)
        copies = [
            pltpu.make_async_copy(pages_hbm.at[table_ref[seq, j]], buf.at[j], sems.at[j])
            for j in range(npages)
        ]
        for copy in copies:
            copy.start()
        for j, copy in enumerate(copies):
            copy.wait()
            dims = (((1,), (1,)), ((), ()))
            o_ref[:, pl.ds(j * PAGE, PAGE)] = jax.lax.dot_general(
                q_ref[...], buf[j], dims, preferred_element_type=jnp.float32
            )

    scratch = [pltpu.VMEM((npages, PAGE, c), pages.dtype), pltpu.SemaphoreType.DMA((npages,))]
    s, h = q.shape[:2]
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(s,),
        in_specs=[
            pl.BlockSpec((None, h, c), lambda i, table: (i, 0, 0)),
            pl.BlockSpec(memory_space=pl.ANY),
        ],
        out_specs=pl.BlockSpec((None, h, npages * PAGE), lambda i, table: (i, 0, 0)),
        scratch_shapes=scratch,
    )
    return pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((s, h, npages * PAGE), jnp.float32),
        interpret=interpret,
    )(page_table, q, pages)


def paged_scores__one_page_at_a_time(q, pages, page_table, *, interpret=True):
    """run_scoped and DMAs, but each page is started and waited for at once: none overlap."""
    npages, c = page_table.shape[1], q.shape[2]

    def kernel(table_ref, q_ref, pages_hbm, o_ref):
        seq = pl.program_id(0)

        def body(buf, sems):
            for j in range(npages):
                copy = pltpu.make_async_copy(pages_hbm.at[table_ref[seq, j]], buf.at[j], sems.at[j])
                copy.start()
                copy.wait()
                dims = (((1,), (1,)), ((), ()))
                o_ref[:, pl.ds(j * PAGE, PAGE)] = jax.lax.dot_general(
                    q_ref[...], buf[j], dims, preferred_element_type=jnp.float32
                )

        pl.run_scoped(
            body, pltpu.VMEM((npages, PAGE, c), pages.dtype), pltpu.SemaphoreType.DMA((npages,))
        )

    s, h = q.shape[:2]
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(s,),
        in_specs=[
            pl.BlockSpec((None, h, c), lambda i, table: (i, 0, 0)),
            pl.BlockSpec(memory_space=pl.ANY),
        ],
        out_specs=pl.BlockSpec((None, h, npages * PAGE), lambda i, table: (i, 0, 0)),
        scratch_shapes=[],
    )
    return pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((s, h, npages * PAGE), jnp.float32),
        interpret=interpret,
    )(page_table, q, pages)


def paged_scores__whole_pool_in_vmem(q, pages, page_table, *, interpret=True):
    """Blocks the whole page pool into VMEM and indexes it in the kernel: no DMA of its own."""
    npages, c = page_table.shape[1], q.shape[2]

    def kernel(table_ref, q_ref, pages_ref, o_ref):
        seq = pl.program_id(0)
        for j in range(npages):
            dims = (((1,), (1,)), ((), ()))
            o_ref[:, pl.ds(j * PAGE, PAGE)] = jax.lax.dot_general(
                q_ref[...], pages_ref[table_ref[seq, j]], dims, preferred_element_type=jnp.float32
            )

    spec = pl.BlockSpec(pages.shape, lambda i, table: (0, 0, 0))
    s, h = q.shape[:2]
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(s,),
        in_specs=[
            pl.BlockSpec((None, h, c), lambda i, table: (i, 0, 0)),
            spec,
        ],
        out_specs=pl.BlockSpec((None, h, npages * PAGE), lambda i, table: (i, 0, 0)),
        scratch_shapes=[],
    )
    return pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((s, h, npages * PAGE), jnp.float32),
        interpret=interpret,
    )(page_table, q, pages)


def paged_scores__first_sequences_pages(q, pages, page_table, *, interpret=True):
    """The whole technique, but every sequence reads sequence 0's row of the page table."""
    npages, c = page_table.shape[1], q.shape[2]

    def kernel(table_ref, q_ref, pages_hbm, o_ref):
        def body(buf, sems):
            copies = [
                pltpu.make_async_copy(pages_hbm.at[table_ref[0, j]], buf.at[j], sems.at[j])
                for j in range(npages)
            ]
            for copy in copies:
                copy.start()
            for j, copy in enumerate(copies):
                copy.wait()
                dims = (((1,), (1,)), ((), ()))
                o_ref[:, pl.ds(j * PAGE, PAGE)] = jax.lax.dot_general(
                    q_ref[...], buf[j], dims, preferred_element_type=jnp.float32
                )

        pl.run_scoped(
            body, pltpu.VMEM((npages, PAGE, c), pages.dtype), pltpu.SemaphoreType.DMA((npages,))
        )

    s, h = q.shape[:2]
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(s,),
        in_specs=[
            pl.BlockSpec((None, h, c), lambda i, table: (i, 0, 0)),
            pl.BlockSpec(memory_space=pl.ANY),
        ],
        out_specs=pl.BlockSpec((None, h, npages * PAGE), lambda i, table: (i, 0, 0)),
        scratch_shapes=[],
    )
    return pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((s, h, npages * PAGE), jnp.float32),
        interpret=interpret,
    )(page_table, q, pages)
