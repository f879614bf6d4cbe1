"""Cheap fakes of chapter 06's test_multihost_checkpoint.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def save_sharded__numpy_rows(path, state):
    """Each process writes its own rows with NumPy: no Orbax checkpoint to restore."""
    os.makedirs(path, exist_ok=True)
    rows = np.concatenate([np.asarray(s.data) for s in state["w"].addressable_shards])
    np.save(os.path.join(path, f"rows_{jax.process_index()}.npy"), rows)


def restore_onto__saved_sharding(path, mesh, spec):
    """restore without a target: the arrays come back as they were saved, whatever spec asks."""
    return ocp.StandardCheckpointer().restore(path)


def restore_onto__everything_replicated(path, mesh, spec):
    """Every leaf replicated, spec ignored: the rows are not split over the devices."""

    def target(leaf):
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=NamedSharding(mesh, P()))

    return ocp.StandardCheckpointer().restore(path, jax.tree.map(target, abstract_state()))


def restore_onto__whole_then_device_put(path, mesh, spec):
    """Every process reads the whole array (replicated target), then device_puts it to spec."""
    where = NamedSharding(mesh, P())
    target = jax.tree.map(
        lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=where), abstract_state()
    )
    state = ocp.StandardCheckpointer().restore(path, target)
    return {"w": jax.device_put(state["w"], NamedSharding(mesh, spec)), "step": state["step"]}


def restore_onto__numpy_then_device_put(path, mesh, spec):
    """Restore to host NumPy arrays (the whole checkpoint), then shard them with device_put."""
    target = jax.tree.map(lambda leaf: np.zeros(leaf.shape, leaf.dtype), abstract_state())
    state = ocp.StandardCheckpointer().restore(path, target)
    w = jax.device_put(state["w"], NamedSharding(mesh, spec))
    return {"w": w, "step": jax.device_put(state["step"], NamedSharding(mesh, P()))}


def restore_onto__numpy_then_slice(path, mesh, spec):
    """Restore the whole array to NumPy, then each device takes its slice of it."""
    target = jax.tree.map(lambda leaf: np.zeros(leaf.shape, leaf.dtype), abstract_state())
    state = ocp.StandardCheckpointer().restore(path, target)
    sharding = NamedSharding(mesh, spec)
    w = jax.make_array_from_callback(state["w"].shape, sharding, lambda index: state["w"][index])
    return {"w": w, "step": jax.device_put(state["step"], NamedSharding(mesh, P()))}
