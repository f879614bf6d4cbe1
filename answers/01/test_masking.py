"""01 · 掩码：where、安全梯度、掩码均值、掩码 softmax / masking and masked reductions."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __  # noqa: F401  (the koans' blanks)


def test_where_computes_both_branches_then_selects():
    """jnp.where 不是 if：两个分支都会被完整计算，再逐元素挑选（jaxpr 里的 select_n 原语）。
    jnp.where is not an `if`: both branches are computed in full, then picked element by
    element (the select_n primitive in the jaxpr).
    """

    def f(x):
        return jnp.where(x > 2, x * 10, -1.0)

    x = jnp.arange(6.0)
    np.testing.assert_array_equal(f(x), [-1.0, -1.0, -1.0, 30.0, 40.0, 50.0])

    jaxpr = jax.make_jaxpr(f)(x)
    primitives = [eqn.primitive.name for eqn in jaxpr.eqns]
    assert "mul" in primitives  # x * 10 runs for every element, selected or not
    assert "select_n" in str(jaxpr)  # inside the small jit that jnp.where wraps it in


def test_grad_of_where_leaks_nan_from_the_unselected_branch():
    """⚠️ 陷阱 / trap：where 挡住了值，却挡不住梯度里的 NaN。
    sqrt 在 0 处导数为 inf、在负数处为 NaN；反向传播时未选中分支得到的余切是 0，
    而 0 * inf = NaN，于是 NaN 漏进了梯度。
    where hides the value, not the NaN in the gradient: the unselected branch gets a zero
    cotangent, and 0 * inf (sqrt'(0)) or 0 * NaN (sqrt'(-1)) is NaN.
    """

    def naive(x):
        return jnp.where(x > 0, jnp.sqrt(x), 0.0)

    xs = jnp.array([-1.0, 0.0, 4.0])
    np.testing.assert_array_equal(jax.vmap(naive)(xs), [0.0, 0.0, 2.0])  # the values look fine
    grads = jax.vmap(jax.grad(naive))(xs)
    np.testing.assert_array_equal(np.isnan(grads), [True, True, False])


def test_double_where_makes_the_gradient_safe():
    """✅ 修复：双重 where——先用 where 把输入换成安全值，再用 where 选结果。
    这样不被选中的分支只在安全点上求导，梯度是有限的 0。
    The fix, "double where": first replace the input by a safe value where it is not used,
    then select. The unselected branch is now differentiated at a harmless point.
    """

    def safe_sqrt(x):
        safe_x = jnp.where(x > 0, x, 1.0)  # sqrt never sees x <= 0
        return jnp.where(x > 0, jnp.sqrt(safe_x), 0.0)

    xs = jnp.array([-1.0, 0.0, 4.0])
    np.testing.assert_array_equal(jax.vmap(safe_sqrt)(xs), [0.0, 0.0, 2.0])
    np.testing.assert_allclose(jax.vmap(jax.grad(safe_sqrt))(xs), [0.0, 0.0, 0.25])


def test_masked_mean_divides_by_the_number_of_valid_entries():
    """⚠️ 陷阱 / trap：mean(x * mask) 把填充位置也算进了分母。
    正确的掩码均值是 sum(x * mask) / sum(mask)，jnp.mean 的 where= 参数也能做到。
    mean(x * mask) still divides by the padded length; a masked mean divides by the number of
    valid entries: sum(x * mask) / sum(mask), or jnp.mean(x, where=mask).
    """
    x = jnp.array([1.0, 2.0, 3.0, 4.0, 100.0])  # the last entry is padding
    mask = jnp.array([1.0, 1.0, 1.0, 1.0, 0.0])

    wrong = jnp.mean(x * mask)
    assert float(wrong) == 2.0

    right = jnp.sum(x * mask) / jnp.sum(mask)
    expected = np.mean(np.asarray(x)[np.asarray(mask) > 0])  # mean of the valid entries only
    np.testing.assert_allclose(right, expected)
    np.testing.assert_allclose(jnp.mean(x, where=mask > 0), expected)


def test_multiplying_by_a_mask_does_not_erase_nan():
    """⚠️ 陷阱 / trap：NaN * 0 仍是 NaN。填充位置若是 NaN（或 inf），x * mask 会污染整个和；
    用 jnp.where(mask > 0, x, 0) 才能真正丢掉它们。
    NaN * 0 is still NaN: if the padding holds NaN (or inf), x * mask poisons the sum;
    jnp.where(mask > 0, x, 0) really drops it.
    """
    x = jnp.array([1.0, 2.0, jnp.nan])  # the last entry is padding
    mask = jnp.array([1.0, 1.0, 0.0])  # a float 0/1 mask, as padding masks usually are

    assert bool(jnp.isnan(jnp.sum(x * mask))) is True
    total = jnp.sum(jnp.where(mask > 0, x, 0.0))
    assert float(total) == 3.0


def test_masked_softmax_gives_zero_probability_to_masked_positions():
    """掩码 softmax：先把被掩盖的 logit 换成 -inf，softmax 后那里的概率正好是 0，
    其余位置重新归一化，每行仍然和为 1。jax.nn.softmax 的 where= 参数给出同样的结果。
    Masked softmax: replace masked logits by -inf before the softmax; they get probability
    exactly 0 and the row still sums to 1. jax.nn.softmax(..., where=mask) gives the same.
    """
    logits = jnp.array([[1.0, 2.0, 3.0, 4.0], [0.5, 0.5, 0.5, 9.0]])
    mask = jnp.array([[True, False, True, True], [True, True, True, False]])

    probs = jax.nn.softmax(jnp.where(mask, logits, -jnp.inf), axis=-1)
    assert float(probs[0, 1]) == 0.0 and float(probs[1, 3]) == 0.0
    np.testing.assert_allclose(probs.sum(axis=-1), [1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(probs[1, :3], [1 / 3, 1 / 3, 1 / 3], rtol=1e-6)

    np.testing.assert_allclose(jax.nn.softmax(logits, where=mask), probs, rtol=1e-6)


def test_fully_masked_row_depends_on_how_you_mask():
    """⚠️ 陷阱 / trap：整行都被掩盖时，三种写法结果各不相同：
    -inf 填充得到 NaN（0/0）；大负数填充得到均匀分布（概率漏给了被掩盖的位置）；
    jax.nn.softmax(where=mask) 得到全 0（该行和为 0 而不是 1）。
    A fully masked row: filling with -inf gives NaN (0/0); a large negative gives a uniform
    row (probability leaks to masked slots); softmax(where=mask) gives all zeros.
    """
    logits = jnp.array([[1.0, 2.0, 3.0]])
    mask = jnp.array([[False, False, False]])

    with_inf = jax.nn.softmax(jnp.where(mask, logits, -jnp.inf))
    with_big_negative = jax.nn.softmax(jnp.where(mask, logits, -1e9))
    with_where = jax.nn.softmax(logits, where=mask)

    assert bool(jnp.isnan(with_inf).all()) is True
    np.testing.assert_allclose(with_big_negative, [[1 / 3, 1 / 3, 1 / 3]], rtol=1e-6)
    np.testing.assert_array_equal(with_where, [[0.0, 0.0, 0.0]])
