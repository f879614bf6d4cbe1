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


def tanh_layer_fwd__saves_everything(x, w):
    """Ignores .perturbed: saves x and w whatever is differentiated."""
    z = x.value @ w.value
    y = jnp.tanh(z)
    return (y, z), (x.value, w.value, y)


def tanh_layer_bwd__instantiated_zeros(residuals, cts):
    """Turns a SymbolicZero cotangent into an array of zeros and computes every term."""
    x, w, y = residuals
    ct_y, ct_z = [jnp.zeros_like(y) if isinstance(ct, SymbolicZero) else ct for ct in cts]
    dz = ct_y * (1 - y**2) + ct_z
    return (dz @ w.T if w is not None else None, x.T @ dz if x is not None else None)


def tanh_layer_bwd__ignores_symbolic_zeros(residuals, cts):
    """Does arithmetic on whatever arrives, SymbolicZero included."""
    x, w, y = residuals
    dz = cts[0] * (1 - y**2) + cts[1]
    return (dz @ w.T if w is not None else None, x.T @ dz if x is not None else None)


def weighted_sum_jvp__primal_without_bind(prim, primals, tangents):
    """The primal by jnp.vdot instead of prim.bind: the primitive never appears in the program."""
    (x, w), (tx, tw) = primals, tangents
    terms = []
    if type(tx) is not ad.Zero:
        terms.append(jnp.sum(tx * w))
    if type(tw) is not ad.Zero:
        terms.append(jnp.sum(x * tw))
    return jnp.vdot(x, w), sum(terms[1:], terms[0])
