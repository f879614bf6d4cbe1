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
