"""Cheap fakes of chapter 10's test_key_patterns.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def step_noise__shift_one_draw(base_key, step):
    """Skips fold_in: one draw from the base key, shifted by the step."""
    return jax.random.normal(base_key, (3,)) + step


def scheme_keys__one_key_for_both(key):
    """Both schemes start from the root key itself, so they share keys."""
    return key, key


def scheme_keys__root_for_the_model(key):
    """The model carries the root key on, and augmentation folds a constant into it."""
    return key, jax.random.fold_in(key, 7)


def scheme_keys__ignores_the_root(key):
    """Two fixed starts, whatever the root key."""
    return jax.random.key(1), jax.random.key(2)
