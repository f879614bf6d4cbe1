"""11 · 自适应步长的 Runge–Kutta：嵌入式误差估计、步长控制与求导 / adaptive Runge–Kutta: an
embedded error estimate, step-size control, and differentiation.

嵌入式 Runge–Kutta 公式用同一组斜率给出两个不同阶的解：Bogacki–Shampine 3(2) 用 4 次 f 的
求值同时得到三阶解 y3 和二阶解 y2，二者之差 y3 - y2 就是这一步误差的估计，不用再多算一次。
控制器按这个估计接受或拒绝一步，并放大或缩小下一步。步数取决于数据，所以整个积分是一个
lax.while_loop：一次编译，任何容差都能跑。while_loop 不能反向求导；前向模式可以，而它给出
的正是这个离散解的导数。jax.experimental.ode.odeint 用伴随法求梯度：把伴随方程另解一遍，
它逼近的是连续问题的梯度，不是 odeint 自己输出的导数。

An embedded Runge–Kutta formula gives two solutions of different order from the same slopes:
Bogacki–Shampine 3(2) uses 4 evaluations of f for a third-order y3 and a second-order y2, and
their difference y3 - y2 estimates the step's error at no extra cost. A controller accepts or
rejects each step on that estimate and grows or shrinks the next one. The number of steps
depends on the data, so the whole integration is one lax.while_loop: compiled once, it runs for
any tolerance. A while_loop has no reverse mode; forward mode works, and gives the derivative of
exactly this discrete solution. jax.experimental.ode.odeint takes its gradient by the adjoint
method, solving the adjoint equation separately: that approximates the continuous problem's
gradient, not the derivative of what odeint itself returned.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.ode import odeint

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import counting_compiles, equations, primitives

# ---- 给定代码 / given code -------------------------------------------------------------


def growth(y, t):
    """y' = y·cos t，精确解 y(t) = y(0)·exp(sin t)。/ Exact solution y(0)·exp(sin t)."""
    return y * jnp.cos(t)


def oscillator(y, t):
    """y = [x, v]，x'' = -x；从 [1, 0] 出发的精确解是 [cos t, -sin t]。"""
    return jnp.stack([y[1], -y[0]])


def lotka_volterra(y, t, k):
    """捕食者–猎物模型，y = [猎物, 捕食者]，k 是捕食率。/ Predator–prey, k the predation rate."""
    return jnp.stack([y[0] * (1.5 - k * y[1]), y[1] * (y[0] - 3.0)])


PREY_START = np.array([3.0, 1.0])  # NumPy: no JAX work at import / 导入时不做 JAX 计算
T_END = 4.0


# ---- 你来实现 / your code ---------------------------------------------------------------


def bs23_step(f, y, t, h):
    """Bogacki–Shampine 3(2) 的一步，返回 (y3, err)。f(y, t) 的签名同 odeint。
        k1 = f(y, t)
        k2 = f(y + h·k1/2, t + h/2)
        k3 = f(y + 3h·k2/4, t + 3h/4)
        y3 = y + h·(2k1/9 + k2/3 + 4k3/9)                  （三阶 / third order）
        k4 = f(y3, t + h)
        y2 = y + h·(7k1/24 + k2/4 + k3/3 + k4/8)           （二阶 / second order）
        err = y3 - y2
    正好 4 次 f 的求值。大约 7 行。
    One Bogacki–Shampine 3(2) step, returning (y3, err), with f(y, t) as in odeint (the formulas
    above); exactly 4 evaluations of f. About 7 lines.
    """
    todo("bs23_step: one Bogacki–Shampine 3(2) step")


def integrate(f, y0, t1, rtol, atol):
    """从 t = 0 积分到 t1，返回 (y(t1), 接受的步数, 拒绝的步数)。用一个 lax.while_loop
    （rtol、atol 可以是 jit 的参数），carry 里有 t、y、h 和两个计数；第一步试 h = t1，
    t < t1 时继续。每一轮：
      h ← min(h, t1 - t)；(y_new, err) = bs23_step(f, y, t, h)
      e = √mean((err / (atol + rtol·max(|y|, |y_new|)))²)
      e ≤ 1 接受（t ← t + h，y ← y_new），否则拒绝（t、y 不变）；
      无论接受与否，h ← h·clip(0.9·e^(-1/3), 0.2, 5)。
    大约 14 行。
    Integrate from t = 0 to t1 and return (y(t1), accepted steps, rejected steps). Use one
    lax.while_loop (rtol and atol may be jit arguments) whose carry holds t, y, h and the two
    counts; the first step tries h = t1, and it goes on while t < t1. Each round: the rules
    above (accept when e <= 1; the new h either way). About 14 lines.
    """

    todo("integrate: a lax.while_loop with step-size control")


