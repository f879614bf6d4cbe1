"""Cheap fakes of chapter 11's test_heat_inverse.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def simulate__states_before_the_step(u0, kappa, dt=DT, steps=STEPS):
    """Stacks the state before each step, so the trajectory lags one step behind."""
    return lax.scan(lambda u, _: (heat_step(u, kappa, dt), u), u0, length=steps)


def recover_zones__plain_gradient_descent(observed, u0, iters=300, learning_rate=0.05):
    """Takes plain gradient steps (optax.sgd) on log κ instead of Adam's."""

    def loss(log_kappa):
        _, states = simulate(u0, kappa_from_zones(jnp.exp(log_kappa)))
        return jnp.mean((states[9::10] - observed) ** 2)

    optimizer = optax.sgd(learning_rate)

    @jax.jit
    def run(log_kappa):
        def step(carry, _):
            log_kappa, state = carry
            value, grad = jax.value_and_grad(loss)(log_kappa)
            updates, state = optimizer.update(grad, state)
            return (optax.apply_updates(log_kappa, updates), state), value

        (log_kappa, _), losses = lax.scan(
            step, (log_kappa, optimizer.init(log_kappa)), length=iters
        )
        return jnp.exp(log_kappa), losses

    return run(jnp.zeros(4))


def recover_zones__python_loop(observed, u0, iters=300, learning_rate=0.05):
    """Runs the Adam steps in a Python loop around a jitted step, not in one lax.scan."""

    def loss(log_kappa):
        _, states = simulate(u0, kappa_from_zones(jnp.exp(log_kappa)))
        return jnp.mean((states[9::10] - observed) ** 2)

    optimizer = optax.adam(learning_rate)

    @jax.jit
    def step(log_kappa, state):
        value, grad = jax.value_and_grad(loss)(log_kappa)
        updates, state = optimizer.update(grad, state)
        return optax.apply_updates(log_kappa, updates), state, value

    log_kappa = jnp.zeros(4)
    state, losses = optimizer.init(log_kappa), []
    for _ in range(iters):
        log_kappa, state, value = step(log_kappa, state)
        losses.append(value)
    return jnp.exp(log_kappa), jnp.stack(losses)


def recover_zones__kappa_not_log(observed, u0, iters=300, learning_rate=0.05):
    """Optimises κ itself, not log κ: nothing keeps κ positive."""

    def loss(kappa):
        _, states = simulate(u0, kappa_from_zones(kappa))
        return jnp.mean((states[9::10] - observed) ** 2)

    optimizer = optax.adam(learning_rate)

    @jax.jit
    def run(kappa):
        def step(carry, _):
            kappa, state = carry
            value, grad = jax.value_and_grad(loss)(kappa)
            updates, state = optimizer.update(grad, state)
            return (optax.apply_updates(kappa, updates), state), value

        (kappa, _), losses = lax.scan(step, (kappa, optimizer.init(kappa)), length=iters)
        return kappa, losses

    return run(jnp.ones(4))
