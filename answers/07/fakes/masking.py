"""Cheap fakes of chapter 07's test_masking.py TODOs (parsed by jaxkoans.authoring.mutate, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def masked_sum_kernel__local_index_only(x_ref, o_ref, *, n):
    """Skips pl.program_id: compares the in-block index with n, so no block is ever masked."""
    idx = jax.lax.broadcasted_iota(jnp.int32, (BLOCK,), 0)
    o_ref[...] = jnp.full((1,), jnp.sum(jnp.where(idx < n, x_ref[...], 0.0)))


def masked_sum_kernel__multiplies_by_the_mask(x_ref, o_ref, *, n):
    """Multiplies by the mask instead of selecting: NaN * 0 is NaN on hardware."""
    idx = pl.program_id(0) * BLOCK + jax.lax.broadcasted_iota(jnp.int32, (BLOCK,), 0)
    o_ref[...] = jnp.full((1,), jnp.sum(x_ref[...] * (idx < n)))


def masked_sum_kernel__zero_the_nans(x_ref, o_ref, *, n):
    """Relies on the interpreter's NaN padding: drops every NaN instead of masking by index."""
    v = x_ref[...]
    o_ref[...] = jnp.full((1,), jnp.sum(jnp.where(jnp.isnan(v), 0.0, v)))
