"""Cheap fakes of chapter 01's test_masking.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def masked_mean__multiply_by_the_mask(x, mask, axis=-1):
    """x * mask: NaN · 0 is still NaN, and an empty row divides by zero."""
    return jnp.sum(x * mask, axis=axis) / jnp.sum(mask, axis=axis)


def masked_mean__jnp_mean_where(x, mask, axis=-1):
    """jnp.mean(where=): right for rows with valid entries, NaN for an empty row."""
    return jnp.mean(x, axis=axis, where=mask)


def safe_norm__library_norm(x):
    """jnp.linalg.norm: NaN gradient at the zero vector."""
    return jnp.linalg.norm(x)


def safe_norm__single_where(x):
    """One where hides the value, not sqrt's inf derivative at 0."""
    squared = jnp.sum(x * x)
    return jnp.where(squared > 0, jnp.sqrt(squared), 0.0)


def safe_norm__eps_inside_the_sqrt(x):
    """sqrt(sum x² + eps): finite everywhere, but sqrt(eps) instead of 0 at zero."""
    return jnp.sqrt(jnp.sum(x * x) + 1e-12)


def safe_norm__clamped_below(x):
    """sqrt(max(sum x², tiny)): a finite gradient, but the value at zero is not 0."""
    return jnp.sqrt(jnp.maximum(jnp.sum(x * x), jnp.finfo(x.dtype).tiny))


def safe_norm__optax_safe_norm(x):
    """The library: optax.safe_norm with min_norm 0, instead of the double where."""
    import optax

    return optax.safe_norm(x, 0.0)


def masked_mean__mean_where_nan_to_num(x, mask, axis=-1):
    """jnp.mean(where=) with the empty row's NaN replaced afterwards."""
    return jnp.nan_to_num(jnp.mean(x, axis=axis, where=mask))


def masked_mean__multiply_with_a_safe_count(x, mask, axis=-1):
    """x * mask with the empty row handled: right for a boolean mask on CPU (XLA rewrites the
    multiply into a select), NaN for the 0/1 float mask."""
    count = jnp.sum(mask, axis=axis)
    safe = jnp.where(count > 0, count, 1)
    return jnp.where(count > 0, jnp.sum(x * mask, axis=axis) / safe, 0.0)
