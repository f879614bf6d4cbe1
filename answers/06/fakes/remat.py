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


def offload_policy__save_on_device():
    """Saves "up" in device memory: nothing is offloaded."""
    return jax.checkpoint_policies.save_only_these_names("up")


def offload_policy__offload_every_dot():
    """Offloads every matmul result, not only the tagged activation."""
    return jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host")


def offload_policy__recompute_everything():
    """Saves nothing at all: every activation is recomputed."""
    return jax.checkpoint_policies.nothing_saveable


def offload_policy__unpinned_host():
    """Names the other host memory kind."""
    return jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=["up"],
        offload_src="device",
        offload_dst="unpinned_host",
    )
