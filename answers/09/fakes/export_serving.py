"""Cheap fakes of chapter 09's test_export_serving.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def export_nnx__over_the_nnx_state(model, x_spec):
    """Skips the pure dict: exports over the nnx.State, whose Param nodes cannot serialize."""
    graphdef, state = nnx.split(model)
    return export.export(jax.jit(lambda s, x: nnx.merge(graphdef, s)(x)))(state, x_spec)


def bucket_server__no_padding(exp, buckets):
    """Skips the buckets: calls the artifact on every request's own shape."""
    return lambda x: np.asarray(exp.call(x))


def bucket_server__cuts_on_the_device(exp, buckets):
    """Pads to the bucket but slices the jax.Array, one new slice shape per request size."""

    def serve(x):
        n = x.shape[0]
        size = next(b for b in buckets if b >= n)
        padded = np.concatenate([x, np.zeros((size - n, *x.shape[1:]), x.dtype)])
        return np.asarray(exp.call(padded)[:n])

    return serve
