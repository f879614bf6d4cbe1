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


def one_f_one_b__gather_every_layer(w_block, xs, targets):
    """No pipeline: every device all_gathers the layers and differentiates the whole model."""
    weights = lax.all_gather(w_block, "stage", tiled=True)
    grads = jax.grad(train_loss)(weights, xs, targets)
    return lax.dynamic_slice_in_dim(grads, lax.axis_index("stage"), 1)


def one_f_one_b__gpipe(w_block, xs, targets):
    """GPipe instead: the derivative of the forward pipeline, every forward before any backward."""
    return gpipe_grads(w_block, xs, targets)


def one_f_one_b__python_loop(w_block, xs, targets):
    """The right schedule and ring, unrolled as a Python loop: no while, 2(M+2N-2)-2 permutes."""

    def schedule(ring_size, read_slot, unrolled=False):
        n, k = lax.axis_size("stage"), lax.axis_index("stage")
        forward = [(j, j + 1) for j in range(n - 1)]
        back = [(j + 1, j) for j in range(n - 1)]
        m, w = xs.shape[0], w_block[0]
        ring = ring_size(n, m)

        def tick(t, carry):
            saved, got_forward, got_back, grad = carry
            h = jnp.where(k == 0, xs[jnp.minimum(t, m - 1)], got_forward)
            y = jnp.tanh(h @ w)
            saved = lax.dynamic_update_index_in_dim(saved, h, t % ring, 0)
            done = t - (n - 1)
            g_last = jnp.where((done >= 0) & (done < m), y - targets[jnp.clip(done, 0, m - 1)], 0.0)
            g = jnp.where(k == n - 1, g_last, got_back)
            h_b = lax.dynamic_index_in_dim(saved, read_slot(t, n, k) % ring, 0, keepdims=False)
            g_pre = g * (1 - jnp.tanh(h_b @ w) ** 2)
            grad = grad + h_b.T @ g_pre
            return (
                saved,
                lax.ppermute(y, "stage", forward),
                lax.ppermute(g_pre @ w.T, "stage", back),
                grad,
            )

        zero = jnp.zeros(xs.shape[1:], xs.dtype)
        start = lax.pcast(
            (jnp.zeros((ring, *xs.shape[1:]), xs.dtype), zero, zero), "stage", to="varying"
        )
        carry = (*start, jnp.zeros_like(w))
        if unrolled:
            for t in range(m + 2 * n - 2):
                carry = tick(t, carry)
        else:
            carry = lax.fori_loop(0, m + 2 * n - 2, tick, carry)
        return carry[-1][None]

    return schedule(lambda n, m: 2 * n - 1, lambda t, n, k: t - 2 * n + 2 + 2 * k, True)


def one_f_one_b__ring_holds_every_step(w_block, xs, targets):
    """Interleaved, but the buffer keeps every time step's input: it grows with M."""

    def schedule(ring_size, read_slot, unrolled=False):
        n, k = lax.axis_size("stage"), lax.axis_index("stage")
        forward = [(j, j + 1) for j in range(n - 1)]
        back = [(j + 1, j) for j in range(n - 1)]
        m, w = xs.shape[0], w_block[0]
        ring = ring_size(n, m)

        def tick(t, carry):
            saved, got_forward, got_back, grad = carry
            h = jnp.where(k == 0, xs[jnp.minimum(t, m - 1)], got_forward)
            y = jnp.tanh(h @ w)
            saved = lax.dynamic_update_index_in_dim(saved, h, t % ring, 0)
            done = t - (n - 1)
            g_last = jnp.where((done >= 0) & (done < m), y - targets[jnp.clip(done, 0, m - 1)], 0.0)
            g = jnp.where(k == n - 1, g_last, got_back)
            h_b = lax.dynamic_index_in_dim(saved, read_slot(t, n, k) % ring, 0, keepdims=False)
            g_pre = g * (1 - jnp.tanh(h_b @ w) ** 2)
            grad = grad + h_b.T @ g_pre
            return (
                saved,
                lax.ppermute(y, "stage", forward),
                lax.ppermute(g_pre @ w.T, "stage", back),
                grad,
            )

        zero = jnp.zeros(xs.shape[1:], xs.dtype)
        start = lax.pcast(
            (jnp.zeros((ring, *xs.shape[1:]), xs.dtype), zero, zero), "stage", to="varying"
        )
        carry = (*start, jnp.zeros_like(w))
        if unrolled:
            for t in range(m + 2 * n - 2):
                carry = tick(t, carry)
        else:
            carry = lax.fori_loop(0, m + 2 * n - 2, tick, carry)
        return carry[-1][None]

    return schedule(lambda n, m: m + 2 * n - 2, lambda t, n, k: t - 2 * n + 2 + 2 * k)


