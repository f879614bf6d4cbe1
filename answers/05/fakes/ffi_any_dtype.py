"""Cheap fakes of chapter 05's test_ffi_any_dtype.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def third_plus_one__jnp_body(x, name):
    """The formula in jnp: no custom call at all."""
    return (x / 3 + 1).astype(x.dtype)


def third_plus_one__always_float32(x, name):
    """Every float through the kernel as float32 and back: float64 loses its precision."""
    if jnp.issubdtype(x.dtype, jnp.floating):
        y = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(x.shape, jnp.float32))(x.astype(jnp.float32))
        return y.astype(x.dtype)
    return jax.ffi.ffi_call(name, like(x))(x)


def third_plus_one__no_upcast(x, name):
    """Every dtype straight to the kernel: the half floats are refused."""
    return jax.ffi.ffi_call(name, like(x))(x)


def third_plus_one__jnp_for_half(x, name):
    """The kernel for float32/float64, the formula in jnp for the half floats."""
    if x.dtype in (jnp.float16, jnp.bfloat16):
        return (x.astype(jnp.float32) / 3 + 1).astype(x.dtype)
    return jax.ffi.ffi_call(name, like(x))(x)


def third_plus_one_by_rows__plain_call(x, name):
    """The plain ffi_call: XLA all-gathers the rows."""
    return jax.ffi.ffi_call(name, like(x))(x)


def third_plus_one_by_rows__attribute_only(x, name):
    """num_batch_dims without the registration: the partitioner does not split the call."""
    with set_xla_metadata(num_batch_dims="1"):
        return jax.ffi.ffi_call(name, like(x))(x)


def third_plus_one_by_rows__registration_only(x, name):
    """The registration without num_batch_dims: the partitioner does not split the call."""
    jax.ffi.register_ffi_target_as_batch_partitionable(name)
    return jax.ffi.ffi_call(name, like(x))(x)


def third_plus_one_by_rows__shard_map(x, name):
    """shard_map at the call site instead of a batch-partitionable target."""
    mesh = x.sharding.mesh
    return jax.shard_map(
        lambda b: jax.ffi.ffi_call(name, like(b))(b), mesh=mesh, in_specs=P("batch"), out_specs=P("batch")
    )(x)


def third_plus_one_by_rows__jnp_body(x, name):
    """The formula in jnp: no custom call, nothing to partition."""
    return x / 3 + 1
