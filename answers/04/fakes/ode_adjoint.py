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


def adjoint_bwd__odeint_vjp(t1, n, res, v):
    """Integrates back to y0, then takes jax.vjp through jax.experimental.ode.odeint."""
    from jax.experimental.ode import odeint

    y1, theta = res
    y0 = rk4_solve(lambda y, t: pendulum(y, t, theta), y1, t1, 0.0, n)
    ts = jnp.array([0.0, t1])
    _, vjp = jax.vjp(lambda y0, th: odeint(pendulum, y0, ts, th, rtol=1e-8, atol=1e-8)[-1], y0, theta)
    return vjp(v)
