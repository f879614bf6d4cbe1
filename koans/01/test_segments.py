"""01 · 分段归约 jax.ops.segment_* / segment reductions."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import primitives


def segment_softmax(logits, segment_ids, num_segments):
    """按段做 softmax（图注意力、变长集合的 pooling 都用它）：同一段内的 logits 归一化，和为 1。
    - logits [N]，segment_ids [N]（0 ≤ id < num_segments，不一定有序），num_segments 是静态 int。
    - 数值稳定：logits 可达 ±1000，exp 不许溢出（先减去本段的最大值）。
    - 只用 jax.ops.segment_* 和 jnp，不许用 Python 循环遍历段；大约 4 行。
    Softmax within segments (graph attention, pooling over variable-size sets): the logits
    of one segment are normalised to sum to 1.
    - logits [N], segment_ids [N] (0 <= id < num_segments, not necessarily sorted),
      num_segments a static int.
    - Numerically stable: logits reach ±1000 and exp must not overflow (subtract the
      segment's maximum first).
    - Only jax.ops.segment_* and jnp, no Python loop over segments; about 4 lines.
    """
    todo(
        "segment_softmax: segment_max, exp, segment_sum, gather back by id / 段最大值、指数、段求和、按 id 取回"
    )


def test_write_a_segment_softmax():
    """✍️ 实现 segment_softmax：segment_max 求每段的最大值，用 segment_ids 把段的统计量按行取回
    （gather），再用 segment_sum 归一化。这是 GNN 里“每个节点对它的邻居做 softmax”的核心。
    Write segment_softmax: segment_max gives each segment's maximum, indexing with segment_ids
    gathers a segment's statistic back to its rows, and segment_sum normalises. It is the core
    of "every node takes a softmax over its neighbours" in GNNs. The jaxpr holds no
    [segments, N] intermediate (no dense one-hot): nothing bigger than N or num_segments.
    """
    logits = jnp.array([1000.0, 2.0, 999.0, -1000.0, 3.0, 1.0, -998.0, 0.5])
    ids = jnp.array([0, 2, 0, 1, 2, 2, 1, 3])

    def reference(logits, ids, n):
        logits, ids, out = np.asarray(logits, np.float64), np.asarray(ids), np.zeros(len(logits))
        for s in range(n):
            rows = ids == s
            e = np.exp(logits[rows] - logits[rows].max()) if rows.any() else []
            out[rows] = e / np.sum(e)
        return out

    got = jax.jit(segment_softmax, static_argnums=2)(logits, ids, 4)
    np.testing.assert_allclose(got, reference(logits, ids, 4), rtol=1e-5)
    np.testing.assert_allclose(
        jax.ops.segment_sum(got, ids, num_segments=4), [1.0, 1.0, 1.0, 1.0], rtol=1e-6
    )
    tenth = logits / 10  # 段的最大值 100 和 -99.8：照样要减 / maxima 100 and -99.8: shift them too
    got = jax.jit(segment_softmax, static_argnums=2)(tenth, ids, 4)
    np.testing.assert_allclose(got, reference(tenth, ids, 4), rtol=1e-5)

    six = jnp.array([5, 2, 0, 4, 2, 1, 4, 3])  # num_segments is the caller's: six of them
    got = jax.jit(segment_softmax, static_argnums=2)(logits, six, 6)
    np.testing.assert_allclose(got, reference(logits, six, 6), rtol=1e-5)

    small = jnp.array([0.1, -0.3, 0.7, 0.2, -0.5, 0.9])  # also with an empty segment (id 2)
    small_ids = jnp.array([1, 0, 1, 3, 0, 1])
    np.testing.assert_allclose(
        segment_softmax(small, small_ids, 4), reference(small, small_ids, 4), rtol=1e-5
    )

    grads = jax.grad(lambda x: segment_softmax(x, ids, 4)[0])(logits)
    assert np.isfinite(grads).all()
    assert np.count_nonzero(grads) == 2  # softmax row 0 depends only on its own segment

    def sizes(jaxpr):  # the size of every intermediate, nested jaxprs included
        for eqn in jaxpr.eqns:
            yield from (var.aval.size for var in eqn.outvars)
            for param in eqn.params.values():
                for sub in param if isinstance(param, tuple | list) else (param,):
                    if hasattr(inner := getattr(sub, "jaxpr", sub), "eqns"):
                        yield from sizes(inner)

    jaxpr = jax.make_jaxpr(segment_softmax, static_argnums=2)(logits, ids, 4).jaxpr
    assert max(sizes(jaxpr)) <= len(logits), "a [segments, N] intermediate: use segment ops"


def test_empty_segments_get_the_identity_of_the_reduction():
    """⚠️ 陷阱 / trap：没有任何元素的段不是 0，也不是 NaN，而是归约的单位元：与任何值结合都不改变它的那个数。
    整数没有 inf，单位元由 dtype 的范围决定。jaxpr 里它是 scatter 的初始值。
    An empty segment is neither 0 nor NaN but the reduction's identity: the value that changes
    nothing it is combined with. Integers have no inf, so their identity comes from the dtype's
    range. In the jaxpr it is the scatter's initial value.
    """
    data = jnp.array([1.0, 2.0, 3.0, 4.0, 5.0])
    ids = jnp.array([0, 0, 2, 2, 2])  # segment 1 is empty

    sums = jax.ops.segment_sum(data, ids, num_segments=3)
    prods = jax.ops.segment_prod(data, ids, num_segments=3)
    maxes = jax.ops.segment_max(data, ids, num_segments=3)
    mins = jax.ops.segment_min(data, ids, num_segments=3)
    np.testing.assert_array_equal(sums, [3.0, 0.0, 12.0])
    np.testing.assert_array_equal(prods, __)
    np.testing.assert_array_equal(maxes, __)
    np.testing.assert_array_equal(mins, __)

    int_max = jax.ops.segment_max(data.astype(jnp.int32), ids, num_segments=3)
    assert int(int_max[1]) == __

    jaxpr = jax.make_jaxpr(lambda d: jax.ops.segment_max(d, ids, num_segments=3))(data)
    assert f"broadcast_in_dim {float(maxes[1])}" in str(jaxpr)  # the output starts filled with it


def graph_mean_pool(node_features, graph_ids, num_graphs):
    """把一批图的节点特征按图取平均（GNN 的 readout）：结果 [num_graphs, F]，第 g 行是图 g 的节点特征均值。
    - node_features [N, F]；graph_ids [N]（int32，无序）；num_graphs 是静态 int（在 jit 里固定形状）。
    - 这批数据被补齐到固定的 N：补齐的节点的 graph_id 等于 num_graphs（不属于任何图），特征是垃圾
      （可能是 NaN 或 inf），它们不许进入结果，也不许进入梯度。
    - 没有节点的图给出 0。只用 jax.ops.segment_* 和 jnp（不许用 one-hot 矩阵乘、不许 Python 循环）；大约 4 行。
    The mean node feature of every graph in a batch of graphs (a GNN readout): the result is
    [num_graphs, F], row g the mean of graph g's node features.
    - node_features [N, F]; graph_ids [N] (int32, unsorted); num_graphs a static int (a fixed
      shape under jit).
    - The batch is padded to a fixed N: a padding node's graph_id is num_graphs (no graph), its
      features are garbage (maybe NaN or inf) that must reach neither the result nor the
      gradient.
    - A graph without nodes gives 0. Only jax.ops.segment_* and jnp (no one-hot matmul, no
      Python loop); about 4 lines.
    """
    todo("graph_mean_pool: segment sums and counts / 分段求和与计数")

def test_write_a_padded_graph_readout():
    """✍️ 实现 graph_mean_pool：把变大小的图拼成一批、补齐到固定的节点数，是 jit 下训练 GNN 的标准做法
    （jraph 就这么做）。补齐的节点指向一个不存在的图：segment_* 悄悄丢掉段号超出 [0, num_segments) 的行
    （包括负数），它们的值和梯度都进不来。这也是为什么 num_segments 要写明：它既是输出的形状，也是丢弃的边界。
    Write graph_mean_pool: concatenating graphs of different sizes into one batch padded to a
    fixed node count is how GNNs train under jit (jraph does it). Padding nodes point at a graph
    that does not exist: segment_* silently drops rows whose segment id is outside
    [0, num_segments) (negative ones too), so neither their values nor their gradients get in.
    That is also why num_segments must be given: it is the output's shape and the edge of
    what is dropped.
    """
    node_features = jnp.array(
        [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [jnp.nan, jnp.inf], [7.0, 9.0], [1e30, jnp.nan]]
    )
    graph_ids = jnp.array([2, 0, 2, 4, 0, 4], dtype=jnp.int32)  # 4 graphs; 1 and 3 empty; 4 = pad

    def reference(x, ids, g):
        x, ids = np.asarray(x, np.float64), np.asarray(ids)
        rows = [x[ids == i].mean(axis=0) if (ids == i).any() else np.zeros(2) for i in range(g)]
        return np.stack(rows)

    pool = jax.jit(graph_mean_pool, static_argnums=2)
    expected = reference(node_features, graph_ids, 4)
    np.testing.assert_allclose(pool(node_features, graph_ids, 4), expected, rtol=1e-6)
    shuffled = jnp.array([5, 2, 0, 3, 1, 4])
    np.testing.assert_allclose(
        pool(node_features[shuffled], graph_ids[shuffled], 4), expected, rtol=1e-6
    )
    np.testing.assert_allclose(  # fewer graphs: ids 2 and 4 are padding now
        pool(node_features, graph_ids, 2), reference(node_features, graph_ids, 2), rtol=1e-6
    )

    grads = jax.grad(lambda x: pool(x, graph_ids, 4).sum())(node_features)
    np.testing.assert_allclose(grads, [[0.5] * 2, [0.5] * 2, [0.5] * 2, [0] * 2, [0.5] * 2, [0] * 2])

    jaxpr = jax.make_jaxpr(graph_mean_pool, static_argnums=2)(node_features, graph_ids, 4)
    prims = primitives(jaxpr)
    assert "dot_general" not in prims  # a scatter, not a dense matmul / 是 scatter，不是稠密矩阵乘
    assert any(name.startswith("scatter") for name in prims)


def test_num_segments_must_be_static_under_jit():
    """⚠️ 陷阱 / trap：输出形状取决于 num_segments，所以在 jit 里它必须是静态的 Python int。
    由被追踪的数据算出来（或者省略它，让 JAX 去算 max(ids)+1）都会在追踪时报错；
    把它作为静态参数传入即可。
    The output shape depends on num_segments, so under jit it must be a static Python int.
    Deriving it from traced data (or leaving it out, so JAX would compute max(ids)+1) fails at
    trace time; passing it as a static argument works.
    """
    data = jnp.array([1.0, 2.0, 3.0, 4.0, 5.0])
    ids = jnp.array([0, 0, 2, 2, 2])

    @jax.jit
    def derived(data, ids):
        return jax.ops.segment_sum(data, ids, num_segments=ids.max() + 1)

    with raises_exactly(__):
        derived(data, ids)

    @partial(jax.jit, static_argnames=__)
    def static(data, ids, num_segments):
        return jax.ops.segment_sum(data, ids, num_segments=num_segments)

    np.testing.assert_array_equal(static(data, ids, num_segments=3), [3.0, 0.0, 12.0])


def test_indices_are_sorted_is_a_promise_recorded_on_the_scatter():
    """indices_are_sorted=True 是你对编译器的承诺（ids 已升序），不是排序请求：
    它作为属性原样记录在 scatter 原语上（jaxpr 与 StableHLO 里都能看到），
    ids 确实有序时结果不变；ids 无序时结果是未定义的，别依赖它。
    indices_are_sorted=True is a promise to the compiler (the ids are ascending), not a request
    to sort: it is recorded as an attribute on the scatter (visible in the jaxpr and in
    StableHLO). On sorted ids the result is the same; on unsorted ids it is undefined.
    """
    data = jnp.array([1.0, 2.0, 3.0, 4.0, 5.0])
    ids = jnp.array([0, 0, 1, 2, 2])  # sorted

    def promised(d, i):
        return jax.ops.segment_sum(d, i, num_segments=3, indices_are_sorted=True)

    plain = jax.ops.segment_sum(data, ids, num_segments=3)
    np.testing.assert_array_equal(promised(data, ids), plain)

    jaxpr = jax.make_jaxpr(promised)(data, ids)
    (scatter,) = [eqn for eqn in jaxpr.eqns if eqn.primitive.name == __]
    assert scatter.params["indices_are_sorted"] is True

    hlo = jax.jit(promised).lower(data, ids).as_text()
    assert "indices_are_sorted = true" in hlo


def top2_moe(x, router, experts):
    """top-2 混合专家层：每个 token 送到得分最高的两个专家，输出是两个专家结果按门控加权的和。
    - x [T, D]，router [D, E]，experts [E, D, H]；logits = x @ router。
    - 用 lax.top_k(logits, 2) 选专家，门控是这两个 logit 的 softmax。
    - 把 T·2 个（token, 专家）对按专家排好序（jnp.argsort，stable=True），jnp.bincount 数出每个
      专家的行数，一次 lax.ragged_dot(行, experts, 各组大小) 算完，再按原顺序放回、乘门控、两两相加。
    - 不许先对每个专家算完整的 [T, E, H] 再挑；大约 10 行。

    A top-2 mixture-of-experts layer: every token goes to its two best-scoring experts, and the
    output is the gate-weighted sum of the two experts' results.
    - x [T, D], router [D, E], experts [E, D, H]; logits = x @ router.
    - Choose the experts with lax.top_k(logits, 2); the gates are the softmax of those two logits.
    - Sort the T·2 (token, expert) pairs by expert (jnp.argsort, stable=True), count each
      expert's rows with jnp.bincount, do one lax.ragged_dot(rows, experts, group sizes), then
      put the rows back in their order, weight them by the gates and add each token's pair.
    - Computing every expert's full [T, E, H] first and picking from it is not allowed; about
      10 lines.
    """
    todo("top2_moe: top_k, sort by expert, one ragged_dot / top_k、按专家排序、一次 ragged_dot")


def test_write_a_top2_mixture_of_experts_with_ragged_dot():
    """✍️ 实现 top2_moe。每个专家分到的 token 数各不相同（参差的数据）：把行按专家排好，
    lax.ragged_dot 一次做完所有“每组一个矩阵”的乘法，不必把每个 token 送进每个专家。检验：数值和对
    x、router、experts 的梯度与稠密参照一致（jit 下），jaxpr 里有 top_k 和 ragged_dot_general，
    没有一个中间值达到 T·E·H 个元素；换一个 token 数和专家数也对。
    Write top2_moe. Every expert receives a different number of tokens (ragged data): with the
    rows sorted by expert, lax.ragged_dot does every "one matrix per group" product in one call,
    with no token sent through every expert. Checked: the values and the gradients by x, router
    and experts equal the dense reference's (under jit), and the jaxpr has top_k and
    ragged_dot_general and no intermediate of T·E·H elements; other numbers of tokens and
    experts too.
    """
    t, d, h, e = 12, 8, 16, 8
    rng = np.random.default_rng(4)
    x = jnp.asarray(rng.normal(size=(t, d)), jnp.float32)
    router = jnp.asarray(rng.normal(size=(d, e)), jnp.float32)
    experts = jnp.asarray(rng.normal(size=(e, d, h)) / 3, jnp.float32)

    def dense(x, router, experts):  # every token through every expert, then pick
        top, expert = jax.lax.top_k(x @ router, 2)
        every = jnp.einsum("td,edh->teh", x, experts)
        picked = jnp.take_along_axis(every, expert[..., None], axis=1)
        return jnp.sum(picked * jax.nn.softmax(top, axis=-1)[..., None], axis=1)

    # ragged_dot: consecutive rows form the groups, row i of group g meets experts[g]
    sizes = jnp.array([1, 3], jnp.int32)
    grouped = jax.lax.ragged_dot(jnp.ones((4, 2)), jnp.stack([jnp.eye(2), 2 * jnp.eye(2)]), sizes)
    np.testing.assert_array_equal(grouped, [[1, 1], [2, 2], [2, 2], [2, 2]])

    got = jax.jit(top2_moe)(x, router, experts)
    assert got.shape == (t, h)
    np.testing.assert_allclose(got, jax.jit(dense)(x, router, experts), rtol=1e-5, atol=1e-5)
    # 另一批 token、另一个专家数 / other tokens, another number of experts
    fewer = (x[:10], router[:, :5], experts[:5])
    np.testing.assert_allclose(top2_moe(*fewer), dense(*fewer), rtol=1e-5, atol=1e-5)

    def loss(fn):
        return lambda *args: jnp.sum(jnp.sin(fn(*args)))

    for got, want in zip(
        jax.jit(jax.grad(loss(top2_moe), (0, 1, 2)))(x, router, experts),
        jax.jit(jax.grad(loss(dense), (0, 1, 2)))(x, router, experts),
        strict=True,
    ):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    program = jax.make_jaxpr(top2_moe)(x, router, experts).jaxpr
    assert {"top_k", "ragged_dot_general"} <= primitives(program)
    largest = max(v.aval.size for eqn in program.eqns for v in eqn.outvars)
    assert largest < t * e * h, largest


def sort_by_segment_then_score(segment_ids, scores, payload):
    """把三列一起排序：先按 segment_ids 升序，同一段里按 scores 降序，payload 跟着各自的行走。
    只用一次 lax.sort：它接受一个操作数元组，num_keys 说前几个是排序键，其余的跟着移动（不用
    argsort 再逐列 gather）。降序？把取负的分数当键，返回前再取负回来。大约 2 行。

    Sort three columns together: by segment_ids ascending, by scores descending within a
    segment, each payload moving with its row. One lax.sort only: it takes a tuple of operands,
    num_keys says how many leading ones are the sort keys, and the rest move along (no argsort
    followed by a gather per column). Descending? Sort by the negated scores and negate them
    back before returning. About 2 lines.
    """
    todo("sort_by_segment_then_score: one lax.sort, two keys / 一次 lax.sort，两个键")


def test_one_multi_operand_sort_groups_ragged_rows():
    """✍️ 实现 sort_by_segment_then_score。参差的数据（每段长度不同）常先排成“段内连续”的顺序，
    上面 ragged_dot 的分组就是这样来的。lax.sort 一次按多个键排序并带上其余的列：jaxpr 里只有一个
    sort 方程（num_keys=2，三个操作数），没有 gather；argsort 或 jnp.lexsort 加索引的写法都要 gather。
    Write sort_by_segment_then_score. Ragged data (segments of different lengths) is often put
    in "each segment contiguous" order first: that is how the groups of ragged_dot above come
    about. lax.sort sorts by several keys at once and carries the other columns along: the jaxpr
    has one sort equation (num_keys=2, three operands) and no gather, where argsort or
    jnp.lexsort followed by indexing needs gathers.
    """
    rng = np.random.default_rng(5)
    n = 12
    segment_ids = jnp.asarray(rng.integers(0, 4, size=n), jnp.int32)
    scores = jnp.asarray(rng.permutation(n) / n, jnp.float32)  # distinct: no ties
    payload = jnp.arange(n, dtype=jnp.int32) * 10

    order = np.lexsort((-np.asarray(scores), np.asarray(segment_ids)))
    got = jax.jit(sort_by_segment_then_score)(segment_ids, scores, payload)
    for column, want in zip(got, (segment_ids, scores, payload), strict=True):
        np.testing.assert_array_equal(column, np.asarray(want)[order])

    jaxpr = jax.make_jaxpr(sort_by_segment_then_score)(segment_ids, scores, payload).jaxpr
    sorts = [e for e in jaxpr.eqns if e.primitive.name == "sort"]
    assert [(e.params["num_keys"], len(e.invars)) for e in sorts] == [(2, 3)]
    assert "gather" not in primitives(jaxpr)
