"""Cheap fakes of chapter 06's test_checkpoint_manager.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def resume__restore_without_a_target(manager, fresh_state):
    """Restores the latest step with no abstract target: Orbax's own guess of the tree comes back."""
    step = manager.latest_step()
    if step is None:
        return 0, fresh_state
    return step + 1, manager.restore(step)


def resume__returns_the_saved_step(manager, fresh_state):
    """Restores the right checkpoint but resumes at its own step, training that step twice."""
    step = manager.latest_step()
    if step is None:
        return 0, fresh_state
    return step, manager.restore(step, args=ocp.args.StandardRestore(abstract_of(fresh_state)))


def resume__always_from_scratch(manager, fresh_state):
    """Ignores the checkpoints and starts again from step 0."""
    return 0, fresh_state


def onto_mesh__shapes_only(abstract, mesh, specs):
    """Returns the shapes and dtypes as they are: Orbax restores the sharding they were saved with."""
    return abstract


def onto_mesh__replicated(abstract, mesh, specs):
    """Puts every array whole on every device of the new mesh, ignoring specs."""
    sharding = NamedSharding(mesh, P())
    return jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), abstract
    )


def save_nnx_train_state__parameters_only(manager, step, model, opt, data_position):
    """Saves the parameters and the optimizer, not Dropout's RNG stream."""
    arrays = {"model": nnx.state(model, nnx.Param), "optimizer": nnx.state(opt)}
    return manager.save(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardSave(arrays),
            data=ocp.args.JsonSave({"position": data_position}),
        ),
    )


def save_nnx_train_state__model_only(manager, step, model, opt, data_position):
    """Saves the model and the data position; the optimizer's moments and step are lost."""
    return manager.save(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardSave({"model": nnx.state(model)}),
            data=ocp.args.JsonSave({"position": data_position}),
        ),
    )


def restore_nnx_train_state__parameters_only(manager, model, opt):
    """Restores everything but writes back only the parameters and the optimizer: dropout starts anew."""
    step = manager.latest_step()
    target = abstract_of({"model": nnx.state(model), "optimizer": nnx.state(opt)})
    restored = manager.restore(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardRestore(target), data=ocp.args.JsonRestore()
        ),
    )
    nnx.update(model, nnx.filter_state(restored.state["model"], nnx.Param))
    nnx.update(opt, restored.state["optimizer"])
    return step + 1, restored.data["position"]


def restore_nnx_train_state__fresh_optimizer(manager, model, opt):
    """Restores the model and the data position, keeps the new optimizer's zero moments."""
    step = manager.latest_step()
    target = abstract_of({"model": nnx.state(model), "optimizer": nnx.state(opt)})
    restored = manager.restore(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardRestore(target), data=ocp.args.JsonRestore()
        ),
    )
    nnx.update(model, restored.state["model"])
    return step + 1, restored.data["position"]


def restore_nnx_train_state__data_from_the_start(manager, model, opt):
    """Restores model and optimizer but reads the data from position 0 again."""
    step = manager.latest_step()
    target = abstract_of({"model": nnx.state(model), "optimizer": nnx.state(opt)})
    restored = manager.restore(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardRestore(target), data=ocp.args.JsonRestore()
        ),
    )
    nnx.update(model, restored.state["model"])
    nnx.update(opt, restored.state["optimizer"])
    return step + 1, 0
