"""07 · 让内核可微：custom_vjp 与 custom_jvp / a differentiable kernel: custom_vjp and custom_jvp.

pallas_call 支持前向模式（jvp），但反向模式求导会失败：pallas_call 的 JVP 规则生成一个同时算原始
输出和切向量的新内核，jax.linearize 无法把已知的原始部分和未知的切向部分分开。给它配一个
custom_vjp（前向保存残差，反向用另一个内核或 jnp 算余切），代价是失去前向模式；要两种模式都
能用，就写 custom_jvp，并让切向量留在内核外面。

pallas_call supports forward mode (jvp), but reverse mode fails: pallas_call's JVP rule builds
one new kernel that computes the primal output and the tangent together, and jax.linearize cannot
split the known primal part from the unknown tangent part. A custom_vjp fixes it (the forward pass
saves residuals, the backward pass computes the cotangent with another kernel or jnp) at the price
of forward mode; to keep both modes, write a custom_jvp and keep the tangent outside the kernel.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.test_util import check_grads

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)


def _elementwise(kernel, *args):
    """整个数组一个块的逐元素 pallas_call。/ An elementwise pallas_call, one block."""
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(args[0].shape, args[0].dtype), interpret=True
    )(*args)


def _silu_kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x * jax.nn.sigmoid(x)


def _silu_grad_kernel(x_ref, o_ref):
    """d silu / dx = s + x·s·(1 - s)，s = sigmoid(x)。"""
    x = x_ref[...]
    s = jax.nn.sigmoid(x)
    o_ref[...] = s + x * s * (1.0 - s)


def _silu_bwd_kernel(x_ref, g_ref, o_ref):
    """g 乘以 d silu / dx。/ g times d silu / dx."""
    x = x_ref[...]
    s = jax.nn.sigmoid(x)
    o_ref[...] = g_ref[...] * (s + x * s * (1.0 - s))


def silu_pallas(x):
    """没有自定义导数的 SiLU 内核。/ The SiLU kernel without a custom derivative."""
    return _elementwise(_silu_kernel, x)


def test_reverse_mode_through_pallas_call_fails():
    """⚠️ 陷阱 / trap：jax.jvp 能穿过 pallas_call，jax.grad 却失败，而且失败在线性化这一步
    （jax.linearize 报同样的错），还没走到转置：JVP 规则把原始输出和切向量放进同一个新内核。
    jax.jvp goes through a pallas_call, jax.grad does not, and it fails while linearizing
    (jax.linearize raises the same error), before any transposition: the JVP rule puts the
    primal output and the tangent into one new kernel.
    """
    x = jnp.linspace(-2.0, 2.0, 8)
    _, tangent = jax.jit(lambda x, t: jax.jvp(silu_pallas, (x,), (t,)))(x, jnp.ones_like(x))
    np.testing.assert_allclose(tangent, jax.vmap(jax.grad(jax.nn.silu))(x), rtol=1e-5)
    with raises_exactly(__) as info:
        jax.grad(lambda x: silu_pallas(x).sum())(x)
    assert "Linearization failed" in str(info.value)
    with pytest.raises(type(info.value), match="Linearization failed"):
        jax.linearize(silu_pallas, x)


@jax.custom_vjp
def silu(x):
    return silu_pallas(x)


def silu_fwd(x):
    """前向：返回 (输出, 残差)。反向只需要 x。一行。
    Forward: return (output, residuals). The backward pass needs only x. One line.
    """
    todo("silu_fwd: (输出, 残差) / (output, residuals)")


def silu_bwd(x, g):
    """反向：用给定的 _silu_bwd_kernel 和 _elementwise 算 g 乘以 d silu / dx，返回一个元组
    （每个原始参数一个余切）。一行。

    Backward: use the given _silu_bwd_kernel and _elementwise to compute g times d silu / dx;
    return a tuple (one cotangent per primal argument). One line.
    """
    todo("silu_bwd: 用反向内核 / with the backward kernel")


silu.defvjp(silu_fwd, silu_bwd)


@pytest.mark.parametrize("shape", [(8,), (4, 16), (2, 3, 5), (32, 32)])
def test_custom_vjp_kernel_has_correct_gradients(shape):
    """custom_vjp 之后：jit(grad) 等于 jnp 版 SiLU 的梯度，check_grads 用有限差分验证反向模式，
    前向和反向都在内核里算（梯度的 jaxpr 里有两个 pallas_call：fwd 或 bwd 里用 jnp 不算数）。
    32×32 时评判还读反向的代价：本该在内核里做的运算放到内核外用 jnp 做（超过总运算量的几个
    百分点），也不算数。
    With the custom_vjp: jit(grad) equals the gradient of the jnp SiLU, check_grads
    verifies reverse mode against finite differences, and both passes run a kernel (the
    gradient's jaxpr holds two pallas_calls: jnp in fwd or bwd does not count). On the 32×32
    input the judge also reads the backward pass's cost: work the kernel could do, done by jnp
    outside it (more than a few percent of the flops), does not count either.
    """
    x = jax.random.normal(jax.random.key(1), shape) * 2
    loss = lambda x: (silu(x) ** 2).sum()  # noqa: E731
    grad = jax.jit(jax.grad(loss))(x)
    expected = jax.grad(lambda x: (jax.nn.silu(x) ** 2).sum())(x)
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-6)
    check_grads(jax.jit(silu), (x,), order=1, modes=["rev"], atol=1e-2, rtol=1e-2)
    assert str(jax.make_jaxpr(jax.grad(loss))(x)).count("pallas_call") == 2


def test_custom_vjp_gives_up_forward_mode():
    """⚠️ 陷阱 / trap：custom_vjp 只定义了反向模式。原来能用的 jax.jvp（以及 jacfwd、前向套
    反向的 Hessian）现在直接报错。
    A custom_vjp defines reverse mode only. The jax.jvp that used to work (and jacfwd, and a
    forward-over-reverse Hessian) now raises.
    """
    x = jnp.linspace(-2.0, 2.0, 8)
    with raises_exactly(__) as info:
        jax.jvp(silu, (x,), (jnp.ones_like(x),))
    assert "forward-mode" in str(info.value)


@jax.custom_jvp
def silu_tangent_in_kernel(x):
    return silu_pallas(x)


@silu_tangent_in_kernel.defjvp
def _tangent_in_kernel_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return silu_tangent_in_kernel(x), _elementwise(_silu_bwd_kernel, x, t)  # t goes into a kernel


def test_a_tangent_inside_a_kernel_cannot_be_transposed():
    """⚠️ 陷阱 / trap：custom_jvp 规则把切向量 t 送进内核：jvp 没问题，grad 却要转置这条规则，
    而 pallas_call 没有转置规则。这次失败在转置这一步，错误类型也和线性化失败不同。
    A custom_jvp rule that feeds the tangent t into a kernel: jvp is fine, but grad has to
    transpose the rule, and pallas_call has no transpose rule. This time it fails while
    transposing, with another exception type than the failed linearization.
    """
    x = jnp.linspace(-2.0, 2.0, 8)
    _, tangent = jax.jvp(silu_tangent_in_kernel, (x,), (jnp.ones_like(x),))
    np.testing.assert_allclose(tangent, jax.vmap(jax.grad(jax.nn.silu))(x), rtol=1e-5)
    with raises_exactly(__) as info:
        jax.grad(lambda x: silu_tangent_in_kernel(x).sum())(x)
    assert "Transpose rule" in str(info.value)


@jax.custom_jvp
def silu_both_modes(x):
    return silu_pallas(x)


@silu_both_modes.defjvp
def silu_both_modes_jvp(primals, tangents):
    """custom_jvp 规则：返回 (输出, 切向量)。导数 d silu / dx 用 _silu_grad_kernel 在内核里算
    （它只读 x），切向量 t 留在内核外面，用 jnp 乘上去：JAX 只需要转置这一个乘法。两行。

    A custom_jvp rule: return (output, tangent). Compute the derivative d silu / dx in a kernel
    with _silu_grad_kernel (it reads only x), and keep the tangent t outside the kernel,
    multiplied in with jnp: that multiplication is all JAX has to transpose. Two lines.
    """
    todo(
        "silu_both_modes_jvp: 导数在内核里，切向量在外面 / the derivative in a kernel, the tangent outside"
    )


@pytest.mark.parametrize("shape", [(8,), (4, 16)])
def test_custom_jvp_kernel_keeps_both_modes(shape):
    """✅ 推荐写法：切向量留在内核外的 custom_jvp 同时支持前向和反向模式：jvp、jit(grad) 都等于
    jnp 版 SiLU 的导数，check_grads 两种模式都通过。导数也由内核算：jvp 的 jaxpr 里有两个
    pallas_call。
    A custom_jvp whose tangent stays outside the kernel supports both modes: jvp and jit(grad)
    both equal the jnp SiLU's derivative, and check_grads passes in both modes. The derivative
    comes from a kernel too: jvp's jaxpr holds two pallas_calls.
    """
    x = jax.random.normal(jax.random.key(2), shape) * 2
    t = jax.random.normal(jax.random.key(3), shape)
    _, tangent = jax.jit(lambda x, t: jax.jvp(silu_both_modes, (x,), (t,)))(x, t)
    np.testing.assert_allclose(tangent, jax.jvp(jax.nn.silu, (x,), (t,))[1], rtol=1e-5, atol=1e-6)
    jvp_jaxpr = jax.make_jaxpr(lambda x, t: jax.jvp(silu_both_modes, (x,), (t,)))(x, t)
    assert str(jvp_jaxpr).count("pallas_call") == 2  # the SiLU kernel and the derivative kernel
    grad = jax.jit(jax.grad(lambda x: (silu_both_modes(x) ** 2).sum()))(x)
    np.testing.assert_allclose(
        grad, jax.grad(lambda x: (jax.nn.silu(x) ** 2).sum())(x), rtol=1e-5, atol=1e-6
    )
    check_grads(jax.jit(silu_both_modes), (x,), order=1, modes=["fwd", "rev"], atol=1e-2, rtol=1e-2)
