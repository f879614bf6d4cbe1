"""Cheap fakes of chapter 11's test_adaptive_rk.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def bs23_step__no_estimate(f, y, t, h):
    """Returns the third-order solution with a zero error estimate."""
    k1 = f(y, t)
    k2 = f(y + h * k1 / 2, t + h / 2)
    k3 = f(y + 3 * h * k2 / 4, t + 3 * h / 4)
    y3 = y + h * (2 * k1 / 9 + k2 / 3 + 4 * k3 / 9)
    return y3, jnp.zeros_like(y3)


def bs23_step__returns_the_low_order_solution(f, y, t, h):
    """Advances with the second-order y2 instead of y3."""
    k1 = f(y, t)
    k2 = f(y + h * k1 / 2, t + h / 2)
    k3 = f(y + 3 * h * k2 / 4, t + 3 * h / 4)
    y3 = y + h * (2 * k1 / 9 + k2 / 3 + 4 * k3 / 9)
    k4 = f(y3, t + h)
    y2 = y + h * (7 * k1 / 24 + k2 / 4 + k3 / 3 + k4 / 8)
    return y2, y3 - y2


def bs23_step__step_doubling(f, y, t, h):
    """Estimates the error by comparing one step of h with two of h/2 (extra evaluations)."""

    def rk3(y, t, h):
        k1 = f(y, t)
        k2 = f(y + h * k1 / 2, t + h / 2)
        k3 = f(y + 3 * h * k2 / 4, t + 3 * h / 4)
        return y + h * (2 * k1 / 9 + k2 / 3 + 4 * k3 / 9)

    whole = rk3(y, t, h)
    halves = rk3(rk3(y, t, h / 2), t + h / 2, h / 2)
    return halves, halves - whole


def bs23_step__heun_euler(f, y, t, h):
    """The cheaper Heun–Euler 2(1) pair."""
    k1 = f(y, t)
    k2 = f(y + h * k1, t + h)
    heun = y + h * (k1 + k2) / 2
    return heun, heun - (y + h * k1)


def integrate__fixed_steps(f, y0, t1, rtol, atol):
    """Takes 1000 equal steps whatever the tolerance."""
    h = t1 / 1000
    y = lax.fori_loop(0, 1000, lambda i, y: bs23_step(f, y, i * h, h)[0], y0)
    return y, 1000, 0


def integrate__accepts_every_step(f, y0, t1, rtol, atol):
    """Adapts h but never rejects a step."""

    def attempt(carry):
        t, y, h, accepted, rejected = carry
        h = jnp.minimum(h, t1 - t)
        y_new, err = bs23_step(f, y, t, h)
        scale = atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y_new))
        e = jnp.sqrt(jnp.mean((err / scale) ** 2))
        h_next = h * jnp.clip(0.9 * e ** (-1 / 3), 0.2, 5.0)
        return t + h, y_new, h_next, accepted + 1, rejected

    start = (jnp.zeros(()), y0, jnp.asarray(t1, float), 0, 0)
    _, y, _, accepted, rejected = lax.while_loop(lambda c: c[0] < t1, attempt, start)
    return y, accepted, rejected


def integrate__steps_from_the_tolerance(f, y0, t1, rtol, atol):
    """Chooses the number of equal steps from rtol with the cube-root rule, in a while loop."""
    n = jnp.ceil(t1 * 0.5 * rtol ** (-1 / 3)).astype(int)
    h = t1 / n

    def attempt(carry):
        i, y = carry
        return i + 1, bs23_step(f, y, i * h, h)[0]

    _, y = lax.while_loop(lambda c: c[0] < n, attempt, (0, y0))
    return y, n, 1


def prey_sensitivity__finite_differences(k, tol):
    """Central differences of prey_at_end: two solves, no derivative of the solver."""
    eps = 1e-6
    return (prey_at_end(k + eps, tol) - prey_at_end(k - eps, tol)) / (2 * eps)


def prey_sensitivity__odeint_adjoint(k, tol):
    """odeint's adjoint gradient at a fixed tolerance (odeint's rtol is static)."""

    def prey(k):
        f = lambda y, t, k: jnp.stack([y[0] * (1.5 - k * y[1]), y[1] * (y[0] - 3.0)])  # noqa: E731
        return odeint(f, PREY_START, jnp.array([0.0, T_END]), k, rtol=1e-9, atol=1e-9)[-1, 0]

    return jax.grad(prey)(k)
