"""Cheap fakes of chapter 01's test_masking.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def masked_mean__multiply_by_the_mask(x, mask, axis=-1):
    """x * mask: NaN · 0 is still NaN, and an empty row divides by zero."""
    return jnp.sum(x * mask, axis=axis) / jnp.sum(mask, axis=axis)


def masked_mean__jnp_mean_where(x, mask, axis=-1):
    """jnp.mean(where=): right for rows with valid entries, NaN for an empty row."""
    return jnp.mean(x, axis=axis, where=mask)
