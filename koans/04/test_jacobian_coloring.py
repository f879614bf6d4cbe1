"""04 · 雅可比着色：几次 JVP 拿回整个带状雅可比矩阵 / Jacobian colouring: a banded Jacobian
from a handful of JVPs.

jacfwd 对 n 个基向量各做一次 JVP（n 列）。如果雅可比矩阵是稀疏的，不共享任何一行的列可以
“涂成同一种颜色”，用一次 JVP 一起求出：种子向量是这些列的基向量之和，结果里每一行只含
其中一列的贡献。半带宽为 b 的带状矩阵只需要 2b + 1 种颜色，与 n 无关。

jacfwd pushes one JVP per basis vector (n columns). When the Jacobian is sparse, columns that
share no row can get the same colour and be computed by one JVP: the seed is the sum of their
basis vectors, and every row of the result holds the contribution of only one of them. A banded
matrix with half-bandwidth b needs 2b + 1 colours, whatever n is.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------


def shift(x, d):
    """y[i] = x[i + d]，越界处补 0 / y[i] = x[i + d], zero outside."""
    n = x.shape[0]
    padded = jnp.pad(x, (abs(d), abs(d)))
    return jax.lax.dynamic_slice(padded, (abs(d) + d,), (n,))


def banded_map(x, b):
    """y_i 依赖 x_{i-b} … x_{i+b}：半带宽为 b 的非线性映射。
    y_i depends on x_{i-b} … x_{i+b}: a nonlinear map with half-bandwidth b.
    """
    y = x**3
    for d in range(1, b + 1):
        y = y + jnp.sin(shift(x, d)) * x + jnp.cos(shift(x, -d) * d)
    return y


def burgers_like(x, b):
    """另一个带状映射（用来防止只对 banded_map 成立的特例）/ another banded map."""
    y = jnp.tanh(x)
    for d in range(1, b + 1):
        y = y + (shift(x, d) - shift(x, -d)) * x / d + 0.1 * shift(x, d) ** 2
    return y


@partial(jax.jit, static_argnums=(0, 1))
def jvp_of(fun, b, x, v):
    return jax.jvp(lambda x: fun(x, b), (x,), (v,))[1]


@partial(jax.jit, static_argnums=(0, 1))
def jacfwd_of(fun, b, x):
    return jax.jacfwd(lambda x: fun(x, b))(x)


def counted_jvp(fun, b, x):
    """返回 jvp：v ↦ J·v（fun(·, b) 在 x 处）。jvp.calls 记下调用次数，jvp.seeds 记下每条切向量；
    每次调用只收一条具体的切向量（不能在 vmap、jit、grad 里调用）。fun 和 x 就在它的闭包里，
    但着色只许调用 jvp：读 __closure__ 的填法会被拒绝。
    Returns jvp: v ↦ J·v (of fun(·, b) at x). jvp.calls counts its calls and jvp.seeds keeps
    every tangent; each call takes one concrete tangent (not under vmap, jit or grad). fun and x
    sit in its closure, but the colouring may only call jvp: a fill that reads __closure__ is
    refused.
    """

    def jvp(v):
        assert not isinstance(v, jax.core.Tracer), "one concrete tangent per call: no vmap or jit"
        assert v.shape == x.shape, f"one tangent of shape {x.shape} per call, got {v.shape}"
        jvp.calls += 1
        jvp.seeds.append(np.asarray(v))
        return jvp_of(fun, b, x, v)

    jvp.calls, jvp.seeds = 0, []
    return jvp


def greedy_column_colouring(pattern):
    """贪心地给列涂色：与已涂色列共享一行的颜色不能用。返回每列的颜色。
    Greedy column colouring: a colour is taken if a column of that colour shares a row.
    Returns each column's colour.
    """
    n = pattern.shape[1]
    colour = [-1] * n
    for j in range(n):
        taken = {colour[k] for k in range(j) if np.any(pattern[:, j] & pattern[:, k])}
        colour[j] = next(c for c in range(n) if c not in taken)
    return colour


def sparsity(fun, b, n):
    """fun(·, b) 在随机点处雅可比矩阵的非零模式 / the nonzero pattern of fun(·, b)'s Jacobian."""
    x = np.random.default_rng(n).normal(size=n).astype(np.float32)
    return np.asarray(jacfwd_of(fun, b, x)) != 0


# ---- 你来实现 / your code ---------------------------------------------------------------


