"""11 · 热方程：灵敏度分析与系数反问题 / the heat equation: sensitivities and a coefficient
inverse problem.

一维变系数热方程 u_t = (κ(x)·u_x)_x，[0, 1] 上 n 个内部点，两端 u = 0。κ 定义在 n+1 个
“面”（相邻两点之间，含两端）上；显式 Euler：u ← u + dt·diff(κ·diff(pad(u)))/h²，
dt ≤ h²/(2·max κ) 才稳定。整个仿真是一个 lax.scan，所以它对 κ、对初值都可以求导：
灵敏度用有限差分核对，再用梯度下降从观测里把 κ 找回来。

The 1-D heat equation with a variable coefficient, u_t = (κ(x)·u_x)_x, n interior points on
[0, 1], u = 0 at both ends. κ lives on the n+1 faces (between neighbours, ends included);
explicit Euler is u ← u + dt·diff(κ·diff(pad(u)))/h², stable for dt ≤ h²/(2·max κ). The whole
simulation is one lax.scan, so it differentiates with respect to κ and to the initial state:
check the sensitivities against finite differences, then recover κ from observations by
gradient descent.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax import lax

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------

N = 32
H = 1.0 / (N + 1)
DT = 0.1 * H**2  # stable while κ ≤ 5 / κ ≤ 5 时稳定
STEPS = 200
ZONES = np.minimum(np.arange(N + 1) * 4 // (N + 1), 3)  # 4 zones of faces / 面分成 4 段


def heat_step(u, kappa, dt):
    """显式 Euler 一步；kappa 形状 [n+1]。/ One explicit Euler step; kappa has shape [n+1]."""
    return u + dt * jnp.diff(kappa * jnp.diff(jnp.pad(u, 1))) / H**2


def initial_state():
    x = jnp.arange(1, N + 1) * H
    return jnp.sin(jnp.pi * x) + 0.5 * jnp.sin(3 * jnp.pi * x)


def kappa_from_zones(zone_values):
    """每段一个值的 κ（形状 [4] → [n+1]）。/ A piecewise-constant κ, one value per zone."""
    return zone_values[ZONES]


# ---- 你来实现 / your code ---------------------------------------------------------------


def simulate(u0, kappa, dt=DT, steps=STEPS):
    """从 u0 出发走 steps 步 heat_step（steps 是 Python int），用 lax.scan，不要 Python 循环。
    返回 (最终状态, 每一步之后的状态堆叠成 [steps, n])。大约 4 行。

    Run heat_step `steps` times from u0 (steps is a Python int) with lax.scan, no Python loop.
    Return (the final state, the state after every step stacked as [steps, n]). About 4 lines.
    """
    todo("simulate: lax.scan 走 steps 步 / lax.scan over the steps")


def recover_zones(observed, u0, iters=300, learning_rate=0.05):
    """反问题：找 4 个段值 κ，使 simulate(u0, kappa_from_zones(κ)) 的轨迹每 10 步取一次
    （下标 9, 19, … 的行，即第 10, 20, … 步之后的状态）与 observed（形状 [steps // 10, n]）
    的均方差最小。优化 log κ（保证 κ > 0），从 κ = 1 出发，optax.adam(learning_rate) 走
    iters 步，整个循环放进 lax.scan 并 jit。返回 (κ 的 4 个段值, 每步的损失)。大约 12 行。

    The inverse problem: find the 4 zone values κ whose trajectory simulate(u0,
    kappa_from_zones(κ)), sampled every 10 steps (rows 9, 19, …: the states after 10, 20, …
    steps), has the least mean squared misfit to observed (shaped [steps // 10, n]). Optimise
    log κ (so κ > 0), start from κ = 1, take `iters` optax.adam(learning_rate) steps inside
    one jitted lax.scan. Return (κ's 4 zone values, the loss at every step). About 12 lines.
    """
    todo("recover_zones: optax.adam 优化 log κ / optax.adam on log κ")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_simulation_decays_the_first_mode_exactly():
    """写 simulate。κ ≡ 1 时 sin(πx) 是离散算子的特征向量，特征值 λ = 4/h²·sin²(πh/2)：
    每一步乘以 1 - dt·λ，steps 步后正好是它的 steps 次方（离散程序的精确解）。
    Write simulate. With κ ≡ 1, sin(πx) is an eigenvector of the discrete operator with
    λ = 4/h²·sin²(πh/2): each step multiplies it by 1 - dt·λ, so after `steps` steps by that
    factor to the power `steps` (the discrete program's exact answer).
    """
    x = jnp.arange(1, N + 1) * H
    mode = jnp.sin(jnp.pi * x)
    final, states = jax.jit(simulate)(mode, jnp.ones(N + 1))
    assert states.shape == (STEPS, N)
    np.testing.assert_allclose(states[-1], final)
    lam = 4 / H**2 * np.sin(np.pi * H / 2) ** 2
    np.testing.assert_allclose(final, (1 - DT * lam) ** STEPS * mode, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(states[0], (1 - DT * lam) * mode, rtol=1e-12, atol=1e-15)
    jaxpr = jax.make_jaxpr(simulate)(mode, jnp.ones(N + 1))
    assert [e.primitive.name for e in jaxpr.eqns] == ["scan"]


def test_sensitivity_to_the_coefficient_matches_finite_differences():
    """J(κ) = Σ w⊙u(T)。jax.grad 一次反向就给出对 κ 每个分量的灵敏度；沿一个随机方向 v，
    ∇J·v 必须等于 J 沿 v 的中心差分。float64 下能核对到 1e-7。
    J(κ) = Σ w⊙u(T). jax.grad gives the sensitivity to every component of κ in one reverse
    pass; along a random direction v, ∇J·v must equal J's central difference along v. In float64 they agree to 1e-7.
    """
    rng = np.random.default_rng(0)
    w, v = jnp.asarray(rng.normal(size=N)), jnp.asarray(rng.normal(size=N + 1))
    kappa = jnp.asarray(rng.uniform(0.5, 2.0, N + 1))

    def objective(kappa):
        return jnp.sum(w * simulate(initial_state(), kappa)[0])

    objective = jax.jit(objective)
    grad = jax.jit(jax.grad(objective))(kappa)
    assert grad.shape == __
    eps = 1e-6
    fd = (objective(kappa + eps * v) - objective(kappa - eps * v)) / __
    np.testing.assert_allclose(grad @ v, fd, rtol=1e-7)


def test_sensitivity_to_the_initial_state_is_the_adjoint_run():
    """J(u0) = Σ w⊙u(T) 对 u0 线性，梯度是“伴随”仿真：按转置的步进矩阵走同样多步。这里每一步
    的矩阵对称（I - dt·Dᵀ·diag(κ)·D/h²），所以伴随仿真就是普通仿真——从哪里出发？
    J(u0) = Σ w⊙u(T) is linear in u0; its gradient is the adjoint simulation, the same number of
    steps with the transposed step matrix. Here every step's matrix is symmetric
    (I - dt·Dᵀ·diag(κ)·D/h²), so the adjoint run is an ordinary run: starting from what?
    """
    rng = np.random.default_rng(1)
    w = jnp.asarray(rng.normal(size=N))
    kappa = jnp.asarray(rng.uniform(0.5, 2.0, N + 1))
    grad_u0 = jax.grad(lambda u0: jnp.sum(w * simulate(u0, kappa)[0]))(initial_state())
    adjoint, _ = simulate(__, kappa)
    np.testing.assert_allclose(grad_u0, adjoint, rtol=1e-10, atol=1e-14)


def test_recover_the_diffusion_coefficient():
    """写 recover_zones：从合成观测里把 4 段 κ = [0.5, 2, 1, 1.5] 找回来（相对误差 < 1e-4），
    损失至少下降 10⁸ 倍。梯度穿过 200 步仿真，整个优化只编译一次。
    Write recover_zones: recover the 4 zone values κ = [0.5, 2, 1, 1.5] from synthetic
    observations (relative error < 1e-4), the loss falling at least 10⁸-fold. The gradient
    runs through all 200 simulation steps; the whole optimisation compiles once. Adam 的第一步
    把它优化的每个坐标挪动约 learning_rate：在 log κ 里挪，κ 就乘上 e^(±lr)。整个优化是一个
    jit 程序，它的循环是一个长 iters 的 lax.scan（从 jaxpr 里读）。
    Adam's first step moves every coordinate it optimises by about learning_rate: moved in
    log κ, κ is multiplied by e^(±lr). The optimisation is one jitted program whose loop is one
    lax.scan of length iters (read from the jaxpr).
    """
    true = jnp.array([0.5, 2.0, 1.0, 1.5])
    _, states = jax.jit(simulate)(initial_state(), kappa_from_zones(true))
    observed = states[9::10]
    kappa, losses = recover_zones(observed, initial_state())
    assert kappa.shape == (4,) and losses.shape == (300,)
    np.testing.assert_allclose(kappa, true, rtol=1e-4)
    assert losses[-1] < 1e-8 * losses[0]
    assert float(losses[0]) == pytest.approx(
        float(jnp.mean((simulate(initial_state(), jnp.ones(N + 1))[1][9::10] - observed) ** 2))
    )
    learning_rate = 0.05
    first, _ = recover_zones(observed, initial_state(), iters=1, learning_rate=learning_rate)
    np.testing.assert_allclose(np.abs(np.log(first)), learning_rate, rtol=1e-3)  # a step in log κ
    jaxpr = jax.make_jaxpr(lambda o, u0: recover_zones(o, u0, iters=7))(observed, initial_state())
    programs = [e for e in jaxpr.eqns if e.primitive.name == "jit"]
    assert len(programs) == 1, "the optimisation should be one jitted program"
    loops = [e for e in programs[0].params["jaxpr"].eqns if e.primitive.name in ("scan", "while")]
    assert [e.params.get("length") for e in loops] == [7], "one lax.scan over the iters steps"
