"""Cheap fakes of chapter 10's test_typed_keys.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def as_typed_key__always_wrap(k, impl=None):
    """Skips the prng_key dtype test: wraps every input, typed keys included."""
    return jax.random.wrap_key_data(k, impl=impl)


def as_typed_key__by_rank(k, impl=None):
    """Decides by shape, not dtype: a scalar is a typed key, anything else is raw data."""
    if k.shape == ():
        return k
    return jax.random.wrap_key_data(k, impl=impl)


def as_typed_key__by_data_axis(k, impl=None):
    """Decides by shape, not dtype: a last axis of 2 or 4 words is raw data."""
    if k.ndim and k.shape[-1] in (2, 4):
        return jax.random.wrap_key_data(k, impl=impl)
    return k
