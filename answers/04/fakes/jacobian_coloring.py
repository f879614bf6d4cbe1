"""Cheap fakes of chapter 04's test_jacobian_coloring.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def colored_jacobian__one_jvp_per_column(jvp, n, b):
    """The dense way: one JVP per column (n of them), no colouring."""
    eye = np.eye(n, dtype=np.float32)
    return np.stack([np.asarray(jvp(eye[j])) for j in range(n)], axis=1)


def colored_jacobian__vmap_over_the_identity(jvp, n, b):
    """The dense Jacobian from one vmap over the n×n basis, then dummy calls to reach 2b + 1."""
    jac = jax.vmap(jvp, out_axes=1)(jnp.eye(n))
    for _ in range(2 * b):
        jvp(jnp.zeros(n))
    return jac


def colored_jacobian__vmap_over_the_identity_colour_seeds(jvp, n, b):
    """The dense Jacobian from a vmap over the basis, plus the 2b + 1 colour seeds, results unused."""
    jac = jax.vmap(jvp, out_axes=1)(jnp.eye(n))
    k = 2 * b + 1
    for c in range(k - 1):
        jvp((np.arange(n) % k == c).astype(np.float32))
    return jac


def colored_jacobian__jacfwd_of_the_counted_map(jvp, n, b):
    """jacfwd_of on the function the JVP wraps (when it was exposed), plus the counted calls."""
    k = 2 * b + 1
    for c in range(k):
        jvp((np.arange(n) % k == c).astype(np.float32))
    return jacfwd_of(jvp.fun, jvp.b, jvp.x)
