"""Cheap fakes of chapter 06's test_nnx_end_to_end.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def fine_tune_step__wrt_only(model, opt, x, y):
    """Differentiates every parameter and lets the optimizer's wrt drop the backbone's gradient."""
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    opt.update(model, grads)
    return loss


def fine_tune_step__no_update(model, opt, x, y):
    """Takes the head's gradient but never applies it."""
    loss, _ = nnx.value_and_grad(
        lambda m: jnp.mean((m(x) - y) ** 2), argnums=nnx.DiffState(0, HEAD)
    )(model)
    return loss


def linear_from_haiku__fresh(params):
    """A new nnx.Linear of the right shape that keeps its own random kernel: nothing copied."""
    w = params["linear"]["w"]
    return nnx.Linear(*w.shape, rngs=nnx.Rngs(0))


def linear_from_haiku__kernel_only(params):
    """Copies w but leaves NNX's zero bias in place of Haiku's b."""
    w = params["linear"]["w"]
    layer = nnx.Linear(*w.shape, rngs=nnx.Rngs(0))
    layer.kernel[...] = w
    return layer
