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
