"""Cheap fakes of chapter 09's test_capstone_deploy.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def save_artifacts__fixed_batch(params, directory):
    """Skips the symbolic dimension: exports for one concrete batch size."""
    import orbax.checkpoint as ocp

    exp = export.export(jax.jit(mlp))(params, jax.ShapeDtypeStruct((1, 3), jnp.float32))
    (directory / MODEL_FILE).write_bytes(exp.serialize())
    ckpt = ocp.StandardCheckpointer()
    ckpt.save(directory / PARAMS_DIR, params)
    ckpt.wait_until_finished()
    ckpt.close()


def load_and_predict__calls_the_model_code(directory, x):
    """Skips the Exported: restores the parameters and calls this file's mlp."""
    import pathlib

    import numpy as np
    import orbax.checkpoint as ocp

    ckpt = ocp.StandardCheckpointer()
    params = ckpt.restore(pathlib.Path(directory) / "params")
    ckpt.close()
    return np.asarray(mlp(params, x))


def load_and_predict__recomputes_the_model(directory, x):
    """Ignores the Exported: restores the parameters and redoes the model's math by hand."""
    import pathlib

    import jax
    import numpy as np
    import orbax.checkpoint as ocp

    ckpt = ocp.StandardCheckpointer()
    params = ckpt.restore(pathlib.Path(directory) / "params")
    ckpt.close()
    h = jax.nn.gelu(x @ params["hidden"]["w"] + params["hidden"]["b"])
    return np.asarray(jax.nn.log_softmax(h @ params["out"]["w"] + params["out"]["b"]))


def save_artifacts__pickle(params, directory):
    """Pickle in place of Orbax, for the saver and (through a global) the loader alike."""
    import pickle

    (b,) = export.symbolic_shape("b")
    exp = export.export(jax.jit(mlp))(params, jax.ShapeDtypeStruct((b, 3), jnp.float32))
    (directory / MODEL_FILE).write_bytes(exp.serialize())
    (directory / PARAMS_DIR).write_bytes(pickle.dumps(jax.device_get(params)))

    global load_and_predict

    def load_and_predict(directory, x):
        import pathlib
        import pickle

        import numpy as np
        from jax import export

        directory = pathlib.Path(directory)
        exp = export.deserialize(bytearray((directory / "model.jaxexport").read_bytes()))
        params = pickle.loads((directory / "params").read_bytes())
        return np.asarray(exp.call(params, x))
