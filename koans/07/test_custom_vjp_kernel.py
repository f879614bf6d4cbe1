"""07 · 让内核可微：custom_vjp / a differentiable kernel with custom_vjp.

pallas_call 支持前向模式（jvp），但反向模式求导会失败。给它配一个 custom_vjp：前向保存
残差，反向用另一个内核（或 jnp）算出输入的余切。

pallas_call supports forward mode (jvp), but reverse-mode differentiation fails. Give it a
custom_vjp: the forward pass saves residuals, the backward pass computes the input cotangent
with another kernel (or jnp).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.test_util import check_grads

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)


def _elementwise(kernel, *args):
    """整个数组一个块的逐元素 pallas_call。/ An elementwise pallas_call, one block."""
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(args[0].shape, args[0].dtype), interpret=True)(*args)


def _silu_kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x * jax.nn.sigmoid(x)


def silu_pallas(x):
    """没有自定义导数的 SiLU 内核。/ The SiLU kernel without a custom derivative."""
    return _elementwise(_silu_kernel, x)


def test_reverse_mode_through_pallas_call_fails():
    """⚠️ 陷阱 / trap：jax.grad 穿过 pallas_call 会报错（内核没有转置规则），jax.jvp 却可以。
    jax.grad through a pallas_call fails (the kernel has no transpose rule), yet jax.jvp works.
    """
    x = jnp.linspace(-2.0, 2.0, 8)
    _, tangent = jax.jit(lambda x, t: jax.jvp(silu_pallas, (x,), (t,)))(x, jnp.ones_like(x))
    np.testing.assert_allclose(tangent, jax.vmap(jax.grad(jax.nn.silu))(x), rtol=1e-5)
    with pytest.raises(__) as info:
        jax.grad(lambda x: silu_pallas(x).sum())(x)
    assert "reverse-mode" in str(info.value)


def _silu_bwd_kernel(x_ref, g_ref, o_ref):
    x = x_ref[...]
    s = jax.nn.sigmoid(x)
    o_ref[...] = g_ref[...] * (s + x * s * (1.0 - s))


@jax.custom_vjp
def silu(x):
    return silu_pallas(x)


def silu_fwd(x):
    """前向：返回 (输出, 残差)。反向只需要 x。一行。
    Forward: return (output, residuals). The backward pass needs only x. One line.
    """
    todo("silu_fwd: (输出, 残差) / (output, residuals)")


def silu_bwd(x, g):
    """反向：d silu / dx = s + x·s·(1 - s)，s = sigmoid(x)。用给定的 _silu_bwd_kernel 和
    _elementwise 算 g 乘以它，返回一个元组（每个原始参数一个余切）。一行。

    Backward: d silu / dx = s + x·s·(1 - s) with s = sigmoid(x). Use the given
    _silu_bwd_kernel and _elementwise to compute g times it; return a tuple (one cotangent per
    primal argument). One line.
    """
    todo("silu_bwd: 用反向内核 / with the backward kernel")


silu.defvjp(silu_fwd, silu_bwd)


@pytest.mark.parametrize("shape", [(8,), (4, 16), (2, 3, 5)])
def test_custom_vjp_kernel_has_correct_gradients(shape):
    """custom_vjp 之后：jit(grad) 等于 jnp 版 SiLU 的梯度，check_grads 用有限差分验证反向模式。
    With the custom_vjp: jit(grad) equals the gradient of the jnp SiLU, and check_grads
    verifies reverse mode against finite differences.
    """
    x = jax.random.normal(jax.random.key(1), shape) * 2
    grad = jax.jit(jax.grad(lambda x: (silu(x) ** 2).sum()))(x)
    expected = jax.grad(lambda x: (jax.nn.silu(x) ** 2).sum())(x)
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-6)
    check_grads(jax.jit(silu), (x,), order=1, modes=["rev"], atol=1e-2, rtol=1e-2)