def prey_at_end(k, tol):
    """用你的 integrate 算 T_END 时的猎物数量。/ The prey at T_END by your integrate."""
    y, _, _ = integrate(lambda y, t: lotka_volterra(y, t, k), PREY_START, T_END, tol, tol)
    return y[0]


def prey_sensitivity(k, tol):
    """d prey_at_end(k, tol) / dk：你的求解器算出的那个离散解的导数，不是近似。反向模式
    过不了 while_loop；换一种求导模式。一两行。
    d prey_at_end(k, tol) / dk: the derivative of the discrete solution your solver computes,
    not an approximation of it. Reverse mode does not go through a while_loop; use the other
    mode. One or two lines.
    """
    todo("prey_sensitivity: the derivative of the discrete solution")


# ---- 检查 / checks ----------------------------------------------------------------------


def observed_order(errors, hs):
    return np.polyfit(np.log(hs), np.log(errors), 1)[0]


def test_the_embedded_pair_estimates_its_own_error():
    """写 bs23_step：在 y' = y·cos t 上，一步的真实误差 |y3 - y(t+h)| 随 h 按 h⁴ 缩小（三阶
    方法的局部误差），而估计 |err| 按 h³ 缩小：它估计的是低阶解的误差，控制器因此偏保守。
    整步只有 4 次 f 的求值（数 jaxpr 里的 cos）：误差估计是白送的。
    Write bs23_step: on y' = y·cos t a step's true error |y3 - y(t+h)| shrinks like h⁴ (a
    third-order method's local error) while the estimate |err| shrinks like h³: it estimates the
    lower-order solution's error, which makes the controller cautious. The whole step evaluates
    f 4 times (count the cos in its jaxpr): the error estimate comes for free.
    """
    y, t = jnp.array([1.0, -2.0]), 0.3
    hs = [0.2, 0.1, 0.05, 0.025]
    step = jax.jit(lambda h: bs23_step(growth, y, t, h))
    true_errors, estimates = [], []
    for h in hs:
        y3, err = step(h)
        exact = y * np.exp(np.sin(t + h) - np.sin(t))
        true_errors.append(float(jnp.abs(y3 - exact).max()))
        estimates.append(float(jnp.abs(err).max()))
    print("true", true_errors, "estimated", estimates)
    assert abs(observed_order(true_errors, hs) - 4) < 0.25
    assert abs(observed_order(estimates, hs) - 3) < 0.25
    assert all(e > t for e, t in zip(estimates, true_errors, strict=True))  # cautious
    assert len(equations("cos", lambda h: bs23_step(growth, y, t, h), 0.1)) == 4


