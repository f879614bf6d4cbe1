"""Cheap fakes of chapter 06's test_multihost_training.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def load_my_shard__every_process_reads_everything(dataset):
    """Every process loads the whole dataset."""
    return dataset.read(0, dataset.num_rows)


def load_my_shard__reads_everything_then_slices(dataset):
    """Right rows in the end, but the whole dataset was read first."""
    x, y = dataset.read(0, dataset.num_rows)
    rows = dataset.num_rows // jax.process_count()
    start = jax.process_index() * rows
    return x[start : start + rows], y[start : start + rows]


def load_my_shard__process_index_hard_coded(dataset):
    """process_index() written as 0: both processes read the first block."""
    rows = dataset.num_rows // jax.process_count()
    return dataset.read(0, rows)


def load_my_shard__rows_one_by_one(dataset):
    """Its own rows, read one at a time."""
    rows = dataset.num_rows // jax.process_count()
    start = jax.process_index() * rows
    parts = [dataset.read(i, i + 1) for i in range(start, start + rows)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def load_my_shard__constants(dataset):
    """Zeros of the right shape."""
    return np.zeros((8, FEATURES), np.float32), np.zeros((8, 1), np.float32)


def global_batch__local_arrays(local, mesh):
    """Each process keeps its own 8 rows on one device."""
    return tuple(jnp.asarray(part) for part in local)


def global_batch__device_put(local, mesh):
    """device_put of the local rows with the batch sharding: 8 rows, not 16."""
    sharding = NamedSharding(mesh, P("data"))
    return tuple(jax.device_put(part, sharding) for part in local)


def global_batch__replicated(local, mesh):
    """The process-local rows declared replicated over the mesh."""
    sharding = NamedSharding(mesh, P())
    return tuple(jax.make_array_from_process_local_data(sharding, part) for part in local)


def replicate__numpy_unchanged(params, mesh):
    """The NumPy parameters handed to the step as they are."""
    return params


def replicate__first_local_device(params, mesh):
    """Parameters on this process's first device only."""
    return jax.device_put(params, jax.local_devices()[0])


def train_step__local_gradients(params, x, y):
    """Each device steps on its own rows: no all-reduce, the replicas drift apart."""

    def local(p, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(p, xb, yb)
        return jax.tree.map(lambda a, g: a - LEARNING_RATE * g, p, grads), loss

    specs = (P(), P("data"), P("data"))
    mesh = jax.typeof(x).sharding.mesh
    run = jax.shard_map(local, mesh=mesh, in_specs=specs, out_specs=(P(), P()), check_vma=False)
    return run(params, x, y)


def train_step__gradients_summed(params, x, y):
    """The local gradients summed over the devices instead of averaged."""

    def local(p, xb, yb):
        loss, grads = jax.value_and_grad(loss_fn)(p, xb, yb)
        grads = jax.lax.psum(grads, "data")
        return jax.tree.map(lambda a, g: a - LEARNING_RATE * g, p, grads), jax.lax.pmean(
            loss, "data"
        )

    specs = (P(), P("data"), P("data"))
    return jax.shard_map(
        local, mesh=jax.typeof(x).sharding.mesh, in_specs=specs, out_specs=(P(), P())
    )(params, x, y)


def train_step__no_update(params, x, y):
    """Returns the parameters unchanged with the loss."""
    return params, loss_fn(params, x, y)


def losses_of_every_process__only_mine(params, local):
    """This process's loss alone."""
    return np.array([np.float32(loss_fn(params, *local))])


def losses_of_every_process__mine_repeated(params, local):
    """This process's loss, once per process."""
    return np.full(jax.process_count(), np.float32(loss_fn(params, *local)))


def losses_of_every_process__constants(params, local):
    """Two constants."""
    return np.array([0.2, 0.25], np.float32)
