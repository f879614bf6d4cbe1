"""Cheap fakes of chapter 03's test_expert_parallel.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def moe_layer__all_gather_the_experts(x, w_gate, w_block):
    """Every device gathers all N experts and applies each token's own: no token moves."""
    expert, gate, _, kept = route(x, w_gate)
    w_all = lax.all_gather(w_block[0], "e")
    y = jnp.tanh(jnp.einsum("td,tdf->tf", x, w_all[expert]))
    return jnp.where(kept[:, None], gate[:, None] * y, 0.0)


def moe_layer__all_gather_the_tokens(x, w_gate, w_block):
    """Every device gathers all tokens, applies its expert to those routed to it, psum_scatter back."""
    e = lax.axis_index("e")
    xs = lax.all_gather(x, "e")
    expert, gate, _, kept = jax.vmap(lambda b: route(b, w_gate))(xs)
    mine = (expert == e) & kept
    y = jnp.where(mine[..., None], gate[..., None] * jnp.tanh(xs @ w_block[0]), 0.0)
    return lax.psum_scatter(y, "e", scatter_dimension=0, tiled=True)[0]


def moe_layer__no_capacity(x, w_gate, w_block):
    """Sends every token (a buffer of TOKENS slots per expert): nothing dropped, bigger all-to-alls."""
    expert, gate, slot, _ = route(x, w_gate)
    sent = jnp.zeros((N, x.shape[0], x.shape[1]), x.dtype).at[expert, slot].set(x)
    arrived = lax.all_to_all(sent, "e", 0, 0, tiled=True)
    back = lax.all_to_all(jnp.tanh(arrived @ w_block[0]), "e", 0, 0, tiled=True)
    return gate[:, None] * back[expert, slot]


def moe_layer__no_gate(x, w_gate, w_block):
    """Dispatch and combine right, but the expert's output is not weighted by the gate."""
    expert, _, slot, kept = route(x, w_gate)
    sent = jnp.zeros((N, CAPACITY, x.shape[1]), x.dtype).at[expert, slot].set(x, mode="drop")
    arrived = lax.all_to_all(sent, "e", 0, 0, tiled=True)
    back = lax.all_to_all(jnp.tanh(arrived @ w_block[0]), "e", 0, 0, tiled=True)
    return jnp.where(kept[:, None], back[expert, slot], 0.0)


def moe_layer__own_expert_only(x, w_gate, w_block):
    """No communication: every token goes through this device's expert."""
    _, gate, _, kept = route(x, w_gate)
    return jnp.where(kept[:, None], gate[:, None] * jnp.tanh(x @ w_block[0]), 0.0)


def moe_layer__dropped_tokens_pass_through(x, w_gate, w_block):
    """Dropped tokens keep their input instead of 0 (the residual belongs outside the layer)."""
    expert, gate, slot, kept = route(x, w_gate)
    sent = jnp.zeros((N, CAPACITY, x.shape[1]), x.dtype).at[expert, slot].set(x, mode="drop")
    arrived = lax.all_to_all(sent, "e", 0, 0, tiled=True)
    back = lax.all_to_all(jnp.tanh(arrived @ w_block[0]), "e", 0, 0, tiled=True)
    return jnp.where(kept[:, None], gate[:, None] * back[expert, slot], x)


def moe_layer__whole_buffer_then_mask(x, w_gate, w_block):
    """A slot for every token in the all-to-alls (TOKENS per expert), capacity applied only at the combine."""
    expert, gate, slot, kept = route(x, w_gate)
    sent = jnp.zeros((N, x.shape[0], x.shape[1]), x.dtype).at[expert, slot].set(x)
    arrived = lax.all_to_all(sent, "e", 0, 0, tiled=True)
    back = lax.all_to_all(jnp.tanh(arrived @ w_block[0]), "e", 0, 0, tiled=True)
    return jnp.where(kept[:, None], gate[:, None] * back[expert, slot], 0.0)


def moe_layer__psum_of_a_global_buffer(x, w_gate, w_block):
    """Every device writes its buffer into its row of an (N, N, CAPACITY, D) array and psums it."""
    me = lax.axis_index("e")
    expert, gate, slot, kept = route(x, w_gate)
    sent = jnp.zeros((N, CAPACITY, x.shape[1]), x.dtype).at[expert, slot].set(x, mode="drop")
    everyone = lax.psum(jnp.zeros((N, *sent.shape), x.dtype).at[me].set(sent), "e")
    done = jnp.tanh(everyone[:, me] @ w_block[0])
    back = lax.psum(jnp.zeros((N, *done.shape), x.dtype).at[me].set(done), "e")[:, me]
    return jnp.where(kept[:, None], gate[:, None] * back[expert, slot], 0.0)
