"""11 · 指数积分器：jax.scipy.linalg.expm / an exponential integrator: jax.scipy.linalg.expm.

线性常微分方程 y' = A y 的解是 y(t) = exp(tA) y(0)：用矩阵指数走一步，不管步长多大都是
精确的。刚性问题里这很要紧。这里 A 是两端绝热的杆在 32 个格心上的差分矩阵：最快的模态衰减率
约为 4N² = 4096，显式 Euler y + h·A y 的步长被这个最快的时间尺度限制住，哪怕我们只关心
慢的模态。jax.scipy.linalg.expm（Padé 近似加平方）算出 exp(hA)，一个 N×N 的稠密矩阵：它适合
几十到几百个未知数的系统，N 大了就要换成无矩阵的办法。带常数源项 g 的 y' = A y + g 也能
精确走一步：把 A 和 g 拼成一个大一圈的矩阵，再取矩阵指数。

The solution of the linear ODE y' = A y is y(t) = exp(tA) y(0): one step with the matrix
exponential is exact however long the step. On a stiff problem that matters. Here A is the
difference matrix of a rod with insulated ends on 32 cell centres: its fastest mode decays at
about 4N² = 4096, and that fastest time scale caps explicit Euler's step y + h·A y, even when
only the slow modes matter. jax.scipy.linalg.expm (Padé approximation with squaring) computes exp(hA), a dense
N×N matrix: fit for tens to hundreds of unknowns; a large N needs a matrix-free method instead.
With a constant source g, y' = A y + g can be stepped exactly too: put A and g into a matrix one
size larger and take its exponential.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------

N = 32


def rod_matrix():
    """格心上两端绝热的二阶差分矩阵（NumPy）：对称，特征值 ≤ 0，有一个 0（常数模态）。
    The insulated second-difference matrix on cell centres (NumPy): symmetric, eigenvalues <= 0,
    one of them 0 (the constant mode)."""
    a = (np.eye(N, k=1) + np.eye(N, k=-1) - 2 * np.eye(N)) * N * N
    a[0, 0] = a[-1, -1] = -N * N
    return a


def start():
    return np.random.default_rng(0).normal(size=N)


def source():
    return np.cos(np.pi * (np.arange(N) + 0.5) / N) + 0.3


def exact(y0, t, g=None):
    """参照：对称矩阵的特征分解。有源项时每个模态乘 (exp(λt) - 1)/λ（λ = 0 时是 t）。
    Reference: the symmetric eigendecomposition. With a source each mode gets
    (exp(λt) - 1)/λ (t where λ = 0)."""
    lam, v = np.linalg.eigh(rod_matrix())
    c = v.T @ y0
    y = v @ (np.exp(lam * t) * c)
    if g is not None:
        safe = np.where(np.abs(lam) < 1e-9, 1.0, lam)
        phi = np.where(np.abs(lam) < 1e-9, t, np.expm1(lam * t) / safe)
        y = y + v @ (phi * (v.T @ g))
    return y


def explicit_euler(a, y, h, steps):
    return lax.fori_loop(0, steps, lambda _, y: y + h * (a @ y), y)


# ---- 你来实现 / your code ---------------------------------------------------------------


def exponential_step(a, g, y, h):
    """y' = a·y + g（g 不随时间变化）精确地走一步 h。把 a 和 g 拼成 (N+1)×(N+1) 的矩阵
    M = [[a, g], [0, 0]]，exp(hM) 作用在 [y, 1] 上，前 N 个分量就是答案。用
    jax.scipy.linalg.expm。不要解 a 的线性方程（这里 a 是奇异的）。大约 4 行。
    One exact step h of y' = a·y + g (g constant in time). Put a and g into the (N+1)×(N+1)
    matrix M = [[a, g], [0, 0]]; exp(hM) applied to [y, 1] holds the answer in its first N
    entries. Use jax.scipy.linalg.expm. Solve no linear system in a (it is singular here).
    About 4 lines.
    """
    todo("exponential_step: expm of the augmented matrix [[a, g], [0, 0]]")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_expm_is_exact_where_explicit_euler_explodes():
    """显式 Euler 走到 t = 0.1：步长取 1e-2、1e-3、1e-4 中的哪些，解还保持有界？
    用矩阵指数，步长 1e-2 走 10 步，或者 0.1 一步，都与精确解相差不到 1e-10。
    Explicit Euler to t = 0.1: which of the steps 1e-2, 1e-3, 1e-4 keep the solution bounded?
    With the matrix exponential, ten steps of 1e-2, or one step of 0.1, are within 1e-10 of the
    exact solution.
    """
    a, y0 = jnp.asarray(rod_matrix()), jnp.asarray(start())
    euler = jax.jit(explicit_euler, static_argnums=3)
    bounded = [h for h in (1e-2, 1e-3, 1e-4) if jnp.abs(euler(a, y0, h, round(0.1 / h))).max() < 10]
    assert bounded == __

    h = 1e-2
    propagator = jax.scipy.linalg.expm(__)
    y = y0
    for _ in range(10):
        y = propagator @ y
    np.testing.assert_allclose(y, exact(start(), 0.1), rtol=0, atol=1e-10)
    one_step = jax.scipy.linalg.expm(__) @ y0
    np.testing.assert_allclose(one_step, exact(start(), 0.1), rtol=0, atol=1e-10)


def test_the_augmented_matrix_integrates_a_source():
    """写 exponential_step：有热源 g 的杆，步长 0.5（显式 Euler 上限的一千倍）一步与精确解
    相差不到 1e-10；两端绝热，平均温度正好增加 h·mean(g)。
    Write exponential_step: the rod with a heat source g, one step of 0.5 (a thousand times
    explicit Euler's limit) within 1e-10 of the exact solution; the ends are insulated, so the
    mean temperature rises by exactly h·mean(g).
    """
    a, g, y0 = jnp.asarray(rod_matrix()), jnp.asarray(source()), jnp.asarray(start())
    step = jax.jit(exponential_step)
    for h in (1e-3, 0.5):
        y = step(a, g, y0, h)
        np.testing.assert_allclose(y, exact(start(), h, source()), rtol=0, atol=1e-10)
        np.testing.assert_allclose(jnp.mean(y), jnp.mean(y0) + h * jnp.mean(g), rtol=0, atol=1e-12)
