"""Cheap fakes of chapter 11's test_nonlinear_implicit.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def implicit_step__newton_alone(b, c):
    """Calls newton directly, without lax.custom_root: reverse mode meets its while_loop."""
    return newton(lambda u: residual(u, b, c), b)


def implicit_step__unrolled_newton(b, c):
    """Differentiates through six Python-unrolled Newton steps (jax's cg is differentiable)."""
    u = b
    for _ in range(6):
        g = lambda u: residual(u, b, c)  # noqa: E731
        delta, _ = cg(lambda t: jax.jvp(g, (u,), (t,))[1], g(u), tol=1e-14)
        u = u - delta
    return u


def implicit_step__plain_cg_tangent(b, c):
    """Uses jax's cg directly as the tangent_solve, so reverse mode cannot transpose it."""
    return lax.custom_root(
        lambda u: residual(u, b, c), b, newton, lambda g, y: cg(g, y, tol=1e-14)[0]
    )


def implicit_step__linear_only(b, c):
    """Drops the cubic term: one linear solve (I + dt·(-Δ)) u = b."""
    return cg_solve(lambda t: t + DT * laplacian(t), b)
