"""Cheap fakes of chapter 10's test_key_patterns.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def step_noise__shift_one_draw(base_key, step):
    """Skips fold_in: one draw from the base key, shifted by the step."""
    return jax.random.normal(base_key, (3,)) + step
