"""11 · 用 BFGS 解反问题 / an inverse problem with BFGS.

从 21 个时刻的观测找回捕食者–猎物模型的两个速率：最小化模拟与观测之差的均方。
jax.scipy.optimize.minimize(fun, x0, method="BFGS") 是一个纯 JAX 的拟牛顿法：它用梯度
（这里是 odeint 的伴随梯度）逐步建起 Hessian 逆的近似，再沿线搜索前进；整个优化是一个
while_loop，能放进 jit，换一组观测不用重新编译。对这种小而光滑的问题，它不到 20 次迭代
就收敛。

Recover the predator–prey model's two rates from observations at 21 times: minimise the mean
squared difference between simulation and observation. jax.scipy.optimize.minimize(fun, x0,
method="BFGS") is a quasi-Newton method in pure JAX: from gradients (here odeint's adjoint) it
builds an approximation of the inverse Hessian and moves along a line search; the whole
optimisation is one while_loop, which goes inside jit and takes new observations without
recompiling. On a small smooth problem like this it converges in under 20 iterations.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax  # noqa: F401  (a tempting shortcut)
from jax.experimental.ode import odeint
from jax.scipy.optimize import minimize  # noqa: F401  (the koan's tool)

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import counting_compiles, primitives

# ---- 给定代码 / given code -------------------------------------------------------------

Y_START = np.array([3.0, 1.0])  # NumPy: no JAX work at import / 导入时不做 JAX 计算
TIMES = np.linspace(0.0, 4.0, 21)
GUESS = np.array([1.0, 0.6])


def lotka_volterra(y, t, rates):
    """y = [猎物, 捕食者]，rates = [猎物增长率, 捕食率]。/ rates = [prey growth, predation]."""
    growth, predation = rates[0], rates[1]
    return jnp.stack([y[0] * (growth - predation * y[1]), y[1] * (y[0] - 3.0)])


def trajectory(rates):
    """TIMES 处的状态 [21, 2]（odeint，容差 1e-10）。/ The states at TIMES (odeint, 1e-10)."""
    return odeint(lotka_volterra, Y_START, TIMES, rates, rtol=1e-10, atol=1e-10)


# ---- 你来实现 / your code ---------------------------------------------------------------


def recover_rates(observed):
    """从观测 observed（形状 [21, 2]）找回两个速率，返回 (速率, BFGS 的迭代次数)。在 log 速率上
    优化（速率保持为正）：loss(log_rates) = mean((trajectory(exp(log_rates)) - observed)²)，
    从 log(GUESS) 出发，用 jax.scipy.optimize.minimize(…, method="BFGS")（JAX 0.12 的 minimize
    接受 tol 却不读它：BFGS 停在 options 的 gtol，默认 1e-5，这里够用）；结果的 .x 和 .nit。
    大约 4 行。
    Recover the two rates from observed ([21, 2]) and return (rates, BFGS's iteration count).
    Optimise the log rates (the rates stay positive): the loss above, from log(GUESS), with
    jax.scipy.optimize.minimize(…, method="BFGS") (JAX 0.12's minimize takes tol and never
    reads it: BFGS stops on options' gtol, by default 1e-5, enough here); the result's .x and
    .nit. About 4 lines.
    """

    def loss(log_rates):
        return jnp.mean((trajectory(jnp.exp(log_rates)) - observed) ** 2)

    result = minimize(loss, jnp.log(GUESS), method="BFGS")
    return jnp.exp(result.x), result.nit


# ---- 检查 / checks ----------------------------------------------------------------------


def test_bfgs_recovers_the_rates_in_a_few_iterations():
    """写 recover_rates：两组不同的真实速率都找回到 1e-5 以内，每次不到 20 次迭代；两次只编译
    一次（观测是 jit 的参数）；程序是一个 while 循环，梯度来自 odeint 的伴随法（custom_vjp）。
    Write recover_rates: two different sets of true rates are both recovered within 1e-5, each in
    under 20 iterations; the two runs compile once (the observations are a jit argument); the
    program is one while loop, its gradient from odeint's adjoint (a custom_vjp).
    """
    truths = [np.array([1.5, 1.0]), np.array([1.2, 0.7])]
    observations = [jax.jit(trajectory)(truth) for truth in truths]
    recover = jax.jit(recover_rates)
    with counting_compiles() as compiled:
        results = [recover(observed) for observed in observations]
    assert len(compiled) == 1
    for truth, (rates, iterations) in zip(truths, results, strict=True):
        print(f"true {truth}, recovered {np.asarray(rates)} in {int(iterations)} iterations")
        np.testing.assert_allclose(rates, truth, rtol=1e-5)
        assert 1 <= int(iterations) < 20
    program = primitives(jax.make_jaxpr(recover_rates)(observations[0]).jaxpr)
    assert "while" in program and "custom_vjp_call" in program
