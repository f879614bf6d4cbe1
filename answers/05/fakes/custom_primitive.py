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
