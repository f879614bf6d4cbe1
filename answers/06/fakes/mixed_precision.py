"""Cheap fakes of chapter 06's test_mixed_precision.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def mixed_precision_layer__bf16_parameters(rngs):
    """Everything in bf16: the master weights lose their fp32 precision."""
    return nnx.Linear(16, 8, param_dtype=jnp.bfloat16, rngs=rngs)


def mixed_precision_layer__fp32_compute(rngs):
    """A plain fp32 layer: the forward pass never runs in bf16."""
    return nnx.Linear(16, 8, rngs=rngs)
