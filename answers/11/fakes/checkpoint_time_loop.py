"""Cheap fakes of chapter 11's test_checkpoint_time_loop.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def segmented_simulate__body_checkpoint(u0, k):
    """jax.checkpoint on the one-step body: one state per step is still stored."""
    return lax.scan(jax.checkpoint(lambda u, _: (step(u, k), None)), u0, length=STEPS)[0]


def segmented_simulate__segments_without_checkpoint(u0, k):
    """Nested scans without jax.checkpoint: every step's intermediates are stored."""

    def segment(u, _):
        return lax.scan(lambda u, _: (step(u, k), None), u, length=SEGMENT)[0], None

    return lax.scan(segment, u0, length=STEPS // SEGMENT)[0]


def segmented_simulate__few_long_segments(u0, k):
    """Four segments of 256 steps: far from the square root."""

    def segment(u, _):
        return lax.scan(lambda u, _: (step(u, k), None), u, length=STEPS // 4)[0], None

    return lax.scan(jax.checkpoint(segment), u0, length=4)[0]


def segmented_simulate__inner_steps_checkpointed(u0, k):
    """Checkpoints each inner step, not the segment: the outer scan stores every state."""

    def segment(u, _):
        inner = jax.checkpoint(lambda u, _: (step(u, k), None))
        return lax.scan(inner, u, length=SEGMENT)[0], None

    return lax.scan(segment, u0, length=STEPS // SEGMENT)[0]
