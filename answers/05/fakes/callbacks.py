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


def cumsum_in_place__jnp_cumsum(x):
    """The running sum in jnp on the device: no callback at all."""
    return jnp.cumsum(x, axis=-1)


def cumsum_in_place__pure_callback(x):
    """A pure_callback that returns a new array: another custom-call target, no alias."""
    return jax.pure_callback(
        lambda v: np.cumsum(v, axis=-1), like(x), x, vmap_method="broadcast_all"
    )


def cumsum_in_place__no_alias(x):
    """buffer_callback without input_output_aliases: the output gets a buffer of its own."""

    def fill(ctx, out, x):
        np.cumsum(np.asarray(x), axis=-1, out=np.asarray(out))

    return buffer_callback(fill, like(x), vmap_method="broadcast_all")(x)


def cumsum_in_place__sequential(x):
    """vmap_method='sequential': vmap loops over the rows, one callback per row."""

    def fill(ctx, out, x):
        np.cumsum(np.asarray(x), axis=-1, out=np.asarray(out))

    return buffer_callback(fill, like(x), input_output_aliases={0: 0}, vmap_method="sequential")(x)


def cumsum_in_place__flat_cumsum(x):
    """np.cumsum without an axis: the whole batch is summed as one flat sequence."""

    def fill(ctx, out, x):
        np.asarray(out)[...] = np.cumsum(np.asarray(x)).reshape(out.shape)

    return buffer_callback(
        fill, like(x), input_output_aliases={0: 0}, vmap_method="broadcast_all"
    )(x)


def on_each_shard__whole_array(host_fn, x, mesh):
    """One pure_callback on the whole array: the compiler all-gathers and the host sees (4, 2)."""
    return jax.pure_callback(host_fn, jax.ShapeDtypeStruct(x.shape[:1], x.dtype), x)


def on_each_shard__jnp(host_fn, x, mesh):
    """The sums of squares in jnp on the device: the host function is never called."""
    return (x * x).sum(axis=1)


def on_each_shard__debug_callback(host_fn, x, mesh):
    """A partitioned debug.callback calls host_fn per block, but its results are thrown away."""
    jax.debug.callback(host_fn, x, partitioned=True)
    return jnp.zeros(x.shape[:1], x.dtype)
