"""11 · 矩阵指数的导数 / the derivative of the matrix exponential.

`jax.scipy.linalg.expm_frechet(A, E)` 返回 expm(A) 和 L(A, E)：expm 在 A 处沿方向 E 的
方向导数（Fréchet 导数）。矩阵不满足乘法交换律，所以标量的链式法则在这里一般不成立；L 与分块
矩阵的指数、与梯度（伴随）的关系才是用得上的事实。

`jax.scipy.linalg.expm_frechet(A, E)` returns expm(A) and L(A, E): the directional (Fréchet)
derivative of expm at A along E. Matrices do not commute, so the scalar chain rule does not
hold here in general; what L has to do with the exponential of a block matrix and with the
gradient (the adjoint) are the facts worth knowing.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import expm_frechet

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------


def upper_block(x, y):
    """[[x, y], [0, x]]。"""
    return jnp.block([[x, y], [jnp.zeros_like(x), x]])


def diagonal_blocks(x, y):
    """[[x, 0], [0, y]]：分块对角矩阵的指数就是各块的指数。
    [[x, 0], [0, y]]: the exponential of a block-diagonal matrix is the blocks' exponentials."""
    zero = jnp.zeros_like(x)
    return jnp.block([[x, zero], [zero, y]])


# ---- 检查 / checks ----------------------------------------------------------------------


def test_the_frechet_derivative_of_expm():
    """expm_frechet 一次调用给出 expm(A) 和 L(A, E)，与中心差分相符。标量有 d/dt e^(a+tε) =
    ε·e^a，矩阵却一般没有这条链式法则（A 与 E 不可交换）。两个恒等式：分块矩阵 [[A, E], [0, A]]
    的指数里有一块就是 L(A, E)；L(A, ·) 的伴随也是一个 Fréchet 导数，只是换了一个点：
    ⟨W, L(A, E)⟩ = ⟨L(?, W), E⟩，所以 Σ W ⊙ expm(A) 对 A 的梯度就是那个点上沿 W 的 L。
    三个矩阵的运算都装在一次批量调用里（一次编译）。
    One call of expm_frechet gives expm(A) and L(A, E), which matches a central difference.
    Scalars have d/dt e^(a+tε) = ε·e^a; matrices in general have no such chain rule (A and E do
    not commute). Two identities: one block of the exponential of [[A, E], [0, A]] is L(A, E);
    and the adjoint of L(A, ·) is a Fréchet derivative too, at another point:
    ⟨W, L(A, E)⟩ = ⟨L(?, W), E⟩, so the gradient of Σ W ⊙ expm(A) in A is L at that point along
    W. The three matrices' work is one batched call (one compile).
    """
    rng = np.random.default_rng(0)
    a, e, w = (jnp.asarray(rng.normal(size=(4, 4))) for _ in range(3))
    h = 1e-5
    matrices = jnp.stack(
        [
            diagonal_blocks(a, __),  # L(A, E) and the adjoint's Fréchet derivative
            upper_block(a, e),
            diagonal_blocks(a + h * e, a - h * e),  # a central difference
        ]
    )
    zero = jnp.zeros((8, 8))
    directions = jnp.stack([diagonal_blocks(e, w), zero, zero])
    exps, derivatives = jax.jit(expm_frechet)(matrices, directions)

    exp_a, frechet = exps[0][:4, :4], derivatives[0][:4, :4]
    difference = (exps[2][:4, :4] - exps[2][4:, 4:]) / (2 * h)
    np.testing.assert_allclose(frechet, difference, atol=1e-8)
    assert bool(jnp.allclose(frechet, e @ exp_a)) is __  # the scalar chain rule

    np.testing.assert_allclose(exps[1][:4, :4], exp_a, atol=1e-12)
    np.testing.assert_allclose(exps[1][__], frechet, atol=1e-12)

    adjoint = derivatives[0][4:, 4:]
    np.testing.assert_allclose(jnp.vdot(w, frechet), jnp.vdot(adjoint, e), rtol=1e-12)
