"""Cheap fakes of chapter 05's test_ffi_sharding_and_aliases.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def leaky_sum_per_shard__whole_array_then_reshard(x, mesh, target):
    """Calls the kernel on the whole (gathered) array, then reshards the output by rows."""
    out = jax.ffi.ffi_call(target, like(x))(x, decay=np.float32(0.5), reverse=False)
    return jax.sharding.reshard(out, NamedSharding(mesh, P("batch")))


def leaky_sum_per_shard__jnp_in_shard_map(x, mesh, target):
    """A shard_map around a jnp recurrence: sharded and right, but the kernel never runs."""

    def local(block):
        columns, carry = [], jnp.zeros(block.shape[:-1], block.dtype)
        for i in range(block.shape[-1]):
            carry = 0.5 * carry + block[..., i]
            columns.append(carry)
        return jnp.stack(columns, axis=-1)

    return jax.shard_map(local, mesh=mesh, in_specs=P("batch"), out_specs=P("batch"))(x)
