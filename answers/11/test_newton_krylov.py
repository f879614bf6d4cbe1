"""11 · 无矩阵的牛顿–Krylov：jax.linearize + GMRES + lax.custom_root / matrix-free Newton–Krylov:
jax.linearize, GMRES and lax.custom_root.

粘性 Burgers 方程 u_t + u·u_x = ν·u_xx（周期边界）的向后 Euler 一步要解非线性方程组
G(u) = u - b + dt·(u·u_x - ν·u_xx) = 0。牛顿法每一步解 J δ = G(u)；J 因为对流项而不对称，
所以用 GMRES 而不是 CG。GMRES 只需要 J 乘向量：jax.linearize(g, u) 在 u 处把 g 算一次，
返回 g(u) 和一个线性函数 t ↦ J t，整段 GMRES 迭代都用它，程序里从来没有 N×N 的 Jacobian。
牛顿循环包进 lax.custom_root，解对 ν 的导数由隐函数定理给出：再解一次线性方程。J 不对称，
反向模式要解的是转置方程，所以 tangent_solve 里的 lax.custom_linear_solve 要给出
transpose_solve（GMRES 同样能解 Jᵀ）。

A backward-Euler step of the viscous Burgers equation u_t + u·u_x = ν·u_xx (periodic) solves
the nonlinear system G(u) = u - b + dt·(u·u_x - ν·u_xx) = 0. Each Newton step solves J δ = G(u);
the advection term makes J nonsymmetric, so GMRES does it rather than CG. GMRES needs only
products with J: jax.linearize(g, u) evaluates g once at u and returns g(u) and a linear function
t ↦ J t, used by every GMRES iteration, so the program never holds an N×N Jacobian. Inside
lax.custom_root the derivative of the solution in ν comes from the implicit function theorem: one
more linear solve. J is nonsymmetric and reverse mode solves the transposed system, so the
lax.custom_linear_solve in the tangent_solve needs a transpose_solve (GMRES solves Jᵀ as well).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.sparse.linalg import gmres

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------

N = 128  # grid points on the periodic unit interval / 周期单位区间上的格点数
H = 1.0 / N
DT = 0.05  # time step / 时间步长


def residual(u, b, nu):
    """G(u) = u - b + dt·(u·u_x - ν·u_xx)，中心差分，周期边界。/ Central differences, periodic."""
    up, um = jnp.roll(u, -1), jnp.roll(u, 1)
    return u - b + DT * (u * (up - um) / (2 * H) - nu * (up - 2 * u + um) / H**2)


def gmres_solve(matvec, y):
    """GMRES(20) 解 matvec(t) = y，容差 1e-13。/ GMRES(20) for matvec(t) = y, tolerance 1e-13."""
    return gmres(matvec, y, tol=1e-13, restart=20, maxiter=50)[0]


def dense_newton(b, nu, iterations=8):
    """参照：稠密的 N×N Jacobian（jax.jacfwd）和 jnp.linalg.solve。/ Reference: the dense N×N
    Jacobian (jax.jacfwd) and jnp.linalg.solve."""
    u = b
    for _ in range(iterations):
        g = jax.jacfwd(residual)(u, b, nu)
        u = u - jnp.linalg.solve(g, residual(u, b, nu))
    return u


def start():
    x = jnp.arange(N) * H
    return jnp.sin(2 * jnp.pi * x) + 0.5


def weights():
    return jnp.asarray(np.random.default_rng(0).normal(size=N))


# ---- 你来实现 / your code ---------------------------------------------------------------


def burgers_step(b, nu, tol=1e-11):
    """向后 Euler 一步：解 residual(u, b, nu) = 0，初值取 b；返回 (u, 牛顿步数)。
    1. 牛顿法 newton(g, u0)：lax.while_loop，只要 ‖g(u)‖ > tol·‖u0‖ 就再走一步（最多 30 步）；
       每一步 r, jvp = jax.linearize(g, u)，再 u - gmres_solve(jvp, r)；返回 (u, 步数)。
    2. lax.custom_root(f, b, newton, tangent_solve, has_aux=True)（步数是 aux，不参与求导），
       tangent_solve(g, y) = lax.custom_linear_solve(g, y, solve=gmres_solve,
       transpose_solve=gmres_solve)。
    不要造稠密的 Jacobian（jax.jacfwd / jax.jacrev）。大约 12 行。

    One backward-Euler step: solve residual(u, b, nu) = 0 starting from b; return (u, the
    number of Newton steps).
    1. Newton newton(g, u0): a lax.while_loop that takes another step while
       ‖g(u)‖ > tol·‖u0‖ (at most 30 steps); each step r, jvp = jax.linearize(g, u), then
       u - gmres_solve(jvp, r); it returns (u, steps).
    2. lax.custom_root(f, b, newton, tangent_solve, has_aux=True) (the count is aux, never
       differentiated), with tangent_solve(g, y) = lax.custom_linear_solve(g, y,
       solve=gmres_solve, transpose_solve=gmres_solve).
    Build no dense Jacobian (jax.jacfwd / jax.jacrev). About 12 lines.
    """

    def newton(g, u0):
        def keep_going(carry):
            u, k = carry
            return (jnp.linalg.norm(g(u)) > tol * jnp.linalg.norm(u0)) & (k < 30)

        def step(carry):
            u, k = carry
            r, jvp = jax.linearize(g, u)
            return u - gmres_solve(jvp, r), k + 1

        return lax.while_loop(keep_going, step, (u0, 0))

    def tangent_solve(g, y):
        return lax.custom_linear_solve(g, y, solve=gmres_solve, transpose_solve=gmres_solve)

    return lax.custom_root(lambda u: residual(u, b, nu), b, newton, tangent_solve, has_aux=True)


# ---- 检查 / checks ----------------------------------------------------------------------


def test_newton_krylov_solves_without_a_jacobian():
    """写 burgers_step：残差小于 1e-10，与稠密牛顿法（jax.jacfwd + jnp.linalg.solve）的解
    相差不到 1e-10，非线性真的起了作用（解离开了 b）。编译后的程序里没有 N×N 的数组，临时
    内存不到一个 N×N 矩阵；jaxpr 里有 CustomRoot。
    Write burgers_step: its residual is below 1e-10 and it agrees with dense Newton (jax.jacfwd
    plus jnp.linalg.solve) within 1e-10, and the step really moved (the solution left b). The
    compiled program holds no N×N array and its temporary memory is under one N×N matrix;
    the jaxpr holds a CustomRoot.
    """
    b, nu = start(), 0.01
    compiled = jax.jit(burgers_step).lower(b, nu).compile()
    u, _ = compiled(b, nu)
    assert jnp.linalg.norm(residual(u, b, nu)) < 1e-10
    np.testing.assert_allclose(u, jax.jit(dense_newton)(b, nu), rtol=0, atol=1e-10)
    assert jnp.abs(u - b).max() > 0.1
    assert f"{N},{N}]" not in compiled.as_text()
    assert compiled.memory_analysis().temp_size_in_bytes < N * N * 8
    assert "CustomRoot" in str(jax.make_jaxpr(burgers_step)(b, nu))


def test_newton_stops_at_its_tolerance():
    """牛顿法收敛得多快，看它走了几步：对三个容差 1e-1、1e-6、1e-11，burgers_step 返回的步数
    k 正好是第一个让残差降到 tol·‖b‖ 以下的步数：稠密牛顿法走 k 步已经到了，走 k - 1 步还没到。
    步数随容差变化（二次收敛，每步有效数字大约翻倍）：不检查停止条件、总走 30 步的循环过不了。
    How fast Newton converges shows in its step count: for each of three tolerances 1e-1, 1e-6
    and 1e-11, the count k that burgers_step returns is the first at which the residual falls
    below tol·‖b‖: dense Newton is there after k steps and not yet after k - 1. The count moves
    with the tolerance (quadratic convergence roughly doubles the correct digits each step): a
    loop that always runs 30 steps without a stopping test fails.
    """
    b, nu = start(), 0.01
    step = jax.jit(burgers_step)
    counts = []
    for tol in (1e-1, 1e-6, 1e-11):
        u, k = step(b, nu, tol)
        k = int(k)
        counts.append(k)
        bound = tol * jnp.linalg.norm(b)
        assert jnp.linalg.norm(residual(u, b, nu)) <= bound, (tol, k)
        assert jnp.linalg.norm(residual(dense_newton(b, nu, k), b, nu)) <= bound, (tol, k)
        assert jnp.linalg.norm(residual(dense_newton(b, nu, k - 1), b, nu)) > bound, (tol, k)
    print(f"Newton steps for tolerances 1e-1, 1e-6, 1e-11: {counts}")


def test_the_root_is_differentiated_implicitly():
    """J(ν) = Σ w⊙u 在一步之后。jax.grad 给出的导数与稠密的隐函数定理相符：
    dJ/dν = -wᵀ (∂G/∂u)⁻¹ ∂G/∂ν（这里用 jax.jacfwd 组装 ∂G/∂u 作参照）。梯度程序里也没有
    N×N 的数组：反向模式用 GMRES 再解一次转置的方程。
    J(ν) = Σ w⊙u after one step. jax.grad's derivative agrees with the dense implicit function
    theorem, dJ/dν = -wᵀ (∂G/∂u)⁻¹ ∂G/∂ν (with ∂G/∂u assembled by jax.jacfwd as the reference).
    The gradient program holds no N×N array either: reverse mode solves the transposed system
    with GMRES once more.
    """
    b, nu, w = start(), 0.01, weights()
    compiled = jax.jit(jax.grad(lambda nu: jnp.sum(w * burgers_step(b, nu)[0]))).lower(nu).compile()
    u = jax.jit(dense_newton)(b, nu)
    dg_du = jax.jacfwd(residual)(u, b, nu)
    dg_dnu = jax.jacfwd(residual, argnums=2)(u, b, nu)
    np.testing.assert_allclose(compiled(nu), -w @ jnp.linalg.solve(dg_du, dg_dnu), rtol=1e-8)
    assert f"{N},{N}]" not in compiled.as_text()
    assert compiled.memory_analysis().temp_size_in_bytes < N * N * 8
