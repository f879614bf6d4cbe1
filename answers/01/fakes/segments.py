"""Cheap fakes of chapter 01's test_segments.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def segment_softmax__no_max_subtraction(logits, segment_ids, num_segments):
    """exp(logits) directly: exp(1000) overflows."""
    e = jnp.exp(logits)
    return e / jax.ops.segment_sum(e, segment_ids, num_segments=num_segments)[segment_ids]


def segment_softmax__global_max(logits, segment_ids, num_segments):
    """Subtracts the maximum of all logits, not each segment's own."""
    e = jnp.exp(logits - logits.max())
    return e / jax.ops.segment_sum(e, segment_ids, num_segments=num_segments)[segment_ids]


def graph_mean_pool__divides_by_zero(node_features, graph_ids, num_graphs):
    """Sums over counts as they are: an empty graph is 0 / 0 = NaN."""
    sums = jax.ops.segment_sum(node_features, graph_ids, num_segments=num_graphs)
    counts = jax.ops.segment_sum(jnp.ones(graph_ids.shape), graph_ids, num_segments=num_graphs)
    return sums / counts[:, None]


def graph_mean_pool__clipped_ids(node_features, graph_ids, num_graphs):
    """Clips the ids into range: the padding nodes join the last graph."""
    ids = jnp.clip(graph_ids, 0, num_graphs - 1)
    sums = jax.ops.segment_sum(node_features, ids, num_segments=num_graphs)
    counts = jax.ops.segment_sum(jnp.ones(ids.shape), ids, num_segments=num_graphs)
    return sums / jnp.maximum(counts, 1.0)[:, None]


def graph_mean_pool__one_hot_matmul(node_features, graph_ids, num_graphs):
    """A dense one-hot matmul, the padding zeroed by where first: right values, N x G memory."""
    one_hot = jax.nn.one_hot(graph_ids, num_graphs)  # an out-of-range id gives a zero row
    clean = jnp.where(one_hot.sum(axis=1, keepdims=True) > 0, node_features, 0.0)
    return (one_hot.T @ clean) / jnp.maximum(one_hot.sum(axis=0), 1.0)[:, None]


def graph_mean_pool__segment_mean_of_everything(node_features, graph_ids, num_graphs):
    """Counts every node, padding included, in one global denominator."""
    sums = jax.ops.segment_sum(node_features, graph_ids, num_segments=num_graphs)
    return sums / graph_ids.shape[0]


def segment_softmax__one_hot_softmax(logits, segment_ids, num_segments):
    """A dense [segments, N] one-hot and jax.nn.softmax(where=): no segment ops at all."""
    one_hot = segment_ids[None, :] == jnp.arange(num_segments)[:, None]
    p = jax.nn.softmax(jnp.where(one_hot, logits[None, :], -jnp.inf), axis=1, where=one_hot)
    return jnp.sum(jnp.where(one_hot, p, 0.0), axis=0)


def graph_mean_pool__one_hot_where(node_features, graph_ids, num_graphs):
    """A dense [N, G, F] selection by where (no matmul, no NaN·0), then sums: no segment ops."""
    one_hot = graph_ids[:, None] == jnp.arange(num_graphs)[None, :]
    sums = jnp.where(one_hot[:, :, None], node_features[:, None, :], 0.0).sum(axis=0)
    return sums / jnp.maximum(one_hot.sum(axis=0), 1)[:, None]


def top2_moe__dense(x, router, experts):
    """Every token through every expert ([T, E, H]), then the top two picked."""
    top, expert = jax.lax.top_k(x @ router, 2)
    every = jnp.einsum("td,edh->teh", x, experts)
    picked = jnp.take_along_axis(every, expert[..., None], axis=1)
    return jnp.sum(picked * jax.nn.softmax(top, axis=-1)[..., None], axis=1)


def top2_moe__masked_loop(x, router, experts):
    """A Python loop over the experts, each applied to all tokens and masked: no ragged_dot."""
    top, expert = jax.lax.top_k(x @ router, 2)
    gates = jax.nn.softmax(top, axis=-1)
    out = 0.0
    for g in range(experts.shape[0]):
        weight = jnp.sum(jnp.where(expert == g, gates, 0.0), axis=-1, keepdims=True)
        out = out + weight * (x @ experts[g])
    return out


def top2_moe__unsorted_groups(x, router, experts):
    """ragged_dot on the rows in token order: the groups are not contiguous, rows meet wrong experts."""
    t, e = x.shape[0], experts.shape[0]
    top, expert = jax.lax.top_k(x @ router, 2)
    gates = jax.nn.softmax(top, axis=-1)
    sizes = jnp.bincount(expert.reshape(-1), length=e).astype(jnp.int32)
    out = jax.lax.ragged_dot(jnp.repeat(x, 2, axis=0), experts, sizes).reshape(t, 2, -1)
    return jnp.sum(out * gates[..., None], axis=1)


def top2_moe__argsort_routing(x, router, experts):
    """The two best experts from a full argsort of the logits instead of top_k."""
    t, e = x.shape[0], experts.shape[0]
    logits = x @ router
    expert = jnp.argsort(-logits, axis=-1)[:, :2]
    top = jnp.take_along_axis(logits, expert, axis=-1)
    gates = jax.nn.softmax(top, axis=-1)
    flat = expert.reshape(-1)
    order = jnp.argsort(flat, stable=True)
    sizes = jnp.bincount(flat, length=e).astype(jnp.int32)
    out = jax.lax.ragged_dot(jnp.repeat(x, 2, axis=0)[order], experts, sizes)
    pairs = jnp.zeros_like(out).at[order].set(out).reshape(t, 2, -1)
    return jnp.sum(pairs * gates[..., None], axis=1)


def top2_moe__top1_only(x, router, experts):
    """Only the best expert, with gate 1."""
    e = experts.shape[0]
    _, expert = jax.lax.top_k(x @ router, 1)
    flat = expert.reshape(-1)
    order = jnp.argsort(flat, stable=True)
    sizes = jnp.bincount(flat, length=e).astype(jnp.int32)
    out = jax.lax.ragged_dot(x[order], experts, sizes)
    return jnp.zeros_like(out).at[order].set(out)


def sort_by_segment_then_score__lexsort_and_gather(segment_ids, scores, payload):
    """jnp.lexsort for the order, then one gather per column."""
    order = jnp.lexsort((-scores, segment_ids))
    return segment_ids[order], scores[order], payload[order]


def sort_by_segment_then_score__two_stable_sorts(segment_ids, scores, payload):
    """Two stable sorts, by score first, then by segment: right order, two sort equations."""
    negated, ids, payload = jax.lax.sort((-scores, segment_ids, payload), num_keys=1)
    ids, negated, payload = jax.lax.sort((ids, negated, payload), num_keys=1)
    return ids, -negated, payload


def sort_by_segment_then_score__ascending_scores(segment_ids, scores, payload):
    """Two keys, but the scores ascending within a segment."""
    return jax.lax.sort((segment_ids, scores, payload), num_keys=2)


def sort_by_segment_then_score__one_key(segment_ids, scores, payload):
    """Only the segment id as key: within a segment the rows keep their input order."""
    return jax.lax.sort((segment_ids, scores, payload), num_keys=1)


def sort_by_segment_then_score__composite_key(segment_ids, scores, payload):
    """One float key id·10 − score, the columns gathered by its argsort."""
    order = jnp.argsort(segment_ids * 10.0 - scores)
    return segment_ids[order], scores[order], payload[order]
