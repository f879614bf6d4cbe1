"""Cheap fakes of chapter 04's test_custom_transforms.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def recompute_apply__plain_call(f, x):
    """No rule at all: plain autodiff keeps tanh's derivative and builds no custom_vjp_call."""
    return f(x)


def recompute_apply__checkpoint(f, x):
    """jax.checkpoint recomputes too, but it is no custom_vjp: the lesson's hoisting never happens."""
    return jax.checkpoint(f)(x)


def recompute_apply__closure_passed_through(f, x):
    """The closure handed to the rule as it is: w's tracer leaks under grad by w."""
    return _recompute(lambda x, *consts: f(x), x)


def recompute_apply__converted_but_called_directly(f, x):
    """closure_convert, then the converted function called without the custom rule."""
    closed, consts = jax.closure_convert(f, x)
    return closed(x, *consts)


def recompute_apply__consts_stopped(f, x):
    """Hoists the consts but stops their gradient: w gets a zero cotangent."""
    closed, consts = jax.closure_convert(f, x)
    return _recompute(closed, x, *[jax.lax.stop_gradient(c) for c in consts])


def sqdist_rule__default_batching(axis_size, in_batched, xs, ys):
    """jax.vmap of the reference in every case: the [B, N, D] difference of the default batching."""
    in_axes = tuple(0 if b else None for b in in_batched)
    return jax.vmap(sqdist_reference, in_axes=in_axes)(xs, ys), True


def sqdist_rule__broadcast_difference(axis_size, in_batched, xs, ys):
    """Broadcasts by hand: the same [B, N, D] intermediate, with no matrix product."""
    x_batched, ys_batched = in_batched
    xs = xs[:, None, :] if x_batched else xs
    if ys_batched and x_batched:
        return jnp.sum((xs - ys) ** 2, axis=-1), True
    if ys_batched:
        return jnp.sum((xs[None, None, :] - ys) ** 2, axis=-1), True
    return jnp.sum((xs - ys[None]) ** 2, axis=-1), True


def sqdist_rule__expansion_everywhere(axis_size, in_batched, xs, ys):
    """The expansion whatever is batched: wrong shapes once ys carries a batch axis."""
    return jnp.sum(xs**2, -1)[:, None] - 2 * xs @ ys.T + jnp.sum(ys**2, -1)[None, :], True


def sqdist_rule__loop_over_batch(axis_size, in_batched, xs, ys):
    """A Python loop over the batch: one small computation per query, the rule unrolled."""
    x_batched, ys_batched = in_batched
    rows = [
        sqdist_reference(xs[i] if x_batched else xs, ys[i] if ys_batched else ys)
        for i in range(axis_size)
    ]
    return jnp.stack(rows), True
