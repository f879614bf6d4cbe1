"""Cheap fakes of chapter 03's test_placement.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def padded_mse__mean_over_the_padded_batch(w, x, y, valid):
    """A plain mean: the padded rows count, so it divides by the padded batch size."""
    return jnp.mean((x @ w - y) ** 2)


def padded_mse__masked_but_divided_by_the_padded_size(w, x, y, valid):
    """Masks the padding out of the sum but still divides by every row, padded ones included."""
    return jnp.mean(jnp.where(valid, (x @ w - y) ** 2, 0.0))
