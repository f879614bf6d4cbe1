"""Cheap fakes of chapter 02's test_capstone_slow_program.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def pad_batch__padding_counts_as_data(x, y, size=BATCH):
    """Pads with zeros but marks every row, padding included, as real."""
    n = len(y)
    x_pad = np.zeros((size, x.shape[1]), np.float32)
    y_pad = np.zeros(size, np.float32)
    x_pad[:n], y_pad[:n] = x, y
    return x_pad, y_pad, np.ones(size, np.float32)


def fast_step__mean_over_the_padded_batch(w, x, y, mask, lr):
    """Ignores the mask: the mean runs over the padding too."""
    return w - lr * jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)


def fast_train__no_padding(w, batches, lrs):
    """Calls fast_step on the batches as they are: every new size compiles again."""
    for (x, y), lr in zip(batches, lrs, strict=True):
        w = fast_step(w, x, y, np.ones(len(y), np.float32), lr)
    return w


def fast_evaluate__python_loop(w, xs, ys):
    """slow_evaluate again: a Python loop, unrolled into the program."""
    total = 0.0
    for i in range(xs.shape[0]):
        total = total + loss(w, xs[i], ys[i])
    return total / xs.shape[0]


def fast_train__numpy_reference(w, batches, lrs):
    """Delegates to the NumPy reference: right values, no fast_step, no compile at all."""
    return numpy_sgd(w, batches, lrs)


def fast_evaluate__calls_slow_evaluate(w, xs, ys):
    """Delegates to slow_evaluate: the outer jaxpr is one call, the unrolled loop sits inside it."""
    return slow_evaluate(w, xs, ys)
