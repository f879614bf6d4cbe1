"""Cheap fakes of chapter 11's test_solvers_in_practice.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def cubic_root__newton_alone(a):
    """Calls newton directly, without lax.custom_root around it."""
    return newton(lambda x: x**3 + x - a, jnp.ones_like(a))


def cubic_root__unrolled_newton(a):
    """Differentiates through 30 Python-unrolled Newton steps instead of lax.custom_root."""
    x = jnp.ones_like(a)
    for _ in range(30):
        x = x - (x**3 + x - a) / (3 * x**2 + 1)
    return x
