"""11 · float64：科学计算为什么要开双精度，以及它不开时悄悄发生了什么 / float64: why scientific
computing needs it, and what silently happens without it.

JAX 有一个开关 jax_enable_x64：它决定 jnp 的默认类型有多宽，也决定明确要求的 64 位类型能不能
拿到（拿不到时只给一个警告）。本章的 chapter.toml 写了 x64 = true，测试运行器在每个 koan 之前设置
jax_enable_x64；单个代码块可以用上下文管理器 jax.enable_x64(...) 临时切换，退出即恢复。

JAX has a switch, jax_enable_x64: it decides how wide jnp's default types are, and whether an
explicitly requested 64-bit type is granted (when it is not, there is only a warning). This
chapter's chapter.toml says x64 = true, so the runner sets jax_enable_x64 before each koan; a
block of code can switch it temporarily with the context manager jax.enable_x64(...), which
restores the setting on exit.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkoans import __  # noqa: F401  (the koans' blanks)


def test_requested_float64_is_truncated_without_x64():
    """⚠️ 陷阱 / trap：x64 关闭时 dtype=jnp.float64 不报错，只发一个 UserWarning。那拿到的是什么
    类型？不写 dtype 的整数呢？本章开着 x64：同样的代码、默认的整数又是什么？
    With x64 off, dtype=jnp.float64 raises nothing, only a UserWarning. What do you get, then,
    and what is an integer without a dtype? This chapter runs with x64 on: what do the same code
    and the default integer give there?
    """
    assert jax.config.jax_enable_x64  # set from chapter.toml / 由 chapter.toml 打开
    with jax.enable_x64(False):  # restored on exit / 退出即恢复
        with pytest.warns(UserWarning, match="truncated"):
            x = jnp.array(1.0, dtype=jnp.float64)
        assert x.dtype == __
        assert jnp.arange(3).dtype == __
    assert jax.config.jax_enable_x64
    assert jnp.array(1.0, dtype=jnp.float64).dtype == jnp.float64
    assert jnp.arange(3).dtype == __  # default integer under x64 / x64 下的默认整数


def test_weak_and_strong_scalars_promote_differently():
    """⚠️ 陷阱 / trap：x64 改变的是“默认”类型。已经是 float32 的数组和 Python 浮点数（弱类型）
    运算得到什么？和 NumPy 的 float64 标量（强类型）、和默认类型的 jnp 数组呢？一条仿真的精度
    取决于数据从哪种类型出发、一路上碰到的是哪一种标量。
    x64 changes the *default* types. What does a float32 array combined with a Python float
    (weakly typed) give? With a NumPy float64 scalar (strongly typed), or a jnp array of the
    default type? A simulation's precision depends on the type its data starts in and on the
    kind of scalars it meets on the way.
    """
    u32 = jnp.ones(3, dtype=jnp.float32)
    assert jnp.ones(3).dtype == jnp.float64
    assert (u32 * 0.5).dtype == __
    assert (u32 * np.float64(0.5)).dtype == __
    assert (u32 + jnp.ones(3)).dtype == __


def test_float32_roundoff_swamps_a_second_order_error():
    """中心差分 (f(x+h) - f(x-h)) / 2h 的截断误差 ∝ h²，舍入误差 ∝ eps / h。float32 的
    eps ≈ 1.2e-7，最好的 h 大约 eps^(1/3)，误差降不到 1e-6 以下；float64 能把 h 再缩小几个数量级，
    误差降到 1e-10 以下。这就是本章（以及收敛阶测量）要用 float64 的原因。
    The central difference has truncation error ∝ h² and round-off ∝ eps / h. float32's eps is
    about 1.2e-7, so the best h is about eps^(1/3) and the error stays above 1e-6; float64 lets h
    shrink several decades further, below 1e-10. That is why this chapter, and any measured
    convergence order, runs in float64.
    """
    steps = 10.0 ** -np.arange(1, 9)  # 1e-1 … 1e-8

    def errors(dtype):
        x, h = jnp.asarray(1.0, dtype), jnp.asarray(steps, dtype)
        derivative = (jnp.sin(x + h) - jnp.sin(x - h)) / (2 * h)
        assert derivative.dtype == dtype
        return np.abs(np.asarray(derivative, np.float64) - np.cos(1.0))

    e32, e64 = errors(jnp.float32), errors(jnp.float64)
    assert steps[np.argmin(e32)] == pytest.approx(__)
    assert steps[np.argmin(e64)] == pytest.approx(__)
    assert e32.min() > 1e-6 and e64.min() < 1e-10
    # with h = 1e-6 float32 is worse than with h = 1e-1 / h 太小，float32 反而更差
    assert e32[5] > e32[0]
