"""Cheap fakes of chapter 11's test_bfgs_inverse.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def recover_rates__adam(observed):
    """300 Adam steps on the log rates in a lax.scan, as in test_heat_inverse.py."""

    def loss(log_rates):
        return jnp.mean((trajectory(jnp.exp(log_rates)) - observed) ** 2)

    optimizer = optax.adam(0.05)

    def step(carry, _):
        log_rates, state = carry
        updates, state = optimizer.update(jax.grad(loss)(log_rates), state)
        return (optax.apply_updates(log_rates, updates), state), None

    start = jnp.log(jnp.asarray(GUESS))
    (log_rates, _), _ = jax.lax.scan(step, (start, optimizer.init(start)), length=300)
    return jnp.exp(log_rates), 300


def recover_rates__few_gradient_steps(observed):
    """Fifteen plain gradient steps: the iteration count of BFGS without its curvature."""

    def loss(log_rates):
        return jnp.mean((trajectory(jnp.exp(log_rates)) - observed) ** 2)

    log_rates = jnp.log(jnp.asarray(GUESS))
    for _ in range(15):
        log_rates = log_rates - 0.5 * jax.grad(loss)(log_rates)
    return jnp.exp(log_rates), 15
