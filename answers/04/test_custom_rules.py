"""04 · 自定义求导规则：custom_jvp 与 custom_vjp / custom differentiation rules.

custom_jvp 给出前向规则（切向量必须线性依赖于输入切向量）；JAX 自己把它转置，所以反向模式也
免费得到。custom_vjp 给出 fwd（原值 + 残差）和 bwd（余切），只能用于反向模式。两者都用来：
修正数值上不稳定的导数、跳过不可微（或不可反向求导）的实现、注入隐函数定理给出的导数。

custom_jvp states the forward rule (the output tangent must be linear in the input tangents);
JAX transposes it itself, so reverse mode comes for free. custom_vjp states fwd (primal output
plus residuals) and bwd (cotangents) and works in reverse mode only. Both are used to fix
numerically unstable derivatives, to skip implementations that cannot be differentiated (or not
in reverse mode), and to inject derivatives from the implicit function theorem.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def test_custom_jvp_makes_softplus_stable():
    """log(1 + eˣ) 在 x = 100 时 eˣ 溢出：值是 inf，导数 eˣ/(1 + eˣ) = inf/inf = nan。
    稳定的写法是 max(x, 0) + log1p(e^-|x|)；用 custom_jvp 把导数写成一个处处有限的表达式
    （乘以切向量 t），而且规则本身可微，二阶导数也对。
    log(1 + eˣ) overflows at x = 100: the value is inf and the derivative eˣ/(1 + eˣ) is
    inf/inf = nan. The stable form is max(x, 0) + log1p(e^-|x|); custom_jvp states the derivative
    (times the tangent t) as an expression that is finite everywhere, and the rule is itself
    differentiable, so second derivatives are right too.
    """

    def naive(x):
        return jnp.log1p(jnp.exp(x))

    assert np.isinf(naive(100.0)) and np.isnan(jax.grad(naive)(100.0))

    @jax.custom_jvp
    def softplus(x):
        return jnp.maximum(x, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(x)))

    @softplus.defjvp
    def softplus_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), jax.nn.sigmoid(x) * t

    xs = jnp.array([-100.0, -3.0, 0.0, 0.5, 100.0])
    np.testing.assert_allclose(softplus(xs), jax.nn.softplus(xs), rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(jax.grad(softplus))(xs), jax.nn.sigmoid(xs), rtol=1e-6)
    s = jax.nn.sigmoid(xs)
    np.testing.assert_allclose(jax.vmap(jax.grad(jax.grad(softplus)))(xs), s * (1 - s), atol=1e-7)
    grad_prims = {e.primitive.name for e in jax.make_jaxpr(jax.grad(softplus))(1.0).eqns}
    assert "logistic" in grad_prims  # your rule, not the autodiff of the primal / 用的是你的规则


def test_custom_jvp_gives_both_modes_custom_vjp_only_reverse():
    """⚠️ 陷阱 / trap：custom_jvp 的规则是线性的，JAX 能把它转置，所以 grad 和 jvp 都能用；
    custom_vjp 只定义了反向，前向模式（jvp、jacfwd）会报错。
    ⚠️ trap: a custom_jvp rule is linear and JAX can transpose it, so both grad and jvp work;
    a custom_vjp defines reverse mode only, and forward mode (jvp, jacfwd) raises.
    """

    @jax.custom_jvp
    def cube_jvp(x):
        return x**3

    cube_jvp.defjvp(lambda p, t: (p[0] ** 3, 3 * p[0] ** 2 * t[0]))

    @jax.custom_vjp
    def cube_vjp(x):
        return x**3

    cube_vjp.defvjp(lambda x: (x**3, x), lambda x, g: (3 * x**2 * g,))

    def works(transform, fun):
        try:
            transform(fun)(2.0)
        except Exception as error:  # JAX refuses the mode / JAX 拒绝这种模式
            assert "can't apply forward-mode autodiff" in str(error), error
            return False
        return True

    def jvp(fun):
        return lambda x: jax.jvp(fun, (x,), (1.0,))[1]

    table = {
        f"{kind} {mode}": works(transform, fun)
        for kind, fun in (("custom_jvp", cube_jvp), ("custom_vjp", cube_vjp))
        for mode, transform in (("grad", jax.grad), ("jvp", jvp))
    }
    assert len(table) == 4
    assert sorted(name for name, ok in table.items() if not ok) == ["custom_vjp jvp"]


def test_custom_vjp_bwd_returns_a_tuple_of_cotangents():
    """custom_vjp 的 bwd 必须返回元组，每个原输入一项（不需要导数的输入可以给 None）。
    这里：前向把 x 乘以 s，反向先按链式法则求 x 的余切，再裁剪到 [-1, 1]（梯度裁剪）；
    s 不求导。bwd 只返回一个数组（不是元组）时报错。
    custom_vjp's bwd must return a tuple with one entry per primal input (None for an input that
    needs no derivative). Here the forward pass scales x by s; the backward pass takes x's
    cotangent by the chain rule and clips it to [-1, 1] (gradient clipping); s gets no
    derivative. A bwd that returns a bare array (not a tuple) raises.
    """

    @jax.custom_vjp
    def clip_gradient(x, s):
        return x * s

    def fwd(x, s):
        return x * s, s

    def bwd(s, g):
        return (jnp.clip(g * s, -1.0, 1.0), None)

    clip_gradient.defvjp(fwd, bwd)

    xs = jnp.array([-2.0, 0.1, 3.0])
    loss = lambda x: jnp.sum(clip_gradient(x, 2.0) ** 2)  # noqa: E731
    np.testing.assert_allclose(jax.grad(loss)(xs), np.clip(8.0 * xs, -1.0, 1.0))
    assert float(jax.grad(lambda s: clip_gradient(1.0, s))(2.0)) == 0.0

    @jax.custom_vjp
    def sloppy(x):
        return x

    sloppy.defvjp(lambda x: (x, None), lambda _, g: jnp.clip(g, -1.0, 1.0))  # not a tuple
    with raises_exactly(TypeError) as info:
        jax.grad(sloppy)(1.0)
    assert "must produce a tuple" in str(info.value)


def test_nondiff_argnums_for_a_function_argument():
    """函数不是 JAX 类型，不能作为普通参数传给 custom_vjp 函数；用 nondiff_argnums 声明它，
    它会作为 bwd 的第一个参数传入（在残差之前）。
    A function is not a JAX type and cannot be an ordinary argument of a custom_vjp function;
    declare it in nondiff_argnums and it is passed to bwd first (before the residuals).
    """

    def apply_plain(fun, x):
        return fun(x)

    plain = jax.custom_vjp(apply_plain)
    plain.defvjp(lambda fun, x: (fun(x), x), lambda res, g: (None, g))
    with raises_exactly(TypeError) as info:
        jax.grad(lambda x: plain(jnp.sin, x))(1.0)
    assert "is not a valid JAX type" in str(info.value)

    @partial(jax.custom_vjp, nondiff_argnums=(0,))
    def apply(fun, x):
        return fun(x)

    def fwd(fun, x):
        return fun(x), x

    def bwd(fun, x, g):  # the nondiff argument first, then the residuals, then g
        _, fun_vjp = jax.vjp(fun, x)
        return fun_vjp(g)

    apply.defvjp(fwd, bwd)
    for fun in (jnp.sin, jnp.tanh, lambda x: x**3):
        np.testing.assert_allclose(
            jax.grad(partial(apply, fun))(0.7), jax.grad(fun)(0.7), rtol=1e-6
        )


def test_custom_rules_must_not_close_over_traced_values():
    """⚠️ 陷阱 / trap：custom_vjp 的 bwd 闭包捕获了正在被求导的值 k，对 k 求 grad 时
    tracer 泄漏。把 k 作为显式参数传入，并在 bwd 里返回它的余切。
    ⚠️ trap: a custom_vjp whose bwd closes over k, the value being differentiated, leaks a tracer
    under grad with respect to k. Pass k as an explicit argument and return its cotangent from
    bwd.
    """

    def leaky(k):
        @jax.custom_vjp
        def scale(x):
            return k * x

        scale.defvjp(lambda x: (k * x, None), lambda _, g: (g * k,))
        return scale(2.0)

    with raises_exactly(jax.errors.UnexpectedTracerError):
        jax.grad(leaky)(3.0)

    @jax.custom_vjp
    def scale(x, k):
        return k * x

    scale.defvjp(lambda x, k: (k * x, (x, k)), lambda res, g: (g * res[1], g * res[0]))
    assert float(jax.grad(lambda k: scale(2.0, k))(3.0)) == 2.0
    assert float(jax.grad(lambda x: scale(x, 3.0))(2.0)) == 3.0


def test_forward_mode_through_while_loop_custom_jvp_for_reverse():
    """牛顿迭代求 √a 用 while_loop（步数取决于数值）：前向模式能穿过，grad 不能。
    用 custom_jvp 给出由隐式方程 x² = a 求得的导数，JAX 只转置这条规则，从不反向穿过
    while_loop，于是 grad 也能用了。
    Newton's √a in a while_loop (the number of steps depends on the values): forward mode goes
    through it, grad does not. A custom_jvp states the derivative that the implicit equation
    x² = a gives; JAX transposes only that rule and never runs the while_loop backwards, so
    grad works too.
    """

    def newton_sqrt(a):
        return lax.while_loop(
            lambda x: jnp.abs(x * x - a) > 1e-6 * a, lambda x: 0.5 * (x + a / x), a
        )

    a = 2.0
    np.testing.assert_allclose(jax.jacfwd(newton_sqrt)(a), 0.5 / np.sqrt(a), rtol=1e-5)
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jax.grad(newton_sqrt)(a)

    @jax.custom_jvp
    def sqrt(a):
        return newton_sqrt(a)

    @sqrt.defjvp
    def sqrt_jvp(primals, tangents):
        (a,), (t,) = primals, tangents
        x = sqrt(a)
        return x, t / (2 * x)

    for a in (0.5, 2.0, 9.0):
        np.testing.assert_allclose(jax.grad(sqrt)(a), 0.5 / np.sqrt(a), rtol=1e-5)
