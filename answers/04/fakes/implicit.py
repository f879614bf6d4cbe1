"""Cheap fakes of chapter 04's test_implicit.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def newton_root__unrolled(theta):
    """Unrolled Newton: the right gradient, by backpropagating through every step (a scan)."""
    return newton_unrolled(theta)


def newton_root__while_loop(theta):
    """The while_loop solver without a rule: reverse mode fails."""
    return newton_while(theta)


def newton_root__scalar_tangent_solve(theta):
    """The scalar recipe y / g(1.0): g needs a vector, not a scalar."""
    f = lambda x: residual(x, theta)  # noqa: E731
    return lax.custom_root(f, jnp.zeros_like(theta), newton_solve, lambda g, y: y / g(1.0))


def newton_root__diagonal_tangent_solve(theta):
    """Divides by g applied to ones: a row sum of the Jacobian, not a linear solve."""
    f = lambda x: residual(x, theta)  # noqa: E731
    tangent_solve = lambda g, y: y / g(jnp.ones_like(y))  # noqa: E731
    return lax.custom_root(f, jnp.zeros_like(theta), newton_solve, tangent_solve)


def newton_root__identity_tangent_solve(theta):
    """Returns y unsolved, as if the Jacobian were the identity."""
    f = lambda x: residual(x, theta)  # noqa: E731
    return lax.custom_root(f, jnp.zeros_like(theta), newton_solve, lambda g, y: y)


def newton_root__transposed_matrix(theta):
    """Solves with the transpose of g's matrix: wrong, since A is not symmetric."""
    f = lambda x: residual(x, theta)  # noqa: E731
    tangent_solve = lambda g, y: jnp.linalg.solve(jax.jacfwd(g)(y).T, y)  # noqa: E731
    return lax.custom_root(f, jnp.zeros_like(theta), newton_solve, tangent_solve)


def newton_root__hand_written_vjp(theta):
    """The hand-written custom_vjp of the koan above: right, but no custom_root at all."""

    @jax.custom_vjp
    def root(theta):
        return newton_while(theta)

    def fwd(theta):
        x = root(theta)
        return x, (x, theta)

    def bwd(res, v):
        x, theta = res
        lam = jnp.linalg.solve(jax.jacobian(residual)(x, theta).T, v)
        _, vjp_theta = jax.vjp(lambda t: residual(x, t), theta)
        return (-vjp_theta(lam)[0],)

    root.defvjp(fwd, bwd)
    return root(theta)
