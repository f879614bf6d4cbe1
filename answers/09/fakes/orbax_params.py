"""Cheap fakes of chapter 09's test_orbax_params.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def restore_backbone__strict_false_whole_model(path, model):
    """Restores the whole model with strict=False: the old head, padded, replaces the new one."""
    state = nnx.state(model)
    whole = jax.tree.map(ocp.utils.to_shape_dtype_struct, nnx.to_pure_dict(state))
    ckpt = ocp.StandardCheckpointer()
    try:
        restored = ckpt.restore(path, whole, strict=False)
    finally:
        ckpt.close()
    nnx.replace_by_pure_dict(state, restored)
    nnx.update(model, state)


def restore_backbone__into_a_copy(path, model):
    """Restores the backbone into the state it got, but never writes it back into model."""
    params = nnx.to_pure_dict(nnx.state(model))
    target = {"backbone": jax.tree.map(ocp.utils.to_shape_dtype_struct, params["backbone"])}
    args = ocp.args.PyTreeRestore(
        item=target,
        partial_restore=True,
        restore_args=ocp.checkpoint_utils.construct_restore_args(target),
    )
    ckpt = ocp.PyTreeCheckpointer()
    try:
        ckpt.restore(path, args=args)
    finally:
        ckpt.close()


def restore_backbone__nothing(path, model):
    """Leaves the model as initialised."""
    return None
