"""Cheap fakes of chapter 01's test_segments.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def segment_softmax__no_max_subtraction(logits, segment_ids, num_segments):
    """exp(logits) directly: exp(1000) overflows."""
    e = jnp.exp(logits)
    return e / jax.ops.segment_sum(e, segment_ids, num_segments=num_segments)[segment_ids]


def segment_softmax__global_max(logits, segment_ids, num_segments):
    """Subtracts the maximum of all logits, not each segment's own."""
    e = jnp.exp(logits - logits.max())
    return e / jax.ops.segment_sum(e, segment_ids, num_segments=num_segments)[segment_ids]
