"""Cheap fakes of chapter 04's test_ode_adjoint.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def adjoint_bwd__forgets_the_parameter_adjoint(t1, n, res, v):
    """Integrates y and a backwards but never accumulates g = -∫ aᵀ ∂f/∂θ."""
    y1, theta = res

    def augmented(state, t):
        y, a = state
        dy, f_vjp = jax.vjp(lambda y: pendulum(y, t, theta), y)
        return dy, -f_vjp(a)[0]

    _, a0 = rk4_solve(augmented, (y1, v), t1, 0.0, n)
    return a0, jnp.zeros_like(theta)
