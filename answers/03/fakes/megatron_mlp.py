"""Cheap fakes of chapter 03's test_megatron_mlp.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def megatron_mlp__gather_the_weights(x, w1_block, w2_block):
    """Gathers W1 and W2 whole and runs the unsharded model: no tensor parallelism."""
    w1 = lax.all_gather(w1_block, "m", axis=1, tiled=True)
    w2 = lax.all_gather(w2_block, "m", axis=0, tiled=True)
    return jax.nn.gelu(x @ w1) @ w2


def megatron_mlp__gather_the_hidden_layer(x, w1_block, w2_block):
    """Column-parallel first layer, then gathers the hidden layer and W2: two collectives."""
    hidden = lax.all_gather(jax.nn.gelu(x @ w1_block), "m", axis=1, tiled=True)
    return hidden @ lax.all_gather(w2_block, "m", axis=0, tiled=True)


def dp_tp_loss__gather_the_weights(params, x, y):
    """Gathers the whole weights along "model" instead of splitting the forward pass Megatron's way."""
    w1 = lax.all_gather(params["w1"], "model", axis=1, tiled=True)
    w2 = lax.all_gather(params["w2"], "model", axis=0, tiled=True)
    return lax.pmean(jnp.mean((jax.nn.gelu(x @ w1) @ w2 - y) ** 2), "data")


def dp_tp_loss__no_data_average(params, x, y):
    """Megatron along "model" but the loss of this data group only: never averaged along "data"."""
    out = lax.psum(jax.nn.gelu(x @ params["w1"]) @ params["w2"], "model")
    return jnp.mean((out - y) ** 2)
