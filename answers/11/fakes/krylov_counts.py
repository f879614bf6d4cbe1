"""Cheap fakes of chapter 11's test_krylov_counts.py TODO (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def line_preconditioner__identity(sigma, eps, r):
    """No preconditioner at all: CG alone needs over thirty steps."""
    return r


def line_preconditioner__jacobi(sigma, eps, r):
    """Jacobi: divide by the operator's diagonal; it does not solve lines."""
    h = 1.0 / (r.shape[0] + 1)
    return r / ((2 * eps + 2) / h**2 + sigma)


def line_preconditioner__dense_solve(sigma, eps, r):
    """lines assembled as a dense N²×N² matrix (jacfwd) and solved by LU."""
    n = r.shape[0]
    matrix = jax.jacfwd(lambda z: lines(z.reshape(n, n), sigma, eps).ravel())(jnp.zeros(n * n))
    return jnp.linalg.solve(matrix, r.ravel()).reshape(n, n)


def line_preconditioner__mean_sigma(sigma, eps, r):
    """The tridiagonal solve with σ replaced by one number: its mean."""
    h = 1.0 / (r.shape[0] + 1)
    d = (2 * eps + 2) / h**2 + jnp.full_like(r, 1e3)
    off = jnp.full_like(r, -1.0 / h**2)
    return lax.linalg.tridiagonal_solve(
        off.at[:, 0].set(0.0), d, off.at[:, -1].set(0.0), r[..., None]
    )[..., 0]


def line_preconditioner__columns(sigma, eps, r):
    """The tridiagonal solves along the other axis (the weak coupling)."""
    h = 1.0 / (r.shape[0] + 1)
    d = (2 * eps + 2) / h**2 + sigma.T
    off = jnp.full_like(r, -1.0 / h**2)
    return lax.linalg.tridiagonal_solve(
        off.at[:, 0].set(0.0), d, off.at[:, -1].set(0.0), r.T[..., None]
    )[..., 0].T
