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


def leaky_sum_partition__accepts_what_xla_offers(mesh, arg_shapes, result_shape):
    """Keeps XLA's shardings as they come, the split recurrence axis included."""
    return mesh, leaky_sum_call, result_shape.sharding, (arg_shapes[0].sharding,)


def leaky_sum_partition__replicated(mesh, arg_shapes, result_shape):
    """Asks for the whole array on every device: right, but all-gathered like plain jit."""
    whole = NamedSharding(mesh, P())
    return mesh, leaky_sum_call, whole, (whole,)


def leaky_sum_partition__jnp_recurrence(mesh, arg_shapes, result_shape):
    """Splits the rows right, but lowers a jnp recurrence: the kernel never runs."""

    def local(block):
        columns, carry = [], jnp.zeros(block.shape[:-1], block.dtype)
        for i in range(block.shape[-1]):
            carry = 0.5 * carry + block[..., i]
            columns.append(carry)
        return jnp.stack(columns, axis=-1)

    spec = arg_shapes[0].sharding.spec
    rows = NamedSharding(mesh, P(spec[0] if len(spec) else None, None))
    return mesh, local, rows, (rows,)


def buffer_aliases__greps_a_literal(compiled):
    """Sees that a table is there and guesses the one-output answer."""
    return {0: 0} if "input_output_alias" in compiled.as_text() else {}


def buffer_aliases__parameters_in_order(compiled):
    """Reads the parameter numbers but numbers the outputs 0, 1, ... itself."""
    header = compiled.as_text().splitlines()[0]
    return {i: int(p) for i, p in enumerate(re.findall(r"\}: \((\d+), ", header))}


def buffer_aliases__whole_program(compiled):
    """Parses the whole text: the kernel calls' output_to_operand_aliasing count as well."""
    pairs = re.findall(r"\{(\d*)\}: \((\d+), ", compiled.as_text())
    return {int(output or 0): int(parameter) for output, parameter in pairs}


def buffer_aliases__parameter_to_output(compiled):
    """Parses the header but keys the dict by parameter instead of output."""
    header = compiled.as_text().splitlines()[0]
    pairs = re.findall(r"\{(\d*)\}: \((\d+), ", header)
    return {int(parameter): int(output or 0) for output, parameter in pairs}
