"""04 · linearize 与 linear_transpose：把 vjp 拆开再装回去 / linearize and linear_transpose: vjp
taken apart and rebuilt.

jax.vjp 其实是两步：先在 x 处线性化（jvp 的线性部分，非线性的计算只做一次，结果作为残差
存下），再对这个线性映射求转置。JAX 把这两步都公开了：jax.linearize 与 jax.linear_transpose。

jax.vjp is two steps: linearize at x (the linear part of jvp; the nonlinear work is done once
and kept as residuals), then transpose that linear map. JAX exposes both steps: jax.linearize
and jax.linear_transpose.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def mix(x):
    """R³ → R²，非线性，雅可比矩阵不对称 / nonlinear, with a non-square Jacobian."""
    return jnp.stack([jnp.sin(x[0]) * x[1], x[1] * jnp.exp(x[2]) - x[0] ** 2])


def test_linearize_does_the_nonlinear_work_once():
    """jax.linearize(f, x) 返回 f(x) 和一个线性函数 t ↦ J·t。f 的 Python 代码只运行一次；
    线性函数的 jaxpr 里只剩乘法和加法，tanh、exp 的值作为常量（残差）存在 consts 里。
    jax.linearize(f, x) returns f(x) and a linear function t ↦ J·t. f's Python body runs once;
    the linear function's jaxpr holds only multiplies and adds, with the values of tanh and exp
    stored as constants (residuals) in its consts.
    """
    calls = []

    def f(x):
        calls.append(1)
        return jnp.tanh(x) * jnp.exp(x)

    x = jnp.array([0.1, 0.5, 1.0])
    y, f_lin = jax.linearize(f, x)
    tangents = [jnp.ones(3), jnp.arange(3.0), -x]
    outs = [f_lin(t) for t in tangents]
    assert len(calls) == __  # how often has f's Python body run? / f 的 Python 代码运行了几次？

    for t, out in zip(tangents, outs, strict=True):
        np.testing.assert_allclose(out, jax.jvp(f, (x,), (t,))[1], rtol=1e-6)
    np.testing.assert_allclose(y, f(x), rtol=1e-6)

    closed = jax.make_jaxpr(f_lin)(x)
    prims = {e.primitive.name for e in closed.eqns}
    assert prims == __
    assert len(closed.consts) == 3  # tanh(x), 1 - tanh(x)², exp(x): the residuals / 残差


def test_linear_transpose_of_linearize_is_vjp():
    """线性化之后再转置就是 vjp：linear_transpose 需要一个“原输入”样例来确定余切的形状和
    dtype，返回的函数输出一个元组（每个原输入一项）。结果等于 J^T·w。
    Transposing the linearization gives the vjp: linear_transpose needs example primal inputs to
    fix the cotangents' shapes and dtypes, and the transposed function returns a tuple (one
    entry per primal input). The result is J^T·w.
    """
    x = jnp.array([0.3, -1.2, 0.5])
    w = jnp.array([2.0, -0.5])
    _, mix_lin = jax.linearize(mix, x)
    mix_lin_t = jax.linear_transpose(mix_lin, __)
    (ct,) = mix_lin_t(w)

    _, mix_vjp = jax.vjp(mix, x)
    np.testing.assert_allclose(ct, mix_vjp(w)[0], rtol=1e-6)
    np.testing.assert_allclose(ct, jax.jacfwd(mix)(x).T @ w, rtol=1e-6)
    assert ct.shape == (3,)


def test_transposes_of_familiar_linear_maps():
    """转置把“读”变成“写”：切片的转置是补零写回，cumsum（下三角全 1 矩阵）的转置是
    从右往左的累加和。
    Transposition turns reads into writes: the transpose of a slice pads with zeros, and the
    transpose of cumsum (a lower-triangular matrix of ones) is a right-to-left running sum.
    """
    w = jnp.array([1.0, 2.0, 3.0, 4.0])
    (every_other,) = jax.linear_transpose(lambda v: v[::2], jnp.zeros(8))(w)
    (suffix,) = jax.linear_transpose(jnp.cumsum, jnp.zeros(4))(w)

    np.testing.assert_array_equal(every_other, __)
    np.testing.assert_array_equal(suffix, __)
    np.testing.assert_array_equal(suffix, np.tril(np.ones((4, 4))).T @ np.asarray(w))


def test_linear_transpose_trusts_you():
    """⚠️ 陷阱 / trap：linear_transpose 不检查线性。遇到没有转置规则的原语（sin）它报错；
    但仿射函数 3x + 1 照样被转置，不报任何错：预测它对余切 2.0 给出什么。
    ⚠️ trap: linear_transpose does not check linearity. A primitive without a transpose rule
    (sin) makes it raise, but the affine 3x + 1 is transposed without any error: predict what
    it gives for the cotangent 2.0.
    """
    with raises_exactly(__) as info:
        jax.linear_transpose(jnp.sin, 1.0)(1.0)
    assert "Transpose rule" in str(info.value)

    (ct,) = jax.linear_transpose(lambda x: 3 * x + 1.0, 1.0)(2.0)
    assert float(ct) == __
