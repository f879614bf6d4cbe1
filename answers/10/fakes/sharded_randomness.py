"""Cheap fakes of chapter 10's test_sharded_randomness.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def dropout_key__whole_device_index(key):
    """Folds in the whole device index, so the model-parallel replicas get different masks."""
    return jax.random.fold_in(key, lax.axis_index(("data", "model")))


def sharded_init__per_device_keys(mesh):
    """Each device draws its own block with its own key, so the values depend on the mesh."""
    model = mesh.shape["model"]

    def body(k):
        k_up, k_down = jax.random.split(jax.random.fold_in(k, lax.axis_index("model")))
        return {
            "up": 0.02 * jax.random.normal(k_up, (64, 256 // model)),
            "down": 0.02 * jax.random.normal(k_down, (256 // model, 64)),
        }

    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(), out_specs=SPECS))


def sharded_init__replicated(mesh):
    """Jits init_params without out_shardings: every device holds the whole arrays."""
    return jax.jit(init_params)
