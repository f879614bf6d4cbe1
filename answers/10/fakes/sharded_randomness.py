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


def explicit_init__replicated(key):
    """Draws unsharded: every parameter replicated on every device."""
    return init_params(key)


def explicit_init__reshard_after(key):
    """Draws the whole arrays, then reshards them: right types and values, whole arrays made."""
    return jax.sharding.reshard(init_params(key), SPECS)


def replicated_key__committed(rng, mesh):
    """Hands the generator's key on as it comes, committed to device 0."""
    return rng.key()


def replicated_key__root_key(rng, mesh):
    """Replicates the generator's root key: the counter never moves, every call the same key."""
    return jax.device_put(rng._base_key, NamedSharding(mesh, P()))


def replicated_key__fresh_seed(rng, mesh):
    """A fresh key from the seed, replicated: it ignores the generator's counter."""
    return jax.device_put(jax.random.key(0), NamedSharding(mesh, P()))


def sharded_init__draw_whole_then_put(mesh):
    """Draws the whole arrays in one program, then device_puts them onto the mesh (an eager cut)."""
    shardings = jax.tree.map(lambda spec: NamedSharding(mesh, spec), SPECS)
    return lambda key: jax.device_put(jax.jit(init_params)(key), shardings)