def one_f_one_b__ring_one_slot_short(w_block, xs, targets):
    """A ring of 2N-2 slots: stage 0's oldest input is overwritten the step it is needed."""

    def schedule(ring_size, read_slot, unrolled=False):
        n, k = lax.axis_size("stage"), lax.axis_index("stage")
        forward = [(j, j + 1) for j in range(n - 1)]
        back = [(j + 1, j) for j in range(n - 1)]
        m, w = xs.shape[0], w_block[0]
        ring = ring_size(n, m)

        def tick(t, carry):
            saved, got_forward, got_back, grad = carry
            h = jnp.where(k == 0, xs[jnp.minimum(t, m - 1)], got_forward)
            y = jnp.tanh(h @ w)
            saved = lax.dynamic_update_index_in_dim(saved, h, t % ring, 0)
            done = t - (n - 1)
            g_last = jnp.where((done >= 0) & (done < m), y - targets[jnp.clip(done, 0, m - 1)], 0.0)
            g = jnp.where(k == n - 1, g_last, got_back)
            h_b = lax.dynamic_index_in_dim(saved, read_slot(t, n, k) % ring, 0, keepdims=False)
            g_pre = g * (1 - jnp.tanh(h_b @ w) ** 2)
            grad = grad + h_b.T @ g_pre
            return (
                saved,
                lax.ppermute(y, "stage", forward),
                lax.ppermute(g_pre @ w.T, "stage", back),
                grad,
            )

        zero = jnp.zeros(xs.shape[1:], xs.dtype)
        start = lax.pcast(
            (jnp.zeros((ring, *xs.shape[1:]), xs.dtype), zero, zero), "stage", to="varying"
        )
        carry = (*start, jnp.zeros_like(w))
        if unrolled:
            for t in range(m + 2 * n - 2):
                carry = tick(t, carry)
        else:
            carry = lax.fori_loop(0, m + 2 * n - 2, tick, carry)
        return carry[-1][None]

    return schedule(lambda n, m: 2 * n - 2, lambda t, n, k: t - 2 * n + 2 + 2 * k)


def one_f_one_b__read_slot_without_the_stage(w_block, xs, targets):
    """The backward reads slot t-2N+2 on every stage, as if each stage's round trip were as long."""

    def schedule(ring_size, read_slot, unrolled=False):
        n, k = lax.axis_size("stage"), lax.axis_index("stage")
        forward = [(j, j + 1) for j in range(n - 1)]
        back = [(j + 1, j) for j in range(n - 1)]
        m, w = xs.shape[0], w_block[0]
        ring = ring_size(n, m)

        def tick(t, carry):
            saved, got_forward, got_back, grad = carry
            h = jnp.where(k == 0, xs[jnp.minimum(t, m - 1)], got_forward)
            y = jnp.tanh(h @ w)
            saved = lax.dynamic_update_index_in_dim(saved, h, t % ring, 0)
            done = t - (n - 1)
            g_last = jnp.where((done >= 0) & (done < m), y - targets[jnp.clip(done, 0, m - 1)], 0.0)
            g = jnp.where(k == n - 1, g_last, got_back)
            h_b = lax.dynamic_index_in_dim(saved, read_slot(t, n, k) % ring, 0, keepdims=False)
            g_pre = g * (1 - jnp.tanh(h_b @ w) ** 2)
            grad = grad + h_b.T @ g_pre
            return (
                saved,
                lax.ppermute(y, "stage", forward),
                lax.ppermute(g_pre @ w.T, "stage", back),
                grad,
            )

        zero = jnp.zeros(xs.shape[1:], xs.dtype)
        start = lax.pcast(
            (jnp.zeros((ring, *xs.shape[1:]), xs.dtype), zero, zero), "stage", to="varying"
        )
        carry = (*start, jnp.zeros_like(w))
        if unrolled:
            for t in range(m + 2 * n - 2):
                carry = tick(t, carry)
        else:
            carry = lax.fori_loop(0, m + 2 * n - 2, tick, carry)
        return carry[-1][None]

    return schedule(lambda n, m: 2 * n - 1, lambda t, n, k: t - 2 * n + 2 + 0 * k)


def one_f_one_b__one_microbatch_at_a_time(w_block, xs, targets):
    """No overlap: each microbatch goes down the whole chain and back before the next starts."""
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    forward = [(j, j + 1) for j in range(n - 1)]
    back = [(j + 1, j) for j in range(n - 1)]
    w = w_block[0]

    def one(i, grad):
        h = xs[i]
        inputs = []
        for stage in range(n):
            inputs.append(h)
            y = jnp.tanh(h @ w)
            h = lax.ppermute(y, "stage", forward) if stage < n - 1 else y
        g = jnp.where(k == n - 1, h - targets[i], 0.0)
        for stage in reversed(range(n)):
            h_in = jnp.where(k == stage, inputs[stage], 0.0)
            g_pre = jnp.where(k == stage, g * (1 - jnp.tanh(h_in @ w) ** 2), 0.0)
            grad = grad + h_in.T @ g_pre
            if stage > 0:
                g = lax.ppermute(g_pre @ w.T, "stage", back)
        return grad

    return lax.fori_loop(0, xs.shape[0], one, jnp.zeros_like(w))[None]
