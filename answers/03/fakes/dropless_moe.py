"""Cheap fakes of chapter 03's test_dropless_moe.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def grouped_experts__per_row_weights(tokens, local_expert, w_local):
    """Each row takes a copy of its expert's weights: (R, D, D), no ragged_dot."""
    w = w_local[jnp.minimum(local_expert, w_local.shape[0] - 1)]
    y = jnp.einsum("td,tdf->tf", tokens, w)
    return jnp.tanh(jnp.where((local_expert < w_local.shape[0])[:, None], y, 0.0))


def grouped_experts__every_expert_then_select(tokens, local_expert, w_local):
    """Every expert multiplies every row (R, LOCAL, D), then each row picks its own."""
    y = jnp.einsum("td,edf->tef", tokens, w_local)
    pick = jax.nn.one_hot(local_expert, w_local.shape[0], dtype=y.dtype)
    return jnp.tanh(jnp.einsum("tef,te->tf", y, pick))


def grouped_experts__masked_loop_over_experts(tokens, local_expert, w_local):
    """One masked dense dot per expert, added up: right values, no ragged_dot."""
    out = jnp.zeros((tokens.shape[0], w_local.shape[2]), tokens.dtype)
    for e in range(w_local.shape[0]):
        out = out + jnp.where((local_expert == e)[:, None], tokens @ w_local[e], 0.0)
    return jnp.tanh(out)


def grouped_experts__unsorted_rows(tokens, local_expert, w_local):
    """ragged_dot on the rows in their original order: the groups cover the wrong rows."""
    sizes = jnp.bincount(local_expert, length=w_local.shape[0])
    return jnp.tanh(lax.ragged_dot(tokens, w_local, sizes))


def grouped_experts__not_put_back(tokens, local_expert, w_local):
    """Sorted and multiplied right, but the rows are returned in sorted order."""
    order = jnp.argsort(local_expert)
    sizes = jnp.bincount(local_expert, length=w_local.shape[0])
    return jnp.tanh(lax.ragged_dot(tokens[order], w_local, sizes))


def grouped_experts__ragged_dot_beside_the_copy(tokens, local_expert, w_local):
    """The per-row copy computes the answer; a ragged_dot sits beside it times zero."""
    order = jnp.argsort(local_expert)
    sizes = jnp.bincount(local_expert, length=w_local.shape[0])
    dead = lax.ragged_dot(tokens[order], w_local, sizes)
    w = w_local[jnp.minimum(local_expert, w_local.shape[0] - 1)]
    y = jnp.where((local_expert < w_local.shape[0])[:, None], jnp.einsum("td,tdf->tf", tokens, w), 0.0)
    return jnp.tanh(y + 0.0 * dead)


def ragged_all_to_all_args__all_gather_counts(send):
    """Gathers the whole (N, N) count matrix and sums the column above this device."""
    counts = lax.all_gather(send, "e")
    me = lax.axis_index("e")
    before = jnp.where(jnp.arange(counts.shape[0])[:, None] < me, counts, 0).sum(axis=0)
    return jnp.cumsum(send) - send, send, before, counts[:, me]


def ragged_all_to_all_args__local_offsets_as_output(send):
    """Uses the sender's own cumulative sums as output_offsets: segments overwrite each other."""
    recv = lax.all_to_all(send, "e", 0, 0, tiled=True)
    starts = jnp.cumsum(send) - send
    return starts, send, starts, recv


def ragged_all_to_all_args__landing_not_sent_back(send):
    """The receiver's landing rows used as the sender's output_offsets without the second all_to_all."""
    recv = lax.all_to_all(send, "e", 0, 0, tiled=True)
    return jnp.cumsum(send) - send, send, jnp.cumsum(recv) - recv, recv


def ragged_all_to_all_args__recv_equals_send(send):
    """Takes recv_sizes to be send: the documented consistency fails."""
    landing = jnp.cumsum(send) - send
    return landing, send, lax.all_to_all(landing, "e", 0, 0, tiled=True), send
