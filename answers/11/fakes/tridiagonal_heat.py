"""Cheap fakes of chapter 11's test_tridiagonal_heat.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def heat_step__conjugate_gradients(u, r):
    """Solves (I + r·L) u_new = u iteratively with CG (a while loop) instead of directly."""

    def matvec(v):
        p = jnp.pad(v, 1)
        return v + r * (2 * v - p[:-2] - p[2:])

    return cg(matvec, u, tol=1e-13)[0]


def heat_step__explicit(u, r):
    """Takes the explicit step u + r·(u[i-1] - 2u[i] + u[i+1]) instead of solving."""
    p = jnp.pad(u, 1)
    return u + r * (p[:-2] - 2 * u + p[2:])


def heat_step__banded_dense(u, r):
    """Builds the tridiagonal matrix densely from its three diagonals and solves it."""
    n = u.shape[0]
    matrix = jnp.diag(jnp.full(n, 1 + 2 * r)) + jnp.diag(jnp.full(n - 1, -r), 1)
    matrix = matrix + jnp.diag(jnp.full(n - 1, -r), -1)
    return jnp.linalg.solve(matrix, u)


def heat_step__jacobi_sweeps(u, r):
    """Five thousand Jacobi sweeps in a fori_loop with static bounds: an iteration, no while."""

    def sweep(_, v):
        p = jnp.pad(v, 1)
        return (u + r * (p[:-2] + p[2:])) / (1 + 2 * r)

    return lax.fori_loop(0, 5000, sweep, u)


def heat_step__thomas_by_scan(u, r):
    """The Thomas algorithm written as two lax.scan sweeps instead of the library's direct solve."""
    n = u.shape[0]
    a, b, c = -r, 1 + 2 * r, -r

    def forward(carry, d):
        cp, dp = carry
        m = b - a * cp
        return (c / m, (d - a * dp) / m), (c / m, (d - a * dp) / m)

    _, (cps, dps) = lax.scan(forward, (0.0, 0.0), u)

    def backward(x_next, cd):
        cp, dp = cd
        x = dp - cp * x_next
        return x, x

    _, xs = lax.scan(backward, 0.0, (cps, dps), reverse=True)
    return xs[:n]
