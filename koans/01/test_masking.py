"""01 · 掩码：where、安全梯度、掩码均值、掩码 softmax / masking and masked reductions."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import equations


def test_where_computes_both_branches_then_selects():
    """jnp.where 不是 if：两个分支都会被完整计算，再由一个挑选原语逐元素取值。
    jnp.where is not an `if`: both branches are computed in full, then a selecting primitive
    picks element by element.
    """

    def f(x):
        return jnp.where(x > 2, x * 10, -1.0)

    x = jnp.arange(6.0)
    np.testing.assert_array_equal(f(x), __)

    jaxpr = jax.make_jaxpr(f)(x)
    primitives = [eqn.primitive.name for eqn in jaxpr.eqns]
    assert "mul" in primitives  # x * 10 runs for every element, selected or not
    (where_call,) = [e for e in jaxpr.eqns if e.primitive.name == "jit"]  # jnp.where's own jit
    assert [e.primitive.name for e in where_call.params["jaxpr"].eqns][-1] == __


def test_double_where_makes_the_gradient_safe():
    """⚠️ 陷阱 / trap，✅ 修复：where 挡住了值，却挡不住梯度里的 NaN：反向传播时未选中的分支得到
    0 余切，再乘上它自己在那一点的导数（sqrt 在负数处是 NaN，在 0 处是 inf），0·NaN 与 0·inf 都是 NaN。
    双重 where 修好它：内层 where 先把被掩盖位置的输入换成一个安全值，外层 where 再选结果。
    两层各管一件事。内层 where 的反向规则只把余切送回被选中的位置：只要分支里 x 的每一次使用
    都经过 safe_x，梯度对任何安全值都有限（下面的 sqrt 用三个值验证）。安全值决定的是被丢弃的那一支
    在前向里算出什么：不在分支的定义域里，它就算出 NaN 或 inf。结果被外层 where 挡住了，可是逐个原语
    检查输出的 jax.debug_nans / jax.debug_infs（找 NaN 的工具）照样报错，真正的 NaN 就藏在这些噪声里。
    where hides the value, not the NaN in the gradient: in the backward pass the unselected
    branch gets a zero cotangent, times its own derivative at that point (sqrt's is NaN at a
    negative number, inf at 0), and 0·NaN and 0·inf are both NaN. The double where fixes it: an
    inner where swaps a safe value in at the masked positions, an outer where selects the
    result. Each does one job. The inner where's backward rule sends cotangents only to the
    selected positions: as long as every use of x in the branch goes through safe_x, the
    gradient is finite whatever the safe value (checked below for sqrt with three values). The
    safe value decides what the discarded branch computes in the forward pass: outside the
    branch's domain it computes NaN or inf. The outer where hides that from the result, yet
    jax.debug_nans / jax.debug_infs, the NaN hunters that check every primitive's output, still
    fire, and a real NaN hides in that noise.
    """
    xs = jnp.array([-1.0, 0.0, 0.5, 2.0])

    def naive_sqrt(x):  # one where: the values look fine, the gradient does not
        return jnp.where(x > 0, jnp.sqrt(x), 0.0)

    np.testing.assert_allclose(jax.vmap(naive_sqrt)(xs), [0, 0, np.sqrt(0.5), np.sqrt(2)], rtol=1e-6)
    np.testing.assert_array_equal(np.isnan(jax.vmap(jax.grad(naive_sqrt))(xs)), [1, 1, 0, 0])

    def safe_sqrt(x, fill):
        safe_x = jnp.where(x > 0, x, fill)
        return jnp.where(x > 0, jnp.sqrt(safe_x), 0.0)

    sqrt_grads = [jax.vmap(jax.grad(safe_sqrt), (0, None))(xs, fill) for fill in (-1.0, 0.0, 1.0)]
    for grads in sqrt_grads:  # the same finite gradient whatever the fill
        np.testing.assert_allclose(
            grads, [0.0, 0.0, 0.5 / np.sqrt(0.5), 0.5 / np.sqrt(2.0)], rtol=1e-6
        )
    with raises_exactly(FloatingPointError), jax.debug_nans(True):
        jax.grad(safe_sqrt)(-1.0, -1.0)  # the discarded branch computed sqrt(-1)

    def x_log_x(x):  # the entropy term x·log(x), defined as 0 for x <= 0
        safe_x = jnp.where(x > 0, x, __)
        return jnp.where(x > 0, safe_x * jnp.log(safe_x), 0.0)

    np.testing.assert_allclose(
        jax.vmap(x_log_x)(xs), [0.0, 0.0, 0.5 * np.log(0.5), 2 * np.log(2.0)], rtol=1e-6
    )
    grads = jax.vmap(jax.grad(x_log_x))(xs)
    np.testing.assert_allclose(grads, [0.0, 0.0, np.log(0.5) + 1, np.log(2.0) + 1], rtol=1e-6)
    with jax.debug_nans(True), jax.debug_infs(True):  # op by op: every primitive's output
        jax.vmap(jax.grad(x_log_x))(xs)
        jax.vmap(x_log_x)(xs)


def safe_norm(x):
    """向量 x（一维）的 L2 范数 sqrt(Σ x²)，零向量处的导数有定义：
    - 值：非零向量给出 sqrt(Σ x²)，零向量给出恰好 0.0；
    - 梯度：非零向量是 x / |x|，零向量是 0（而不是 NaN），二阶导数也处处有限；
    - 不许加 eps（sqrt(Σ x² + eps) 在零点的值不是 0）；只用 jnp，程序里只有一个 sqrt（双重 where
      护住的就是它）；大约 4 行。
    The L2 norm sqrt(sum x²) of a vector x (1-D), with a derivative defined at zero:
    - value: sqrt(sum x²) for a nonzero vector, exactly 0.0 for the zero vector;
    - gradient: x / |x| for a nonzero vector, 0 (not NaN) at the zero vector, and finite second
      derivatives everywhere;
    - no eps (sqrt(sum x² + eps) is not 0 at zero); jnp only, with one sqrt in the program (the
      one the double where guards); about 4 lines.
    """
    todo("safe_norm: double where around the sqrt / sqrt 外面的双重 where")

def test_write_a_norm_with_a_safe_gradient_at_zero():
    """✍️ 实现 safe_norm：jnp.linalg.norm 在零向量处的梯度是 NaN（sqrt 在 0 处的导数是 inf，
    链式法则再乘上 0），一个全零的填充行或刚初始化成 0 的参数就足以让整个训练变成 NaN。
    用上一个 koan 的双重 where 写一个在零点也能求导的范数，jit、vmap、二阶导数下都成立。
    Write safe_norm: jnp.linalg.norm has a NaN gradient at the zero vector (sqrt's derivative at
    0 is inf, which the chain rule multiplies by 0); one all-zero padding row or a parameter
    initialised to 0 turns a whole training run into NaN. Use the double where of the previous
    koan to write a norm that is differentiable at zero too, under jit, vmap and second
    derivatives.
    """
    xs = jnp.array([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0], [0.0, -2.0, 0.0], [1.0, 1.0, 1.0]])
    assert np.isnan(jax.grad(jnp.linalg.norm)(xs[1])).all()  # the library norm, at zero

    norms = jax.jit(jax.vmap(safe_norm))(xs)
    np.testing.assert_allclose(norms, np.linalg.norm(np.asarray(xs), axis=1), rtol=1e-6)
    assert float(norms[1]) == 0.0  # exactly, not sqrt(eps)

    grads = jax.jit(jax.vmap(jax.grad(safe_norm)))(xs)
    expected = [[0.6, 0.8, 0.0], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0], [1 / np.sqrt(3)] * 3]
    np.testing.assert_allclose(grads, expected, rtol=1e-6, atol=1e-7)
    hessians = jax.vmap(jax.hessian(safe_norm))(xs)
    assert np.isfinite(hessians).all()
    np.testing.assert_allclose(hessians[1], np.zeros((3, 3)))  # the selected branch at zero: 0

    def loss(xs):  # a zero row in the batch no longer poisons the whole gradient
        return jnp.sum(jax.vmap(safe_norm)(xs))

    assert np.isfinite(jax.grad(loss)(xs)).all()
    sqrts = equations("sqrt", safe_norm, xs[0])  # nested jits (jnp.linalg.norm's) included
    assert len(sqrts) == 1, f"{len(sqrts)} sqrt in safe_norm's program: guard one sqrt"


def masked_mean(x, mask, axis=-1):
    """沿 axis 求 mask 为 True 的元素的均值。
    - x：浮点数组；mask：与 x 同形状的布尔数组，或者它的 0/1 浮点版本（数据加载器常给这种）。
      被掩盖的位置可能是 NaN 或 inf（填充的垃圾），它们既不能进入结果，也不能进入梯度。
    - 一行里没有有效元素时结果是 0.0，梯度处处有限（那一行的梯度是 0）。
    - 掩码只挡住填充：有效位置上真的 NaN 照样让那一行的均值是 NaN（不要事后把 NaN 换掉）。
    - 只用 jnp；大约 4 行。
    The mean of the entries of x where mask is True, along axis.
    - x: a float array; mask: a boolean array shaped like x, or its 0/1 float twin (what many
      data loaders hand you). Masked positions may hold NaN or inf (padding garbage), which must
      reach neither the result nor the gradient.
    - A row with no valid entry gives 0.0, and the gradient is finite everywhere (0 on that row).
    - The mask hides the padding only: a real NaN at a valid position still makes its row's
      mean NaN (do not replace NaNs afterwards).
    - jnp only; about 4 lines.
    """
    todo("masked_mean: where, not multiplication / 用 where 而不是乘法")


def test_write_a_masked_mean_that_survives_padding():
    """✍️ 实现 masked_mean：真实数据里的填充位置常常是 NaN 或 inf，按 IEEE，NaN·0 与 inf·0 都是
    NaN。乘以布尔掩码在这台 CPU 上恰好不漏：jnp 把 x * mask 写成 mul(x, convert(mask))，XLA 把它
    改写成 select（下面的断言看得到），但这是编译器的优化，不是语义：0/1 浮点掩码就没有这个改写，
    NaN 照样漏出来。where 对哪种掩码都对。全是填充的一行会让分母为 0。两种情况都要在值和梯度里
    处理掉，jit 和 vmap 下也一样。
    Write masked_mean: real padding often holds NaN or inf, and in IEEE arithmetic NaN·0 and
    inf·0 are NaN. Multiplying by a boolean mask happens not to leak on this CPU: jnp writes
    x * mask as mul(x, convert(mask)) and XLA rewrites that into a select (the asserts below
    show it), but that is a compiler optimisation, not the semantics: a 0/1 float mask gets no
    such rewrite and the NaN leaks. where is right for either mask. A row that is all padding
    makes the denominator 0. Handle both, in the value and in the gradient, also under jit and
    vmap.
    """
    x = jnp.array(
        [
            [1.0, 2.0, 3.0, jnp.nan, jnp.inf],  # two padded entries holding garbage
            [4.0, -2.0, 7.0, 1.0, 0.5],  # all valid
            [jnp.nan, 5.0, jnp.nan, 6.0, 9.0],  # nothing valid
            [jnp.nan, 1.0, 2.0, jnp.inf, 3.0],  # a real NaN in the data, garbage in the padding
        ]
    )
    mask = jnp.array(
        [
            [True, True, True, False, False],
            [True, True, True, True, True],
            [False, False, False, False, False],
            [True, True, True, False, False],
        ]
    )
    x_np, mask_np = np.asarray(x), np.asarray(mask)
    counts = mask_np.sum(axis=1)
    expected = [x_np[i][mask_np[i]].mean() if counts[i] else 0.0 for i in range(4)]
    assert np.isnan(expected[3])  # the data's own NaN stays / 数据自己的 NaN 留着

    np.testing.assert_allclose(jax.jit(masked_mean)(x, mask), expected, rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(masked_mean)(x, mask), expected, rtol=1e-6)
    np.testing.assert_allclose(masked_mean(x.T, mask.T, axis=0), expected, rtol=1e-6)

    grads = jax.jit(jax.grad(lambda x: masked_mean(x, mask).sum()))(x)
    expected_grads = np.where(mask_np, 1.0 / np.maximum(counts, 1)[:, None], 0.0)
    np.testing.assert_allclose(grads, expected_grads, rtol=1e-6)  # finite, 0 on padding

    float_mask = mask.astype(x.dtype)  # the same mask as 0/1 floats / 同一个掩码，0/1 浮点
    assert float(jax.jit(jnp.multiply)(x, mask)[0, 3]) == 0.0  # XLA's select rewrite, CPU
    assert np.isnan(jax.jit(jnp.multiply)(x, float_mask)[0, 3])  # no rewrite: NaN·0
    np.testing.assert_allclose(jax.jit(masked_mean)(x, float_mask), expected, rtol=1e-6)
    np.testing.assert_allclose(masked_mean(x.T, float_mask.T, axis=0), expected, rtol=1e-6)
    grads = jax.jit(jax.grad(lambda x: masked_mean(x, float_mask).sum()))(x)
    np.testing.assert_allclose(grads, expected_grads, rtol=1e-6)


def test_masked_softmax_gives_zero_probability_to_masked_positions():
    """掩码 softmax：先把被掩盖的 logit 换成一个让 exp 恰好为 0 的值，softmax 后那里的概率正好是 0，
    其余位置重新归一化，每行仍然和为 1。jax.nn.softmax 自己的 where= 参数给出同样的结果。
    Masked softmax: replace the masked logits by a value whose exp is exactly 0; they get
    probability exactly 0 and the row still sums to 1. jax.nn.softmax's own where= argument
    gives the same result.
    """
    logits = jnp.array([[1.0, 2.0, 3.0, 4.0], [0.5, 0.5, 0.5, 9.0]])
    mask = jnp.array([[True, False, True, True], [True, True, True, False]])

    probs = jax.nn.softmax(jnp.where(mask, logits, __), axis=-1)
    assert float(probs[0, 1]) == 0.0 and float(probs[1, 3]) == 0.0
    np.testing.assert_allclose(probs.sum(axis=-1), [1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(probs[1, :3], [1 / 3, 1 / 3, 1 / 3], rtol=1e-6)

    np.testing.assert_allclose(jax.nn.softmax(logits, where=__), probs, rtol=1e-6)


def test_fully_masked_row_depends_on_how_you_mask():
    """⚠️ 陷阱 / trap：整行都被掩盖时，三种写法给出三种不同的结果，而且没有一种报错。
    想一想每种写法的分子和分母。
    A fully masked row: the three ways of masking give three different results, and none of
    them raises. Think of each one's numerator and denominator.
    """
    logits = jnp.array([[1.0, 2.0, 3.0]])
    mask = jnp.array([[False, False, False]])

    with_inf = jax.nn.softmax(jnp.where(mask, logits, -jnp.inf))
    with_big_negative = jax.nn.softmax(jnp.where(mask, logits, -1e9))
    with_where = jax.nn.softmax(logits, where=mask)

    assert bool(jnp.isnan(with_inf).all()) is __
    np.testing.assert_allclose(with_big_negative, __, rtol=1e-6)
    np.testing.assert_array_equal(with_where, __)
