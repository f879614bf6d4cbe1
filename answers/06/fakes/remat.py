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


def keep_up_offload_dots__offload_every_dot(prim, *args, **params):
    """OFFLOAD_DOTS alone: "up" is offloaded too."""
    return OFFLOAD_DOTS(prim, *args, **params)


def keep_up_offload_dots__save_up_only(prim, *args, **params):
    """SAVE_UP alone: nothing is offloaded."""
    return SAVE_UP(prim, *args, **params)


def keep_up_offload_dots__offload_up_by_name(prim, *args, **params):
    """Chapter 03's policy: "up" offloaded by name, the other dots recomputed."""
    return jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=["up"],
        offload_src="device",
        offload_dst="pinned_host",
    )(prim, *args, **params)


def keep_up_offload_dots__save_every_dot(prim, *args, **params):
    """Keeps "up" and every other dot on the device: nothing moves."""
    return SAVE_UP(prim, *args, **params) or jax.checkpoint_policies.dots_saveable(
        prim, *args, **params
    )
