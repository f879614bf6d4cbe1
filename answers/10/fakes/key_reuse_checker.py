"""Cheap fakes of chapter 10's test_key_reuse_checker.py TODO (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def noise_and_mask__one_key_twice(key, shape):
    """Draws both from the same key: the reuse the checker exists to catch."""
    return jax.random.normal(key, shape), jax.random.bernoulli(key, 0.5, shape)


def noise_and_mask__clone_to_silence_the_checker(key, shape):
    """Clones the key so the checker is silent: both draws still come from one key."""
    copy = jax.random.clone(key)
    return jax.random.normal(key, shape), jax.random.bernoulli(copy, 0.5, shape)


def noise_and_mask__fold_in(key, shape):
    """Two keys by fold_in(key, 0) and fold_in(key, 1): legal, but not the split asked for."""
    k_noise, k_mask = jax.random.fold_in(key, 0), jax.random.fold_in(key, 1)
    return jax.random.normal(k_noise, shape), jax.random.bernoulli(k_mask, 0.5, shape)


def noise_and_mask__split_then_clone(key, shape):
    """The split's values, with a clone thrown in for the mask's key."""
    k_noise, k_mask = jax.random.split(key)
    k_mask = jax.random.clone(k_mask)
    return jax.random.normal(k_noise, shape), jax.random.bernoulli(k_mask, 0.5, shape)
