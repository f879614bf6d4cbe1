"""Cheap fakes of chapter 03's test_ulysses.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def ulysses_attention__all_gather_k_and_v(q, k, v):
    """The direct way: gather all of K and V, then every head for this device's queries."""
    k_all = lax.all_gather(k, "i", tiled=True)
    v_all = lax.all_gather(v, "i", tiled=True)
    return attention(q, k_all, v_all)


def ulysses_attention__only_queries_exchanged(q, k, v):
    """Q goes to head groups, but K and V are gathered whole and sliced to the heads."""
    h = q.shape[1] // lax.axis_size("i")
    me = lax.axis_index("i")
    q_h = lax.all_to_all(q, "i", 1, 0, tiled=True)
    k_h, v_h = (lax.dynamic_slice_in_dim(lax.all_gather(a, "i", tiled=True), me * h, h, 1) for a in (k, v))
    return lax.all_to_all(attention(q_h, k_h, v_h), "i", 0, 1, tiled=True)


def ulysses_attention__local_segment_only(q, k, v):
    """No communication: each segment attends to its own keys only."""
    return attention(q, k, v)


def ulysses_attention__ring_of_heads(q, k, v):
    """K and V gathered by passing them around the ring (ppermute), no all_to_all."""
    n = lax.axis_size("i")
    ring = [(j, (j + 1) % n) for j in range(n)]
    me = lax.axis_index("i")
    ks, vs = [k], [v]
    for _ in range(n - 1):
        ks.append(lax.ppermute(ks[-1], "i", ring))
        vs.append(lax.ppermute(vs[-1], "i", ring))
    order = lambda xs: jnp.roll(jnp.stack(xs), me + 1, axis=0)[::-1].reshape(-1, *q.shape[1:])  # noqa: E731
    return attention(q, order(ks), order(vs))


def ulysses_attention__back_with_the_same_axes(q, k, v):
    """The output exchanged back with split and concat axes swapped the wrong way (heads stay split)."""
    to_heads = lambda a: lax.all_to_all(a, "i", 1, 0, tiled=True)  # noqa: E731
    out = attention(to_heads(q), to_heads(k), to_heads(v))
    back = lax.all_to_all(out, "i", 0, 0, tiled=True)
    return jnp.tile(back, (1, lax.axis_size("i"), 1))[: q.shape[0]]
