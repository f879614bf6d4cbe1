"""Cheap fakes of chapter 06's test_host_offload.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def host_adam_step__on_the_device(opt, w, g, state):
    """The update on the device between two device_puts: right numbers, no compute on the host."""
    updates, new_state = opt.update(g, jax.device_put(state, Device), w)
    return optax.apply_updates(w, updates), jax.device_put(new_state, Host)


def host_adam_step__state_left_on_device(opt, w, g, state):
    """compute_on on the host, but every output sent to device memory: the state leaves the host."""

    def update(w, g, state):
        updates, new_state = opt.update(g, state, w)
        return optax.apply_updates(w, updates), new_state

    on_host = compute_on(update, compute_type="device_host", out_memory_spaces=(Device, Device))
    return on_host(jax.device_put(w, Host), jax.device_put(g, Host), state)


def host_adam_step__inputs_not_moved(opt, w, g, state):
    """compute_on, with w and g left in device memory: the update mixes memory spaces."""

    def update(w, g, state):
        updates, new_state = opt.update(g, state, w)
        return optax.apply_updates(w, updates), new_state

    on_host = compute_on(update, compute_type="device_host", out_memory_spaces=(Device, Host))
    return on_host(w, g, state)
