"""Cheap fakes of chapter 03's test_pmap_to_modern.py TODO (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def accumulated_grads__pmean_inside_the_loop(p, xb, yb):
    """The given contrast: differentiating the invariant p sums across devices every microbatch."""
    xs, ys = xb.reshape(MICROBATCHES, -1, 4), yb.reshape(MICROBATCHES, -1, 2)

    def step(total, batch):
        grads = jax.grad(lambda q: lax.pmean(linear_loss(q, *batch), "batch"))(p)
        return jax.tree.map(jnp.add, total, grads), None

    total, _ = lax.scan(step, jax.tree.map(jnp.zeros_like, p), (xs, ys))
    return jax.tree.map(lambda g: g / MICROBATCHES, total)


def accumulated_grads__no_microbatches(p, xb, yb):
    """The right gradient from the whole block at once: no loop, so nothing is accumulated."""
    local = lax.pcast(p, "batch", to="varying")
    return jax.tree.map(lambda g: lax.pmean(g, "batch"), jax.grad(linear_loss)(local, xb, yb))


def accumulated_grads__python_loop(p, xb, yb):
    """Microbatches unrolled by a Python loop: no while loop, the program grows with M."""
    local = lax.pcast(p, "batch", to="varying")
    xs, ys = xb.reshape(MICROBATCHES, -1, 4), yb.reshape(MICROBATCHES, -1, 2)
    total = jax.tree.map(jnp.zeros_like, local)
    for i in range(MICROBATCHES):
        total = jax.tree.map(jnp.add, total, jax.grad(linear_loss)(local, xs[i], ys[i]))
    return jax.tree.map(lambda g: lax.pmean(g / MICROBATCHES, "batch"), total)


def accumulated_grads__delegates_to_the_contrast(p, xb, yb):
    """Returns the given contrast, which all-reduces on every microbatch."""
    return pmean_every_microbatch(p, xb, yb)
