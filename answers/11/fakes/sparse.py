"""Cheap fakes of chapter 11's test_sparse.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def assemble_neg_laplacian__fromdense(n, h):
    """Builds the dense matrix with np.kron and converts it with BCOO.fromdense."""
    t = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    dense = (np.kron(t, np.eye(n)) + np.kron(np.eye(n), t)) / h**2
    return sparse.BCOO.fromdense(jnp.asarray(dense))


def assemble_neg_laplacian__jnp_kron(n, h):
    """Builds the dense matrix with jnp (out of tracemalloc's sight) and calls BCOO.fromdense."""
    t = 2 * jnp.eye(n) - jnp.eye(n, k=1) - jnp.eye(n, k=-1)
    dense = (jnp.kron(t, jnp.eye(n)) + jnp.kron(jnp.eye(n), t)) / h**2
    return sparse.BCOO.fromdense(dense)
