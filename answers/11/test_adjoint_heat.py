"""11 · 可微分仿真：隐式时间步进的伴随梯度 / differentiable simulation: the adjoint gradient of
an implicit time stepper.

热方程加一个逐点的吸收系数场 θ：∂u/∂t = Δu - θ⊙u，单位正方形，边界 u = 0。隐式（向后
Euler）时间步每一步都要解一个线性方程 (I + dt·A(θ)) uₖ₊₁ = uₖ，A(θ)u = -Δu + θ⊙u。目标是
末时刻与目标场的差 J(θ) = ½‖u_T - target‖²。对 θ（n² 个参数）的梯度要穿过每一步的线性
求解：把每一步的 CG 迭代都记下来，内存是“步数 × 迭代数”个网格；custom_linear_solve 让每一步
的反向只是一次转置求解，只需要存每一步的状态。

The heat equation with a pointwise absorption field θ: ∂u/∂t = Δu - θ⊙u on the unit square,
u = 0 on the boundary. Implicit (backward Euler) time steps solve a linear system
(I + dt·A(θ)) uₖ₊₁ = uₖ at every step, with A(θ)u = -Δu + θ⊙u. The objective compares the last
state with a target, J(θ) = ½‖u_T - target‖². The gradient with respect to θ (n² parameters)
goes through every step's solve: recording each step's CG iterations costs "steps × iterations"
grids of memory; custom_linear_solve makes each step's backward pass one transposed solve, so
only the states of the steps are kept.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import equations

# ---- 给定代码 / given code -------------------------------------------------------------

DT = 1e-3  # time step / 时间步长


def operator(theta, u):
    """A(θ)u = -Δu + θ⊙u（五点差分，单位正方形的 n×n 个内部点）。对称正定。
    A(θ)u = -Δu + θ⊙u (five-point stencil, the n×n interior points of the unit square). SPD."""
    h = 1.0 / (u.shape[0] + 1)
    p = jnp.pad(u, 1)
    return (4 * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]) / h**2 + theta * u


def cg_solve(matvec, b):
    """手写 CG（lax.while_loop，解到相对残差 1e-12）：自己不能反向求导。
    Hand-written CG (a lax.while_loop, to a relative residual of 1e-12): no reverse mode."""

    def keep_going(carry):
        _, _, _, rr, k = carry
        return (rr > 1e-24 * jnp.vdot(b, b)) & (k < 10 * b.size)

    def step(carry):
        x, r, p, rr, k = carry
        ap = matvec(p)
        alpha = rr / jnp.vdot(p, ap)
        x, r = x + alpha * p, r - alpha * ap
        rr_new = jnp.vdot(r, r)
        return x, r, r + rr_new / rr * p, rr_new, k + 1

    return lax.while_loop(keep_going, step, (jnp.zeros_like(b), b, b, jnp.vdot(b, b), 0))[0]


def dense_reference(theta, u0, steps):
    """NumPy 参考：组装 I + dt·A(θ)，逐步 np.linalg.solve（只用于小网格）。
    NumPy reference: assemble I + dt·A(θ) and np.linalg.solve step by step (small grids only)."""
    n = u0.shape[0]
    h = 1.0 / (n + 1)
    t = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    a = (np.kron(t, np.eye(n)) + np.kron(np.eye(n), t)) / h**2 + np.diag(np.ravel(theta))
    u = np.ravel(u0)
    for _ in range(steps):
        u = np.linalg.solve(np.eye(n * n) + DT * a, u)
    return u.reshape(n, n)


def initial_and_target(n):
    x = np.linspace(0.0, 1.0, n + 2)[1:-1]
    xx, yy = np.meshgrid(x, x, indexing="ij")
    u0 = np.sin(np.pi * xx) * np.sin(np.pi * yy)
    return jnp.asarray(u0), jnp.asarray(0.5 * u0)


def absorption(n, seed=0):
    return jnp.asarray(np.random.default_rng(seed).uniform(0.0, 50.0, (n, n)))


def simulate_unrolled(theta, u0, steps, iters=30):
    """对照：同样的向后 Euler，但每一步是固定 iters 次迭代的 CG（fori_loop），直接反向传播
    穿过所有迭代（朴素的 BPTT）。30 次迭代时它与 simulate 的结果相差约 1e-9。
    For comparison: the same backward Euler, each step CG for a fixed `iters` iterations (a
    fori_loop), backpropagated through every iteration (naive backprop through time). With 30
    iterations it agrees with simulate to about 1e-9."""

    def matvec(u):
        return u + DT * operator(theta, u)

    def cg_step(i, carry):
        x, r, p, rr = carry
        ap = matvec(p)
        alpha = rr / jnp.vdot(p, ap)
        x, r = x + alpha * p, r - alpha * ap
        rr_new = jnp.vdot(r, r)
        return x, r, r + rr_new / rr * p, rr_new

    def step(u, _):
        return lax.fori_loop(0, iters, cg_step, (jnp.zeros_like(u), u, u, jnp.vdot(u, u)))[0], None

    return lax.scan(step, u0, length=steps)[0]


# ---- 你来实现 / your code ---------------------------------------------------------------


def simulate(theta, u0, steps):
    """向后 Euler 走 steps 步，返回最后的 u。每一步解 (I + DT·A(θ)) u_new = u：用
    lax.custom_linear_solve，matvec 是 u ↦ u + DT·operator(θ, u)，求解用 cg_solve，并告诉 JAX
    这个矩阵是对称的。时间循环用 lax.scan（steps 是 Python int）。大约 6 行。

    steps backward-Euler steps; return the last u. Each step solves (I + DT·A(θ)) u_new = u:
    use lax.custom_linear_solve with the matvec u ↦ u + DT·operator(θ, u), cg_solve as the
    solver, and tell JAX the matrix is symmetric. Loop over time with lax.scan (steps is a
    Python int). About 6 lines.
    """

    def matvec(u):
        return u + DT * operator(theta, u)

    def step(u, _):
        return lax.custom_linear_solve(matvec, u, solve=cg_solve, symmetric=True), None

    return lax.scan(step, u0, length=steps)[0]


# ---- 检查 / checks ----------------------------------------------------------------------


def objective(theta, u0, target, steps):
    return 0.5 * jnp.sum((simulate(theta, u0, steps) - target) ** 2)


def test_implicit_steps_match_the_dense_reference():
    """写 simulate：在一个小网格上与组装好的矩阵逐步求解的结果相同。测试还读 simulate 的
    jaxpr：整个程序里只有一个 custom_linear_solve，放在 scan 里，不管走几步都是它；而且它声明了
    对称（转置求解就是同一个求解）。固定次数展开的 CG 也能算出同样的数，但它的程序里没有线性
    求解这回事，反向传播只能穿过每一次迭代。
    Write simulate: on a small grid it equals solving with the assembled matrix step by step.
    The test also reads simulate's jaxpr: the whole program holds one custom_linear_solve, in the
    scan, however many steps it takes, and it declares the matrix symmetric (its transposed
    solve is the solve itself). CG unrolled for a fixed number of iterations computes the same
    numbers, but its program has no linear solve in it, and backprop must go through every
    iteration.
    """
    n, steps = 6, 4
    u0, _ = initial_and_target(n)
    theta = absorption(n, seed=3)
    got = jax.jit(simulate, static_argnums=2)(theta, u0, steps)
    np.testing.assert_allclose(got, dense_reference(theta, u0, steps), rtol=1e-10)

    for k in (steps, 3 * steps):  # the program does not grow with the steps / 程序不随步数变长
        solves = equations("custom_linear_solve", lambda t, u: simulate(t, u, k), theta, u0)
        assert len(solves) == 1, f"{len(solves)} custom_linear_solve for {k} steps"
        assert equations("scan", lambda t, u: simulate(t, u, k), theta, u0)
        jaxprs = solves[0].params["jaxprs"]
        assert jaxprs.transpose_solve is not None  # symmetric: the backward pass is a solve


def test_the_adjoint_gradient_matches_finite_differences_in_bounded_memory():
    """48×48 个未知量、50 个时间步：一次反向传播就得到 θ 的全部 2304 个分量的梯度，与沿一个
    随机方向的中心差分相符（有限差分每个方向要两次完整的仿真）。编译后的 memory_analysis()：
    梯度的临时内存只够存每一步的状态再加几个网格，不到 2 × 步数 个网格。对照是朴素的做法
    simulate_unrolled：每步 30 次 CG 迭代全部展开、反向传播穿过它们——梯度相同（到 1e-8），
    临时内存却多出一百倍以上（测试量两者并打印）。
    48×48 unknowns and 50 time steps: one backward pass gives the gradient for all 2304
    components of θ, and it agrees with a central difference along a random direction (finite
    differences need two full simulations per direction). The compiled memory_analysis(): the
    gradient's temporary memory holds each step's state plus a few grids, less than
    2 × steps grids. The comparison is the naive simulate_unrolled, backpropagating through all
    30 CG iterations of every step: the same gradient (to 1e-8), and more than a hundred times
    the temporary memory (the test measures both and prints them).
    """
    n, steps = 48, 50
    u0, target = initial_and_target(n)
    theta = absorption(n)

    def compile_gradient(simulate):
        def objective(theta):
            return 0.5 * jnp.sum((simulate(theta, u0, steps) - target) ** 2)

        return jax.jit(jax.grad(objective)).lower(theta).compile()

    compiled = compile_gradient(simulate)
    grad = compiled(theta)
    assert grad.shape == (n, n)

    v = jnp.asarray(np.random.default_rng(1).normal(size=(n, n)))
    j = jax.jit(objective, static_argnums=3)
    eps = 1e-3
    fd = (j(theta + eps * v, u0, target, steps) - j(theta - eps * v, u0, target, steps)) / (2 * eps)
    np.testing.assert_allclose(jnp.vdot(grad, v), fd, rtol=1e-6)

    naive = compile_gradient(simulate_unrolled)
    np.testing.assert_allclose(naive(theta), grad, rtol=1e-8, atol=1e-8 * np.abs(grad).max())
    temp = compiled.memory_analysis().temp_size_in_bytes
    naive_temp = naive.memory_analysis().temp_size_in_bytes
    grid = n * n * 8  # one float64 grid / 一个 float64 网格
    print(
        f"gradient temp bytes: adjoint {temp} ({temp / grid:.0f} grids), "
        f"naive {naive_temp} ({naive_temp / grid:.0f} grids), {naive_temp / temp:.0f}x"
    )
    assert temp < 2 * steps * grid
    assert naive_temp > 100 * temp
