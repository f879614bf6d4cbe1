"""01 · 分段归约 jax.ops.segment_* / segment reductions."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkoans import __  # noqa: F401  (the koans' blanks)


def test_segment_sum_adds_rows_that_share_an_id():
    """segment_sum 把 segment_ids 相同的行加在一起：输出第 i 行 = 所有 id 为 i 的行之和。
    它就是一次 scatter-add（和 numpy 的 np.add.at 相同）。
    segment_sum adds up the rows that share a segment id: output row i is the sum of all rows
    with id i. It is a scatter-add, like numpy's np.add.at.
    """
    data = jnp.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
    ids = jnp.array([1, 0, 1, 1])

    summed = jax.ops.segment_sum(data, ids, num_segments=2)
    np.testing.assert_array_equal(summed, __)

    reference = np.zeros((2, 2), np.float32)
    np.add.at(reference, np.asarray(ids), np.asarray(data))
    np.testing.assert_array_equal(summed, reference)


def test_empty_segments_get_the_identity_of_the_reduction():
    """⚠️ 陷阱 / trap：没有任何元素的段得到归约的单位元，而不是 0 或 NaN：
    sum → 0，prod → 1，max → -inf，min → +inf（整数类型则是 dtype 的最小/最大值）。
    An empty segment gets the reduction's identity: sum 0, prod 1, max -inf, min +inf
    (for integers, the dtype's min / max). jaxpr shows it as the scatter's initial value.
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
    assert "broadcast_in_dim -inf" in str(jaxpr)  # the output starts filled with the identity


def test_out_of_range_segment_ids_are_silently_dropped():
    """⚠️ 陷阱 / trap：segment_id 超出 [0, num_segments) 的元素（包括负数）被悄悄丢弃，不报错。
    Elements whose segment id falls outside [0, num_segments), negative ids included, are
    silently dropped: no error, they just vanish from the result.
    """
    data = jnp.array([1.0, 2.0, 3.0, 4.0, 5.0])
    ids = jnp.array([0, 0, 5, -1, 2])

    summed = jax.ops.segment_sum(data, ids, num_segments=3)
    np.testing.assert_array_equal(summed, __)


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

    with pytest.raises(__):
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
