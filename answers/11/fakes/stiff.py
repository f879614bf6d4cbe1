"""Cheap fakes of chapter 11's test_stiff.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def backward_euler_step__newton_alone(y, k, h):
    """Calls newton directly, without lax.custom_root: reverse mode meets its while_loop."""
    return newton(lambda z: z - y - h * robertson(z, k), y)


def backward_euler_step__unrolled_newton(y, k, h):
    """Eight Python-unrolled Newton steps: differentiable, but it differentiates the iterations."""
    g = lambda z: z - y - h * robertson(z, k)  # noqa: E731
    z = y
    for _ in range(8):
        z = z - jnp.linalg.solve(jax.jacfwd(g)(z), g(z))
    return z


def backward_euler_step__fixed_point(y, k, h):
    """Iterates z ← y + h·f(z) inside custom_root instead of Newton's method."""

    def iterate(g, z0):
        return lax.fori_loop(0, 50, lambda i, z: y + h * robertson(z, k), z0)

    return lax.custom_root(
        lambda z: z - y - h * robertson(z, k),
        y,
        iterate,
        lambda g, r: jnp.linalg.solve(jax.jacfwd(g)(r), r),
    )


def backward_euler_step__one_newton_step(y, k, h):
    """Linearly implicit Euler: a single Newton step from y, wrapped in custom_root."""

    def once(g, z0):
        return z0 - jnp.linalg.solve(jax.jacfwd(g)(z0), g(z0))

    return lax.custom_root(
        lambda z: z - y - h * robertson(z, k),
        y,
        once,
        lambda g, r: jnp.linalg.solve(jax.jacfwd(g)(r), r),
    )


def backward_euler_step__trapezoidal(y, k, h):
    """The second-order trapezoidal rule, also stable, also through custom_root."""
    f0 = robertson(y, k)
    return lax.custom_root(
        lambda z: z - y - h / 2 * (f0 + robertson(z, k)),
        y,
        newton,
        lambda g, r: jnp.linalg.solve(jax.jacfwd(g)(r), r),
    )
