"""04 · 隐函数定理 + custom_vjp：对解求导，而不是对迭代求导 / the implicit function theorem with
custom_vjp: differentiate the solution, not the iterations.

若 x*(θ) 满足 g(x*, θ) = 0，则 ∂g/∂x · dx* + ∂g/∂θ · dθ = 0。反向模式只需要一个转置的
线性方程：(∂g/∂x)ᵀ λ = v̄，然后 θ̄ = -(∂g/∂θ)ᵀ λ。求解器怎么迭代、迭代多少步都无关紧要：
不用展开，也不用存每一步的中间值。

If x*(θ) satisfies g(x*, θ) = 0, then ∂g/∂x · dx* + ∂g/∂θ · dθ = 0. Reverse mode needs one
transposed linear system, (∂g/∂x)ᵀ λ = v̄, and then θ̄ = -(∂g/∂θ)ᵀ λ. How the solver iterates,
and for how many steps, does not matter: nothing is unrolled and no step is stored.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import primitives

# ---- 给定代码 / given code -------------------------------------------------------------


def residual(x, theta):
    """g(x, θ) = A x + 0.1·x³ - θ，A 不对称 / with a non-symmetric A."""
    n = x.shape[0]
    a = 3.0 * jnp.eye(n) + jnp.triu(jnp.ones((n, n)), 1)
    return a @ x + 0.1 * x**3 - theta


def newton_step(x, theta):
    return x - jnp.linalg.solve(jax.jacobian(residual)(x, theta), residual(x, theta))


def newton_unrolled(theta, iters=12):
    """展开的牛顿法（fori_loop 静态步数，可反向求导）/ unrolled Newton (static fori_loop)."""
    return lax.fori_loop(0, iters, lambda i, x: newton_step(x, theta), jnp.zeros_like(theta))


def newton_while(theta):
    """收敛即停的牛顿法（while_loop，不能反向求导）/ Newton until converged (while_loop)."""

    def keep_going(carry):
        i, x = carry
        return (i < 50) & (jnp.linalg.norm(residual(x, theta)) > 1e-6)

    return lax.while_loop(keep_going, lambda c: (c[0] + 1, newton_step(c[1], theta)), (0, theta))[1]


def layer(z, params, x):
    """不动点映射 φ(z) = tanh(W z + x)，‖W‖ < 1 时是压缩映射。
    The fixed-point map φ(z) = tanh(W z + x), a contraction when ‖W‖ < 1.
    """
    return jnp.tanh(params @ z + x)


def unrolled_fixed_point(params, x, iters):
    return lax.fori_loop(0, iters, lambda i, z: layer(z, params, x), jnp.zeros_like(x))


# ---- 检查 / checks ----------------------------------------------------------------------


def test_root_solve_vjp_uses_the_transposed_jacobian():
    """对 while_loop 牛顿法写 custom_vjp：bwd 解 (∂g/∂x)ᵀ λ = v̄，θ̄ = -(∂g/∂θ)ᵀ λ。
    A 不对称，所以忘了转置会得到错的梯度；对的梯度等于展开的牛顿法的梯度。
    A custom_vjp for Newton in a while_loop: bwd solves (∂g/∂x)ᵀ λ = v̄ and returns
    θ̄ = -(∂g/∂θ)ᵀ λ. A is not symmetric, so a forgotten transpose gives a wrong gradient; the
    right one equals the gradient of unrolled Newton.
    """

    @jax.custom_vjp
    def root(theta):
        return newton_while(theta)

    def fwd(theta):
        x = root(theta)
        return x, (x, theta)

    def bwd(res, v):
        x, theta = res
        jac_x = jax.jacobian(residual)(x, theta)
        lam = jnp.linalg.solve(jac_x.T, v)
        _, vjp_theta = jax.vjp(lambda t: residual(x, t), theta)
        (g_theta,) = vjp_theta(lam)
        return (-g_theta,)

    root.defvjp(fwd, bwd)

    def loss(solve, theta):
        x = solve(theta)
        return jnp.sum(jnp.sin(x) * jnp.arange(1.0, x.shape[0] + 1))

    implicit_grad = jax.jit(jax.grad(partial(loss, root)))
    unrolled_grad = jax.jit(jax.grad(partial(loss, newton_unrolled)))
    for seed in range(3):
        theta = np.random.default_rng(seed).normal(size=5).astype(np.float32)
        np.testing.assert_allclose(implicit_grad(theta), unrolled_grad(theta), rtol=1e-4, atol=1e-6)


def test_implicit_gradient_memory_does_not_grow_with_iterations():
    """展开的不动点迭代反向时要存下每一步的中间值：临时内存随步数线性增长。隐函数版本的
    反向只需要最终的 z*：临时内存与步数无关。两者的梯度相同。数字来自编译后的
    memory_analysis()。
    Backpropagating an unrolled fixed-point iteration stores every step: temporary memory grows
    linearly with the steps. The implicit version needs only the final z*: its temporary memory
    does not depend on the steps. The gradients agree. The figures come from the compiled
    program's memory_analysis().
    """

    @partial(jax.custom_vjp, nondiff_argnums=(2,))
    def implicit_fixed_point(params, x, iters):
        return unrolled_fixed_point(params, x, iters)

    def fwd(params, x, iters):
        z = unrolled_fixed_point(params, x, iters)
        return z, (params, x, z)

    def bwd(iters, res, v):
        # (I - ∂φ/∂z)ᵀ u = v̄, solved by the iteration u ← v̄ + (∂φ/∂z)ᵀ u; then θ̄ = (∂φ/∂θ)ᵀ u
        params, x, z = res
        _, vjp_z = jax.vjp(lambda z: layer(z, params, x), z)
        u = lax.fori_loop(0, iters, lambda i, u: v + vjp_z(u)[0], v)
        _, vjp_inputs = jax.vjp(lambda p, x: layer(z, p, x), params, x)
        return vjp_inputs(u)

    implicit_fixed_point.defvjp(fwd, bwd)

    n = 64
    rng = np.random.default_rng(0)
    params = (0.5 * rng.normal(size=(n, n)) / np.sqrt(n)).astype(np.float32)
    x = rng.normal(size=n).astype(np.float32)

    def temp_bytes(compiled):
        return compiled.memory_analysis().temp_size_in_bytes

    def loss(solve, params, x, iters):
        return jnp.sum(solve(params, x, iters) ** 2)

    temps, grads = {}, {}
    for name, solve in (("unrolled", unrolled_fixed_point), ("implicit", implicit_fixed_point)):
        grad = jax.jit(jax.grad(partial(loss, solve), argnums=(0, 1)), static_argnums=2)
        compiled = {it: grad.lower(params, x, it).compile() for it in (20, 200)}
        temps[name] = {it: temp_bytes(c) for it, c in compiled.items()}
        grads[name] = compiled[200](params, x)  # iters is static: already compiled in

    for g_unrolled, g_implicit in zip(grads["unrolled"], grads["implicit"], strict=True):
        np.testing.assert_allclose(g_implicit, g_unrolled, rtol=1e-4, atol=1e-6)
    assert temps["implicit"][20] == temps["implicit"][200], temps
    per_step = (temps["unrolled"][200] - temps["unrolled"][20]) / 180
    assert per_step >= n * 4, temps  # at least one float32 vector kept per step / 每步至少一个向量
    assert temps["unrolled"][200] > 20 * temps["implicit"][200], temps


def newton_solve(f, x0):
    """f(x) = 0 的牛顿法，收敛即停（while_loop），形如 lax.custom_root 要的 solve（给定）。
    Newton on f(x) = 0 until converged (while_loop), shaped as lax.custom_root's solve (given)."""

    def keep_going(carry):
        i, x = carry
        return (i < 50) & (jnp.linalg.norm(f(x)) > 1e-6)

    def step(carry):
        i, x = carry
        return i + 1, x - jnp.linalg.solve(jax.jacobian(f)(x), f(x))

    return lax.while_loop(keep_going, step, (0, x0))[1]


