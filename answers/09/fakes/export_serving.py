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


def serving_mesh__one_data_axis(exp, devices):
    """Assumes the 1-D "data" mesh instead of reading the artifact's: the 2-D one is refused."""
    return mesh_of(devices[: exp.nr_devices])


def serving_mesh__default_axis_types(exp, devices):
    """Reads the names and sizes but drops the axis types: make_mesh's Explicit default."""
    recorded = exp.in_shardings_jax()[0].mesh
    return jax.make_mesh(recorded.axis_sizes, recorded.axis_names, devices=devices)


def serving_mesh__the_export_devices(exp, devices):
    """Lays out the first devices of the process, not the server's own."""
    recorded = exp.in_shardings_jax()[0].mesh
    return jax.make_mesh(recorded.axis_sizes, recorded.axis_names, recorded.axis_types)


def serving_mesh__the_abstract_mesh(exp, devices):
    """Hands back the recorded AbstractMesh itself: a mesh with no devices."""
    return exp.in_shardings_jax()[0].mesh


def export_nnx__bakes_the_weights(model, x_spec):
    """Ignores params: the exported function closes over the model, its weights baked in."""
    params = nnx.to_pure_dict(nnx.state(model))
    return export.export(jax.jit(lambda params, x: model(x)))(params, x_spec)
