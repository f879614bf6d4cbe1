"""11 · 刚性问题：显式方法为什么炸，隐式方法为什么稳 / a stiff problem: why an explicit method
blows up and an implicit one does not.

Robertson 的化学反应 A → B（速率 0.04）、B + C → A + C（10⁴）、2B → B + C（3·10⁷）：
三个速率相差九个数量级，快过程很快就平衡了，解本身变得很慢，可显式 Euler 的步长仍然被
最快的那个时间尺度限制住——步长稍大，误差每一步都被放大，几步之内就溢出。向后 Euler
y' = y + h·f(y') 每一步要解一个非线性方程组；这里只有 3 个未知数，牛顿法用稠密的
Jacobian（jax.jacfwd）和 jnp.linalg.solve。牛顿循环是 while_loop，包进 lax.custom_root 后
整段仿真就能对速率常数求梯度，导数由隐函数定理给出。

Robertson's reactions A → B (rate 0.04), B + C → A + C (10⁴), 2B → B + C (3·10⁷): rates nine
orders of magnitude apart. The fast reactions settle almost at once and the solution becomes
slow, yet explicit Euler's step stays bound by the fastest time scale: a step a little too large
amplifies the error at every step, and it overflows within a few. Backward Euler,
y' = y + h·f(y'), solves a nonlinear system at every step; with 3 unknowns Newton's method uses
the dense Jacobian (jax.jacfwd) and jnp.linalg.solve. The Newton loop is a while_loop; inside
lax.custom_root the whole simulation has a gradient with respect to the rate constants, given by
the implicit function theorem.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.ode import odeint  # noqa: F401  (a tempting shortcut)
from scipy.integrate import solve_ivp

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import primitives

# ---- 给定代码 / given code -------------------------------------------------------------

RATES = np.array([0.04, 1e4, 3e7])  # NumPy: no JAX work at import / 导入时不做 JAX 计算
Y_START = np.array([1.0, 0.0, 0.0])
T_END = 10.0


def robertson(y, k):
    """三种物质的浓度 y，速率常数 k。/ Three concentrations y, rate constants k."""
    fast_back, slow, fastest = k[1] * y[1] * y[2], k[0] * y[0], k[2] * y[1] ** 2
    return jnp.stack([-slow + fast_back, slow - fast_back - fastest, fastest])


def explicit_euler_step(y, k, h):
    return y + h * robertson(y, k)


def newton(g, y0):
    """牛顿法解 g(y) = 0，稠密 Jacobian，直到 max|g| ≤ 1e-14（最多 30 步）。while_loop：
    不能反向求导。/ Newton's method for g(y) = 0 with the dense Jacobian, until max|g| <= 1e-14
    (at most 30 steps). A while_loop: no reverse mode.
    """

    def keep_going(carry):
        y, i = carry
        return (jnp.abs(g(y)).max() > 1e-14) & (i < 30)

    def step(carry):
        y, i = carry
        return y - jnp.linalg.solve(jax.jacfwd(g)(y), g(y)), i + 1

    return lax.while_loop(keep_going, step, (y0, 0))[0]


def simulate(step, y0, k, h, steps):
    """steps 步 step(y, k, h)，一个 lax.scan。/ steps steps of step(y, k, h) in one lax.scan."""
    return lax.scan(lambda y, _: (step(y, k, h), None), y0, length=steps)[0]


# ---- 你来实现 / your code ---------------------------------------------------------------


def backward_euler_step(y, k, h):
    """向后 Euler 一步：解 z - y - h·robertson(z, k) = 0，初值取 y。用
    lax.custom_root(f, 初值, solve, tangent_solve)：solve 就是 newton；tangent_solve(g, r)
    解线性方程 g(t) = r，g 是线性函数：它的矩阵是 jax.jacfwd(g) 在任意一点的值，再用
    jnp.linalg.solve。大约 4 行。

    One backward-Euler step: solve z - y - h·robertson(z, k) = 0 starting from y. Use
    lax.custom_root(f, initial guess, solve, tangent_solve): solve is newton; tangent_solve(g, r)
    solves the linear g(t) = r, and g is linear: its matrix is jax.jacfwd(g) at any point, then
    jnp.linalg.solve. About 4 lines.
    """
    return lax.custom_root(
        lambda z: z - y - h * robertson(z, k),
        y,
        newton,
        lambda g, r: jnp.linalg.solve(jax.jacfwd(g)(r), r),
    )


# ---- 检查 / checks ----------------------------------------------------------------------


def reference():
    """SciPy 的 Radau（隐式，容差 1e-11）在 T_END 的解。/ SciPy's Radau at T_END."""
    a, b, c = RATES

    def rhs(t, y):
        return [
            -a * y[0] + b * y[1] * y[2],
            a * y[0] - b * y[1] * y[2] - c * y[1] ** 2,
            c * y[1] ** 2,
        ]

    solution = solve_ivp(rhs, (0.0, T_END), Y_START, method="Radau", rtol=1e-11, atol=1e-14)
    return solution.y[:, -1]


