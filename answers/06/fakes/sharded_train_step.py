"""Cheap fakes of chapter 06's test_sharded_train_step.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def shard_batch__replicated(mesh, x, y):
    """The whole batch on every device: right losses, but no data parallelism."""
    sharding = NamedSharding(mesh, P())
    return jax.device_put(x, sharding), jax.device_put(y, sharding)


def shard_batch__split_over_every_device(mesh, x, y):
    """Splits the examples over both mesh axes: the two model-parallel devices see different ones."""
    sharding = NamedSharding(mesh, P(("data", "model")))
    return jax.device_put(x, sharding), jax.device_put(y, sharding)


def fsdp_loss_and_grads__jit_chooses(mesh, params, x, y):
    """No shard_map: jit differentiates the plain loss on the sharded inputs and picks the collectives."""

    def loss(p, x, y):
        return jnp.mean((jax.nn.relu(x @ p["up"]) @ p["down"] - y) ** 2)

    return jax.value_and_grad(loss)(params, x, y)


def fsdp_loss_and_grads__replicated_weights(mesh, params, x, y):
    """Data parallelism only: every device gets the whole weights, the gradients are all-reduced."""

    def local_loss(whole, xb, yb):
        prediction = jax.nn.relu(xb @ whole["up"]) @ whole["down"]
        return jax.lax.pmean(jnp.mean((prediction - yb) ** 2), "data")

    loss = jax.shard_map(local_loss, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=P())
    return jax.value_and_grad(loss)(params, x, y)


def fsdp_loss_and_grads__gradients_all_reduced(mesh, params, x, y):
    """Gathers the weights but sums whole gradients with psum, then slices: all-reduce, not reduce-scatter."""

    def local(blocks, xb, yb):
        whole = jax.tree.map(lambda w: jax.lax.all_gather(w, "data", tiled=True), blocks)

        def loss(w):
            return jnp.mean((jax.nn.relu(xb @ w["up"]) @ w["down"] - yb) ** 2)

        value, grads = jax.value_and_grad(loss)(whole)
        index = jax.lax.axis_index("data")
        grads = jax.tree.map(
            lambda g, b: jax.lax.dynamic_slice_in_dim(
                jax.lax.psum(g, "data") / 8, index * b.shape[0], b.shape[0]
            ),
            grads,
            blocks,
        )
        return jax.lax.pmean(value, "data"), grads

    return jax.shard_map(local, mesh=mesh, in_specs=(P("data"),) * 3, out_specs=(P(), P("data")))(
        params, x, y
    )


def explicit_tp_loss__gather_the_weights(params, x, y):
    """Reshards both weights to full copies: the right numbers, but every step gathers them."""
    w1, w2 = (jax.sharding.reshard(w, P()) for w in params)
    return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)


def explicit_tp_loss__replicated_output(params, x, y):
    """Asks for the output replicated on every device instead of split over "data"."""
    w1, w2 = params
    h = jnp.tanh(x @ w1)
    return jnp.mean((jnp.matmul(h, w2, out_sharding=P()) - y) ** 2)


def explicit_tp_loss__gather_the_hidden_layer(params, x, y):
    """Gathers the hidden activation's columns before the second matmul."""
    w1, w2 = params
    h = jax.sharding.reshard(jnp.tanh(x @ w1), P("data", None))
    return jnp.mean((h @ jax.sharding.reshard(w2, P()) - y) ** 2)


def explicit_tp_loss__output_split_over_model(params, x, y):
    """Splits the output's columns over "model" too: a reduce-scatter instead of the all-reduce."""
    w1, w2 = params
    h = jnp.tanh(x @ w1)
    return jnp.mean((jnp.matmul(h, w2, out_sharding=P("data", "model")) - y) ** 2)


def zero_step__no_reshard(params, state, x, y):
    """The plain Adam step: the replicated weights meet the split state and come out split."""
    loss, grads = jax.value_and_grad(_plain_loss)(params, x, y)
    updates, state = ADAM.update(grads, state)
    return optax.apply_updates(params, updates), state, loss


def zero_step__gradients_only(params, state, x, y):
    """Reshards the gradients but adds the split updates to the replicated weights."""
    loss, grads = jax.value_and_grad(_plain_loss)(params, x, y)
    updates, state = ADAM.update(reshard(grads, ZERO_SPEC), state)
    return optax.apply_updates(params, updates), state, loss


def zero_step__state_gathered(params, state, x, y):
    """Gathers the whole state onto every device and updates there: no memory saved."""
    loss, grads = jax.value_and_grad(_plain_loss)(params, x, y)
    updates, state = ADAM.update(grads, reshard(state, P()))
    return optax.apply_updates(params, updates), state, loss


def zero_step__gathered_back_then_resplit(params, state, x, y):
    """Right values, but the new weights are left split: the next step sees another type."""
    loss, grads = jax.value_and_grad(_plain_loss)(params, x, y)
    updates, state = ADAM.update(reshard(grads, ZERO_SPEC), state)
    return optax.apply_updates(reshard(params, ZERO_SPEC), updates), state, loss


def zero_step__no_update(params, state, x, y):
    """The weights and state handed back unchanged."""
    return params, state, _plain_loss(params, x, y)


def zero_step__state_gathered_and_split_again(params, state, x, y):
    """Gathers the state, updates replicated, splits the state again: types kept, memory not."""
    loss, grads = jax.value_and_grad(_plain_loss)(params, x, y)
    adam, rest = state
    whole = adam._replace(mu=reshard(adam.mu, P()), nu=reshard(adam.nu, P()))
    updates, (whole, rest) = ADAM.update(grads, (whole, rest))
    adam = whole._replace(mu=reshard(whole.mu, ZERO_SPEC), nu=reshard(whole.nu, ZERO_SPEC))
    return optax.apply_updates(params, updates), (adam, rest), loss
