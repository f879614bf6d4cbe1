"""Cheap fakes of chapter 03's test_placement.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def padded_mse__mean_over_the_padded_batch(w, x, y, valid):
    """A plain mean: the padded rows count, so it divides by the padded batch size."""
    return jnp.mean((x @ w - y) ** 2)


def padded_mse__masked_but_divided_by_the_padded_size(w, x, y, valid):
    """Masks the padding out of the sum but still divides by every row, padded ones included."""
    return jnp.mean(jnp.where(valid, (x @ w - y) ** 2, 0.0))


def mean_loss_on_mesh__plain_mean_under_jit(w, x, y, mesh):
    """The reference the easy way: no shard_map, so no device ever sees a block of its own."""
    return jnp.mean(row_losses(w, x, y))


def mean_loss_on_mesh__counts_the_padded_rows(w, x, y, mesh):
    """Pads and masks the errors, but divides by every row, padded ones included."""
    n = mesh.shape["i"]
    missing = -x.shape[0] % n
    valid = jnp.arange(x.shape[0] + missing) < x.shape[0]
    x = jnp.pad(x, ((0, missing), (0, 0)))
    y = jnp.pad(y, (0, missing))

    def local(w, x, y, valid):
        total = jnp.sum(jnp.where(valid, row_losses(w, x, y), 0.0))
        return lax.psum(total, "i") / lax.psum(x.shape[0], "i")

    spec = P("i")
    return jax.shard_map(local, mesh=mesh, in_specs=(P(), spec, spec, spec), out_specs=P())(
        w, x, y, valid
    )


def mean_loss_on_mesh__mean_of_the_local_means(w, x, y, mesh):
    """Averages each device's own mean: a device holding only padding divides 0 by 0."""
    n = mesh.shape["i"]
    missing = -x.shape[0] % n
    valid = jnp.arange(x.shape[0] + missing) < x.shape[0]
    x = jnp.pad(x, ((0, missing), (0, 0)))
    y = jnp.pad(y, (0, missing))

    def local(w, x, y, valid):
        mean = jnp.sum(jnp.where(valid, row_losses(w, x, y), 0.0)) / jnp.sum(valid)
        return lax.pmean(mean, "i")

    spec = P("i")
    return jax.shard_map(local, mesh=mesh, in_specs=(P(), spec, spec, spec), out_specs=P())(
        w, x, y, valid
    )


def mean_loss_on_mesh__gathers_every_row_first(w, x, y, mesh):
    """Pads and shards, then all-gathers the rows so that every device computes the whole mean."""
    n = mesh.shape["i"]
    missing = -x.shape[0] % n
    valid = jnp.arange(x.shape[0] + missing) < x.shape[0]
    x = jnp.pad(x, ((0, missing), (0, 0)))
    y = jnp.pad(y, (0, missing))

    def local(w, x, y, valid):
        x, y, valid = (lax.all_gather(a, "i", tiled=True) for a in (x, y, valid))
        return jnp.sum(jnp.where(valid, row_losses(w, x, y), 0.0)) / jnp.sum(valid)

    spec = P("i")
    return jax.shard_map(local, mesh=mesh, in_specs=(P(), spec, spec, spec), out_specs=P())(
        w, x, y, valid
    )
