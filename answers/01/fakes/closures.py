"""Cheap fakes of chapter 01's test_closures.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def random_features__staged_draws(x, seed=0, features=16):
    """The same draws without ensure_compile_time_eval: random numbers generated on every call."""
    k1, k2 = jax.random.split(jax.random.key(seed))
    w = jax.random.normal(k1, (x.shape[-1], features))
    b = jax.random.uniform(k2, (features,)) * 2 * jnp.pi
    return jnp.sqrt(2.0 / features) * jnp.cos(x @ w + b)


def random_features__numpy_draws(x, seed=0, features=16):
    """Constants from NumPy's generator: no random primitive, but not jax.random's numbers."""
    rng = np.random.default_rng(seed)
    w = jnp.asarray(rng.normal(size=(x.shape[-1], features)), jnp.float32)
    b = jnp.asarray(rng.uniform(size=features) * 2 * np.pi, jnp.float32)
    return jnp.sqrt(2.0 / features) * jnp.cos(x @ w + b)


def random_features__disable_jit(x, seed=0, features=16):
    """jax.disable_jit while tracing: the draws are staged all the same."""
    with jax.disable_jit():
        k1, k2 = jax.random.split(jax.random.key(seed))
        w = jax.random.normal(k1, (x.shape[-1], features))
        b = jax.random.uniform(k2, (features,)) * 2 * jnp.pi
    return jnp.sqrt(2.0 / features) * jnp.cos(x @ w + b)


def random_features__one_key(x, seed=0, features=16):
    """At trace time, but both draws from the unsplit key."""
    with jax.ensure_compile_time_eval():
        key = jax.random.key(seed)
        w = jax.random.normal(key, (x.shape[-1], features))
        b = jax.random.uniform(key, (features,)) * 2 * jnp.pi
    return jnp.sqrt(2.0 / features) * jnp.cos(x @ w + b)
