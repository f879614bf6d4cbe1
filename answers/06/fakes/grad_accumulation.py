"""Cheap fakes of chapter 06's test_grad_accumulation.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def accumulated_grad__big_batch_gradient(w, x, y, micro):
    """The gradient of the whole batch at once: right numbers, no accumulation at all."""
    return jax.grad(_loss)(w, x, y)


def accumulated_grad__python_loop(w, x, y, micro):
    """A Python loop over the micro-batches: unrolled into the program instead of one scan body."""
    size = x.shape[0] // micro
    total = jnp.zeros_like(w)
    for i in range(micro):
        total = total + jax.grad(_loss)(
            w, x[i * size : (i + 1) * size], y[i * size : (i + 1) * size]
        )
    return total / micro


# Hole reported to the lead: token_mean as jnp.sum(losses * mask) / jnp.sum(mask) passes
# test_token_weighted_loss_for_padded_batches on the CPU: XLA rewrites a multiply by a converted
# bool mask into a select, so inf · False comes out 0, not NaN, under jit.


def token_mean__mean_over_every_position(losses, mask):
    """Zeroes the padding but divides by every position, padded ones included."""
    return jnp.mean(jnp.where(mask, losses, 0.0))
