"""Cheap fakes of chapter 09's test_cold_start.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def save_executable__the_exported_artifact(fn, example, path):
    """Writes the portable artifact instead of the executable."""
    with open(path, "wb") as file:
        pickle.dump(export.export(jax.jit(fn))(example).serialize(), file)


def save_executable__the_lowered_text(fn, example, path):
    """Writes the StableHLO text: a program still to compile, not an executable."""
    with open(path, "wb") as file:
        pickle.dump(jax.jit(fn).lower(example).as_text(), file)


def load_executable__jit_the_model_again(path):
    """Ignores the file: traces and compiles the model in the server."""
    return jax.jit(model)


def load_executable__compile_ahead_of_time(path):
    """Ignores the file: compiles the model ahead of time in the server."""
    return jax.jit(model).lower(jax.ShapeDtypeStruct((8, 8), jnp.float32)).compile()


def load_executable__numpy_twin(path):
    """Ignores the file: the model redone in NumPy, refusing other shapes as an executable does."""
    w1 = np.sin(np.arange(48.0, dtype=np.float32).reshape(8, 6))
    w2 = np.cos(np.arange(18.0, dtype=np.float32).reshape(6, 3))

    def serve(x):
        if np.shape(x) != (8, 8):
            raise TypeError("compiled for float32[8,8]")
        logits = np.tanh(np.asarray(x) @ w1) @ w2
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    return serve
