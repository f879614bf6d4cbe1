"""Cheap fakes of chapter 11's test_implicit_solver.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def implicit_solve__unrolled_cg(theta, f, iters=None):
    """Differentiates through 200 unrolled CG steps instead of custom_linear_solve."""
    return unrolled_cg(theta, f, iters or 200)


def implicit_solve__dense_solve(theta, f, iters=None):
    """Assembles A(θ) with jacfwd and calls jnp.linalg.solve on the dense matrix."""
    a = jax.jacfwd(partial(operator, theta))(f).reshape(f.size, f.size)
    return jnp.linalg.solve(a, f.ravel()).reshape(f.shape)
