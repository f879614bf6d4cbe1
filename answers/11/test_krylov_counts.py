"""11 · 用迭代数衡量 Krylov 方法 / a Krylov method is measured by its iterations.

Krylov 求解器（cg、bicgstab、gmres）的代价就是 matvec 的次数：预条件好不好，要看它省下了多少次
迭代、每次迭代又多花了多少。jax.scipy 的求解器不报告迭代数，所以要自己数，而且要数对：
迭代在 lax.while_loop 里执行，Python 代码只在追踪时运行。

A Krylov solver's (cg, bicgstab, gmres) cost is its number of matvecs: a preconditioner is as
good as the iterations it saves against what each iteration then costs. jax.scipy's solvers do
not report the count, so count it yourself, and count the right thing: the iterations run
inside a lax.while_loop, and Python code runs only while it is traced.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.sparse.linalg import bicgstab, cg

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------


def spectrum(k):
    """对角算子的对角元：1, 2, …, k 各重复 10 次，只有 k 个不同的特征值。
    The diagonal of a diagonal operator: 1, 2, …, k, each ten times: k distinct eigenvalues."""
    return jnp.repeat(jnp.arange(1.0, k + 1), 10)


def rhs(size, seed=0):
    return jnp.asarray(np.random.default_rng(seed).normal(size=size))


def counting(d):
    """d⊙x 这个 matvec，和它的两个计数器：Python 调用它的次数、它真正执行的次数。
    The matvec d⊙x and two counters: how often Python called it, how often it ran."""
    calls = {"python": 0, "executed": 0}

    def executed(x):
        calls["executed"] += 1

    def matvec(x):
        calls["python"] += 1
        jax.debug.callback(executed, x)  # runs every time the compiled program runs this line
        return d * x

    return matvec, calls


def anisotropic(u, sigma, eps):
    """-(ε ∂xx + ∂yy) u + σ⊙u，边界外为 0：沿轴 0（x）的耦合只有沿轴 1（y）的 ε 倍。
    -(ε ∂xx + ∂yy) u + σ⊙u, zero outside: the coupling along axis 0 (x) is ε times that along
    axis 1 (y)."""
    h = 1.0 / (u.shape[0] + 1)
    p = jnp.pad(u, 1)
    along_x = 2 * u - p[:-2, 1:-1] - p[2:, 1:-1]
    along_y = 2 * u - p[1:-1, :-2] - p[1:-1, 2:]
    return (eps * along_x + along_y) / h**2 + sigma * u


def lines(u, sigma, eps):
    """anisotropic 去掉 x 方向邻居的项（对角元不变）：每一行 u[i, :] 自成一个三对角方程组。
    anisotropic without its x-neighbour terms (the diagonal kept): each row u[i, :] is a
    tridiagonal system of its own."""
    h = 1.0 / (u.shape[0] + 1)
    p = jnp.pad(u, 1)
    return (2 * eps * u + 2 * u - p[1:-1, :-2] - p[1:-1, 2:]) / h**2 + sigma * u


def problem(n, seed):
    """σ 在 [0, 2000) 里随机取值，右端随机。/ σ drawn in [0, 2000), a random right-hand side."""
    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.uniform(0.0, 2e3, size=(n, n))), jnp.asarray(rng.normal(size=(n, n)))


HISTORY: dict[str, list[float]] = {}  # residual_history's last run / 最近一次的残差历史


def _recorded(name, precondition):
    """M 的包装：先把 ‖r‖ 记进 HISTORY[name]。/ M wrapped to record ‖r‖ into HISTORY[name]."""

    def record(r):
        HISTORY.setdefault(name, []).append(float(np.linalg.norm(r)))

    def M(r):
        jax.debug.callback(record, r)  # cg calls M once on every new residual
        return precondition(r)

    return M


@functools.partial(jax.jit, static_argnames="precondition")
def _both_solves(sigma, eps, b, precondition):
    def matvec(u):
        return anisotropic(u, sigma, eps)

    cg(matvec, b, tol=1e-8, maxiter=500, M=_recorded("cg alone", lambda r: r))
    x, _ = cg(matvec, b, tol=1e-8, maxiter=500,
              M=_recorded("preconditioned", lambda r: precondition(sigma, eps, r)))  # fmt: skip
    return jnp.linalg.norm(matvec(x) - b) / jnp.linalg.norm(b)


def residual_history(sigma, eps, b, precondition):
    """cg 解 anisotropic(x) = b 到相对残差 1e-8 两次，在同一个程序里：不预条件一次，
    M(r) = precondition(sigma, eps, r) 一次。返回后者的解的相对残差，和两次每一步的残差范数
    {"cg alone": […], "preconditioned": […]}：cg 每得到一个新残差 r 就调用一次 M(r)，M 里的
    回调把 ‖r‖ 记下来（第一项是初始残差）。
    cg solves anisotropic(x) = b to a relative residual of 1e-8 twice, in one program: once
    without a preconditioner, once with M(r) = precondition(sigma, eps, r). It returns the
    latter solution's relative residual and both runs' residual norms at every step,
    {"cg alone": […], "preconditioned": […]}: cg calls M(r) once for every new residual r, and
    a callback in M records ‖r‖ (the first entry is the initial residual)."""
    HISTORY.clear()
    residual = float(_both_solves(sigma, eps, b, precondition))
    jax.effects_barrier()
    return residual, dict(HISTORY)


# ---- 你来实现 / your code ---------------------------------------------------------------


def line_preconditioner(sigma, eps, r):
    """返回 lines(z, sigma, eps) = r 的解 z：每一行 i 是一个 N 元三对角方程组，N 行一次解完，用
    lax.linalg.tridiagonal_solve(dl, d, du, b)（dl、d、du 形状 [N, N]，b 形状 [N, N, 1]；
    dl 的第一列、du 的最后一列必须是 0）。网格步长 h = 1 / (N + 1)。不要循环，也不要再调用迭代求解器：
    预条件子每一步都要用，必须便宜。大约 6 行。

    Return the solution z of lines(z, sigma, eps) = r: each row i is a tridiagonal system of N
    unknowns; solve all N rows at once with lax.linalg.tridiagonal_solve(dl, d, du, b) (dl, d,
    du of shape [N, N], b of shape [N, N, 1]; dl's first column and du's last column must be
    0). The grid step is h = 1 / (N + 1). No loop and no other iterative solver: a
    preconditioner runs at every step and must be cheap. About 6 lines.
    """
    h = 1.0 / (r.shape[0] + 1)
    diagonal = (2 * eps + 2) / h**2 + sigma
    off = jnp.full_like(r, -1.0 / h**2)
    below, above = off.at[:, 0].set(0.0), off.at[:, -1].set(0.0)
    return lax.linalg.tridiagonal_solve(below, diagonal, above, r[..., None])[..., 0]


# ---- 检查 / checks ----------------------------------------------------------------------


def test_a_python_counter_counts_traces_not_iterations():
    """⚠️ 陷阱 / trap：求解器的迭代在 lax.while_loop 里，matvec 的 Python 代码只在追踪时运行：
    闭包里的计数器数的是追踪，走 3 步和走 6 步的解数出来一样多。每次执行都会调用的
    jax.debug.callback 才数得到真正的 matvec 次数。精确算术下，CG 对只有 k 个不同特征值的算子
    至多 k 步就解完；BiCGSTAB 每一步的 matvec 次数另算。
    ⚠️ trap: a solver's iterations run inside a lax.while_loop, and the matvec's Python code
    runs only while it is traced: a counter in its closure counts traces, as many for a 3-step
    solve as for a 6-step one. A jax.debug.callback, called on every execution, counts the
    matvecs that ran. In exact arithmetic CG solves an operator with k distinct eigenvalues in
    at most k steps; BiCGSTAB's matvecs per step are its own.
    """
    calls = {}
    for k in (3, 6):
        d = spectrum(k)
        matvec, calls[k] = counting(d)
        x, _ = jax.jit(lambda b: cg(matvec, b, tol=1e-10))(rhs(d.size))
        jax.effects_barrier()  # every callback has run
        np.testing.assert_allclose(d * x, rhs(d.size), rtol=1e-9)
    assert calls[3]["python"] == calls[6]["python"]  # the traces, however many steps
    assert calls[3]["executed"] == 4
    assert calls[6]["executed"] == 7

    d = spectrum(3)
    matvec, counts = counting(d)
    x, _ = jax.jit(lambda b: bicgstab(matvec, b, tol=1e-10))(rhs(d.size))
    jax.effects_barrier()
    np.testing.assert_allclose(d * x, rhs(d.size), rtol=1e-9)
    assert counts["executed"] == 7



def test_a_line_preconditioner_buys_its_iterations():
    """写 line_preconditioner：x 方向的耦合很弱（ε 很小）时，算子几乎就是一行行互不相干的三对角方程组
    lines。把 lines 精确地解出来当作 M，CG 几步就收敛，不到不预条件时的五分之一。预条件子的价值
    用迭代数衡量（每一步的残差由 residual_history 记下），它对任何 σ、ε、网格都必须精确地解出 lines。
    Write line_preconditioner: when the coupling along x is weak (small ε) the operator is
    almost a set of unrelated tridiagonal systems, one per row, lines. With lines solved
    exactly as M, CG converges in a few steps, under a fifth of those of CG alone. A
    preconditioner is worth the iterations it saves (residual_history records every step's
    residual), and it must solve lines exactly for any σ, ε and grid.
    """
    sigma, u = problem(24, 5)
    round_trip = jax.jit(lambda eps: line_preconditioner(sigma, eps, lines(u, sigma, eps)))
    for eps in (1e-3, 0.3, 4.0):  # exact on lines, whatever the coupling
        np.testing.assert_allclose(round_trip(eps), u, rtol=1e-9, atol=1e-9)

    for eps, seed in ((1e-3, 0), (2e-3, 1)):
        sigma, b = problem(32, seed)
        residual, history = residual_history(sigma, eps, b, line_preconditioner)
        assert residual < 1e-8
        alone, line = history["cg alone"], history["preconditioned"]
        print(f"steps to 1e-8: CG alone {len(alone) - 1}, with lines {len(line) - 1}")
        assert len(line) - 1 <= 6 and 5 * len(line) < len(alone)
        assert line[-1] <= 1e-8 * line[0]  # the last residual recorded is the converged one
