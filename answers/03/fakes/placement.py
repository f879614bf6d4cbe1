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


def stitch__concatenate_then_device_put(pieces, mesh, spec):
    """Fetches every block to the host, assembles the whole array and puts it back: all copied."""
    block = next(iter(pieces.values())).shape
    entries = tuple(spec) + (None,) * (len(block) - len(spec))
    shape = []
    for length, names in zip(block, entries, strict=True):
        names = () if names is None else (names,) if isinstance(names, str) else names
        shape.append(length * int(np.prod([mesh.shape[n] for n in names])))
    sharding = NamedSharding(mesh, spec)
    whole = np.zeros(shape, np.float32)
    for device, index in sharding.devices_indices_map(tuple(shape)).items():
        whole[index] = np.asarray(pieces[device])
    return jax.device_put(whole, sharding)


def stitch__callback_from_the_pieces(pieces, mesh, spec):
    """make_array_from_callback reading each device's block back from its piece: new buffers."""
    sharding = NamedSharding(mesh, spec)
    block = next(iter(pieces.values())).shape
    entries = tuple(spec) + (None,) * (len(block) - len(spec))
    shape = []
    for length, names in zip(block, entries, strict=True):
        names = () if names is None else (names,) if isinstance(names, str) else names
        shape.append(length * int(np.prod([mesh.shape[n] for n in names])))
    by_index = {}
    for device, index in sharding.devices_indices_map(tuple(shape)).items():
        by_index[str(index)] = np.asarray(pieces[device])
    return jax.make_array_from_callback(tuple(shape), sharding, lambda index: by_index[str(index)])


def stitch__block_times_the_device_count(pieces, mesh, spec):
    """Multiplies every split axis by the number of devices (8), not by the named axes' sizes."""
    block = next(iter(pieces.values())).shape
    entries = tuple(spec) + (None,) * (len(block) - len(spec))
    shape = tuple(n if e is None else n * len(pieces) for n, e in zip(block, entries, strict=True))
    sharding = NamedSharding(mesh, spec)
    return jax.make_array_from_single_device_arrays(shape, sharding, list(pieces.values()))


def stitch__first_axis_only(pieces, mesh, spec):
    """Assumes the split is along axis 0 over the first mesh axis, whatever spec says."""
    block = next(iter(pieces.values())).shape
    shape = (block[0] * mesh.shape["X"], *block[1:])
    sharding = NamedSharding(mesh, spec)
    return jax.make_array_from_single_device_arrays(shape, sharding, list(pieces.values()))
