"""06 · fp8：很窄的范围，按块缩放 / fp8: a narrow range, scaled by blocks.

fp8 训练把矩阵乘的输入存成 8 位浮点：float8_e4m3fn（4 位指数、3 位尾数，没有 inf）
或 float8_e5m2（5 位指数、2 位尾数，范围大、更粗）。范围这么窄，数值必须先缩放；MX（microscaling）
格式给每 32 个相邻元素一个共同的 2 的幂次缩放因子（float8_e8m0fnu，只有指数）。
jax.nn.scaled_matmul 收下量化后的数值和每块的缩放因子：在 GPU 上它是 cuDNN 的块缩放矩阵乘，在这台
CPU 上 XLA 把它展开成“反量化，再做普通的 dot”，所以这里检查的是数值，而不是 fp8 的速度。

fp8 training stores a matmul's inputs as 8-bit floats: float8_e4m3fn (4 exponent bits, 3
mantissa bits, no inf) or float8_e5m2 (5 exponent bits, 2 mantissa bits: more
range, coarser). With a range that narrow the values must be scaled first; the MX
(microscaling) formats give every 32 neighbouring elements one shared power-of-two scale
(float8_e8m0fnu, an exponent only). jax.nn.scaled_matmul takes the quantized values and each
block's scale: on a GPU it is cuDNN's block-scaled matmul, on this CPU XLA expands it into
"dequantize, then an ordinary dot", so what is checked here is the numbers, not fp8's speed.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

BLOCK = 32


def test_float8_e4m3fn_rounds_coarsely_and_has_no_inf():
    """⚠️ 陷阱 / trap: float8_e4m3fn 的 “fn” 表示 finite：它没有 inf。3 位尾数意味着每个二进制
    数量级（比如从 2ⁿ 到 2ⁿ⁺¹）里只有 8 个数。float8_e5m2 范围大得多，但每个数量级里只有 4 个数。预测：几个数
    转换成 fp8 再转回 float32 之后是多少，超出范围的数变成什么？
    The "fn" of float8_e4m3fn means finite: it has no inf. 3 mantissa bits mean only 8 numbers
    per binade (from 2ⁿ to 2ⁿ⁺¹, say). float8_e5m2 reaches much further, but holds only 4 numbers
    per binade. Predict: what do a few numbers become, cast to fp8 and back to float32,
    and what does a number out of range become?
    """
    e4m3 = jnp.finfo(jnp.float8_e4m3fn)
    assert float(e4m3.max) == 448.0
    assert float(jnp.finfo(jnp.float8_e5m2).max) == 57344.0

    x = jnp.array([300.0, 430.0, 500.0, 0.1], jnp.float32)
    y = np.asarray(x.astype(jnp.float8_e4m3fn).astype(jnp.float32))
    assert y[0] == __
    assert y[1] == __
    assert bool(np.isnan(y[2])) is __
    assert y[3] == 0.1015625

    z = np.asarray(x.astype(jnp.float8_e5m2).astype(jnp.float32))
    assert z[2] == __
    assert z[0] == 320.0


def quantize_mx(x):
    """✍️ 把 x（float32，最后一根轴是 BLOCK 的整数倍）按 MX 的方式量化成 float8_e4m3fn：最后一根
    轴每 BLOCK 个相邻元素一块，每块的缩放因子是不小于 max|块| / 448 的最小的 2 的幂（2 的
    ceil(log2(max|块| / 448)) 次方），存成 float8_e8m0fnu；数值是 x 除以所在块的缩放因子、再转成
    float8_e4m3fn（这样每块最大的那个数不超过 448）。返回 (数值, 缩放因子)：数值与 x 同形状，缩放
    因子的最后一根轴变成 x.shape[-1] // BLOCK。大约 6 行。
    Quantize x (float32, its last axis a multiple of BLOCK) to float8_e4m3fn the MX way: every
    BLOCK neighbours along the last axis form a block, whose scale is the smallest power of two
    not below max|block| / 448 (2 to the ceil(log2(max|block| / 448))), stored as
    float8_e8m0fnu; the values are x divided by their block's scale, cast to float8_e4m3fn (so a
    block's largest value stays within 448). Return (values, scales): the values shaped like x,
    the scales with a last axis of x.shape[-1] // BLOCK. About 6 lines.
    """
    todo("quantize_mx: 每块一个 2 的幂缩放因子 / one power-of-two scale per block")


def _operands():
    """lhs (1, 8, 64): its first 32 columns are ~1, its last 32 ~1000 (two blocks per row of very
    different size); rhs (1, 16, 64) ~1."""
    rng = np.random.default_rng(0)
    lhs = rng.normal(size=(1, 8, 64)).astype(np.float32)
    lhs[..., BLOCK:] *= 1000.0
    rhs = rng.normal(size=(1, 16, 64)).astype(np.float32)
    return jnp.asarray(lhs), jnp.asarray(rhs)


def test_block_scaled_fp8_matmul():
    """✍️ 实现 quantize_mx。把整个张量直接转成 float8_e4m3fn 时，大于 448 的元素就丢了；只用一个
    缩放因子时，数值小的那一块被挤到 fp8 最粗的低端。每 32 个元素一个缩放因子，每块都用满 fp8 的
    范围。jax.nn.scaled_matmul(lhs 数值, rhs 数值, lhs 缩放, rhs 缩放) 算 lhs · rhsᵀ（批次、行、
    收缩轴，两边都在最后一根轴上收缩）；jax.nn.scaled_dot_general 用 "mxfp8" 配置自己量化，结果
    应与你的量化逐位相同。
    Write quantize_mx. Cast a whole tensor to float8_e4m3fn directly and the elements above 448
    are lost; use one scale for all and the block of small values is squeezed into fp8's
    coarse low end. One scale per 32 elements lets every block use fp8's whole range.
    jax.nn.scaled_matmul(lhs values, rhs values, lhs scales, rhs scales) computes lhs · rhsᵀ
    (batch, rows, contraction, both contracted on their last axis); jax.nn.scaled_dot_general
    quantizes by itself with the "mxfp8" configuration, and must agree with your quantization
    bit for bit.
    """
    lhs, rhs = _operands()
    quantize = jax.jit(quantize_mx)
    lq, ls = quantize(lhs)
    rq, rs = quantize(rhs)
    assert (lq.dtype, ls.dtype) == (jnp.float8_e4m3fn, jnp.float8_e8m0fnu)
    assert lq.shape == (1, 8, 64) and ls.shape == (1, 8, 2)

    amax = np.abs(np.asarray(lhs)).reshape(1, 8, 2, BLOCK).max(axis=-1)
    want = np.exp2(np.ceil(np.log2(amax / 448.0)))
    np.testing.assert_array_equal(np.asarray(ls.astype(jnp.float32)), want)
    top = np.abs(np.asarray(lq.astype(jnp.float32))).reshape(1, 8, 2, BLOCK).max(axis=-1)
    assert (top > 224).all() and (top <= 448).all()  # every block uses the top binade of fp8

    out = jax.jit(jax.nn.scaled_matmul)(lq, rq, ls, rs)
    config = jax.nn.get_scaled_dot_general_config("mxfp8")
    dims = (((2,), (2,)), ((0,), (0,)))
    library = jax.jit(lambda a, b: jax.nn.scaled_dot_general(a, b, dims, configs=[config] * 3))(lhs, rhs)
    np.testing.assert_array_equal(out, library)
    exact = np.einsum("bmk,bnk->bmn", np.asarray(lhs, np.float64), np.asarray(rhs, np.float64))
    assert np.abs(np.asarray(out) - exact).max() < 0.05 * np.abs(exact).max()


E4M3_MAX = 448.0


def delayed_scaling_quantize(x, amax_history):
    """✍️ 延迟缩放（delayed scaling）：把 x（float32）量化成 float8_e4m3fn，缩放因子不看 x 自己，
    而是来自前几步记下的 amax：scale = max(amax_history) / 448。数值是 x / scale 先截到
    [-448, 448]（e4m3fn 没有 inf：比历史大的数要饱和，而不是变成 NaN），再转成 float8_e4m3fn。
    然后记下这一步的 amax：历史整体往后挪一格（最老的那个丢掉），max|x| 放在第 0 格。
    返回 (数值, scale, 新的历史)。大约 5 行。
    Delayed scaling: quantize x (float32) to float8_e4m3fn with a scale that does not look at x
    but at the amax the previous steps recorded: scale = max(amax_history) / 448. The values are
    x / scale clipped to [-448, 448] (e4m3fn has no inf: a value above the history must saturate,
    not become NaN), then cast to float8_e4m3fn. Then record this step's amax: the history moves
    back by one slot (the oldest dropped) and max|x| goes into slot 0. Return (values, scale,
    the new history). About 5 lines.
    """
    todo("delayed_scaling_quantize: 用历史的 amax 缩放 / scale by the history's amax")


def test_delayed_scaling_takes_the_scale_from_past_steps():
    """✍️ 实现 delayed_scaling_quantize。按当前张量的 amax 缩放，转换要等整个张量的归约算完；
    延迟缩放用前几步的 amax，这一步的 amax 只是顺手记下、留给后面的步。代价是：数值突然变大的那一步，
    超出历史的数饱和在 448；记下之后，后面几步的 scale 跟上来，窗口里最大的 amax 说了算。这里跑六步，
    每一步的 scale 都等于参考（到 float32 的舍入），数值和历史与 NumPy 的参考逐位相同。
    Write delayed_scaling_quantize. Scaling by the current tensor's amax makes the cast wait for a
    reduction over the whole tensor; delayed scaling uses the previous steps' amax and only records
    this step's for the steps after. The price: on the step where the values jump, those above the
    history saturate at 448; once recorded, the following steps' scale catches up, and the largest
    amax in the window decides it. Six steps run here: every step's scale equals the reference (to
    float32 rounding), and its values and history match a NumPy reference bit for bit.
    """
    rng = np.random.default_rng(1)
    sizes = (1.0, 1.2, 0.9, 8.0, 6.0, 1.0)  # a jump at step 3, and a window that remembers it
    xs = [jnp.asarray(rng.normal(size=(16, 32)).astype(np.float32) * s) for s in sizes]
    history = jnp.array([2.0, 3.0, 1.5, 2.5], jnp.float32)
    step = jax.jit(delayed_scaling_quantize)
    saturated = []
    for x in xs:
        values, scale, new_history = step(x, history)
        want_scale = np.float32(np.max(np.asarray(history))) / np.float32(E4M3_MAX)
        np.testing.assert_allclose(np.asarray(scale), want_scale, rtol=1e-6)
        want = np.clip(np.asarray(x) / np.asarray(scale), -E4M3_MAX, E4M3_MAX).astype(jnp.float8_e4m3fn)
        assert values.dtype == jnp.float8_e4m3fn
        np.testing.assert_array_equal(np.asarray(values).astype(np.float32), want.astype(np.float32))
        amax = np.max(np.abs(np.asarray(x)))
        np.testing.assert_array_equal(new_history, np.concatenate([[amax], np.asarray(history)[:-1]]))
        saturated.append(int(np.sum(np.abs(want.astype(np.float32)) == E4M3_MAX)))
        history = new_history
    assert saturated[3] > 100 and saturated[4] == saturated[5] == 0
