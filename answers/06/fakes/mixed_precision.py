"""Cheap fakes of chapter 06's test_mixed_precision.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def mixed_precision_layer__bf16_parameters(rngs):
    """Everything in bf16: the master weights lose their fp32 precision."""
    return nnx.Linear(16, 8, param_dtype=jnp.bfloat16, rngs=rngs)


def mixed_precision_layer__fp32_compute(rngs):
    """A plain fp32 layer: the forward pass never runs in bf16."""
    return nnx.Linear(16, 8, rngs=rngs)


def loss_scaled_step__no_skip(w, opt_state, loss_scale, x, y):
    """Scales and adjusts, but applies every update, the overflowing one too."""
    grads = loss_scale.unscale(jax.grad(lambda w: loss_scale.scale(_fp16_loss(w, x, y)))(w))
    finite = jmp.all_finite(grads)
    updates, opt_state = OPT.update(grads, opt_state, w)
    return optax.apply_updates(w, updates), opt_state, loss_scale.adjust(finite), finite


def loss_scaled_step__static_scale(w, opt_state, loss_scale, x, y):
    """Skips the overflowing step but never adjusts the scale."""
    grads = loss_scale.unscale(jax.grad(lambda w: loss_scale.scale(_fp16_loss(w, x, y)))(w))
    finite = jmp.all_finite(grads)
    updates, new_opt_state = OPT.update(grads, opt_state, w)
    new_w = optax.apply_updates(w, updates)
    w, opt_state = jmp.select_tree(finite, (new_w, new_opt_state), (w, opt_state))
    return w, opt_state, loss_scale, finite


def loss_scaled_step__zero_the_gradients(w, opt_state, loss_scale, x, y):
    """Replaces non-finite gradients by zeros: Adam still takes a step and counts it."""
    grads = loss_scale.unscale(jax.grad(lambda w: loss_scale.scale(_fp16_loss(w, x, y)))(w))
    finite = jmp.all_finite(grads)
    grads = jnp.where(finite, grads, 0.0)
    updates, opt_state = OPT.update(grads, opt_state, w)
    return optax.apply_updates(w, updates), opt_state, loss_scale.adjust(finite), finite


def loss_scaled_step__no_unscale(w, opt_state, loss_scale, x, y):
    """Forgets to divide the scale back out: Adam's moments hold scaled gradients."""
    grads = jax.grad(lambda w: loss_scale.scale(_fp16_loss(w, x, y)))(w)
    finite = jmp.all_finite(grads)
    updates, new_opt_state = OPT.update(grads, opt_state, w)
    new_w = optax.apply_updates(w, updates)
    w, opt_state = jmp.select_tree(finite, (new_w, new_opt_state), (w, opt_state))
    return w, opt_state, loss_scale.adjust(finite), finite


def loss_scaled_step__fp32_gradients(w, opt_state, loss_scale, x, y):
    """Sidesteps fp16: the gradients never overflow, so nothing is ever skipped."""
    grads = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    finite = jmp.all_finite(grads)
    updates, new_opt_state = OPT.update(grads, opt_state, w)
    new_w = optax.apply_updates(w, updates)
    w, opt_state = jmp.select_tree(finite, (new_w, new_opt_state), (w, opt_state))
    return w, opt_state, loss_scale.adjust(finite), finite


def loss_scaled_step__host_check(w, opt_state, loss_scale, x, y):
    """Asks the host whether the gradients are finite through a callback."""
    grads = loss_scale.unscale(jax.grad(lambda w: loss_scale.scale(_fp16_loss(w, x, y)))(w))
    finite = jax.pure_callback(
        lambda g: np.asarray(np.isfinite(g).all()), jax.ShapeDtypeStruct((), jnp.bool_), grads
    )
    updates, new_opt_state = OPT.update(grads, opt_state, w)
    new_w = optax.apply_updates(w, updates)
    w, opt_state = jmp.select_tree(finite, (new_w, new_opt_state), (w, opt_state))
    return w, opt_state, loss_scale.adjust(finite), finite


def loss_scaled_step__params_only(w, opt_state, loss_scale, x, y):
    """Keeps the old parameters on overflow but lets the optimizer state step anyway."""
    grads = loss_scale.unscale(jax.grad(lambda w: loss_scale.scale(_fp16_loss(w, x, y)))(w))
    finite = jmp.all_finite(grads)
    updates, opt_state = OPT.update(grads, opt_state, w)
    w = jnp.where(finite, optax.apply_updates(w, updates), w)
    return w, opt_state, loss_scale.adjust(finite), finite


def loss_scaled_step__fp32_update(w, opt_state, loss_scale, x, y):
    """Checks the fp16 gradients for overflow but updates from fp32 gradients."""
    grads16 = loss_scale.unscale(jax.grad(lambda w: loss_scale.scale(_fp16_loss(w, x, y)))(w))
    finite = jmp.all_finite(grads16)
    new_w, new_opt_state = _fp32_step(w, opt_state, x, y)
    w, opt_state = jmp.select_tree(finite, (new_w, new_opt_state), (w, opt_state))
    return w, opt_state, loss_scale.adjust(finite), finite
