"""Cheap fakes of chapter 03's test_zigzag_attention.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def zigzag_ring_attention__all_gather(q, k, v):
    """The direct way: gather K and V, mask by the zig-zag positions, full softmax."""
    n, me = lax.axis_size("i"), lax.axis_index("i")
    c = q.shape[0] // 2
    k_all, v_all = (lax.all_gather(a, "i", tiled=True) for a in (k, v))
    keys = jnp.concatenate([zigzag_positions(j, n, c) for j in range(n)])
    mask = zigzag_positions(me, n, c)[:, None] >= keys[None, :]
    return jax.nn.softmax(jnp.where(mask, q @ k_all.T, -jnp.inf), axis=-1) @ v_all


def zigzag_ring_attention__contiguous_positions(q, k, v):
    """The ring right, but the mask assumes the sequence was cut in order."""
    n, me = lax.axis_size("i"), lax.axis_index("i")
    ring = [(j, (j + 1) % n) for j in range(n)]
    mine = contiguous_positions(me, n, q.shape[0] // 2)

    def step(s, carry):
        m, den, o, k, v = carry
        theirs = contiguous_positions((me - s) % n, n, q.shape[0] // 2)
        scores = jnp.where(mine[:, None] >= theirs[None, :], q @ k.T, -jnp.inf)
        m_new = jnp.maximum(m, scores.max(axis=-1, keepdims=True))
        p, rescale = jnp.exp(scores - m_new), jnp.exp(m - m_new)
        k, v2 = lax.ppermute((k, v), "i", ring)
        return m_new, den * rescale + p.sum(-1, keepdims=True), o * rescale + p @ v, k, v2

    start = (jnp.full_like(q[:, :1], -jnp.inf), jnp.zeros_like(q[:, :1]), jnp.zeros_like(q), k, v)
    _, den, o, _, _ = lax.fori_loop(0, n, step, start)
    return o / den


def zigzag_ring_attention__source_the_wrong_way(q, k, v):
    """Takes the block at step s to come from device (me + s) % n: the ring runs the other way."""
    n, me = lax.axis_size("i"), lax.axis_index("i")
    ring = [(j, (j + 1) % n) for j in range(n)]
    mine = zigzag_positions(me, n, q.shape[0] // 2)

    def step(s, carry):
        m, den, o, k, v = carry
        theirs = zigzag_positions((me + s) % n, n, q.shape[0] // 2)
        scores = jnp.where(mine[:, None] >= theirs[None, :], q @ k.T, -jnp.inf)
        m_new = jnp.maximum(m, scores.max(axis=-1, keepdims=True))
        p, rescale = jnp.exp(scores - m_new), jnp.exp(m - m_new)
        k, v2 = lax.ppermute((k, v), "i", ring)
        return m_new, den * rescale + p.sum(-1, keepdims=True), o * rescale + p @ v, k, v2

    start = (jnp.full_like(q[:, :1], -jnp.inf), jnp.zeros_like(q[:, :1]), jnp.zeros_like(q), k, v)
    _, den, o, _, _ = lax.fori_loop(0, n, step, start)
    return o / den


def zigzag_ring_attention__no_mask(q, k, v):
    """Plain ring attention: every query sees every key."""
    n = lax.axis_size("i")
    ring = [(j, (j + 1) % n) for j in range(n)]

    def step(_, carry):
        m, den, o, k, v = carry
        scores = q @ k.T
        m_new = jnp.maximum(m, scores.max(axis=-1, keepdims=True))
        p, rescale = jnp.exp(scores - m_new), jnp.exp(m - m_new)
        k, v2 = lax.ppermute((k, v), "i", ring)
        return m_new, den * rescale + p.sum(-1, keepdims=True), o * rescale + p @ v, k, v2

    start = (jnp.full_like(q[:, :1], -jnp.inf), jnp.zeros_like(q[:, :1]), jnp.zeros_like(q), k, v)
    _, den, o, _, _ = lax.fori_loop(0, n, step, start)
    return o / den


def zigzag_ring_attention__own_block_only(q, k, v):
    """No communication: causal attention inside this device's two chunks only."""
    mine = zigzag_positions(lax.axis_index("i"), lax.axis_size("i"), q.shape[0] // 2)
    scores = jnp.where(mine[:, None] >= mine[None, :], q @ k.T, -jnp.inf)
    return jax.nn.softmax(scores, axis=-1) @ v


def zigzag_ring_attention__forward_right_gradient_stopped(q, k, v):
    """The forward pass right, but K and V enter through stop_gradient: their gradients are 0."""
    n, me = lax.axis_size("i"), lax.axis_index("i")
    ring = [(j, (j + 1) % n) for j in range(n)]
    mine = zigzag_positions(me, n, q.shape[0] // 2)
    k, v = lax.stop_gradient(k), lax.stop_gradient(v)

    def step(s, carry):
        m, den, o, k, v = carry
        theirs = zigzag_positions((me - s) % n, n, q.shape[0] // 2)
        scores = jnp.where(mine[:, None] >= theirs[None, :], q @ k.T, -jnp.inf)
        m_new = jnp.maximum(m, scores.max(axis=-1, keepdims=True))
        p, rescale = jnp.exp(scores - m_new), jnp.exp(m - m_new)
        k, v2 = lax.ppermute((k, v), "i", ring)
        return m_new, den * rescale + p.sum(-1, keepdims=True), o * rescale + p @ v, k, v2

    start = (jnp.full_like(q[:, :1], -jnp.inf), jnp.zeros_like(q[:, :1]), jnp.zeros_like(q), k, v)
    _, den, o, _, _ = lax.fori_loop(0, n, step, start)
    return o / den
