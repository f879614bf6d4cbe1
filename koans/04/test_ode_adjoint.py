"""04 · ODE 伴随法：反向积分代替存下每一步 / the ODE adjoint: integrate backwards instead of
storing every step.

直接对求解器反向传播（backprop through the solver）要存下每一步的中间值，内存随步数增长。
伴随法把梯度也写成一个 ODE，从 T 积分回 0：
    a(T) = ∂L/∂y(T),   da/dt = -aᵀ ∂f/∂y,   dL/dθ = ∫₀ᵀ aᵀ ∂f/∂θ dt
只需要 y(T)（y(t) 在反向时与 a 一起重新积分回去），内存与步数无关。
jax.experimental.ode.odeint 在 0.12 上仍然存在：自适应步长的 Dormand–Prince，用的正是伴随法。

Backpropagating through the solver stores every step: memory grows with the steps. The adjoint
method writes the gradient as an ODE as well, integrated from T back to 0:
    a(T) = ∂L/∂y(T),   da/dt = -aᵀ ∂f/∂y,   dL/dθ = ∫₀ᵀ aᵀ ∂f/∂θ dt
It needs y(T) only (y(t) is integrated back together with a), so memory does not depend on the
steps. jax.experimental.ode.odeint still exists on 0.12: adaptive Dormand–Prince, differentiated
by exactly this adjoint.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.ode import odeint

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import primitives
from jaxkoans.api.program import read

# ---- 给定代码 / given code -------------------------------------------------------------


def pendulum(y, t, theta):
    """阻尼摆，y = [角度, 角速度]，θ = [g/l, 阻尼]，外力随 t 变化。
    A damped, driven pendulum: y = [angle, angular velocity], θ = [g/l, damping].
    """
    return jnp.stack([y[1], -theta[0] * jnp.sin(y[0]) - theta[1] * y[1] + 0.2 * jnp.cos(t)])


def axpy(a, x, y):
    return jax.tree.map(lambda x_leaf, y_leaf: a * x_leaf + y_leaf, x, y)


def rk4_solve(func, y0, t0, t1, n):
    """n 步定步长 RK4，从 t0 积分到 t1（t1 < t0 时反向积分），状态可为 pytree，func(y, t)。
    n fixed RK4 steps from t0 to t1 (backwards when t1 < t0); the state may be a pytree;
    func(y, t).
    """
    h = (t1 - t0) / n

    def step(carry, _):
        y, i = carry
        t = t0 + i * h
        k1 = func(y, t)
        k2 = func(axpy(h / 2, k1, y), t + h / 2)
        k3 = func(axpy(h / 2, k2, y), t + h / 2)
        k4 = func(axpy(h, k3, y), t + h)
        slope = jax.tree.map(lambda a, b, c, d: a + 2 * b + 2 * c + d, k1, k2, k3, k4)
        return (axpy(h / 6, slope, y), i + 1), None

    return lax.scan(step, (y0, 0), length=n)[0][0]


def backprop_solve(y0, theta, t1, n):
    """参照：直接对 RK4 的 scan 反向传播 / reference: backprop straight through the RK4 scan."""
    return rk4_solve(lambda y, t: pendulum(y, t, theta), y0, 0.0, t1, n)


@partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def adjoint_solve(y0, theta, t1, n):
    """与 backprop_solve 相同的前向，反向用伴随法 / the same forward pass, adjoint backwards."""
    return backprop_solve(y0, theta, t1, n)


def adjoint_fwd(y0, theta, t1, n):
    y1 = backprop_solve(y0, theta, t1, n)
    return y1, (y1, theta)


# ---- 你来实现 / your code ---------------------------------------------------------------


def adjoint_bwd(t1, n, res, v):
    """伴随法的反向：res = (y(T), θ)，v = ∂L/∂y(T)。把增广状态 (y, a, g) 从 t1 用给定的
    rk4_solve（n 步）积分回 0，其中 dy/dt = f(y, t, θ)，da/dt = -aᵀ ∂f/∂y，dg/dt = -aᵀ ∂f/∂θ，
    初值 (y(T), v, 0)；一次 jax.vjp 同时给出 aᵀ ∂f/∂y 和 aᵀ ∂f/∂θ。返回 (y0 的余切 a(0), θ 的
    余切 g(0))。不要调用 backprop_solve 的反向。大约 8 行。

    The adjoint's backward pass: res = (y(T), θ), v = ∂L/∂y(T). Integrate the augmented state
    (y, a, g) from t1 back to 0 with the given rk4_solve (n steps), where dy/dt = f(y, t, θ),
    da/dt = -aᵀ ∂f/∂y and dg/dt = -aᵀ ∂f/∂θ, starting from (y(T), v, 0); one jax.vjp gives both
    aᵀ ∂f/∂y and aᵀ ∂f/∂θ. Return (y0's cotangent a(0), θ's cotangent g(0)). Do not backprop
    through the forward solve. About 8 lines.
    """
    todo("adjoint_bwd: 增广状态反向积分 / integrate the augmented state backwards")


adjoint_solve.defvjp(adjoint_fwd, adjoint_bwd)


# ---- 检查 / checks ----------------------------------------------------------------------

Y0 = np.array([1.0, 0.0], np.float32)  # NumPy: no JAX work at import / 导入时不做 JAX 计算
THETA = np.array([2.0, 0.3], np.float32)
T1 = 3.0


def loss_of(solve, n=150):
    return lambda y0, theta: jnp.sum(solve(y0, theta, T1, n) ** 2)


def odeint_loss(y0, theta):
    ys = odeint(pendulum, y0, jnp.linspace(0.0, T1, 4), theta, rtol=1e-7, atol=1e-7)
    return jnp.sum(ys[-1] ** 2), ys


odeint_value_and_grad = jax.jit(jax.value_and_grad(odeint_loss, argnums=(0, 1), has_aux=True))


def test_odeint_trajectory_and_adjoint_gradient():
    """odeint(func, y0, ts, *args)：func 的签名是 func(y, t, *args)（y 在前），ts 必须包含起点，
    返回每个 ts 处的状态。它的梯度（伴随法）与直接对细步长 RK4 反向传播的梯度
    一致。
    odeint(func, y0, ts, *args): func's signature is func(y, t, *args) (y first), ts must include
    the start, and it returns the state at every ts. Its gradient (by the adjoint) agrees with
    backprop through a fine fixed-step RK4.
    """
    (l_ode, ys), g_ode = odeint_value_and_grad(Y0, THETA)  # ts = linspace(0, T1, 4)
    assert ys.shape == __
    np.testing.assert_allclose(ys[__], Y0)

    l_rk4, g_rk4 = jax.jit(jax.value_and_grad(loss_of(backprop_solve), argnums=(0, 1)))(Y0, THETA)
    np.testing.assert_allclose(l_ode, l_rk4, rtol=1e-4)
    for got, want in zip(g_ode, g_rk4, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_odeint_is_reverse_mode_only():
    """⚠️ 陷阱 / trap：odeint 是 custom_vjp 函数，jacfwd / jvp 会报错。要前向敏感度，
    就对定步长的 scan 求解器用 jacfwd；结果与 odeint 的梯度一致。
    ⚠️ trap: odeint is a custom_vjp function, so jacfwd / jvp raise. For forward
    sensitivities use jacfwd on the fixed-step scan solver; it agrees with odeint's gradient.
    """
    with raises_exactly(__) as info:
        jax.jacfwd(odeint_loss, argnums=1, has_aux=True)(Y0, THETA)
    assert "can't apply forward-mode autodiff" in str(info.value)

    forward = jax.jit(jax.jacfwd(loss_of(backprop_solve), argnums=1))(Y0, THETA)
    _, (_, reverse) = odeint_value_and_grad(Y0, THETA)  # the gradient with respect to θ
    np.testing.assert_allclose(forward, reverse, rtol=1e-3, atol=1e-4)


def test_adjoint_gradient_matches_backprop():
    """综合：你的伴随梯度对 y0 和 θ 都与直接反向传播的梯度一致（不同步长下的误差是 O(h⁴)），
    几组不同的 y0 和 θ；反向过程每个 RK4 阶段只算一次 f（一个 sin）：一次 vjp 同时给出两个余切；
    反向积分恰好走 n 步（一个长度为 n 的 scan）。
    Capstone: your adjoint gradient with respect to y0 and θ agrees with backprop through the
    solver (they differ by O(h⁴)), for several y0 and θ; the backward pass evaluates f (one
    sin) once per RK4 stage: one vjp gives both cotangents; and it integrates back in exactly
    n steps (one scan of length n).
    """
    adjoint_grad = jax.jit(jax.grad(loss_of(adjoint_solve), argnums=(0, 1)))
    backprop_grad = jax.jit(jax.grad(loss_of(backprop_solve), argnums=(0, 1)))
    for y0, theta in [
        (Y0, THETA),
        (jnp.array([-0.5, 1.5]), jnp.array([1.0, 0.1])),
        (jnp.array([2.0, -1.0]), jnp.array([4.0, 0.5])),
    ]:
        for got, want in zip(adjoint_grad(y0, theta), backprop_grad(y0, theta), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # 每个 RK4 阶段只算一次 f（一次 vjp 同时给出两个余切）/ f once per RK4 stage (one vjp, both)
    backward = jax.make_jaxpr(lambda res, v: adjoint_bwd(T1, 150, res, v))((Y0, THETA), Y0)
    assert read(backward).every()["sin"] == 4
    # the n steps asked for, back from T: fewer would still pass a tolerance at this fine step
    (scan,) = [e for e in backward.eqns if e.primitive.name == "scan"]
    assert scan.params["length"] == 150, scan.params["length"]


def test_adjoint_memory_does_not_grow_with_steps():
    """综合：编译后的 memory_analysis()：直接反向传播的临时内存随步数增长，你的伴随法不变。
    梯度程序里没有 while_loop：反向是 rk4_solve 的定步长 scan，不是自适应求解器（odeint）。
    Capstone: by the compiled memory_analysis(), backprop's temporary memory grows with the
    number of steps; your adjoint's stays the same. The gradient program holds no while_loop:
    the backward pass is rk4_solve's fixed-step scan, not an adaptive solver (odeint).
    """

    def temp_bytes(solve, n):
        grad = jax.jit(jax.grad(loss_of(solve, n), argnums=(0, 1)))
        return grad.lower(Y0, THETA).compile().memory_analysis().temp_size_in_bytes

    backprop = {n: temp_bytes(backprop_solve, n) for n in (100, 400)}
    adjoint = {n: temp_bytes(adjoint_solve, n) for n in (100, 400)}
    assert adjoint[100] == adjoint[400], adjoint
    assert backprop[400] > backprop[100] + 300 * 8, backprop  # ≥ one state per extra step
    assert backprop[400] > 4 * adjoint[400], (backprop, adjoint)
    program = jax.make_jaxpr(jax.grad(loss_of(adjoint_solve, 100), argnums=(0, 1)))(Y0, THETA)
    assert "while" not in primitives(program.jaxpr), "an adaptive solver in the backward pass"
    assert "scan" in primitives(program.jaxpr)
