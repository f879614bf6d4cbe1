"""11 · 无矩阵 Poisson 求解器 / a matrix-free Poisson solver.

-Δu = f 在单位正方形上，边界 u = 0（Dirichlet）。n×n 个等距的内部网格点，步长 h，
五点差分：(-Δu)ᵢⱼ ≈ (4uᵢⱼ - uᵢ₋₁ⱼ - uᵢ₊₁ⱼ - uᵢⱼ₋₁ - uᵢⱼ₊₁) / h²，边界外的值是 0。
这个算子是对称正定的，所以可以用共轭梯度 (CG)；CG 只需要“矩阵乘向量”这个函数，
n²×n² 的矩阵从来不必存在。

-Δu = f on the unit square with u = 0 on the boundary (Dirichlet): n×n interior points,
evenly spaced by h, and the five-point stencil above, with zeros outside the boundary. The operator is
symmetric positive definite, so conjugate gradients (CG) apply; CG needs only a function that
multiplies by the matrix, so the n²×n² matrix never has to exist.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.scipy.sparse.linalg import cg

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------


def dense_neg_laplacian(n, h):
    """参考实现：组装好的 n²×n² 矩阵（行优先展平）。/ The assembled reference matrix."""
    t = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    return (np.kron(t, np.eye(n)) + np.kron(np.eye(n), t)) / h**2


def grid(n, h):
    """内部网格点的坐标 (X, Y)，形状 [n, n]。/ The interior points' coordinates."""
    x = jnp.arange(1, n + 1) * h
    return jnp.meshgrid(x, x, indexing="ij")


def cg_counting(matvec, b, rtol=1e-8):
    """手写 CG（while_loop），额外返回迭代次数。/ Hand-written CG that also counts iterations.
    最多 2·n 步：算子写错（不对称、奇异）时不收敛，循环也会结束。/ At most 2·n steps, so a wrong
    (non-symmetric or singular) operator ends the loop instead of spinning forever."""

    def keep_going(carry):
        return (jnp.sqrt(carry[3]) > rtol * jnp.linalg.norm(b)) & (carry[4] < 2 * b.size)

    def step(carry):
        x, r, p, rr, k = carry
        ap = matvec(p)
        alpha = rr / jnp.vdot(p, ap)
        x, r = x + alpha * p, r - alpha * ap
        rr_new = jnp.vdot(r, r)
        return x, r, r + rr_new / rr * p, rr_new, k + 1

    x, _, _, _, k = lax.while_loop(keep_going, step, (jnp.zeros_like(b), b, b, jnp.vdot(b, b), 0))
    return x, k


# ---- 你来实现 / your code ---------------------------------------------------------------


def neg_laplacian(u, h):
    """五点差分 -Δu，u 形状 [n, n]（内部点），边界外当作 0；返回同形状。不要组装矩阵：
    jnp.pad 补一圈 0，再用切片取四个邻居。大约 3 行。

    The five-point -Δu of u shaped [n, n] (interior points), zero outside; same shape out. No
    matrix: pad a ring of zeros with jnp.pad, then slice out the four neighbours. About 3 lines.
    """
    p = jnp.pad(u, 1)
    neighbours = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]
    return (4 * u - neighbours) / h**2


# ---- 检查 / checks ----------------------------------------------------------------------


@pytest.mark.parametrize("n", [4, 7])
def test_stencil_equals_the_assembled_matrix(n):
    """写 neg_laplacian：与组装好的矩阵逐项相同（随机输入，所以边界处理错了也能发现）。
    Write neg_laplacian: it must equal the assembled matrix on random input (so a wrong
    boundary shows up too).
    """
    h = 1.0 / (n + 1)
    u = np.random.default_rng(n).normal(size=(n, n))
    got = jax.jit(neg_laplacian)(jnp.asarray(u), h)
    assert got.shape == (n, n) and got.dtype == jnp.float64
    np.testing.assert_allclose(got.ravel(), dense_neg_laplacian(n, h) @ u.ravel(), rtol=1e-12)