def newton_root(theta):
    """residual(x, θ) = 0 的解 x*(θ)，用 lax.custom_root(f, 初值, solve, tangent_solve)：f 是固定 θ
    的 residual，初值全 0，solve 用 newton_solve。tangent_solve(g, y) 要解线性方程 g(v) = y，
    g 是 f 在根处的雅可比作用在向量上（一个线性函数，不是矩阵）：x 是向量，g 的矩阵要先建出来
    （g 是线性的：它在任何一点的雅可比都是那个矩阵），再 jnp.linalg.solve。大约 4 行。

    The solution x*(θ) of residual(x, θ) = 0 by lax.custom_root(f, initial guess, solve,
    tangent_solve): f is residual with θ fixed, the guess all zeros, solve newton_solve.
    tangent_solve(g, y) solves the linear system g(v) = y, where g is f's Jacobian at the root
    applied to a vector (a linear function, not a matrix): x is a vector, so build g's matrix
    first (g is linear: its Jacobian at any point is that matrix), then jnp.linalg.solve.
    About 4 lines.
    """

    def tangent_solve(g, y):
        return jnp.linalg.solve(jax.jacfwd(g)(y), y)

    f = lambda x: residual(x, theta)  # noqa: E731
    return lax.custom_root(f, jnp.zeros_like(theta), newton_solve, tangent_solve)


def test_custom_root_differentiates_a_solver_by_its_tangent_solve():
    """✍️ 实现 newton_root。lax.custom_root 就是上面手写的隐函数规则的库版本：前向只跑 solve（这里是
    while_loop，本身不能反向求导），导数来自隐函数定理，只要你告诉它怎样解一个以 g 为系数的线性方程。
    检验：值等于 newton_while 的，jit 下的梯度等于展开牛顿法的梯度（A 不对称），程序里是一个 CustomRoot
    方程（里面是 while_loop 的 solve），梯度程序里没有展开的 scan。
    Write newton_root. lax.custom_root is the library's version of the hand-written implicit rule
    above: forward it runs only the solve (a while_loop here, itself not reverse-differentiable),
    and the derivative comes from the implicit function theorem once you say how to solve a
    linear system whose coefficients are g. Checked: the value equals newton_while's, the
    gradient under jit equals unrolled Newton's (A is not symmetric), the program is one
    CustomRoot equation (with the while_loop solve inside), and the gradient program has no
    unrolled scan.
    """

    def loss(solve, theta):
        x = solve(theta)
        return jnp.sum(jnp.sin(x) * jnp.arange(1.0, x.shape[0] + 1))

    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jax.grad(partial(loss, newton_while))(jnp.ones(5))

    implicit_grad = jax.jit(jax.grad(partial(loss, newton_root)))
    unrolled_grad = jax.jit(jax.grad(partial(loss, newton_unrolled)))
    root, reference = jax.jit(newton_root), jax.jit(newton_while)
    for seed in range(3):
        theta = np.random.default_rng(seed).normal(size=5).astype(np.float32)
        np.testing.assert_allclose(root(theta), reference(theta), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(implicit_grad(theta), unrolled_grad(theta), rtol=1e-4, atol=1e-6)

    forward = str(jax.make_jaxpr(newton_root)(jnp.ones(5)))
    assert "CustomRoot[" in forward and "while[" in forward  # the solve runs inside custom_root
    program = jax.make_jaxpr(jax.grad(partial(loss, newton_root)))(jnp.ones(5)).jaxpr
    assert "scan" not in primitives(program)
