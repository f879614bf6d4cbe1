"""Cheap fakes of chapter 05's test_callbacks.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def host_sin_jvp__jnp_cos(primals, tangents):
    """The derivative computed with jnp.cos on the device instead of a host callback."""
    (x,), (t,) = primals, tangents
    return host_sin(x), jnp.cos(x) * t


def host_sin_jvp__no_vmap_method(primals, tangents):
    """cos on the host, but a pure_callback without a vmap_method: vmap of the gradient breaks."""
    (x,), (t,) = primals, tangents
    return host_sin(x), jax.pure_callback(np.cos, like(x), x) * t
