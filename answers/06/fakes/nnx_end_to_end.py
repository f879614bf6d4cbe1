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
