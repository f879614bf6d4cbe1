"""Cheap fakes of chapter 04's test_symbolic_zeros.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def dense_jvp__instantiated_zeros(primals, tangents):
    """Turns every SymbolicZero into an array of zeros and computes all three terms."""
    (x, w, b), tangents = primals, tangents
    tx, tw, tb = [
        jnp.zeros_like(p) if isinstance(t, SymbolicZero) else t
        for p, t in zip(primals, tangents, strict=True)
    ]
    y = jnp.tanh(x @ w + b)
    return y, (1 - y**2) * (tx @ w + x @ tw + tb)


def weighted_sum_jvp__instantiated_zeros(prim, primals, tangents):
    """Instantiates the ad.Zero tangents and computes both terms."""
    (x, w), (tx, tw) = primals, [ad.instantiate_zeros(t) for t in tangents]
    return prim.bind(x, w), jnp.sum(tx * w) + jnp.sum(x * tw)


def rotate_split_transpose__instantiated_zeros(cts, x, *, angle):
    """Instantiates the ad.Zero cotangent and multiplies it anyway."""
    ct0, ct1 = [ad.instantiate_zeros(ct) for ct in cts]
    return [np.cos(angle) * ct0 + np.sin(angle) * ct1]
