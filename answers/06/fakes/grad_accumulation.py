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


def token_mean__multiply_by_the_mask(losses, mask):
    """losses * mask: saved on CPU for the boolean mask (XLA's select rewrite), inf · 0 = NaN
    for the 0/1 float mask."""
    return jnp.sum(losses * mask) / jnp.sum(mask)


def token_mean__mean_over_every_position(losses, mask):
    """Zeroes the padding but divides by every position, padded ones included."""
    return jnp.mean(jnp.where(mask, losses, 0.0))


def token_weighted_grad__mean_of_means(w, x, y, mask, micro):
    """Averages the micro-batches' token-mean gradients: a mean of means."""
    xs, ys, masks = (a.reshape(micro, -1, *a.shape[1:]) for a in (x, y, mask))

    def add_one(total, batch):
        xb, yb, mb = batch

        def token_mean_loss(w):
            return jnp.sum(jnp.where(mb, _token_losses(w, xb, yb), 0.0)) / jnp.sum(mb)

        return total + jax.grad(token_mean_loss)(w), None

    total, _ = jax.lax.scan(add_one, jnp.zeros_like(w), (xs, ys, masks))
    return total / micro


def token_weighted_grad__every_position_counts(w, x, y, mask, micro):
    """Sums only the real tokens' losses but divides by every position, padding included."""
    xs, ys, masks = (a.reshape(micro, -1, *a.shape[1:]) for a in (x, y, mask))

    def add_one(total, batch):
        xb, yb, mb = batch
        return total + jax.grad(lambda w: jnp.sum(jnp.where(mb, _token_losses(w, xb, yb), 0.0)))(
            w
        ), None

    total, _ = jax.lax.scan(add_one, jnp.zeros_like(w), (xs, ys, masks))
    return total / mask.size


def token_weighted_grad__python_loop(w, x, y, mask, micro):
    """Right numbers from a Python loop: every micro-batch unrolled into the program."""
    size = x.shape[0] // micro
    grad_sum, tokens = jnp.zeros_like(w), 0
    for i in range(micro):
        part = slice(i * size, (i + 1) * size)
        xb, yb, mb = x[part], y[part], mask[part]
        grad_sum = grad_sum + jax.grad(
            lambda w, xb=xb, yb=yb, mb=mb: jnp.sum(jnp.where(mb, _token_losses(w, xb, yb), 0.0))
        )(w)
        tokens = tokens + jnp.sum(mb)
    return grad_sum / tokens
