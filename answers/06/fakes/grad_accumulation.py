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


def reduce_once__plain_jit_scan(mesh, w, xs, ys):
    """The scan without shard_map: XLA all-reduces each micro-batch's gradient inside the loop."""

    def add_one(total, batch):
        return total + jax.grad(_matrix_loss)(w, *batch), None

    total, _ = jax.lax.scan(add_one, jnp.zeros_like(w), (xs, ys))
    return total / xs.shape[0]


def reduce_once__scatter_every_micro_step(mesh, w, xs, ys):
    """shard_map, but psum_scatter inside the loop body: one reduce-scatter per micro-batch."""

    def local(w_block, xs, ys):
        w_full = jax.lax.all_gather(w_block, "data", tiled=True)

        def add_one(total, batch):
            g = jax.grad(_matrix_loss)(w_full, *batch)
            return total + jax.lax.psum_scatter(g, "data", tiled=True), None

        total, _ = jax.lax.scan(add_one, jnp.zeros_like(w_block), (xs, ys))
        return total / (xs.shape[0] * jax.lax.axis_size("data"))

    rows = P(None, "data")
    return jax.shard_map(local, mesh=mesh, in_specs=(P("data"), rows, rows), out_specs=P("data"))(w, xs, ys)


def reduce_once__psum_then_slice(mesh, w, xs, ys):
    """One psum after the loop, then each device slices its rows: an all-reduce, not a reduce-scatter."""

    def local(w_block, xs, ys):
        w_full = jax.lax.all_gather(w_block, "data", tiled=True)

        def add_one(total, batch):
            return total + jax.grad(_matrix_loss)(w_full, *batch), None

        total, _ = jax.lax.scan(add_one, jnp.zeros_like(w_full), (xs, ys))
        full = jax.lax.psum(total, "data") / (xs.shape[0] * jax.lax.axis_size("data"))
        rows_per = w_block.shape[0]
        return jax.lax.dynamic_slice_in_dim(full, jax.lax.axis_index("data") * rows_per, rows_per)

    rows = P(None, "data")
    return jax.shard_map(local, mesh=mesh, in_specs=(P("data"), rows, rows), out_specs=P("data"))(w, xs, ys)
