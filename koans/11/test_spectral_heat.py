"""11 · 谱方法解热方程：离散余弦变换 / a spectral heat solver: the discrete cosine transform.

两端绝热（Neumann，u_x = 0）的一维热方程 u_t = u_xx。余弦 cos(kπx) 满足这个边界条件，
也是 ∂²/∂x² 的特征函数：第 k 个余弦分量只是按 exp(-(kπ)²t) 衰减。所以在格心
x_j = (j + ½)/N 上采样的 u，做一次 jax.scipy.fft.dct（第 2 类，norm="ortho"）得到余弦系数，
每个乘上自己的衰减因子，再 idct 回来：任意长的 t 一步到位，时间上没有误差，代价是一次
O(N log N) 的变换。同一根杆也可以用上一个文件的三对角向后 Euler 一步一步地走。
哪个更好？本文件先看 cost_analysis 的浮点运算数数的是什么，再量光滑与不光滑初值上的误差，
最后看 jax 提供了哪些变换。

The 1-D heat equation u_t = u_xx with insulated ends (Neumann, u_x = 0). The cosines cos(kπx)
meet that boundary condition and are eigenfunctions of ∂²/∂x²: the k-th cosine component only
decays, by exp(-(kπ)²t). So for u sampled at the cell centres x_j = (j + ½)/N, one
jax.scipy.fft.dct (type 2, norm="ortho") gives the cosine coefficients; multiply each by its
decay and idct back: any t in one step, no error in time, for one O(N log N) transform. The same
rod can also be marched step by step with a tridiagonal backward Euler, as in the previous file.
Which is better? This file first looks at what cost_analysis's flop counts count, then measures
the errors on smooth and on non-smooth initial data, and last asks which transforms jax provides.
"""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from jax import lax
from jax.scipy.fft import dct, idct

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------

T = 0.002  # the time the koans integrate to / koan 积分到的时刻


def cell_centres(n):
    return (np.arange(n) + 0.5) / n


def smooth_start(x):
    return np.exp(np.cos(np.pi * x))


def kinked_start(x):
    return np.abs(x - 0.5)


def smooth_exact(x, t):
    """exp(cos πx) = I₀(1) + 2 Σ I_k(1) cos(kπx)（修正 Bessel 函数），每项衰减 exp(-(kπ)²t)。
    exp(cos πx) = I₀(1) + 2 Σ I_k(1) cos(kπx) (modified Bessel functions), each term decaying
    by exp(-(kπ)²t)."""
    k = np.arange(1, 40)[:, None]
    terms = 2 * scipy.special.iv(k, 1.0) * np.exp(-((k * np.pi) ** 2) * t) * np.cos(k * np.pi * x)
    return scipy.special.iv(0, 1.0) + terms.sum(axis=0)


def kinked_exact(x, t):
    """|x - ½| = ¼ + Σ_{k = 2, 6, 10, …} 8/(kπ)² cos(kπx)，每项衰减 exp(-(kπ)²t)。
    |x - ½| = ¼ + Σ_{k = 2, 6, 10, …} 8/(kπ)² cos(kπx), each term decaying by exp(-(kπ)²t)."""
    k = np.arange(2, 4000, 4)[:, None]
    terms = 8 / (k * np.pi) ** 2 * np.exp(-((k * np.pi) ** 2) * t) * np.cos(k * np.pi * x)
    return 0.25 + terms.sum(axis=0)


def neumann_step(u, r):
    """向后 Euler 一步，两端绝热：解 (I + r·L) u' = u，L 的首尾对角元是 1。
    One backward-Euler step with insulated ends: (I + r·L) u' = u, L's first and last diagonal
    entries 1."""
    n = u.shape[0]
    off = jnp.full(n, -r)
    d = jnp.full(n, 1 + 2 * r).at[0].set(1 + r).at[-1].set(1 + r)
    return lax.linalg.tridiagonal_solve(off.at[0].set(0.0), d, off.at[-1].set(0.0), u[:, None])[:, 0]


def tridiagonal_heat(u, t, steps=200):
    """steps 个向后 Euler 步走到 t。/ steps backward-Euler steps to time t."""
    n = u.shape[0]
    return lax.fori_loop(0, steps, lambda _, v: neumann_step(v, t / steps * n * n), u)


def laplacian(n, insulated):
    """格心上的二阶差分矩阵（稠密，只作检查用）。insulated=False 是 u = 0 的 Dirichlet 端。
    The second-difference matrix on cell centres (dense, for checks only); insulated=False gives
    Dirichlet ends u = 0."""
    a = (np.eye(n, k=1) + np.eye(n, k=-1) - 2 * np.eye(n)) * n * n
    if insulated:
        a[0, 0] = a[-1, -1] = -n * n
    return a


# ---- 你来实现 / your code ---------------------------------------------------------------