def test_the_step_size_follows_the_tolerance():
    """写 integrate：一次编译就能跑不同的容差（步数是数据，不是形状）；终点误差跟着容差走；
    三阶方法每步误差 ∝ h³ 时，容差缩小 1000 倍，接受的步数大约变成 1000^(1/3) = 10 倍。
    第一步试整个区间，所以至少有一步被拒绝。程序里是一个 while 循环，没有 scan。在时间尺度沿轨道变化的
    捕食者–猎物模型上，它接受、拒绝的步与在 Python 里逐步执行同样规则的结果完全相同。
    Write integrate: one compilation runs every tolerance (the step count is data, not a shape);
    the error at the end follows the tolerance; with an error per step ∝ h³, a tolerance 1000
    times smaller takes about 1000^(1/3) = 10 times as many accepted steps. The first step tries
    the whole interval, so at least one step is rejected. The program is one while loop, with no scan. On the
    predator–prey model, whose time scale changes along the orbit, it accepts and rejects exactly
    the steps the same rules accept and reject one attempt at a time in Python.
    """
    y0 = jnp.array([1.0, 0.0])
    run = jax.jit(lambda y0, tol: integrate(oscillator, y0, 10.0, tol, tol))
    exact = np.array([np.cos(10.0), -np.sin(10.0)])
    with counting_compiles() as compiled:
        loose, tight = run(y0, 1e-5), run(y0, 1e-8)
    assert len(compiled) == 1
    (y_loose, accepted_loose, rejected_loose) = loose
    (y_tight, accepted_tight, rejected_tight) = tight
    error_loose = np.abs(y_loose - exact).max()
    error_tight = np.abs(y_tight - exact).max()
    print(
        f"accepted {int(accepted_loose)} → {int(accepted_tight)}, rejected "
        f"{int(rejected_loose)}, {int(rejected_tight)}; errors {error_loose:.1e}, {error_tight:.1e}"
    )
    assert error_loose < 100 * 1e-5 and error_tight < 100 * 1e-8
    assert error_tight < error_loose / 300
    assert 8 < int(accepted_tight) / int(accepted_loose) < 12
    assert 1 <= int(rejected_loose) < int(accepted_loose) / 10
    assert 1 <= int(rejected_tight) < int(accepted_tight) / 10
    program = primitives(jax.make_jaxpr(run)(y0, 1e-5).jaxpr)
    assert "while" in program and "scan" not in program

    def lotka(y, t):
        return lotka_volterra(y, t, 1.0)

    step = jax.jit(lambda y, t, h: bs23_step(lotka, y, t, h))
    t, y, h, accepted, rejected, tol = 0.0, PREY_START, T_END, 0, 0, 1e-6
    while (
        t < T_END
    ):  # the same rules, one attempt at a time in Python / 同样的规则，逐步在 Python 里
        h = min(h, T_END - t)
        y_new, err = (np.asarray(a) for a in step(y, t, h))
        e = np.sqrt(np.mean((err / (tol + tol * np.maximum(np.abs(y), np.abs(y_new)))) ** 2))
        if e <= 1:
            t, y, accepted = t + h, y_new, accepted + 1
        else:
            rejected += 1
        h = h * np.clip(0.9 * e ** (-1 / 3), 0.2, 5.0)
    y_mine, accepted_mine, rejected_mine = jax.jit(integrate, static_argnums=0)(
        lotka, PREY_START, T_END, tol, tol
    )
    assert (int(accepted_mine), int(rejected_mine)) == (accepted, rejected)
    np.testing.assert_allclose(y_mine, y, rtol=1e-10)


def test_forward_mode_differentiates_the_discrete_solution():
    """写 prey_sensitivity。⚠️ 陷阱 / trap：对自适应求解器反向求导会报错；前向模式穿过
    while_loop 没有问题，而且它求的是这个离散解本身的导数：和对 prey_at_end 做中心差分
    相符到 1e-7。odeint 的伴随梯度在松的容差下与它自己输出的差分差了一成以上；容差收紧后，
    两种梯度才都趋向连续问题的梯度。数一数 odeint 梯度程序里的 while 循环。
    Write prey_sensitivity. ⚠️ trap: reverse mode through the adaptive solver raises; forward mode
    goes through the while_loop, and it is the derivative of this discrete solution itself: it
    agrees with central differences of prey_at_end to 1e-7. odeint's adjoint gradient at a loose
    tolerance differs from the differences of its own output by more than a tenth; only as the
    tolerance tightens do both gradients approach the continuous problem's. Count the while
    loops in odeint's gradient program.
    """
    with raises_exactly(ValueError) as info:
        jax.grad(prey_at_end)(1.0, 1e-3)
    assert "Reverse-mode differentiation does not work for lax.while_loop" in str(info.value)

    def odeint_prey(k, tol):
        ts = jnp.array([0.0, T_END])
        return odeint(lotka_volterra, PREY_START, ts, k, rtol=tol, atol=tol)[-1, 0]

    k, eps = 1.0, 1e-6
    sensitivity, prey = jax.jit(prey_sensitivity), jax.jit(prey_at_end)
    for tol in (1e-3, 1e-4):
        differences = (prey(k + eps, tol) - prey(k - eps, tol)) / (2 * eps)
        np.testing.assert_allclose(sensitivity(k, tol), differences, rtol=1e-7)

    loose = jax.jit(jax.grad(lambda k: odeint_prey(k, 1e-3)))(k)
    own = (odeint_prey(k + eps, 1e-3) - odeint_prey(k - eps, 1e-3)) / (2 * eps)
    assert abs(loose - own) > 0.1 * abs(own)  # the adjoint is not d(its output)/dk

    adjoint = jax.jit(jax.grad(lambda k: odeint_prey(k, 1e-9)))(k)
    np.testing.assert_allclose(sensitivity(k, 1e-9), adjoint, rtol=1e-6)

    mine = jax.make_jaxpr(prey_sensitivity)(k, 1e-3)
    assert str(mine).count("while[") == 1
    assert "custom_vjp_call" not in primitives(mine.jaxpr)
    theirs = str(jax.make_jaxpr(jax.grad(lambda k: odeint_prey(k, 1e-3)))(k))
    assert theirs.count("while[") == __
