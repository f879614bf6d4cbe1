"""Cheap fakes of chapter 05's test_ffi_attributes.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def weighted_sum__jnp(xs, weights, scale, shift, name):
    """The weighted sum in jnp on the device: no custom call at all."""
    return jnp.float32(scale) * sum(jnp.float32(w) * x for w, x in zip(weights, xs)) + jnp.float32(shift)


def weighted_sum__one_call_per_operand(xs, weights, scale, shift, name):
    """One kernel call per operand with a one-element weight, the partial sums added in jnp."""
    parts = [
        jax.ffi.ffi_call(name, like(x))(
            x,
            weights=np.asarray([w], dtype=np.float32),
            affine={"scale": np.float32(scale), "shift": np.float32(0.0)},
        )
        for w, x in zip(weights, xs)
    ]
    return sum(parts) + jnp.float32(shift)


def weighted_sum__float64_weights(xs, weights, scale, shift, name):
    """The weights as NumPy's default float64: the kernel's binding refuses them at run time."""
    return jax.ffi.ffi_call(name, like(xs[0]))(
        *xs, weights=np.asarray(weights), affine={"scale": np.float32(scale), "shift": np.float32(shift)}
    )


def weighted_sum__flat_attributes(xs, weights, scale, shift, name):
    """scale and shift as two attributes of their own instead of one dictionary."""
    return jax.ffi.ffi_call(name, like(xs[0]))(
        *xs, weights=np.asarray(weights, dtype=np.float32), scale=np.float32(scale), shift=np.float32(shift)
    )
