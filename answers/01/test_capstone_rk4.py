"""01 · 综合练习：用 lax.scan 写 RK4 积分器 / capstone: an RK4 integrator in lax.scan.

经典四阶 Runge-Kutta 法解 y' = f(y, t)。一步用四个斜率：
    k1 = f(y, t)                  k2 = f(y + h/2·k1, t + h/2)
    k3 = f(y + h/2·k2, t + h/2)   k4 = f(y + h·k3, t + h)
    y_next = y + h/6·(k1 + 2·k2 + 2·k3 + k4)
n 步用 lax.scan 串起来：一次编译，可以 jit、可以求导，状态可以是任意 pytree。
测试会“测量”收敛阶：步长减半，RK4 的误差缩小约 2⁴ = 16 倍。

The classic fourth-order Runge-Kutta method for y' = f(y, t); one step uses the four slopes
above. lax.scan chains the n steps: one compiled loop that jits, differentiates and carries
any pytree state. The tests MEASURE the order: halving the step shrinks RK4's error about
2⁴ = 16-fold.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------


def axpy(a, x, y):
    """a·x + y，逐叶作用于 pytree。/ a·x + y, leaf by leaf over pytrees."""
    return jax.tree.map(lambda x_leaf, y_leaf: a * x_leaf + y_leaf, x, y)


def euler_step(f, y, t, h):
    """前向 Euler（一阶），用来对照。/ Forward Euler (first order), for contrast."""
    return axpy(h, f(y, t), y)


def gaussian_decay(y, t):
    """y' = -2·t·y，精确解 y(t1) = y(t0)·exp(t0² - t1²)；显式依赖 t。
    y' = -2·t·y, exactly y(t1) = y(t0)·exp(t0² - t1²); depends on t explicitly.
    """
    return -2 * t * y


def oscillator(y, t):
    """谐振子 y = [x, v]：x' = v, v' = -x。/ The harmonic oscillator y = [x, v]."""
    return jnp.stack([y[1], -y[0]])


# ---- 你来实现 / your code ---------------------------------------------------------------


def rk4_step(f, y, t, h):
    """从 (y, t) 走一步 RK4，步长 h，返回新的 y。f(y, t) 返回 dy/dt。
    y 可以是 pytree：用给定的 axpy 组合（不要直接写 y + h * k）。大约 5 行。

    One RK4 step of size h from (y, t); return the new y. f(y, t) returns dy/dt.
    y may be a pytree: combine with the given axpy (not y + h * k). About 5 lines.
    """
    k1 = f(y, t)
    k2 = f(axpy(h / 2, k1, y), t + h / 2)
    k3 = f(axpy(h / 2, k2, y), t + h / 2)
    k4 = f(axpy(h, k3, y), t + h)
    return axpy(h / 6, jax.tree.map(lambda a, b, c, d: a + 2 * b + 2 * c + d, k1, k2, k3, k4), y)


def integrate(f, y0, t0, t1, n_steps, step=rk4_step):
    """从 t0 到 t1 等分 n_steps 步（Python int），用 lax.scan 反复调用 step(f, y, t, h)，
    返回 y(t1)。第 i 步从 t = t0 + i·h 出发。不要用 Python 循环。大约 6 行。

    Integrate from t0 to t1 in n_steps equal steps (a Python int): lax.scan calls
    step(f, y, t, h) again and again; return y(t1). Step i starts at t = t0 + i·h.
    No Python loop. About 6 lines.
    """
    h = (t1 - t0) / n_steps

    def body(y, i):
        return step(f, y, t0 + i * h, h), None

    y, _ = lax.scan(body, y0, jnp.arange(n_steps))
    return y


# ---- 检查 / checks ----------------------------------------------------------------------


def test_one_rk4_step_is_simpson_and_taylor():
    """一步 RK4：对 y' = g(t) 就是 Simpson 公式（三次多项式精确）；对 y' = y 就是 e^h 的
    四阶 Taylor 多项式。Euler 和中点法都做不到。
    One RK4 step is Simpson's rule for y' = g(t) (exact for cubics) and the degree-4 Taylor
    polynomial of e^h for y' = y; neither Euler nor the midpoint rule manages that.
    """
    y = rk4_step(lambda y, t: 3 * t**2, 1.0, 1.0, 0.5)  # y = t³ from y(1) = 1
    np.testing.assert_allclose(y, 1.5**3, rtol=1e-6)
    h = 0.1
    y = rk4_step(lambda y, t: y, 1.0, 0.0, h)
    np.testing.assert_allclose(y, 1 + h + h**2 / 2 + h**3 / 6 + h**4 / 24, rtol=1e-6)


def test_oscillator_matches_exact_solution():
    """向量状态：谐振子走一整圈 (100 步)，回到 [1, 0]，误差 < 5e-6（Euler 约 0.2）。
    A vector state: the oscillator runs one full period in 100 steps and returns to [1, 0]
    within 5e-6 (Euler is off by about 0.2).
    """
    run = jax.jit(lambda y0, t1: integrate(oscillator, y0, 0.0, t1, 100))
    y = run(jnp.array([1.0, 0.0]), 2 * np.pi)
    np.testing.assert_allclose(y, [1.0, 0.0], atol=5e-6)
    y = run(jnp.array([1.0, 0.0]), 1.0)  # same compiled loop, another t1 / 同一份编译
    np.testing.assert_allclose(y, [np.cos(1.0), -np.sin(1.0)], atol=5e-6)


def test_measured_convergence_order_is_four():
    """测量收敛阶：误差 e(n) ∝ hᵖ，p ≈ log2(e(n) / e(2n))。RK4 给出 ≈ 4，Euler ≈ 1。
    要在 float64 里测：float32 的舍入误差（~1e-7）会淹没 RK4 的截断误差。
    Measure the order: e(n) ∝ hᵖ, so p ≈ log2(e(n) / e(2n)): about 4 for RK4, 1 for Euler.
    Measure in float64: float32 round-off (~1e-7) would swamp RK4's truncation error.
    """

    def observed_orders(step):
        exact = np.exp(0.5**2 - 1.5**2)
        errors = []
        for n in (16, 32, 64):
            y = integrate(gaussian_decay, jnp.array(1.0), 0.5, 1.5, n, step=step)
            assert y.dtype == jnp.float64  # inside enable_x64 / x64 已打开
            errors.append(abs(float(y) - exact))
        return np.log2(np.array(errors[:-1]) / np.array(errors[1:]))

    with jax.enable_x64(True):  # restored on exit, even when an assert fails / 退出即恢复
        rk4_orders = observed_orders(rk4_step)
        euler_orders = observed_orders(euler_step)
    assert np.all((3.7 < rk4_orders) & (rk4_orders < 4.3)), rk4_orders
    assert np.all((0.8 < euler_orders) & (euler_orders < 1.2)), euler_orders


def test_integrate_is_one_scan_and_differentiable():
    """integrate 是一个 scan（jaxpr 不随步数展开），可以 jit 和求导。对 y' = -y，
    d y(T)/d y0 恰好是 RK4 每步放大因子 R(-h) 的 n 次方：求导的是离散程序，不是精确解 exp(-T)。
    integrate is one scan (its jaxpr does not unroll the steps), jits and differentiates. For
    y' = -y, d y(T)/d y0 is exactly RK4's per-step factor R(-h) to the n: grad differentiates
    the discrete program, not the exact exp(-T).
    """

    def decay(y, t):
        return -y

    def final(y0, t1):
        return integrate(decay, y0, 0.0, t1, 1000)

    jaxpr = jax.make_jaxpr(final)(1.0, 2.0)
    scans = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
    assert len(scans) == 1 and scans[0].params["length"] == 1000
    assert len(jaxpr.eqns) < 10  # not 1000 unrolled steps / 没有展开成 1000 步

    n, t1 = 5, 2.0  # big steps, so the discrete map differs from exp / 大步长，离散映射 ≠ exp
    h = t1 / n
    factor = 1 - h + h**2 / 2 - h**3 / 6 + h**4 / 24  # one RK4 step of y' = -y / 一步的放大因子
    dy_dy0 = jax.jit(jax.grad(lambda y0: integrate(decay, y0, 0.0, t1, n)))(1.0)
    np.testing.assert_allclose(dy_dy0, factor**n, rtol=1e-5)
    np.testing.assert_allclose(dy_dy0, np.exp(-t1), rtol=1e-3)  # close, but not exact / 接近而已
    assert abs(float(dy_dy0) - np.exp(-t1)) > 1e-5
    # h = t1 / n is traced too; chain rule with dh/dt1 = 1/n / h 也被追踪，链式法则
    dy_dt1 = jax.grad(lambda t1: integrate(decay, 1.0, 0.0, t1, n))(t1)
    dfactor_dh = -1 + h - h**2 / 2 + h**3 / 6
    np.testing.assert_allclose(dy_dt1, n * factor ** (n - 1) * dfactor_dh / n, rtol=1e-5)


def test_integrate_carries_a_pytree_state():
    """状态可以是 pytree：{"x", "v"} 字典版谐振子与数组版结果一致。
    The state may be a pytree: the oscillator as an {"x", "v"} dict agrees with the array one.
    """

    def oscillator_dict(s, t):
        return {"x": s["v"], "v": -s["x"]}

    s = integrate(oscillator_dict, {"x": jnp.array(1.0), "v": jnp.array(0.0)}, 0.0, 1.0, 50)
    y = integrate(oscillator, jnp.array([1.0, 0.0]), 0.0, 1.0, 50)
    assert set(s) == {"x", "v"}
    np.testing.assert_allclose([s["x"], s["v"]], y, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(y, [np.cos(1.0), -np.sin(1.0)], atol=5e-6)