def test_cg_takes_a_function_not_a_matrix():
    """jax.scipy.sparse.linalg.cg 的 A 可以是函数，未知量可以是任意形状（这里是 [n, n] 的网格）。
    程序里没有 n²×n² 的数组：jaxpr 中最大的数组只是补了一圈 0 的网格。
    cg's A may be a function and the unknown any shape (here the [n, n] grid). The program holds
    no n²×n² array: the largest array in its jaxpr is the zero-padded grid.
    """
    n = 31
    h = 1.0 / (n + 1)
    x, y = grid(n, h)
    f = jnp.exp(x) * y * (1 - y)

    def solve(f):
        u, _ = cg(lambda u: neg_laplacian(u, h), f, tol=1e-10)
        return u

    u = jax.jit(solve)(f)
    assert u.shape == (n, n)
    residual = jnp.linalg.norm(neg_laplacian(u, h) - f) / jnp.linalg.norm(f)
    assert residual < 1e-9
    jaxpr = jax.make_jaxpr(solve)(f)

    def sizes(jaxpr):
        for eqn in jaxpr.eqns:
            for var in eqn.outvars:
                yield int(np.prod(var.aval.shape))
            for param in eqn.params.values():  # the bodies of while / cond / pjit
                for sub in param if isinstance(param, tuple) else (param,):
                    if hasattr(sub, "jaxpr"):
                        yield from sizes(getattr(sub, "jaxpr", sub))

    assert max(sizes(jaxpr.jaxpr)) == (n + 2) ** 2  # the padded grid / 补过 0 的网格


def test_poisson_converges_at_second_order():
    """测量收敛阶：精确解 u = sin(πx)·sin(πy)，f = 2π²u。网格加密三次，最大误差 e ∝ hᵖ，
    也就是 log e = p·log h + 常数：p 是这条直线的斜率，由三组 (h, e) 拟合出来。阶数是测出来的，
    不是假设的：同一段代码再量一次“差一个点”的网格（h = 1/n，最后一个内部点落在边界 1 上），
    格式本身没变，测出的阶数却掉到 1 以下——这正是收敛阶测量要抓的那类错误。
    Measure the order: with the exact u = sin(πx)·sin(πy) and f = 2π²u, refine the grid three
    times; the max error goes like e ∝ hᵖ, that is log e = p·log h + a constant: p is the slope
    of that line, fitted to the three (h, e) pairs. The order is measured, not assumed: the same
    code measures a grid that is off by one point (h = 1/n puts the last interior point on the
    boundary at 1); the stencil is unchanged, yet the measured order falls below 1, which is the
    kind of mistake an order measurement exists to catch.
    """
    orders = {}
    for grid_name, spacing in (("right", lambda n: 1.0 / (n + 1)), ("off by one", lambda n: 1 / n)):
        hs, errors = [], []
        for n in (7, 15, 31):
            h = spacing(n)
            x, y = grid(n, h)
            exact = jnp.sin(jnp.pi * x) * jnp.sin(jnp.pi * y)
            solve = jax.jit(lambda f, h=h: cg(lambda v: neg_laplacian(v, h), f, tol=1e-12)[0])
            u = solve(2 * jnp.pi**2 * exact)
            hs.append(h)
            errors.append(float(jnp.max(jnp.abs(u - exact))))
        orders[grid_name] = np.polyfit(np.log(hs), np.log(errors), 1)[0]  # the slope / 斜率
    print("measured orders:", {name: round(float(p), 2) for name, p in orders.items()})
    assert 1.9 < orders["right"] < 2.1 and orders["off by one"] < 1.0, orders


def test_cg_iterations_follow_the_condition_number():
    """CG 的迭代次数 ∝ √κ，而五点算子的条件数 κ ∝ h⁻²：网格每加密一倍，迭代次数大约翻倍。
    ⚠️ 但右端项若恰好是算子的特征向量（sin(πx)·sin(πy) 就是），CG 一步就精确收敛。
    CG needs about √κ iterations and the stencil's condition number grows like h⁻²: each
    refinement roughly doubles the count. ⚠️ But a right-hand side that is an eigenvector of the
    operator (sin(πx)·sin(πy) is one) converges exactly in a single step.
    """
    counts = []
    for n in (15, 31, 63):
        h = 1.0 / (n + 1)
        f = jnp.asarray(np.random.default_rng(n).normal(size=(n, n)))
        _, k = jax.jit(lambda f, h=h: cg_counting(lambda u: neg_laplacian(u, h), f))(f)
        counts.append(int(k))
    ratios = np.array(counts[1:]) / np.array(counts[:-1])
    np.testing.assert_allclose(ratios, 2, rtol=0.15)

    n = 31
    h = 1.0 / (n + 1)
    x, y = grid(n, h)
    eigenvector = jnp.sin(jnp.pi * x) * jnp.sin(jnp.pi * y)
    _, k = jax.jit(lambda f: cg_counting(lambda u: neg_laplacian(u, h), f))(eigenvector)
    assert int(k) == 1
