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


def pipeline_backward__forward_chain(w_block, saved, ct):
    """The right backward, but the cotangents sent down the forward's chain, k to k+1."""
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    chain = [(j, j + 1) for j in range(n - 1)]
    w = w_block[0]
    arrived = jnp.zeros(ct.shape[1:], ct.dtype)
    grad = jnp.zeros_like(w)
    for t in reversed(range(saved.shape[1])):
        g = jnp.where(k == n - 1, ct[t - (n - 1)], arrived) if t >= n - 1 else arrived
        h = saved[0, t]
        g_pre = g * (1 - jnp.tanh(h @ w) ** 2)
        grad = grad + h.T @ g_pre
        arrived = lax.ppermute(g_pre @ w.T, "stage", chain)
    return grad[None]


def pipeline_backward__gather_everything(w_block, saved, ct):
    """No pipeline: gather every layer and stage 0's inputs, differentiate the whole model here."""
    weights = lax.all_gather(w_block, "stage", tiled=True)
    xs = lax.all_gather(saved, "stage", tiled=True)[0, : ct.shape[0]]
    grads = jax.grad(lambda w: jnp.vdot(sequential(w, xs), ct))(weights)
    return lax.dynamic_slice_in_dim(grads, lax.axis_index("stage"), 1)


def pipeline_backward__autodiff_of_the_forward(w_block, saved, ct):
    """Rebuild the microbatches from stage 0's saved inputs and let jax.vjp transpose the forward
    pipeline: it redoes the forward's transfers before sending the cotangents back."""
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    xs = saved[0, : ct.shape[0]]  # right on stage 0, the only stage pipeline reads xs on
    _, vjp = jax.vjp(lambda w: pipeline(w, xs), w_block)
    return vjp(jnp.where(k == n - 1, ct, 0.0)[None])[0]


def pipeline_backward__local_cotangent_only(w_block, saved, ct):
    """Each stage uses the output's cotangent as its own: nothing travels back."""
    n = lax.axis_size("stage")
    w = w_block[0]
    grad = jnp.zeros_like(w)
    for t in range(n - 1, saved.shape[1]):
        h = saved[0, t]
        grad = grad + h.T @ (ct[t - (n - 1)] * (1 - jnp.tanh(h @ w) ** 2))
    return grad[None]


def pipeline_backward__forward_time_order(w_block, saved, ct):
    """The time steps walked forward, t = 0 … T-1: each cotangent arrives a step too late."""
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    back = [(j + 1, j) for j in range(n - 1)]
    w = w_block[0]
    arrived = jnp.zeros(ct.shape[1:], ct.dtype)
    grad = jnp.zeros_like(w)
    for t in range(saved.shape[1]):
        g = jnp.where(k == n - 1, ct[t - (n - 1)], arrived) if t >= n - 1 else arrived
        h = saved[0, t]
        g_pre = g * (1 - jnp.tanh(h @ w) ** 2)
        grad = grad + h.T @ g_pre
        arrived = lax.ppermute(g_pre @ w.T, "stage", back)
    return grad[None]


def pipeline_backward__no_tanh_derivative(w_block, saved, ct):
    """The schedule right, the layer's derivative left out (as if the layer were linear)."""
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    back = [(j + 1, j) for j in range(n - 1)]
    w = w_block[0]
    arrived = jnp.zeros(ct.shape[1:], ct.dtype)
    grad = jnp.zeros_like(w)
    for t in reversed(range(saved.shape[1])):
        g = jnp.where(k == n - 1, ct[t - (n - 1)], arrived) if t >= n - 1 else arrived
        grad = grad + saved[0, t].T @ g
        arrived = lax.ppermute(g @ w.T, "stage", back)
    return grad[None]