def spectral_heat(u, t):
    """两端绝热的热方程从 u 走到时刻 t：c = dct(u, norm="ortho")，第 k 个系数乘上
    exp(-(kπ)²·t)（k = 0, 1, …, N-1），再 idct(…, norm="ortho")。不要矩阵，不要时间步。
    大约 3 行。
    The insulated heat equation from u to time t: c = dct(u, norm="ortho"), multiply the k-th
    coefficient by exp(-(kπ)²·t) (k = 0, 1, …, N-1), then idct(…, norm="ortho"). No matrix, no
    time steps. About 3 lines.
    """
    todo("spectral_heat: dct, a decay per mode, idct")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_the_cosine_transform_solves_the_insulated_rod():
    """写 spectral_heat：16 个格心、一次调用，在 t = 0.002 和 t = 0.1 都与精确解相差不到
    1e-12；两端绝热，热量守恒：平均值不变。每个模式都算数：64 个格心上第 40 个余弦模式
    cos(40πx) 正是一个特征向量，按它自己的因子 exp(-(40π)²t) 衰减。
    Write spectral_heat: 16 cell centres, one call, within 1e-12 of the exact solution at both
    t = 0.002 and t = 0.1; the ends are insulated, so heat is conserved: the mean stays. Every
    mode counts: on 64 cell centres the 40th cosine mode cos(40πx) is an eigenvector and decays
    by its own factor exp(-(40π)²t).
    """
    x = cell_centres(16)
    u0 = jnp.asarray(smooth_start(x))
    solve = jax.jit(spectral_heat)
    for t in (T, 0.1):
        np.testing.assert_allclose(solve(u0, t), smooth_exact(x, t), rtol=0, atol=1e-12)
    assert abs(jnp.mean(solve(u0, 0.1)) - jnp.mean(u0)) < 1e-13
    mode = np.cos(40 * np.pi * cell_centres(64))
    decayed = np.exp(-((40 * np.pi) ** 2) * 1e-4) * mode  # about 0.21 of it is left / 还剩约 0.21
    np.testing.assert_allclose(solve(jnp.asarray(mode), 1e-4), decayed, rtol=0, atol=1e-12)


def test_what_cost_analysis_counts():
    """⚠️ 陷阱 / trap: compiled.cost_analysis()["flops"] 是 XLA 对编译后程序的估计，不是做了
    多少功。4096 个点上量三样：单独一次 lax.linalg.tridiagonal_solve（Thomas 消元每个点要做
    大约 8 次运算）、向后 Euler 走 200 步、走 2000 步。预测一次三对角求解被数成每个点几次运算，
    以及 2000 步是否比 200 步数得多。拿两个解法比成本之前，先确认两边是用同一种方法数的。
    A trap: compiled.cost_analysis()["flops"] is XLA's estimate for the compiled program, not the
    work done. Three counts on 4096 points: one lax.linalg.tridiagonal_solve alone (Thomas
    elimination does about 8 operations per point), backward Euler marched 200 steps, and 2000
    steps. Predict how many operations per point one tridiagonal solve is counted as, and whether
    2000 steps count more than 200. Before two solvers' costs are compared, make sure both sides
    were counted the same way.
    """
    n = 4096
    u = jnp.asarray(smooth_start(cell_centres(n)))

    def flops(f, *args):
        return jax.jit(f).lower(*args).compile().cost_analysis()["flops"]

    zeros = jnp.zeros(n)
    solve = flops(lambda d, v: lax.linalg.tridiagonal_solve(zeros, d, zeros, v[:, None]), jnp.full(n, 2.0), u)
    march = {steps: flops(lambda v: tridiagonal_heat(v, T, steps), u) for steps in (200, 2000)}
    print(f"one tridiagonal solve {solve}, marches {march}")
    assert round(solve / n) == __
    assert bool(march[2000] > march[200]) is __


def test_when_each_solver_wins():
    """同一根杆的两个解法量两样：光滑初值 exp(cos πx) 在 16 个点上的误差，折线初值 |x - ½|
    的误差在 N 每翻一倍时缩小的阶数。预测误差的比较结果，以及阶数。
    Two solvers of the same rod, two measures: the error on the smooth start exp(cos πx) at 16
    points, and the order at which the error on the kinked start |x - ½| shrinks as N doubles.
    Predict the comparison of the errors, and the order.
    """
    x = cell_centres(16)
    u0 = jnp.asarray(smooth_start(x))
    spectral = jax.jit(spectral_heat)
    errors = {
        "spectral": jnp.abs(spectral(u0, T) - smooth_exact(x, T)).max(),
        "tridiagonal": jnp.abs(jax.jit(tridiagonal_heat)(u0, T) - smooth_exact(x, T)).max(),
    }
    assert bool(errors["spectral"] < errors["tridiagonal"]) is __

    sizes = [16, 32, 64]
    kinked = []
    for n in sizes:
        x = cell_centres(n)
        kinked.append(float(jnp.abs(spectral(jnp.asarray(kinked_start(x)), T) - kinked_exact(x, T)).max()))
    order = -np.polyfit(np.log(sizes), np.log(kinked), 1)[0]
    print(f"smooth errors {errors}, kinked spectral errors {kinked}")
    assert round(order) == __


def test_jax_offers_one_cosine_transform():
    """变换决定边界条件：第 2 类 DCT 把格心上两端绝热的差分矩阵变成对角阵；对 u = 0 的
    Dirichlet 端（三对角那个文件的边界）也一样吗？jax.scipy.fft 还提供哪些变换？试一试第 1 类
    DCT，再看看有没有正弦变换（dst）。
    The transform decides the boundary condition: the type-2 DCT turns the insulated
    cell-centre difference matrix into a diagonal one; does it do so with Dirichlet ends u = 0
    (the tridiagonal file's boundary) too? Which other transforms does jax.scipy.fft offer? Try the
    type-1 DCT, and look for a sine transform (dst).
    """
    n = 16
    c = np.asarray(dct(jnp.eye(n), norm="ortho", axis=0))  # the orthogonal DCT-II matrix
    off_diagonal = {}
    for insulated in (True, False):
        m = c @ laplacian(n, insulated) @ c.T
        off_diagonal[insulated] = np.abs(m - np.diag(np.diag(m))).max()
    assert off_diagonal[True] < 1e-9
    assert bool(off_diagonal[False] < 1e-9) is __
    with raises_exactly(__):
        dct(jnp.ones(n), type=1)
    assert hasattr(jax.scipy.fft, "dst") is __
