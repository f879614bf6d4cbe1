"""11 · 非线性隐式时间步：牛顿法 + lax.custom_root / a nonlinear implicit time step: Newton's
method inside lax.custom_root.

反应扩散方程 ∂u/∂t = Δu - c·u³，单位正方形，边界 u = 0。向后 Euler 每一步要解一个非线性
方程组 G(u) = u + dt·(-Δu + c·u³) - b = 0（b 是上一步的状态）。牛顿法每次迭代解一个线性
方程 J δ = G(u)，J = I + dt·(-Δ + 3c·diag(u²)) 对称正定，只需要 J 乘向量（jvp），所以用 CG。
牛顿循环是 while_loop，不能反向求导；lax.custom_root 告诉 JAX“u 是 G 的根”，导数由隐函数
定理给出：du = -J⁻¹ ∂G/∂p dp，只要再解一次线性方程（tangent_solve），与牛顿走了几步无关。

The reaction-diffusion equation ∂u/∂t = Δu - c·u³ on the unit square, u = 0 on the boundary.
Every backward-Euler step solves the nonlinear system G(u) = u + dt·(-Δu + c·u³) - b = 0 (b is
the previous state). Each Newton iteration solves a linear system J δ = G(u), with
J = I + dt·(-Δ + 3c·diag(u²)) symmetric positive definite and needed only as a product (a jvp),
so CG does it. The Newton loop is a while_loop and cannot be reverse-differentiated;
lax.custom_root tells JAX that u is a root of G, and the implicit function theorem gives the
derivative, du = -J⁻¹ ∂G/∂p dp: one more linear solve (the tangent_solve), however many Newton
steps were taken.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.sparse.linalg import cg

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------

N = 24  # interior points per side / 每边的内部点数
H = 1.0 / (N + 1)
DT = 1e-3  # time step / 时间步长
STEPS = 10


def laplacian(u):
    """五点差分 -Δu，边界外为 0。/ The five-point -Δu, zero outside."""
    p = jnp.pad(u, 1)
    return (4 * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]) / H**2


def residual(u, b, c):
    """G(u) = u + dt·(-Δu + c·u³) - b：向后 Euler 一步的方程。/ One backward-Euler step's equation."""
    return u + DT * (laplacian(u) + c * u**3) - b


def newton(g, u0):
    """牛顿法解 g(u) = 0，直到 ‖g(u)‖ ≤ 1e-12·‖u0‖（最多 50 步）。每一步用 CG 解
    J δ = g(u)，J 只以 jvp 的形式出现。它是一个 lax.while_loop：不能反向求导。
    Newton's method for g(u) = 0 until ‖g(u)‖ <= 1e-12·‖u0‖ (at most 50 steps). Each step solves
    J δ = g(u) with CG, J appearing only as a jvp. It is a lax.while_loop: no reverse mode.
    """

    def keep_going(carry):
        u, k = carry
        return (jnp.linalg.norm(g(u)) > 1e-12 * jnp.linalg.norm(u0)) & (k < 50)

    def step(carry):
        u, k = carry
        delta, _ = cg(lambda t: jax.jvp(g, (u,), (t,))[1], g(u), tol=1e-14)
        return u - delta, k + 1

    return lax.while_loop(keep_going, step, (u0, 0))[0]


def cg_solve(matvec, y):
    """CG 解 matvec(t) = y（jax.scipy 的 cg，容差 1e-14）。/ CG for matvec(t) = y."""
    return cg(matvec, y, tol=1e-14)[0]


def initial_state():
    x = jnp.arange(1, N + 1) * H
    xx, yy = jnp.meshgrid(x, x, indexing="ij")
    return 20 * jnp.sin(jnp.pi * xx) * jnp.sin(jnp.pi * yy)


def weights(seed=0):
    return jnp.asarray(np.random.default_rng(seed).normal(size=(N, N)))


# ---- 你来实现 / your code ---------------------------------------------------------------


def implicit_step(b, c):
    """向后 Euler 一步：解 residual(u, b, c) = 0，初值取 b。用 lax.custom_root(f, 初值,
    solve, tangent_solve)：solve 就是 newton；tangent_solve(g, y) 要解线性方程 g(t) = y，
    g 是 J 乘向量（对称正定），用 lax.custom_linear_solve(g, y, solve=cg_solve,
    symmetric=True)——反向模式要转置这次求解，直接调用 jax 的 cg 做不到（见本文件最后一个
    koan）。大约 4 行。

    One backward-Euler step: solve residual(u, b, c) = 0 starting from b. Use
    lax.custom_root(f, initial guess, solve, tangent_solve): solve is newton; tangent_solve(g, y)
    solves the linear g(t) = y, where g multiplies by J (symmetric positive definite): use
    lax.custom_linear_solve(g, y, solve=cg_solve, symmetric=True). Reverse mode transposes that
    solve, which jax's cg called directly cannot do (the file's last koan). About 4 lines.
    """
    todo("implicit_step: lax.custom_root + newton")


