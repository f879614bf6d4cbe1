"""Cheap fakes of chapter 05's test_custom_primitive.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def leaky_sum_jvp__tangent_run_backwards(prim, primals, tangents, *, decay, reverse):
    """Binds the tangent with reverse flipped, as the transpose would: the JVP runs the same way."""
    (x,), (t,) = primals, tangents
    y = prim.bind(x, decay=decay, reverse=reverse)
    return y, prim.bind(t, decay=decay, reverse=not reverse)


def leaky_sum_jvp__reference_tangent(prim, primals, tangents, *, decay, reverse):
    """Computes the tangent with the plain-JAX reference instead of binding the primitive."""
    (x,), (t,) = primals, tangents
    return prim.bind(x, decay=decay, reverse=reverse), leaky_sum_reference(
        t, decay=decay, reverse=reverse
    )


def leaky_sum_jvp__reference_both(prim, primals, tangents, *, decay, reverse):
    """Builds the whole rule on the plain-JAX reference: neither output binds the primitive."""
    (x,), (t,) = primals, tangents
    return (
        leaky_sum_reference(x, decay=decay, reverse=reverse),
        leaky_sum_reference(t, decay=decay, reverse=reverse),
    )


def leaky_sum_transpose__jax_transposes_the_reference(prim, ct, x, *, decay, reverse):
    """Lets JAX transpose the reference instead of writing the transpose with the primitive."""
    return jax.linear_transpose(partial(leaky_sum_reference, decay=decay, reverse=reverse), ct)(ct)


def leaky_sum_transpose__same_direction(prim, ct, x, *, decay, reverse):
    """Binds the primitive again in the same direction: the recurrence is not reversed."""
    return (prim.bind(ct, decay=decay, reverse=reverse),)


def leaky_sum_batch__one_bind_per_example(prim, args, dims, *, decay, reverse):
    """Loops over the batch in Python: one bind per example instead of one for the whole batch."""
    (x,), (d,) = args, dims
    rows = [prim.bind(row, decay=decay, reverse=reverse) for row in jnp.moveaxis(x, d, 0)]
    return jnp.stack(rows), 0


def leaky_sum_batch__reference(prim, args, dims, *, decay, reverse):
    """Runs the plain-JAX scan on the batch instead of binding the primitive."""
    (x,), (d,) = args, dims
    return leaky_sum_reference(jnp.moveaxis(x, d, 0), decay=decay, reverse=reverse), 0


def scale_jvp__instantiated_zeros(prim, primals, tangents):
    """Turns the symbolic zero into an array of zeros and computes both terms."""
    (a, x), (ta, tx) = primals, [ad.instantiate_zeros(t) for t in tangents]
    return prim.bind(a, x), ta * x + a * tx


def batch_norm_lowering__lower_fun_reference(ctx, x, scale, offset, mean, var, *, epsilon, feature_index):
    """Lets JAX lower the plain-JAX reference: the right numbers, a module of reshapes and arithmetic."""
    rule = mlir.lower_fun(
        partial(batch_norm_reference, epsilon=epsilon, feature_index=feature_index),
        multiple_results=False,
    )
    return rule(ctx, x, scale, offset, mean, var)


def batch_norm_lowering__op_as_dead_code(ctx, x, scale, offset, mean, var, *, epsilon, feature_index):
    """Emits the op but returns the lowered reference: the op stays in the module, unused."""
    stablehlo.BatchNormInferenceOp(
        x, scale, offset, mean, var,
        epsilon=ir.FloatAttr.get(ir.F32Type.get(), epsilon),
        feature_index=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), feature_index),
    )  # fmt: skip
    rule = mlir.lower_fun(
        partial(batch_norm_reference, epsilon=epsilon, feature_index=feature_index),
        multiple_results=False,
    )
    return rule(ctx, x, scale, offset, mean, var)


def batch_norm_lowering__zero_mean(ctx, x, scale, offset, mean, var, *, epsilon, feature_index):
    """Feeds the op a constant zero mean instead of the operand."""
    zeros = mlir.ir_constant(np.zeros(ctx.avals_in[3].shape, np.float32))
    op = stablehlo.BatchNormInferenceOp(
        x, scale, offset, zeros, var,
        epsilon=ir.FloatAttr.get(ir.F32Type.get(), epsilon),
        feature_index=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), feature_index),
    )  # fmt: skip
    return [op.result]


def batch_norm_lowering__first_case_attributes(ctx, x, scale, offset, mean, var, *, epsilon, feature_index):
    """Writes the first case's epsilon and feature axis as constants instead of the params."""
    op = stablehlo.BatchNormInferenceOp(
        x, scale, offset, mean, var,
        epsilon=ir.FloatAttr.get(ir.F32Type.get(), 1e-3),
        feature_index=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1),
    )  # fmt: skip
    return [op.result]


def batch_norm_lowering__epsilon_dropped(ctx, x, scale, offset, mean, var, *, epsilon, feature_index):
    """Writes epsilon as zero: the variance alone under the square root."""
    op = stablehlo.BatchNormInferenceOp(
        x, scale, offset, mean, var,
        epsilon=ir.FloatAttr.get(ir.F32Type.get(), 0.0),
        feature_index=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), feature_index),
    )  # fmt: skip
    return [op.result]
