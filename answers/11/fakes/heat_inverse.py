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
