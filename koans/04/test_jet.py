"""04 · jax.experimental.jet：一遍推出高阶导数 / Taylor-mode AD: higher-order derivatives
in one pass.

jet(f, (x,), ((x1, x2, ...),)) 把一条输入曲线 x(t) = x + x1·t + x2·t²/2! + … 推过 f，返回
f(x) 和 f(x(t)) 在 t = 0 处的各阶导数。默认 factorial_scaled=True：输入和输出的第 k 项都是
k 阶导数（不是 Taylor 系数）。嵌套 k 次 grad 的程序可能指数膨胀（多快取决于 f）；jet 只做一遍。

jet(f, (x,), ((x1, x2, ...),)) pushes the input curve x(t) = x + x1·t + x2·t²/2! + … through f
and returns f(x) and the derivatives of f(x(t)) at t = 0. By default (factorial_scaled=True)
term k of the input and output series is the k-th derivative, not a Taylor coefficient. Nesting
grad k times can blow the program up exponentially (how fast depends on f); jet makes one pass.
"""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import jet

from jaxkoans import __  # noqa: F401  (the koans' blanks)


def f(x):
    return jnp.exp(jnp.sin(x)) * jnp.tanh(x)


def nested_grad(fun, order):
    """fun 的 order 阶导数：grad 嵌套 order 次 / the order-th derivative by nesting grad."""
    for _ in range(order):
        fun = jax.grad(fun)
    return fun


def derivatives(fun, x, orders):
    """参照：1 … orders 阶导数，一次编译 / reference derivatives 1 … orders, one compile."""
    return jax.jit(lambda x: [nested_grad(fun, k)(x) for k in range(1, orders + 1)])(x)


def test_jet_series_out_holds_derivatives():
    """沿直线 x(t) = x + t（输入序列 (1, 0, 0, …)），jet 的输出序列第 k 项（下标 k-1）就是
    f 的 k 阶导数；原函数值单独返回。
    Along the straight line x(t) = x + t (input series (1, 0, 0, …)), entry k of jet's output
    series (index k - 1) is the k-th derivative of f; the primal value comes back separately.
    """
    x = 0.3
    y, series_out = jax.jit(lambda x: jet.jet(f, (x,), ((1.0, 0.0, 0.0, 0.0),)))(x)
    third = series_out[__]

    assert len(series_out) == __
    np.testing.assert_allclose(y, f(x), rtol=1e-6)
    reference = derivatives(f, x, 4)
    np.testing.assert_allclose(third, reference[2], rtol=1e-5)
    np.testing.assert_allclose(series_out, reference, rtol=1e-4)


def test_factorial_scaled_false_gives_taylor_coefficients():
    """factorial_scaled=False 时两边都是 Taylor 系数：第 k 项 = k 阶导数 / k!。
    用这些系数写出的多项式逼近 f(x + h)，误差随 h 五阶下降。
    With factorial_scaled=False both series hold Taylor coefficients: term k = k-th derivative
    / k!. The polynomial built from them approximates f(x + h) with an error of order h⁵.
    """
    x = 0.3

    @jax.jit
    def both(x):
        _, derivs = jet.jet(f, (x,), ((1.0, 0.0, 0.0, 0.0),))
        _, coeffs = jet.jet(f, (x,), ((1.0, 0.0, 0.0, 0.0),), factorial_scaled=False)
        return derivs, coeffs

    derivs, coeffs = both(x)
    for k in range(1, 5):
        np.testing.assert_allclose(derivs[k - 1], __ * coeffs[k - 1], rtol=1e-5)

    with jax.enable_x64(True):  # float32 round-off would hide an O(h⁵) error / 否则被舍入淹没
        x64 = jnp.float64(x)
        _, coeffs = both(x64)  # float64 in, float64 out: a new compile / 新的编译
        assert coeffs[0].dtype == jnp.float64

        def taylor_error(h):
            poly = f(x64) + sum(c * h**k for k, c in enumerate(coeffs, start=1))
            return abs(float(poly) - float(f(x64 + h)))

        order = np.log2(taylor_error(0.05) / taylor_error(0.025))
    assert 4.5 < order < 5.5, order


def test_jet_composes_along_a_curve():
    """输入序列就是输入曲线的导数：先用 jet 得到曲线 c(t) 的导数，再把它们喂给 h 的 jet，
    得到 h(c(t)) 的高阶导数，与对复合函数嵌套 grad 一致（高阶链式法则，Faà di Bruno）。
    The input series are the input curve's derivatives: jet gives the derivatives of the curve
    c(t), and feeding them to h's jet gives the higher derivatives of h(c(t)), the same as
    nested grads of the composition (the higher-order chain rule, Faà di Bruno).
    """

    def curve(t):
        return jnp.stack([jnp.cos(t), jnp.sin(t)])

    def h(p):
        return p[0] * p[1] ** 2

    @jax.jit
    def h_series_along_curve(t0):
        c0, c_series = jet.jet(curve, (t0,), ((1.0, 0.0, 0.0),))
        return jet.jet(h, (c0,), (__,))[1]

    t0 = 0.4
    h_series = h_series_along_curve(t0)

    composed = lambda t: h(curve(t))  # noqa: E731
    np.testing.assert_allclose(h_series, derivatives(composed, t0, 3), rtol=1e-4)


def test_nested_grad_blows_up_jet_does_not():
    """要 5 阶导数，jet 需要长度为 5 的输入序列。对这个 f（复合函数的乘积），嵌套 grad 的 jaxpr
    每升一阶就乘上 2 倍以上（指数增长），jet 的只是多项式增长：到 5 阶时 jet 的程序已经更小。
    增长多快取决于 f：exp 的导数就是它自己，嵌套 grad 每阶只多 2 个方程，这时 jet 反而更大。
    For the 5th derivative jet needs an input series of length 5. For this f (a product of
    compositions) nested grad's jaxpr more than doubles with every order (exponential growth),
    jet's grows polynomially: by order 5 jet's program is already the smaller one. How fast it
    grows depends on f: exp is its own derivative, nested grad adds 2 equations per order, and
    there jet's program is the bigger one.
    """
    x = 0.3

    def by_jet(order):
        return lambda x: jet.jet(f, (x,), ((1.0,) + (0.0,) * (order - 1),))[1][-1]

    fifth = jax.jit(lambda x: jet.jet(f, (x,), ((1.0,) + (0.0,) * __,))[1][-1])(x)
    np.testing.assert_allclose(fifth, jax.jit(nested_grad(f, 5))(x), rtol=1e-3)

    def eqns(fun):
        return len(jax.make_jaxpr(fun)(x).eqns)

    nested = [eqns(nested_grad(f, k)) for k in range(1, 6)]
    taylor = [eqns(by_jet(k)) for k in range(1, 6)]
    assert all(b > 2 * a for a, b in itertools.pairwise(nested)), nested  # exponential / 指数
    assert all(b < 2 * a for a, b in itertools.pairwise(taylor[1:])), taylor  # polynomial / 多项式
    assert nested[-1] > taylor[-1], (nested, taylor)

    nested_exp = [eqns(nested_grad(jnp.exp, k)) for k in range(1, 6)]
    assert nested_exp == [2, 4, 6, 8, 10]  # linear for exp / 对 exp 是线性的
    third_by_jet = lambda x: jet.jet(jnp.exp, (x,), ((1.0, 0.0, 0.0),))[1][-1]  # noqa: E731
    assert eqns(third_by_jet) > nested_exp[2]  # jet's pass costs more than exp's nested grads
