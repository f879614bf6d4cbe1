"""Cheap fakes of chapter 06's test_remat.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def scan_blocks__unrolled_loop(blocks, x):
    """The given Python loop over the layers: no scan, no remat, a program as deep as the model."""
    return unrolled(blocks, x)


def scan_blocks__scan_without_remat(blocks, x):
    """nnx.scan over the layers, but every block keeps its activations for the backward pass."""

    def body(block, x):
        return block(x)

    return nnx.scan(body, in_axes=(0, nnx.Carry), out_axes=nnx.Carry)(blocks, x)
