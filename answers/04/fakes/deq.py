"""Cheap fakes of chapter 04's test_deq.py TODOs (parsed by jaxkoans.authoring.mutate, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def deq_bwd__one_neumann_term(res, v):
    """Skips the adjoint solve: takes u = v, the first term of the Neumann series."""
    params, x, z = res
    _, vjp_inputs = jax.vjp(lambda p, x: deq_layer(z, p, x), params, x)
    return vjp_inputs(v)


def deq_bwd__dense_jacobian_and_solve(res, v):
    """Builds ∂f/∂z with jax.jacobian and solves (I - J)ᵀ u = v densely: the lesson's "no Jacobian"."""
    params, x, z = res
    jac = jax.jacobian(lambda z: deq_layer(z, params, x))(z)
    u = jnp.linalg.solve((jnp.eye(HIDDEN) - jac).T, v)
    _, vjp_inputs = jax.vjp(lambda p, x: deq_layer(z, p, x), params, x)
    return vjp_inputs(u)


def deq_bwd__jacobian_by_hand(res, v):
    """Writes the Jacobian diag(1 - z²)·W out, then iterates u = v + Jᵀu with it: still an n×n matrix."""
    params, x, z = res
    jac = (1 - z**2)[:, None] * params["W"]
    u = fixed_point(lambda u: v + jac.T @ u, v)
    _, vjp_inputs = jax.vjp(lambda p, x: deq_layer(z, p, x), params, x)
    return vjp_inputs(u)
