"""Cheap fakes of chapter 01's test_capstone_rk4.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def rk4_step__slopes_at_the_start(f, y, t, h):
    """Four slopes, all taken at the start of the step: Euler in disguise."""
    k = f(y, t)
    return axpy(h / 6, jax.tree.map(lambda a: 6 * a, k), y)


def integrate__steps_start_one_step_late(f, y0, t0, t1, n_steps, step=rk4_step):
    """A scan, but step i starts at t0 + (i + 1)·h: the time is off by one step."""
    h = (t1 - t0) / n_steps

    def body(y, i):
        return step(f, y, t0 + (i + 1) * h, h), None

    y, _ = lax.scan(body, y0, jnp.arange(n_steps))
    return y


def integrate__odeint(f, y0, t0, t1, n_steps, step=rk4_step):
    """The library: jax.experimental.ode.odeint (adaptive Dormand-Prince) instead of a scan of steps."""
    from jax.experimental.ode import odeint

    ys = odeint(lambda y, t: f(y, t), y0, jnp.stack([jnp.asarray(t0, float), jnp.asarray(t1, float)]))
    return jax.tree.map(lambda a: a[-1], ys)
