"""Cheap fakes of chapter 04's test_spectral_grads.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def expm_sym_jvp__library_expm(primals, tangents):
    """The library: jax.scipy.linalg.expm's own JVP (Padé, solves and a cond, no eigh)."""
    return jax.jvp(jax.scipy.linalg.expm, primals, tangents)


def expm_sym_jvp__eigh_rule(primals, tangents):
    """eigh's own rule through the naive spectral function: NaN at the repeated eigenvalue."""
    return jax.jvp(naive_expm_sym, primals, tangents)


def expm_sym_jvp__perturbed(primals, tangents):
    """Split the repeated eigenvalues with a small diagonal shift, then eigh's own rule."""
    (a,) = primals
    shift = 1e-3 * jnp.diag(jnp.arange(a.shape[0], dtype=a.dtype))
    return jax.jvp(lambda a: naive_expm_sym(a + shift), (a,), tangents)


def expm_sym_jvp__plain_divided_difference(primals, tangents):
    """(e^a − e^b)/(a − b) as written: float32 cancels when two eigenvalues are a hair apart."""
    (a,), (da,) = primals, tangents
    w, v = jnp.linalg.eigh(a)
    ew = jnp.exp(w)
    d = w[:, None] - w[None, :]
    same = d == 0.0
    loewner = jnp.where(same, ew[:, None], (ew[:, None] - ew[None, :]) / jnp.where(same, 1.0, d))
    return (v * ew) @ v.T, v @ (loewner * (v.T @ da @ v)) @ v.T


def expm_sym_jvp__eigenvalues_only(primals, tangents):
    """Only the diagonal of L (the eigenvalues' derivative): the eigenvector term is dropped."""
    (a,), (da,) = primals, tangents
    w, v = jnp.linalg.eigh(a)
    ew = jnp.exp(w)
    return (v * ew) @ v.T, (v * (ew * jnp.diag(v.T @ da @ v))) @ v.T


def expm_sym_jvp__taylor_series(primals, tangents):
    """Another algorithm: a Taylor series of matrix powers, eigh kept for the primal only."""
    (a,), (da,) = primals, tangents

    def series(m):
        term, total = jnp.eye(m.shape[0], dtype=m.dtype), jnp.eye(m.shape[0], dtype=m.dtype)
        for k in range(1, 30):
            term = term @ m / k
            total = total + term
        return total

    w, v = jnp.linalg.eigh(a)
    _, tangent = jax.jvp(series, (a,), (da,))
    return (v * jnp.exp(w)) @ v.T, tangent


def expm_sym_jvp__scipy_callback(primals, tangents):
    """SciPy's exact Fréchet derivative inside a pure_callback."""
    (a,), (da,) = primals, tangents
    shape = jax.ShapeDtypeStruct(a.shape, a.dtype)
    tangent = jax.pure_callback(
        lambda a, e: scipy.linalg.expm_frechet(a, e, compute_expm=False).astype(a.dtype),
        shape,
        a,
        da,
    )
    return expm_sym(a), tangent


def expm_sym_jvp__taylor_through_eigenvectors(primals, tangents):
    """A Taylor series' tangent routed through V Vᵀ (= I), so that eigh lies on its path."""
    (a,), (da,) = primals, tangents

    def series(m):
        term, total = jnp.eye(m.shape[0], dtype=m.dtype), jnp.eye(m.shape[0], dtype=m.dtype)
        for k in range(1, 30):
            term = term @ m / k
            total = total + term
        return total

    w, v = jnp.linalg.eigh(a)
    _, tangent = jax.jvp(series, (a,), (da,))
    return (v * jnp.exp(w)) @ v.T, v @ (v.T @ tangent)


def expm_sym_jvp__scaling_and_squaring(primals, tangents):
    """Another algorithm: exp(A) = exp(A / 2^s)^(2^s) with a short series, eigh on the path."""
    (a,), (da,) = primals, tangents

    def scaled(m):
        m = m / 64.0
        term, total = jnp.eye(m.shape[0], dtype=m.dtype), jnp.eye(m.shape[0], dtype=m.dtype)
        for k in range(1, 8):
            term = term @ m / k
            total = total + term
        for _ in range(6):
            total = total @ total
        return total

    w, v = jnp.linalg.eigh(a)
    _, tangent = jax.jvp(scaled, (a,), (da,))
    return (v * jnp.exp(w)) @ v.T, v @ (v.T @ tangent)


def expm_sym_jvp__nested_jit_library(primals, tangents):
    """The library's JVP hidden in a nested jit."""
    return jax.jit(lambda p, t: jax.jvp(jax.scipy.linalg.expm, p, t))(primals, tangents)
