"""01 · 综合练习：变长序列的掩码 LSTM / capstone: a masked LSTM over variable-length sequences.

一批长度不同的序列被补齐 (pad) 成同一形状 xs [B, T, D]，lengths [B] 记录各自的真实长度。
用 lax.scan 沿时间走一遍 LSTM：t >= length 的补齐步必须原样保留 carry (h, c)，输出 0。
这样一次编译就能处理任意长度组合，结果却与逐条、不补齐地运行完全一致。补齐位置装的是垃圾
（测试里是 NaN 和 inf），按 IEEE，NaN·0 是 NaN：乘以布尔掩码只在 XLA 把它改写成 select 时
不漏，0/1 浮点掩码就漏；掩码要用 where 挑选，不能靠乘（见 test_masking.py）。

A batch of sequences of different lengths is padded to one shape xs [B, T, D]; lengths [B]
holds each true length. Run an LSTM over time with lax.scan: at padded steps (t >= length)
the carry (h, c) must stay exactly as it was and the output is 0. One compiled program then
handles every mix of lengths and still agrees with running each sequence alone, unpadded. The
padding holds garbage (NaN and inf in the tests), and in IEEE arithmetic NaN·0 is NaN: a
multiply by a boolean mask survives only where XLA rewrites it into a select, a 0/1 float
mask leaks; mask by selecting with where, do not rely on multiplying (see test_masking.py).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

B, T, D, H = 3, 7, 4, 4
LENGTHS = [5, 0, 7]  # a short one, an empty one, a full one / 短的、空的、满的


# ---- 给定代码 / given code -------------------------------------------------------------


def init_params():
    """固定的 LSTM 参数（numpy 种子 0，免去 PRNG 的编译开销）。
    Fixed LSTM parameters (numpy seed 0, which spares the PRNG's compile time).
    """
    rng = np.random.default_rng(0)
    return {
        "wx": jnp.asarray(rng.normal(size=(D, 4 * H)) / np.sqrt(D), jnp.float32),
        "wh": jnp.asarray(rng.normal(size=(H, 4 * H)) / np.sqrt(H), jnp.float32),
        "b": jnp.asarray(0.1 * rng.normal(size=4 * H), jnp.float32),
    }


def lstm_cell(params, carry, x):
    """一步 LSTM：(h, c), x -> (h', c'), h'。x 可以是 [D] 或 [B, D]。
    One LSTM step: (h, c), x -> (h', c'), h'. Works for x of shape [D] or [B, D].
    """
    h, c = carry
    z = x @ params["wx"] + h @ params["wh"] + params["b"]
    i, f, g, o = jnp.split(z, 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return (h, c), h


def initial_carry(batch_shape=()):
    """全零的 (h, c)。/ The all-zero (h, c)."""
    zeros = jnp.zeros((*batch_shape, H))
    return zeros, zeros


def numpy_lstm(params, x):
    """参考实现（纯 numpy）：逐步运行一条未补齐的序列 x [L, D]（L 可以是 0）。
    Reference in plain numpy: step through one unpadded sequence x [L, D] (L may be 0).
    Returns ((h, c), ys [L, H]).
    """
    wx, wh, b = (np.asarray(params[k], np.float64) for k in ("wx", "wh", "b"))
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    h, c, ys = np.zeros(H), np.zeros(H), []
    for x_t in np.asarray(x, np.float64):
        i, f, g, o = np.split(x_t @ wx + h @ wh + b, 4)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        ys.append(h)
    return (h, c), np.array(ys).reshape(len(ys), H)


def padded_batch(total_steps=T, pad_value=0.0):
    """固定的一批输入 xs [B, total_steps, D]：有效部分固定，补齐部分填 pad_value。
    A fixed batch xs [B, total_steps, D]: the valid part is fixed, the padding holds pad_value.
    """
    xs = np.full((B, total_steps, D), pad_value, np.float32)
    valid = np.random.default_rng(1).normal(size=(B, T, D))
    for b, n in enumerate(LENGTHS):
        xs[b, :n] = valid[b, :n]
    return jnp.asarray(xs), jnp.asarray(LENGTHS)


# ---- 你来实现 / your code ---------------------------------------------------------------


def length_mask(lengths, total_steps):
    """返回 [B, total_steps] 的布尔掩码：第 b 行第 t 列为 True 当且仅当 t < lengths[b]。
    不要写 Python 循环（lengths 在 jit 里是 tracer）。大约 1 行。

    Return a [B, total_steps] bool mask, True at (b, t) exactly when t < lengths[b].
    No Python loop (lengths is a tracer under jit). About 1 line.
    """
    return jnp.arange(total_steps)[None, :] < lengths[:, None]


def masked_lstm(params, xs, lengths):
    """在补齐的 xs [B, T, D] 上用 lax.scan 沿时间运行 lstm_cell（整批一起，carry 形状 [B, H]）。
    - 从 initial_carry((B,)) 出发；
    - 有效步 (t < length)：正常更新 (h, c)，输出 h；
    - 补齐步：(h, c) 原样保留（jnp.where 配合掩码），输出 0。
    - 补齐位置的 xs 可能是 NaN 或 inf：结果和对 params、xs 的梯度都必须有限，补齐输入的梯度为 0。
    返回 ((h, c), ys)，ys 形状 [B, T, H]。提示：scan 沿第 0 轴切片，先把时间轴换到前面。
    大约 9 行。

    Run lstm_cell over time on the padded xs [B, T, D] with lax.scan (the whole batch at
    once, carry of shape [B, H]):
    - start from initial_carry((B,));
    - at a valid step (t < length) update (h, c) as usual and output h;
    - at a padded step keep (h, c) unchanged (jnp.where with the mask) and output 0;
    - padded entries of xs may be NaN or inf: the result and the gradients with respect to
      params and xs must stay finite, and padded inputs get a zero gradient.
    Return ((h, c), ys) with ys of shape [B, T, H]. Hint: scan slices axis 0, so move time
    to the front first. About 9 lines.
    """
    batch, total_steps, _ = xs.shape
    mask = length_mask(lengths, total_steps)  # [B, T]

    def step(carry, inputs):
        x_t, m_t = inputs  # [B, D], [B]
        m = m_t[:, None]  # broadcast over the hidden axis / 沿隐藏维广播
        x_t = jnp.where(m, x_t, 0.0)  # no NaN into the cell: its gradient would be 0·NaN
        new_carry, y = lstm_cell(params, carry, x_t)
        carry = jax.tree.map(lambda new, old: jnp.where(m, new, old), new_carry, carry)
        return carry, jnp.where(m, y, 0.0)

    carry, ys = lax.scan(step, initial_carry((batch,)), (jnp.swapaxes(xs, 0, 1), mask.T))
    return carry, jnp.swapaxes(ys, 0, 1)


# ---- 检查 / checks ----------------------------------------------------------------------


def test_length_mask_marks_valid_steps():
    """掩码由比较广播得到：t < length 的位置为 True，长度 0 的行全为 False。
    The mask comes from a broadcast comparison: True where t < length; a length-0 row is all
    False.
    """
    lengths = jnp.array([2, 0, 5, 3])
    mask = jax.jit(length_mask, static_argnums=1)(lengths, 5)
    expected = np.array([[t < n for t in range(5)] for n in [2, 0, 5, 3]])
    assert mask.dtype == jnp.bool_
    np.testing.assert_array_equal(mask, expected)


def test_final_state_equals_unpadded_run():
    """每条序列的最终 (h, c) 等于把它切到真实长度、单独运行的结果；长度 0 时停在初始状态。
    Each sequence's final (h, c) equals running it alone, sliced to its true length; with
    length 0 it stays at the initial state.
    """
    params = init_params()
    xs, lengths = padded_batch()
    (h, c), _ = jax.device_get(jax.jit(masked_lstm)(params, xs, lengths))  # -> numpy
    assert h.shape == c.shape == (B, H)
    for b, n in enumerate(LENGTHS):
        (h_ref, c_ref), _ = numpy_lstm(params, np.asarray(xs)[b, :n])
        np.testing.assert_allclose(h[b], h_ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c[b], c_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(h[1], np.zeros(H))  # length 0 / 长度 0
    np.testing.assert_array_equal(c[1], np.zeros(H))


def test_padded_outputs_are_zero_valid_outputs_match():
    """补齐位置的输出恰好是 0；有效位置的输出与未补齐运行逐步一致。掩码只挡住补齐：有效步里
    真的 NaN 照样传下去（不要把输入里的 NaN 换掉）。
    Outputs at padded positions are exactly 0; valid outputs match the unpadded run step by
    step. The mask hides the padding only: a real NaN at a valid step still propagates (do not
    replace the NaNs of the input).
    """
    params = init_params()
    xs, lengths = padded_batch(pad_value=np.nan)  # garbage in the padding / 补齐位置是垃圾
    _, ys = jax.device_get(jax.jit(masked_lstm)(params, xs, lengths))  # -> numpy
    assert ys.shape == (B, T, H)
    for b, n in enumerate(LENGTHS):
        _, ys_ref = numpy_lstm(params, np.asarray(xs)[b, :n])
        np.testing.assert_allclose(ys[b, :n], ys_ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(ys[b, n:], np.zeros((T - n, H)))
    broken = xs.at[0, 1, 0].set(jnp.nan)  # a real NaN at a valid step of example 0 / 有效步里的 NaN
    (h, c), ys = jax.device_get(jax.jit(masked_lstm)(params, broken, lengths))
    assert np.isnan(h[0]).all() and np.isnan(c[0]).all() and np.isnan(ys[0, 1:LENGTHS[0]]).all()
    assert np.isfinite(h[1:]).all() and np.isfinite(ys[1:]).all()  # the others are untouched


def test_extra_padding_under_jit_changes_nothing():
    """在 jit 下把同一批补到 T+5、补齐值换成 inf：最终状态不变，多出的输出全为 0。
    Under jit, padding the same batch to T+5 with inf changes no final state, and the extra
    outputs are all 0.
    """
    params = init_params()
    run = jax.jit(masked_lstm)
    (h, c), ys = jax.device_get(run(params, *padded_batch()))
    (h_long, c_long), ys_long = jax.device_get(run(params, *padded_batch(T + 5, pad_value=np.inf)))
    np.testing.assert_allclose(h_long, h, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(c_long, c, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ys_long[:, :T], ys, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(ys_long[:, T:], np.zeros((B, 5, H)))


def test_gradients_flow_only_from_valid_steps():
    """梯度只来自有效步：补齐值从 0 换成 NaN，对参数的梯度不变（仍然有限）；对补齐输入的梯度恰好为 0。
    Gradients come only from valid steps: NaN padding instead of zeros leaves the parameter
    gradient unchanged (and finite), and the gradient with respect to padded inputs is exactly 0.
    """

    def loss(params, xs, lengths):
        (h, c), ys = masked_lstm(params, xs, lengths)
        return jnp.sum(h**2) + jnp.sum(c) + jnp.sum(jnp.sin(ys))

    grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
    params = init_params()
    g_params, g_xs = jax.device_get(grad(params, *padded_batch()))
    g_params_big, g_xs_big = jax.device_get(grad(params, *padded_batch(pad_value=np.nan)))
    for name in params:
        np.testing.assert_allclose(g_params_big[name], g_params[name], rtol=1e-5, atol=1e-6)
        assert np.abs(g_params[name]).sum() > 0  # something does flow / 确有梯度
    padded = np.arange(T)[None, :] >= np.array(LENGTHS)[:, None]  # [B, T]
    np.testing.assert_array_equal(g_xs_big[padded], 0.0)
    np.testing.assert_array_equal(g_xs[padded], 0.0)