def run(step, h):
    steps = round(T_END / h)
    return jax.jit(simulate, static_argnums=(0, 4))(step, Y_START, RATES, h, steps)


def test_backward_euler_is_stable_where_explicit_euler_blows_up():
    """写 backward_euler_step。显式 Euler 走 1000 步（h = 0.01）就溢出成 nan；走 20000 步
    （h = 5·10⁻⁴）时它稳定，而且很准：限制步长的是稳定性，不是精度。向后 Euler 只走 100 步
    （h = 0.1），误差不到 1 %；步长减半误差也减半（一阶方法）；每一步都真的解了那个方程，
    总浓度守恒到舍入误差，jaxpr 里有 CustomRoot。
    Write backward_euler_step. Explicit Euler overflows into nan in 1000 steps (h = 0.01); with
    20000 (h = 5·10⁻⁴) it is stable, and accurate too: stability, not accuracy, bounds its
    step. Backward Euler takes 100 steps (h = 0.1) with an error under 1 %; halving
    the step halves the error (a first-order method); every step really solves its equation, the
    total concentration is conserved to round-off, and the jaxpr holds CustomRoot.
    """
    ref = reference()
    assert not np.isfinite(run(explicit_euler_step, 0.01)).all()
    np.testing.assert_allclose(run(explicit_euler_step, 5e-4), ref, rtol=1e-3)

    coarse, fine = run(backward_euler_step, 0.1), run(backward_euler_step, 0.05)
    errors = [float(np.max(np.abs(y - ref) / ref)) for y in (coarse, fine)]
    print("backward Euler relative errors", errors)
    assert errors[0] < 1e-2
    assert 1.8 < errors[0] / errors[1] < 2.2
    np.testing.assert_allclose(coarse.sum(), 1.0, atol=1e-13)

    y = jnp.asarray(Y_START)
    for _ in range(3):
        z = jax.jit(backward_euler_step)(y, RATES, 0.1)
        np.testing.assert_allclose(z - y - 0.1 * robertson(z, RATES), 0.0, atol=1e-13)
        y = z
    assert "CustomRoot" in str(jax.make_jaxpr(backward_euler_step)(y, RATES, 0.1))


def test_the_gradient_goes_through_custom_root():
    """对 100 个向后 Euler 步之后 C 的浓度求三个速率常数的梯度（取 log k：k·∂J/∂k），与中心
    差分相符。梯度程序里有几个 while 循环？每一步的牛顿法都没有被求导：反向只是每步一次线性
    求解（custom_linear_solve）。
    The gradient of C's concentration after 100 backward-Euler steps with respect to the three
    rates (in log k: k·∂J/∂k) agrees with central differences. How many while loops does the
    gradient program hold? No step's Newton iterations are differentiated: the backward pass is
    one linear solve per step (custom_linear_solve).
    """

    def final_c(log_k):
        return simulate(backward_euler_step, Y_START, jnp.exp(log_k), 0.1, 100)[2]

    log_k = jnp.log(RATES)
    gradient = jax.jit(jax.grad(final_c))(log_k)
    value, eps = jax.jit(final_c), 1e-6
    for i in range(3):
        step = jnp.zeros(3).at[i].set(eps)
        differences = (value(log_k + step) - value(log_k - step)) / (2 * eps)
        np.testing.assert_allclose(gradient[i], differences, rtol=1e-6, atol=1e-12)
    assert abs(gradient[0]) > 0.1  # the slow reaction drives the product

    program = jax.make_jaxpr(jax.grad(final_c))(log_k)
    assert "custom_linear_solve" in primitives(program.jaxpr)
    assert str(program).count("while[") == 1
