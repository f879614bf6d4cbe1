"""Cheap fakes of chapter 03's test_pipeline_parallel.py TODO (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def pipeline__gather_every_layer(w_block, xs):
    """No pipeline: every device all_gathers the N layers and runs the whole model itself."""
    weights = lax.all_gather(w_block, "stage", tiled=True)
    return sequential(weights, xs)[None]


def pipeline__one_microbatch_at_a_time(w_block, xs):
    """Each microbatch walks the whole chain before the next one starts: M·(N-1) transfers."""
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    chain = [(j, j + 1) for j in range(n - 1)]
    outputs = []
    for x in xs:
        h = x
        for stage in range(n):
            h = jnp.where(k == stage, jnp.tanh(h @ w_block[0]), h)
            if stage < n - 1:
                h = lax.ppermute(h, "stage", chain)
        outputs.append(h)
    return jnp.stack(outputs)[None]


def pipeline__whole_batch_at_once(w_block, xs):
    """No microbatches: the whole batch goes down the chain as one, N-1 larger transfers."""
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    chain = [(j, j + 1) for j in range(n - 1)]
    h = xs.reshape(-1, xs.shape[-1])
    for stage in range(n):
        h = jnp.where(k == stage, jnp.tanh(h @ w_block[0]), h)
        if stage < n - 1:
            h = lax.ppermute(h, "stage", chain)
    return h.reshape(xs.shape)[None]


def bubble_fraction__idle_over_useful(stages, microbatches):
    """The common shorthand (N-1)/M: idle steps over useful ones, not over all steps."""
    return (stages - 1) / microbatches


def bubble_fraction__stages_fixed_at_eight(stages, microbatches):
    """The formula with this chapter's 8 stages written in."""
    return 7 / (microbatches + 7)


def bubble_fraction__one_step_too_many(stages, microbatches):
    """Counts M + N time steps instead of M + N - 1."""
    return stages / (microbatches + stages)


def bubble_fraction__integer_division(stages, microbatches):
    """Floor division: 0 for every pipeline with more microbatches than stages."""
    return float((stages - 1) // (microbatches + stages - 1))
