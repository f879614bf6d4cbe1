"""11 · 求解器的实际问题 / what a practitioner meets next with solvers.

解线性、非线性方程时接下来会碰到的事：jax.scipy 的 `cg` 不告诉你它是否收敛；病态的算子要
预条件；非对称的算子不能用 CG，要用 GMRES 或 BiCGSTAB；非线性方程用 `lax.custom_root`
把牛顿迭代包起来，导数由隐函数定理给出；自己写的导数规则用 `jax.test_util.check_grads`
对照有限差分检查。

What comes next when solving linear and nonlinear equations: jax.scipy's `cg` does not tell
you whether it converged; an ill-conditioned operator needs a preconditioner; a nonsymmetric
operator is not for CG but for GMRES or BiCGSTAB; a nonlinear equation wraps Newton's method
in `lax.custom_root`, whose derivative comes from the implicit function theorem; and a
derivative rule of your own is checked against finite differences with
`jax.test_util.check_grads`.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.sparse.linalg import cg
from jax.test_util import check_grads

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------

N = 32
H = 1.0 / (N + 1)


def laplacian(u):
    """五点差分 -Δu，边界外为 0（见 test_poisson.py）。/ The five-point -Δu (test_poisson.py)."""
    p = jnp.pad(u, 1)
    return (4 * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]) / H**2


def reaction_field():
    """一半的点上反应系数是 10⁷、另一半是 0：对角元相差很大。/ θ = 10⁷ on half the points."""
    rng = np.random.default_rng(0)
    return jnp.asarray(np.where(rng.uniform(size=(N, N)) < 0.5, 1e7, 0.0))


def advection_diffusion(u, c=40.0):
    """-Δu + c·∂u/∂x（中心差分）：对流项让算子不再对称。/ The advection term makes it nonsymmetric."""
    p = jnp.pad(u, 1)
    return laplacian(u) + c * (p[2:, 1:-1] - p[:-2, 1:-1]) / (2 * H)


def relative_residual(matvec, x, b):
    return float(jnp.linalg.norm(matvec(x) - b) / jnp.linalg.norm(b))


def right_hand_side():
    return jnp.asarray(np.random.default_rng(1).normal(size=(N, N)))


def iterations_needed(matvec, b, tol, M=None, most=64):
    """cg 达到相对残差 tol 所需的迭代数：对 maxiter = 0 … most 各跑一次（vmap），取结果第一个
    达标的；都不达标就是 most + 1。/ The iterations cg needs to reach the relative residual tol:
    run it once for every maxiter = 0 … most (under vmap) and take the first whose answer meets
    tol; most + 1 when none does."""

    def meets(maxiter):
        x, _ = cg(matvec, b, tol=tol, maxiter=maxiter, M=M)
        return jnp.linalg.norm(matvec(x) - b) <= tol * jnp.linalg.norm(b)

    met = np.asarray(jax.jit(jax.vmap(meets))(jnp.arange(most + 1)))
    return int(np.argmax(met)) if met.any() else most + 1


def newton(g, x0):
    """牛顿迭代直到 |g(x)| ≤ 1e-13（lax.while_loop：不能反向求导）。
    Newton's method until |g(x)| <= 1e-13 (a lax.while_loop: no reverse mode by itself).
    """

    def keep_going(x):
        return jnp.abs(g(x)) > 1e-13

    def step(x):
        return x - g(x) / jax.grad(g)(x)

    return lax.while_loop(keep_going, step, x0)


# ---- 你来实现 / your code ---------------------------------------------------------------


def cubic_root(a):
    """解 x³ + x = a（对每个实数 a 只有一个实根）。用 lax.custom_root：方程 f(x) = x³ + x - a，
    初值 1.0，求解用上面的 newton；tangent_solve(g, y) 解线性方程 g(t) = y，这里 g 是一个
    标量线性函数，t = y / g(1.0)。大约 3 行。

    Solve x³ + x = a (one real root for every real a). Use lax.custom_root: the equation
    f(x) = x³ + x - a, the initial guess 1.0, newton above as the solver; tangent_solve(g, y)
    solves the linear equation g(t) = y, and here g is a scalar linear function, so
    t = y / g(1.0). About 3 lines.
    """

    def f(x):
        return x**3 + x - a

    return lax.custom_root(f, jnp.ones_like(a), newton, lambda g, y: y / g(1.0))


# ---- 检查 / checks ----------------------------------------------------------------------


def test_cg_does_not_say_whether_it_converged():
    """⚠️ 陷阱 / trap：jax.scipy.sparse.linalg.cg 返回 (x, info)，但 info 只是为了和 SciPy 的接口
    一致而留的占位，不管收没收敛都一样。是否收敛要自己用残差判断（在 jit 里也能算），标准就是
    交给 cg 的那个容差：这里 99 步后残差仍高于它，也不算收敛。
    ⚠️ trap: jax.scipy.sparse.linalg.cg returns (x, info), but info is a placeholder kept for
    SciPy's signature and is the same whether or not it converged. Decide convergence yourself
    from the residual (it can be computed under jit too), against the same tolerance you gave cg:
    after 99 steps the residual here is still above it, and that is not converged either.
    """
    b = right_hand_side()

    @jax.jit
    def solve(b, maxiter):
        x, info = cg(laplacian, b, tol=1e-8, maxiter=maxiter)
        converged = jnp.linalg.norm(laplacian(x) - b) <= 1e-8 * jnp.linalg.norm(b)
        return x, info, converged

    x_short, info_short, ok_short = solve(b, 5)
    x_almost, _, ok_almost = solve(b, 99)
    x_long, info_long, ok_long = solve(b, 500)
    assert info_short is None and info_long is None
    assert relative_residual(laplacian, x_short, b) > 1e-2  # 5 steps are far from enough
    assert relative_residual(laplacian, x_almost, b) > 1e-8  # still above tol
    assert relative_residual(laplacian, x_long, b) < 1e-8
    assert (bool(ok_short), bool(ok_almost), bool(ok_long)) == (False, False, True)


def test_a_jacobi_preconditioner_tames_a_badly_scaled_operator():
    """-Δu + θ⊙u 在 θ 一半是 10⁷、一半是 0 时对角元相差两千多倍，CG 收敛很慢。M 是一个近似
    A⁻¹ 的函数；最简单的是 Jacobi 预条件，它只用到 A 的对角元。效果要数清楚：cg 不报告迭代
    次数，所以 iterations_needed 对每个 maxiter 都跑一次 cg，找出结果第一次达到容差的那个。
    这里 Jacobi 把达到 1e-8 所需的迭代数减到不足六成，而同样走 20 步时残差小了上千倍
    （测试会打印两种数字）：看残差的比值，会比看迭代数显得更神奇。
    -Δu + θ⊙u with θ = 10⁷ on half the points and 0 elsewhere has diagonal entries more than
    two thousand times apart, and CG converges slowly. M is a function that approximates A⁻¹;
    the simplest, Jacobi, uses only A's diagonal. Count its effect honestly: cg does not report iterations, so
    iterations_needed runs cg once for every maxiter and finds the first whose answer meets the
    tolerance. Here Jacobi needs less than 60 % of the iterations to reach 1e-8, while after the
    same 20 steps its residual is a thousand times smaller (the test prints both): the residual
    ratio looks far more impressive than the iteration count.
    """
    theta = reaction_field()

    def matvec(u):
        return laplacian(u) + theta * u

    diagonal = 4 / H**2 + theta
    assert diagonal.max() / diagonal.min() > 2000  # 4356 against 10⁷ + 4356
    b = right_hand_side()

    def jacobi(r):  # M: r ↦ an approximation of A⁻¹ r / A⁻¹ r 的近似
        return r / diagonal

    plain_x, _ = jax.jit(lambda b: cg(matvec, b, tol=1e-14, maxiter=20))(b)
    jacobi_x, _ = jax.jit(lambda b: cg(matvec, b, tol=1e-14, maxiter=20, M=jacobi))(b)
    r_plain, r_jacobi = (
        relative_residual(matvec, plain_x, b),
        relative_residual(matvec, jacobi_x, b),
    )
    counts = {
        "plain": iterations_needed(matvec, b, 1e-8),
        "Jacobi": iterations_needed(matvec, b, 1e-8, jacobi),
    }
    print(
        f"after 20 steps: plain {r_plain:.1e}, Jacobi {r_jacobi:.1e}; iterations to 1e-8: {counts}"
    )
    assert r_jacobi < 1e-3 * r_plain
    assert counts["plain"] <= 64 and counts["Jacobi"] < 0.6 * counts["plain"]


def test_a_nonsymmetric_operator_needs_another_krylov_solver():
    """⚠️ 陷阱 / trap：CG 只对对称正定的算子成立；对流扩散算子不对称，CG 照样跑完、返回一个
    错得离谱的 x，而且不报任何错。jax.scipy.sparse.linalg 里还有两个不要求对称的求解器。
    ⚠️ trap: CG holds only for symmetric positive definite operators; the advection-diffusion
    operator is not symmetric, yet CG runs to the end and returns a wildly wrong x without any
    error. jax.scipy.sparse.linalg has two more solvers that do not need symmetry.
    """
    b = right_hand_side()
    u, v = right_hand_side(), jnp.ones((N, N))
    asymmetry = jnp.vdot(v, advection_diffusion(u)) - jnp.vdot(advection_diffusion(v), u)
    assert abs(float(asymmetry)) > 1.0  # the operator is not symmetric

    wrong, _ = jax.jit(lambda b: cg(advection_diffusion, b, tol=1e-10, maxiter=300))(b)
    assert relative_residual(advection_diffusion, wrong, b) > 1.0

    solve = jax.scipy.sparse.linalg.bicgstab
    x, _ = jax.jit(lambda b: solve(advection_diffusion, b, tol=1e-10, maxiter=2000))(b)
    assert relative_residual(advection_diffusion, x, b) < 1e-8


def test_custom_root_differentiates_newton_by_the_implicit_function_theorem():
    """写 cubic_root：newton 是 while_loop，直接对它求导会失败。custom_root 只把“x 是 f 的根”
    这件事告诉 JAX：dx/da = -(∂f/∂a) / (∂f/∂x) = 1 / (3x² + 1)，与迭代了多少步无关。
    check_grads 用有限差分检查一阶导数，前向、反向都查。
    Write cubic_root: newton is a while_loop and differentiating it directly fails.
    custom_root tells JAX only that x is a root of f: dx/da = -(∂f/∂a) / (∂f/∂x) = 1 / (3x² + 1),
    however many steps were taken. check_grads compares the first derivatives with finite
    differences, in forward and reverse mode. 梯度的 jaxpr 说明用的是哪条规则：里面有 CustomRoot，
    newton 的 while_loop 只出现一次（前向求解），没有哪一步迭代被求导。
    The gradient's jaxpr shows which rule ran: it holds CustomRoot, and Newton's while_loop
    appears once (the forward solve): no iteration is differentiated.
    """
    with raises_exactly(ValueError):  # no reverse mode through the while_loop
        jax.grad(lambda a: newton(lambda x: x**3 + x - a, jnp.ones_like(a)))(2.0)

    a = jnp.array([-5.0, 0.5, 2.0, 30.0])
    x = jax.jit(jax.vmap(cubic_root))(a)
    np.testing.assert_allclose(x**3 + x, a, rtol=1e-12)
    slope = jax.jit(jax.vmap(jax.grad(cubic_root)))(a)
    np.testing.assert_allclose(slope, 1 / (3 * x**2 + 1), rtol=1e-10)
    check_grads(jax.jit(cubic_root), (jnp.float64(2.0),), order=1)  # forward and reverse
    grad_jaxpr = str(jax.make_jaxpr(jax.grad(cubic_root))(jnp.float64(2.0)))
    assert "CustomRoot" in grad_jaxpr
    assert grad_jaxpr.count("while[") == 1  # the forward solve; no iteration is differentiated


def test_check_grads_catches_a_wrong_derivative_rule():
    """自己写的 custom_vjp 错了，值照样对，训练只是悄悄变差。check_grads 对比规则给出的导数与
    有限差分，不一致时就抛出异常。只查这条规则定义了的那种求导模式：查别的模式会因为另一种原因失败。
    A wrong custom_vjp of your own still gives the right values, and training just quietly gets
    worse. check_grads compares the rule's derivative with finite differences and raises when they
    disagree. Check only the mode the rule defines: checking another fails for another reason.
    """

    @jax.custom_vjp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))

    def forward(x):
        return softplus(x), x

    def wrong_backward(x, g):
        return (g * jnp.exp(x) / (1 + jnp.exp(-x)),)  # should be σ(x) = 1 / (1 + e⁻ˣ)

    softplus.defvjp(forward, wrong_backward)
    x = jnp.float64(0.5)
    np.testing.assert_allclose(softplus(x), np.log1p(np.exp(0.5)), rtol=1e-12)
    with raises_exactly(AssertionError) as info:
        check_grads(softplus, (x,), order=1, modes=["rev"])
    assert "Not equal to tolerance" in str(info.value)  # the derivatives disagree
    check_grads(jax.nn.softplus, (x,), order=1, modes=["fwd", "rev"])  # its rule is right