# ---- 检查 / checks ----------------------------------------------------------------------


def simulate(u0, c, steps=STEPS):
    return lax.scan(lambda u, _: (implicit_step(u, c), None), u0, length=steps)[0]


def test_newton_step_solves_the_nonlinear_system():
    """写 implicit_step：结果满足非线性方程（相对残差 < 1e-10）；c = 0 时方程变成线性的，
    结果与直接用 CG 解 (I + dt·(-Δ)) u = b 相同；c = 5 时三次项真的起作用。程序里有
    CustomRoot：牛顿法被包在 custom_root 里。
    Write implicit_step: its result satisfies the nonlinear system (relative residual < 1e-10);
    with c = 0 the system is linear, and the result equals solving (I + dt·(-Δ)) u = b with CG;
    with c = 5 the cubic term really matters. The program holds a CustomRoot: Newton runs inside
    custom_root.
    """
    b = initial_state()
    step = jax.jit(implicit_step)
    u = step(b, 5.0)
    relative = jnp.linalg.norm(residual(u, b, 5.0)) / jnp.linalg.norm(b)
    assert relative < 1e-10
    linear = jax.jit(lambda b: cg_solve(lambda t: t + DT * laplacian(t), b))(b)
    np.testing.assert_allclose(step(b, 0.0), linear, rtol=1e-10, atol=1e-12)
    assert jnp.abs(u - linear).max() > 0.1 * jnp.abs(linear).max()  # the cubic term matters
    assert "CustomRoot" in str(jax.make_jaxpr(implicit_step)(b, 5.0))


def test_the_nonlinear_simulation_gradient_matches_finite_differences():
    """10 个非线性隐式步之后的 J = Σ w⊙u。一次反向传播给出对反应系数 c 和对初值 u0（576 个
    分量）的梯度，与中心差分相符：对 c 直接差分，对 u0 沿一个随机方向差分。梯度的 jaxpr 里
    有 CustomRoot：牛顿迭代本身没有被求导。
    J = Σ w⊙u after 10 nonlinear implicit steps. One backward pass gives the gradient with
    respect to the reaction coefficient c and the initial state u0 (576 components), and both
    agree with central differences: in c directly, in u0 along a random direction. The
    gradient's jaxpr holds CustomRoot: no Newton iteration was differentiated.
    """
    u0, w, c = initial_state(), weights(), 5.0

    def objective(u0, c):
        return jnp.sum(w * simulate(u0, c))

    j = jax.jit(objective)
    grad_u0, grad_c = jax.jit(jax.grad(objective, argnums=(0, 1)))(u0, c)
    assert grad_u0.shape == (N, N)
    eps = 1e-4
    np.testing.assert_allclose(grad_c, (j(u0, c + eps) - j(u0, c - eps)) / (2 * eps), rtol=1e-6)
    v = weights(seed=1)
    fd = (j(u0 + eps * v, c) - j(u0 - eps * v, c)) / (2 * eps)
    np.testing.assert_allclose(jnp.vdot(grad_u0, v), fd, rtol=1e-6)
    assert "CustomRoot" in str(jax.make_jaxpr(jax.grad(objective, argnums=1))(u0, c))


def test_jax_cg_alone_cannot_be_the_tangent_solve_in_reverse_mode():
    """⚠️ 陷阱 / trap：把 jax.scipy 的 cg 直接当作 custom_root 的 tangent_solve，前向模式
    （jvp）照常工作、与有限差分相符；反向模式却要把这次求解当作右端的线性函数来转置，
    JAX 0.12 做不到，报一个内部错误（见 jax-ml/jax#33872）。包一层
    lax.custom_linear_solve(…, symmetric=True)，JAX 就不必转置 CG 的迭代，只需要再解一次。
    ⚠️ trap: with jax.scipy's cg used directly as custom_root's tangent_solve, forward mode
    (jvp) works and matches finite differences; reverse mode must transpose that solve as a
    linear function of its right-hand side, which JAX 0.12 cannot do, and it raises an internal
    error (see jax-ml/jax#33872). Wrapped in lax.custom_linear_solve(…, symmetric=True),
    JAX need not transpose CG's iterations, only solve once more.
    """
    b, w = initial_state(), weights()

    def step_with_plain_cg(c):
        return lax.custom_root(
            lambda u: residual(u, b, c), b, newton, lambda g, y: cg(g, y, tol=1e-14)[0]
        )

    def objective(c):
        return jnp.sum(w * step_with_plain_cg(c))

    _, forward = jax.jit(lambda c: jax.jvp(objective, (c,), (1.0,)))(5.0)
    j, eps = jax.jit(objective), 1e-4
    fd = (j(5.0 + eps) - j(5.0 - eps)) / (2 * eps)
    np.testing.assert_allclose(forward, fd, rtol=1e-6)
    with raises_exactly(__):  # reverse mode / 反向模式
        jax.grad(objective)(5.0)
