"""Cheap fakes of chapter 03's test_interleaved_1f1b.py TODO (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def interleaved_1f1b__gpipe_all_forwards_then_all_backwards(w_block, xs, targets):
    """The right values by GPipe's schedule: one loop of every forward (each input stashed by
    its step), then one loop of every backward, time reversed: 2(M·V + N - 1) steps and a
    stash that grows with M."""
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    virtual, m = w_block.shape[1], xs.shape[0]
    forward = [(j, (j + 1) % n) for j in range(n)]
    back = [((j + 1) % n, j) for j in range(n)]
    steps = m * virtual + n - 1

    def unit(t):
        j = t - k
        micro, v = (j // (n * virtual)) * n + j % n, (j // n) % virtual
        ends = (j >= 0) & (j < m * virtual) & (k == n - 1) & (v == virtual - 1)
        return jnp.clip(micro, 0, m - 1), v, ends

    def run(t, carry):
        saved, got = carry
        micro, v, _ = unit(t)
        h = jnp.where((k == 0) & (v == 0), xs[micro], got)
        saved = lax.dynamic_update_index_in_dim(saved, h, t, 0)
        return saved, lax.ppermute(jnp.tanh(h @ w_block[0, v]), "stage", forward)

    def unrun(s, carry):
        got, loss, grad = carry
        t = steps - 1 - s
        micro, v, ends = unit(t)
        h = lax.dynamic_index_in_dim(saved, t, 0, keepdims=False)
        y = jnp.tanh(h @ w_block[0, v])
        err = jnp.where(ends, y - targets[micro], 0.0)
        g_pre = jnp.where(ends, err, got) * (1 - y**2)
        grad = grad.at[v].add(h.T @ g_pre)
        sent = lax.ppermute(g_pre @ w_block[0, v].T, "stage", back)
        return sent, loss + 0.5 * jnp.sum(err**2), grad

    zero = jnp.zeros(xs.shape[1:], xs.dtype)
    start = lax.pcast((jnp.zeros((steps, *xs.shape[1:]), xs.dtype), zero), "stage", to="varying")
    saved, _ = lax.fori_loop(0, steps, run, start)
    back_start = lax.pcast((zero, jnp.zeros((), xs.dtype)), "stage", to="varying")
    _, loss, grad = lax.fori_loop(0, steps, unrun, (*back_start, jnp.zeros_like(w_block[0])))
    return loss[None], grad[None]


def interleaved_1f1b__weights_around_the_ring_then_grad(w_block, xs, targets):
    """The weights gathered by N-1 ppermutes in a loop (no all_gather), then jax.value_and_grad
    of the whole model on every device: N times the work, few serial steps."""
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    ring = [(j, (j + 1) % n) for j in range(n)]

    def pass_on(s, carry):
        every, held = carry
        held = lax.ppermute(held, "stage", ring)
        return every.at[(k - s - 1) % n].set(held[0]), held

    every = lax.pcast(jnp.zeros((n, *w_block.shape[1:]), w_block.dtype), "stage", to="varying")
    every, _ = lax.fori_loop(0, n - 1, pass_on, (every.at[k].set(w_block[0]), w_block))
    layers = every.transpose(1, 0, 2, 3).reshape(-1, *w_block.shape[2:])
    data = lax.pcast((xs, targets), "stage", to="varying")
    loss, g = jax.value_and_grad(train_loss)(layers, *data)
    g = g.reshape(w_block.shape[1], n, *w_block.shape[2:])[:, k]
    return loss[None], g[None]


def interleaved_1f1b__stash_sized_by_m(w_block, xs, targets):
    """The right schedule, but every forward input kept by its unit number (and one slot for
    the steps that do not count): a stash of M·V + 1 inputs that grows with the microbatches."""
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    virtual, m = w_block.shape[1], xs.shape[0]
    forward = [(j, (j + 1) % n) for j in range(n)]
    back = [((j + 1) % n, j) for j in range(n)]
    lag = virtual * n + n - 2

    def tick(t, carry):
        saved, got_forward, got_back, loss, grad = carry
        j = t - k
        micro, v = (j // (n * virtual)) * n + j % n, (j // n) % virtual
        h = jnp.where((k == 0) & (v == 0), xs[jnp.clip(micro, 0, m - 1)], got_forward)
        y = jnp.tanh(h @ w_block[0, v])
        counts = (j >= 0) & (j < m * virtual)
        saved = lax.dynamic_update_index_in_dim(saved, h, jnp.where(counts, j, m * virtual), 0)
        ends = counts & (k == n - 1) & (v == virtual - 1)
        err = jnp.where(ends, y - targets[jnp.clip(micro, 0, m - 1)], 0.0)
        i = t - (lag - k)
        v_b = virtual - 1 - (i // n) % virtual
        jb = (i // (n * virtual)) * n * virtual + v_b * n + i % n
        h_b = lax.dynamic_index_in_dim(saved, jnp.clip(jb, 0, m * virtual - 1), 0, keepdims=False)
        g = jnp.where((k == n - 1) & (v_b == virtual - 1), err, got_back)
        g_pre = g * (1 - jnp.tanh(h_b @ w_block[0, v_b]) ** 2)
        grad = grad.at[v_b].add(h_b.T @ g_pre)
        sent_back = lax.ppermute(g_pre @ w_block[0, v_b].T, "stage", back)
        sent = lax.ppermute(y, "stage", forward)
        return saved, sent, sent_back, loss + 0.5 * jnp.sum(err**2), grad

    zero = jnp.zeros(xs.shape[1:], xs.dtype)
    stash = jnp.zeros((m * virtual + 1, *xs.shape[1:]), xs.dtype)
    start = lax.pcast((stash, zero, zero, jnp.zeros((), xs.dtype)), "stage", to="varying")
    carry = (*start, jnp.zeros_like(w_block[0]))
    *_, loss, grad = lax.fori_loop(0, m * virtual + lag, tick, carry)
    return loss[None], grad[None]


def interleaved_1f1b__ring_one_slot_short(w_block, xs, targets):
    """The right schedule with R = 2·V·N - 2: device 0's first virtual stage is overwritten
    one step before its backward reads it."""
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    virtual, m = w_block.shape[1], xs.shape[0]
    forward = [(j, (j + 1) % n) for j in range(n)]
    back = [((j + 1) % n, j) for j in range(n)]
    ring = 2 * virtual * n - 2
    lag = virtual * n + n - 2

    def tick(t, carry):
        saved, got_forward, got_back, loss, grad = carry
        j = t - k
        micro, v = (j // (n * virtual)) * n + j % n, (j // n) % virtual
        h = jnp.where((k == 0) & (v == 0), xs[jnp.clip(micro, 0, m - 1)], got_forward)
        y = jnp.tanh(h @ w_block[0, v])
        saved = lax.dynamic_update_index_in_dim(saved, h, t % ring, 0)
        ends = (j >= 0) & (j < m * virtual) & (k == n - 1) & (v == virtual - 1)
        err = jnp.where(ends, y - targets[jnp.clip(micro, 0, m - 1)], 0.0)
        i = t - (lag - k)
        v_b = virtual - 1 - (i // n) % virtual
        jb = (i // (n * virtual)) * n * virtual + v_b * n + i % n
        h_b = lax.dynamic_index_in_dim(saved, (k + jb) % ring, 0, keepdims=False)
        g = jnp.where((k == n - 1) & (v_b == virtual - 1), err, got_back)
        g_pre = g * (1 - jnp.tanh(h_b @ w_block[0, v_b]) ** 2)
        grad = grad.at[v_b].add(h_b.T @ g_pre)
        sent_back = lax.ppermute(g_pre @ w_block[0, v_b].T, "stage", back)
        sent = lax.ppermute(y, "stage", forward)
        return saved, sent, sent_back, loss + 0.5 * jnp.sum(err**2), grad

    zero = jnp.zeros(xs.shape[1:], xs.dtype)
    stash = jnp.zeros((ring, *xs.shape[1:]), xs.dtype)
    start = lax.pcast((stash, zero, zero, jnp.zeros((), xs.dtype)), "stage", to="varying")
    carry = (*start, jnp.zeros_like(w_block[0]))
    *_, loss, grad = lax.fori_loop(0, m * virtual + lag, tick, carry)
    return loss[None], grad[None]
