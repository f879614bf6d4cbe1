"""Cheap fakes of chapter 01's test_paths_and_caches.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def decode_with_cache__attention_at_once(q, k, v):
    """The reference with the inputs as the caches: the whole T×T score matrix, no scan."""
    return causal_attention(q, k, v), (k, v)


def decode_with_cache__scan_without_a_cache(q, k, v):
    """A scan that masks the whole k and v at every step: right values, no cache written."""
    steps, dim = q.shape
    rows = jnp.arange(steps)

    def step(carry, inputs):
        t, q_t = inputs
        scores = jnp.where(rows <= t, k @ q_t / np.sqrt(dim), -jnp.inf)
        return carry, jax.nn.softmax(scores) @ v

    _, outputs = lax.scan(step, 0, (rows, q))
    return outputs, (k, v)


def decode_with_cache__scatter_update(q, k, v):
    """.at[t].set writes the cache through a scatter instead of dynamic_update_slice."""
    steps, dim = q.shape
    rows = jnp.arange(steps)

    def step(cache, inputs):
        k_cache, v_cache = cache
        t, q_t, k_t, v_t = inputs
        k_cache, v_cache = k_cache.at[t].set(k_t), v_cache.at[t].set(v_t)
        scores = jnp.where(rows <= t, k_cache @ q_t / np.sqrt(dim), -jnp.inf)
        return (k_cache, v_cache), jax.nn.softmax(scores) @ v_cache

    empty = jnp.zeros((steps, dim), q.dtype)
    caches, outputs = lax.scan(step, (empty, empty), (rows, q, k, v))
    return outputs, caches


def decode_with_cache__no_causal_mask(q, k, v):
    """Attends to every row of the cache, the empty (zero) future rows included."""
    steps, dim = q.shape
    rows = jnp.arange(steps)

    def step(cache, inputs):
        k_cache, v_cache = cache
        t, q_t, k_t, v_t = inputs
        k_cache = lax.dynamic_update_slice(k_cache, k_t[None, :], (t, 0))
        v_cache = lax.dynamic_update_slice(v_cache, v_t[None, :], (t, 0))
        return (k_cache, v_cache), jax.nn.softmax(k_cache @ q_t / np.sqrt(dim)) @ v_cache

    empty = jnp.zeros((steps, dim), q.dtype)
    caches, outputs = lax.scan(step, (empty, empty), (rows, q, k, v))
    return outputs, caches
