"""Cheap fakes of chapter 03's test_fsdp.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def fsdp_spec__only_axis_0(shape):
    """Looks at axis 0 only: (10, 16) stays whole instead of split along its second axis."""
    return P("fsdp") if shape and shape[0] % N == 0 else P()


def fsdp_loss__gather_the_batch_too(params, x, y):
    """Gathers the batch as well and computes the whole loss on every device: no data parallelism."""
    full = {
        name: lax.all_gather(block, "fsdp", tiled=True) if MODEL_SPECS[name] == P("fsdp") else block
        for name, block in params.items()
    }
    x, y = (lax.all_gather(a, "fsdp", tiled=True) for a in (x, y))
    return lax.pmean(loss(full, x, y), "fsdp")


def zero3_loss__no_checkpoint(params, x, y):
    """Gathers each weight once, as fsdp_loss does: without jax.checkpoint nothing is gathered again."""
    full = {
        name: lax.all_gather(block, "fsdp", tiled=True) if MODEL_SPECS[name] == P("fsdp") else block
        for name, block in params.items()
    }
    return lax.pmean(loss(full, x, y), "fsdp")


def zero3_loss__calls_fsdp_loss(params, x, y):
    """Delegates to the fsdp_loss written before: right values, no jax.checkpoint around a layer."""
    return fsdp_loss(params, x, y)


def fsdp_spec__the_asserted_shapes(shape):
    """A table of the shapes the koan asks about and the model's own: the asserts' constants."""
    table = {
        (64, 96): P("fsdp"),
        (10, 16): P(None, "fsdp"),
        (3, 5, 24): P(None, None, "fsdp"),
        (96,): P("fsdp"),
        (96, 10): P("fsdp"),
    }
    return table.get(tuple(shape), P())
