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


def export_for_devices__the_old_artifact(fn, exp, devices):
    """Serves the artifact it was given: still 4 devices."""
    return exp


def export_for_devices__without_shardings(fn, exp, devices):
    """Exports the source again at the recorded shapes, but with no shardings: one device."""
    flat = [jax.ShapeDtypeStruct(aval.shape, aval.dtype) for aval in exp.in_avals]
    args, kwargs = jax.tree.unflatten(exp.in_tree, flat)
    return export.export(jax.jit(fn))(*args, **kwargs)


def export_for_devices__fixed_specs(fn, exp, devices):
    """Writes this koan's first specs from memory instead of reading the artifact's."""
    mesh = Mesh(np.array(devices), ("data",), axis_types=(AxisType.Explicit,))
    specs = (
        jax.ShapeDtypeStruct((3, 2), jnp.float32, sharding=NamedSharding(mesh, P())),
        jax.ShapeDtypeStruct((8, 3), jnp.float32, sharding=NamedSharding(mesh, P("data", None))),
    )
    return export.export(jax.jit(fn))(*specs)


def export_for_devices__default_axis_types(fn, exp, devices):
    """Reads the specs and the axis name but drops the axis type: make_mesh's Explicit default."""
    recorded = exp.in_shardings_jax()
    mesh = jax.make_mesh((len(devices),), recorded[0].mesh.axis_names, devices=devices)
    flat = [
        jax.ShapeDtypeStruct(aval.shape, aval.dtype, sharding=NamedSharding(mesh, sharding.spec))
        for aval, sharding in zip(exp.in_avals, recorded, strict=True)
    ]
    args, kwargs = jax.tree.unflatten(exp.in_tree, flat)
    return export.export(jax.jit(fn))(*args, **kwargs)
