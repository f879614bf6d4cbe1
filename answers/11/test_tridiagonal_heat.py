"""11 · 一维隐式热方程：三对角求解 / the implicit 1-D heat equation: a tridiagonal solve.

一维热方程 u_t = u_xx 的向后 Euler 一步是 (I + r·L) u' = u，r = dt/h²，L 是 [-1, 2, -1]
三对角矩阵（两端 u = 0）。它无条件稳定，r 远大于显式方法允许的 1/2 也行。矩阵只有三条
对角线：lax.linalg.tridiagonal_solve 用 O(N) 的消元直接解，不用造 N×N 的稠密矩阵，也不用
迭代。它还能求导：反向模式是再解一次转置的三对角方程。

A backward-Euler step of the 1-D heat equation u_t = u_xx is (I + r·L) u' = u, with r = dt/h²
and L the tridiagonal [-1, 2, -1] (u = 0 at both ends). It is unconditionally stable, for r far
above the 1/2 an explicit method allows. The matrix has three diagonals only:
lax.linalg.tridiagonal_solve solves it directly by O(N) elimination, with no dense N×N matrix and
no iterations. It differentiates too: reverse mode is one more solve with the transposed
tridiagonal system.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.sparse.linalg import cg  # noqa: F401  (a tempting shortcut)

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import equations, primitives

# ---- 给定代码 / given code -------------------------------------------------------------

N = 400  # interior points / 内部点数
H = 1.0 / (N + 1)
STEPS = 50


def dense_step(u, r):
    """参照：组装稠密的 I + r·L 再 jnp.linalg.solve。/ Reference: the dense I + r·L, solved."""
    n = u.shape[0]
    matrix = (1 + 2 * r) * jnp.eye(n) - r * (jnp.eye(n, k=1) + jnp.eye(n, k=-1))
    return jnp.linalg.solve(matrix, u)


def first_mode():
    return jnp.sin(jnp.pi * jnp.arange(1, N + 1) * H)


# ---- 你来实现 / your code ---------------------------------------------------------------


def heat_step(u, r):
    """向后 Euler 一步：解 (I + r·L) u_new = u，L 是 [-1, 2, -1]。用
    lax.linalg.tridiagonal_solve(dl, d, du, b)：dl 是下对角（dl[0] = 0），d 是主对角，du 是
    上对角（du[-1] = 0），三者形状都是 [N]；b 是 [N, 1] 的矩阵。r 是 jit 的参数。大约 5 行。
    One backward-Euler step: solve (I + r·L) u_new = u. Use lax.linalg.tridiagonal_solve(dl, d,
    du, b): dl the lower diagonal (dl[0] = 0), d the main one, du the upper (du[-1] = 0), all of
    shape [N]; b is an [N, 1] matrix. r is a jit argument. About 5 lines.
    """
    n = u.shape[0]
    off = jnp.full(n, -r)
    dl, du = off.at[0].set(0.0), off.at[-1].set(0.0)
    d = jnp.full(n, 1 + 2 * r)
    return lax.linalg.tridiagonal_solve(dl, d, du, u[:, None])[:, 0]


# ---- 检查 / checks ----------------------------------------------------------------------


def simulate(u0, r):
    return lax.scan(lambda u, _: (heat_step(u, r), None), u0, length=STEPS)[0]


def test_the_implicit_step_is_one_tridiagonal_solve():
    """写 heat_step：与稠密求解一致；r = 50（显式 Euler 的 100 倍上限）50 步之后，第一个正弦
    模态正好衰减了 (1 + 4r·sin²(πh/2))⁻⁵⁰ 倍（它是 L 的特征向量）。编译出来的程序里没有
    N×N 的数组，heat_step 里也没有循环（while 或 scan）；临时内存远小于一个 N×N 矩阵。
    Write heat_step: it agrees with the dense solve; with r = 50 (100 times explicit Euler's
    limit) the first sine mode decays after 50 steps by exactly (1 + 4r·sin²(πh/2))⁻⁵⁰ (it is an
    eigenvector of L). The compiled program holds no N×N array, heat_step no loop (while or
    scan); its temporary memory is far below one N×N matrix.
    """
    rng = np.random.default_rng(0)
    u = jnp.asarray(rng.normal(size=N))
    step = jax.jit(heat_step)
    np.testing.assert_allclose(step(u, 0.3), jax.jit(dense_step)(u, 0.3), rtol=1e-10, atol=1e-12)

    r = 50.0
    decay = (1 + 4 * r * np.sin(np.pi * H / 2) ** 2) ** -STEPS
    compiled = jax.jit(simulate).lower(first_mode(), r).compile()
    np.testing.assert_allclose(compiled(first_mode(), r), decay * first_mode(), rtol=1e-9)
    assert f"{N},{N}]" not in compiled.as_text()
    assert compiled.memory_analysis().temp_size_in_bytes < N * N * 8 / 20
    program = primitives(jax.make_jaxpr(heat_step)(u, r).jaxpr)
    assert "while" not in program and "scan" not in program  # a direct solve, no loop


def test_the_gradient_is_a_transposed_tridiagonal_solve():
    """J(r) = Σ w⊙u 在 50 步之后。它对 r 的导数与中心差分相符；梯度程序里也没有 N×N 的数组，
    临时内存不到一个 N×N 矩阵：反向模式每步再解一次三对角方程（jaxpr 里前向的 scan 体里一个
    tridiagonal_solve，反向的 scan 体里再一个）。
    J(r) = Σ w⊙u after 50 steps. Its derivative in r agrees with central differences; the
    gradient program holds no N×N array either, and its temporary memory stays below one N×N
    matrix: reverse mode solves one more tridiagonal system per step (in the jaxpr, one
    tridiagonal_solve in the forward scan's body and one more in the backward scan's).
    """
    w = jnp.asarray(np.random.default_rng(1).normal(size=N))

    def objective(r):
        return jnp.sum(w * simulate(first_mode() + 0.1 * w, r))

    r, eps = 2.0, 1e-5
    compiled = jax.jit(jax.grad(objective)).lower(r).compile()
    j = jax.jit(objective)
    np.testing.assert_allclose(compiled(r), (j(r + eps) - j(r - eps)) / (2 * eps), rtol=1e-6)
    assert f"{N},{N}]" not in compiled.as_text()
    assert compiled.memory_analysis().temp_size_in_bytes < N * N * 8  # not one dense matrix
    assert len(equations("tridiagonal_solve", objective, r)) == 1  # the forward scan's body
    assert len(equations("tridiagonal_solve", jax.grad(objective), r)) == 2  # + the backward's
