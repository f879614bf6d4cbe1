"""Cheap fakes of chapter 11's test_newton_krylov.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def burgers_step__dense_jacobian(b, nu, tol=1e-11):
    """Newton with the dense jax.jacfwd Jacobian and jnp.linalg.solve, inside lax.custom_root."""

    def newton(g, u0):
        def step(carry):
            u, k = carry
            return u - jnp.linalg.solve(jax.jacfwd(g)(u), g(u)), k + 1

        return lax.while_loop(lambda c: c[1] < 8, step, (u0, 0))

    def tangent_solve(g, y):
        return jnp.linalg.solve(jax.jacfwd(g)(y), y)

    return lax.custom_root(lambda u: residual(u, b, nu), b, newton, tangent_solve, has_aux=True)


def burgers_step__newton_alone(b, nu, tol=1e-11):
    """The matrix-free Newton while_loop without lax.custom_root: reverse mode meets the loop."""
    g = lambda u: residual(u, b, nu)  # noqa: E731

    def step(carry):
        u, k = carry
        r, jvp = jax.linearize(g, u)
        return u - gmres_solve(jvp, r), k + 1

    return lax.while_loop(lambda c: c[1] < 8, step, (b, 0))


def burgers_step__unrolled_newton(b, nu, tol=1e-11):
    """Eight Python-unrolled matrix-free Newton steps: differentiates the iterations instead."""
    u = b
    for _ in range(8):
        r, jvp = jax.linearize(lambda u: residual(u, b, nu), u)
        u = u - gmres_solve(jvp, r)
    return u, 8


def burgers_step__plain_gmres_tangent(b, nu, tol=1e-11):
    """gmres called directly as the tangent_solve, with no custom_linear_solve to transpose."""

    def newton(g, u0):
        def step(carry):
            u, k = carry
            r, jvp = jax.linearize(g, u)
            return u - gmres_solve(jvp, r), k + 1

        return lax.while_loop(lambda c: c[1] < 8, step, (u0, 0))

    return lax.custom_root(lambda u: residual(u, b, nu), b, newton, gmres_solve, has_aux=True)


def burgers_step__one_newton_step(b, nu, tol=1e-11):
    """A single linearised step (a linear solve), no Newton iteration."""
    r, jvp = jax.linearize(lambda u: residual(u, b, nu), b)
    return b - gmres_solve(jvp, r), 1


def burgers_step__fixed_thirty(b, nu, tol=1e-11):
    """The matrix-free Newton inside lax.custom_root, always 30 steps: no stopping test."""

    def newton(g, u0):
        def step(carry):
            u, k = carry
            r, jvp = jax.linearize(g, u)
            return u - gmres_solve(jvp, r), k + 1

        return lax.fori_loop(0, 30, lambda _, c: step(c), (u0, 0))

    def tangent_solve(g, y):
        return lax.custom_linear_solve(g, y, solve=gmres_solve, transpose_solve=gmres_solve)

    return lax.custom_root(lambda u: residual(u, b, nu), b, newton, tangent_solve, has_aux=True)


def burgers_step__fixed_thirty_claims_four(b, nu, tol=1e-11):
    """Thirty Newton steps with no stopping test, reporting the count the default tolerance needs."""

    def newton(g, u0):
        def step(_, u):
            r, jvp = jax.linearize(g, u)
            return u - gmres_solve(jvp, r)

        return lax.fori_loop(0, 30, step, u0), 4

    def tangent_solve(g, y):
        return lax.custom_linear_solve(g, y, solve=gmres_solve, transpose_solve=gmres_solve)

    return lax.custom_root(lambda u: residual(u, b, nu), b, newton, tangent_solve, has_aux=True)