def colored_jacobian(jvp, n, b):
    """用恰好 2b + 1 次 jvp(v)（每种颜色一次，Python 循环，不要 vmap）恢复 n×n 的带状雅可比
    矩阵（半带宽 b，n > 2b + 1）。列 j 的颜色是 j % (2b + 1)。颜色 c 的种子向量在这些列处为 1；
    对 |i - j| ≤ b 且 j 的颜色为 c 的 (i, j)，J[i, j] 就是第 c 次 JVP 结果的第 i 项；带外为 0。
    组装用 NumPy 或 jnp 都行（JAX 的部分是 JVP）。大约 8 行。

    Recover the n×n banded Jacobian (half-bandwidth b, n > 2b + 1) with exactly 2b + 1 calls of
    jvp(v) (one per colour, a Python loop, no vmap). Column j has colour j % (2b + 1); colour
    c's seed is 1 at its columns. For (i, j) with |i - j| ≤ b and j of colour c, J[i, j] is
    entry i of colour c's JVP; outside the band J is 0. Assemble with NumPy or jnp (the JVPs are
    the JAX part). About 8 lines.
    """
    todo("colored_jacobian: 2b + 1 次 JVP 加解压 / 2b + 1 JVPs, then decompress")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_columns_that_share_no_row_fit_in_one_jvp():
    """三对角雅可比矩阵：列 j 只碰到第 j-1、j、j+1 行。列 0、3、6 互不重叠，所以一次 JVP
    （种子 e0 + e3 + e6）就得到三列之和，每一行里只有其中一列的值。
    A tridiagonal Jacobian: column j touches rows j-1, j and j+1 only. Columns 0, 3 and 6 do
    not overlap, so one JVP (seed e0 + e3 + e6) yields the sum of the three columns, with each
    row holding one column's value.
    """
    n = 8
    x = np.random.default_rng(0).normal(size=n).astype(np.float32)
    jac = np.asarray(jacfwd_of(banded_map, 1, x))
    jvp = counted_jvp(banded_map, 1, x)

    rows = {j: set(np.flatnonzero(jac[:, j]).tolist()) for j in (0, 3, 6)}
    assert rows == __

    seed = jnp.zeros(n).at[jnp.array([0, 3, 6])].set(1.0)
    compressed = np.asarray(jvp(seed))
    np.testing.assert_allclose(compressed, jac[:, 0] + jac[:, 3] + jac[:, 6], rtol=1e-6)
    for j, touched in rows.items():
        np.testing.assert_allclose(compressed[sorted(touched)], jac[sorted(touched), j], rtol=1e-6)
    assert jvp.calls == 1


def test_colour_count_follows_the_band_not_n():
    """半带宽 b 的（两侧）带状矩阵：列 j 与 j ± 1 … j ± 2b 共享行，颜色数只看 b、与 n 无关，而
    jacfwd 需要 n 次 JVP。单侧的带呢（迎风格式：y_i 只依赖 x_i … x_{i+b}）？数一数列 j 与哪些列
    共享行。贪心着色直接在 jacfwd 算出的非零模式上数颜色。
    A (two-sided) band of half-bandwidth b: column j shares rows with j ± 1 … j ± 2b, so the
    colour count depends on b only, not on n, while jacfwd needs n JVPs. And a one-sided band
    (an upwind stencil: y_i depends on x_i … x_{i+b} only)? Count the columns that share a row
    with column j. The greedy colouring counts colours on the nonzero pattern computed by jacfwd.
    """

    def colours(fun, b, n):
        return max(greedy_column_colouring(sparsity(fun, b, n))) + 1

    def upwind_map(x, b):  # y_i depends on x_i … x_(i+b) / 只依赖下游
        y = x**2
        for d in range(1, b + 1):
            y = y + jnp.sin(shift(x, d)) * x
        return y

    assert [colours(banded_map, b, 12) for b in (1, 2)] == [2 * b + 1 for b in (1, 2)]
    assert colours(upwind_map, 1, 12) == __
    assert colours(upwind_map, 2, 12) == __
    assert colours(upwind_map, 2, 12) == colours(upwind_map, 2, 30)  # independent of n / 与 n 无关
    assert colours(banded_map, 2, 30) < 30


def test_colored_jacobian_equals_jacfwd_with_few_jvps():
    """综合：你的 colored_jacobian 对两种带状映射、两种带宽、几个 n 都等于 jax.jacfwd，
    且只调用 2b + 1 次 JVP；这些种子向量都是 0/1 向量，每一列恰好在其中一条里是 1。
    Capstone: your colored_jacobian equals jax.jacfwd for two banded maps, two bandwidths and
    several n, and calls the JVP only 2b + 1 times; the seeds are 0/1 vectors, and every column
    is 1 in exactly one of them.
    """
    cases = [(banded_map, 1, 7), (banded_map, 2, 16), (burgers_like, 2, 11)]
    for fun, b, n in cases:
        x = np.random.default_rng(10 * n + b).normal(size=n).astype(np.float32)
        jvp = counted_jvp(fun, b, x)
        jac = colored_jacobian(jvp, n, b)
        np.testing.assert_allclose(jac, jacfwd_of(fun, b, x), rtol=1e-5, atol=1e-6)
        assert jvp.calls == 2 * b + 1, (
            f"{fun.__name__}, n={n}, b={b}: {jvp.calls} JVPs, expected 2b + 1 (jacfwd: {n})"
        )
        seeds = np.stack(jvp.seeds)
        assert set(np.unique(seeds)) <= {0.0, 1.0}, "0/1 seeds / 种子是 0/1 向量"
        np.testing.assert_array_equal(seeds.sum(axis=0), np.ones(n))  # each column seeded once
