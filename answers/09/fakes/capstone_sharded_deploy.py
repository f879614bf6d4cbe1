"""Cheap fakes of chapter 09's test_capstone_sharded_deploy.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def save_sharded__unsharded_export(params, directory, devices):
    """Skips the mesh: exports jax.jit(mlp) over plain, unsharded input specs."""
    import orbax.checkpoint as ocp

    x_spec = jax.ShapeDtypeStruct((BATCH, 3), jnp.float32)
    (directory / MODEL_FILE).write_bytes(export.export(jax.jit(mlp))(params, x_spec).serialize())
    ckpt = ocp.StandardCheckpointer()
    ckpt.save(directory / PARAMS_DIR, params)
    ckpt.wait_until_finished()
    ckpt.close()


def serve__ignores_the_shardings(directory, x):
    """Skips the mesh: restores the parameters without a target and calls on default devices."""
    import pathlib

    import numpy as np
    import orbax.checkpoint as ocp
    from jax import export

    directory = pathlib.Path(directory)
    exp = export.deserialize(bytearray((directory / "model.jaxexport").read_bytes()))
    ckpt = ocp.StandardCheckpointer()
    params = ckpt.restore(directory / "params")
    ckpt.close()
    return np.asarray(exp.call(params, x))


def save_sharded__pickle(params, directory, devices):
    """Pickle in place of Orbax, for the saver and (through a global) the server alike."""
    import pickle

    mesh = data_mesh(devices)
    replicated, rows = NamedSharding(mesh, P()), NamedSharding(mesh, P("data", None))
    params_specs = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated), params
    )
    x_spec = jax.ShapeDtypeStruct((BATCH, 3), jnp.float32, sharding=rows)
    forward = jax.jit(mlp, in_shardings=(replicated, rows), out_shardings=rows)
    (directory / MODEL_FILE).write_bytes(export.export(forward)(params_specs, x_spec).serialize())
    (directory / PARAMS_DIR).write_bytes(pickle.dumps(jax.device_get(params)))

    global serve

    def serve(directory, x):
        import pathlib
        import pickle

        import jax
        import numpy as np
        from jax import export
        from jax.sharding import AxisType, Mesh

        directory = pathlib.Path(directory)
        exp = export.deserialize(bytearray((directory / "model.jaxexport").read_bytes()))
        devices = np.array(jax.devices()[: exp.nr_devices])
        mesh = Mesh(devices, ("data",), axis_types=(AxisType.Explicit,))
        (p_shard, x_shard), _ = jax.tree.unflatten(exp.in_tree, exp.in_shardings_jax(mesh))
        params = jax.device_put(pickle.loads((directory / "params").read_bytes()), p_shard)
        return np.asarray(exp.call(params, jax.device_put(x, x_shard)))


def serve__recomputes_the_model(directory, x):
    """Restores the parameters into the artifact's shardings, then redoes the model's math by
    hand instead of calling the artifact."""
    import pathlib

    import jax
    import jax.numpy as jnp
    import numpy as np
    import orbax.checkpoint as ocp
    from jax import export
    from jax.sharding import AxisType, Mesh

    directory = pathlib.Path(directory)
    exp = export.deserialize(bytearray((directory / "model.jaxexport").read_bytes()))
    devices = np.array(jax.devices()[: exp.nr_devices])
    mesh = Mesh(devices, ("data",), axis_types=(AxisType.Explicit,))
    flat = [
        jax.ShapeDtypeStruct(aval.shape, aval.dtype, sharding=sharding)
        for aval, sharding in zip(exp.in_avals, exp.in_shardings_jax(mesh), strict=True)
    ]
    (params_target, _x_target), _ = jax.tree.unflatten(exp.in_tree, flat)
    ckpt = ocp.StandardCheckpointer()
    p = ckpt.restore(directory / "params", params_target)
    ckpt.close()
    h = jnp.tanh(x @ p["hidden"]["w"] + p["hidden"]["b"])
    return np.asarray(h @ p["out"]["w"])
