"""11 · 长时间循环的检查点：√T 分段 / checkpointing a long time loop: √T segments.

对 T 步的 lax.scan 反向求导，要存下每一步留给反向的值：这里每步约 3 个状态大小的数组（状态
和它旁边的残差），内存约 3T 个状态。只在 scan 的循环体上加 jax.checkpoint，每步只存 carry，
约 T 个状态，仍然 ∝ T。把 T 步分成 √T 段、每段是一个内层 scan，把 jax.checkpoint 加在“一段”上：
外层只存每段开头的状态（√T 个），反向时一段一段地重算，重算的这一段里 √T 步又各存约 3 个状态
大小的数组。编译后的梯度程序的临时内存（memory_analysis）于是约为 √T + 3√T = 4√T 个状态
（T = 1024、一个状态 8000 字节时实测约 132 个），梯度不变。

Differentiating a T-step lax.scan stores what every step leaves for the backward pass: here
about 3 state-sized arrays per step (the state and the residuals beside it), some 3T states.
jax.checkpoint on the scan body alone stores only the carry per step, about T states, still
∝ T. Split the T steps into √T segments, each an inner scan, and put jax.checkpoint on a
segment: the outer scan stores each segment's first state (√T of them), and the backward pass
recomputes one segment at a time, its √T steps again storing about 3 state-sized arrays each.
The compiled gradient's temporaries (memory_analysis) come to about √T + 3√T = 4√T states
(measured: about 132 states of 8000 bytes at T = 1024), and the gradient is unchanged.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------

N = 1000  # points / 网格点数
STEPS = 1024
SEGMENT = 32  # steps per segment: √STEPS / 每段的步数
DT = 1e-3


def step(u, k):
    """反应扩散的一个显式步（非线性：反向要存好几个中间量）。/ One explicit reaction-diffusion
    step (nonlinear: the backward pass needs several intermediates)."""
    p = jnp.pad(u, 1)
    return u + DT * (k * (p[:-2] - 2 * u + p[2:]) * 100.0 - u**3 + jnp.sin(u))


def simulate(u0, k):
    """STEPS 步，一个 lax.scan。/ STEPS steps in one lax.scan."""
    return lax.scan(lambda u, _: (step(u, k), None), u0, length=STEPS)[0]


# ---- 你来实现 / your code ---------------------------------------------------------------


def segmented_simulate(u0, k):
    """与 simulate 相同的 STEPS 步，但分成 STEPS // SEGMENT 段：外层 lax.scan 的每一步是一段，
    一段是 SEGMENT 步的内层 lax.scan，jax.checkpoint 包住一段。大约 5 行。
    The same STEPS steps as simulate, split into STEPS // SEGMENT segments: each step of an outer
    lax.scan is one segment, an inner lax.scan of SEGMENT steps, and jax.checkpoint wraps a
    segment. About 5 lines.
    """

    todo("segmented_simulate: nested scans, jax.checkpoint on a segment")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_segment_checkpoints_cut_memory_to_the_square_root():
    """写 segmented_simulate：结果和梯度与 simulate 相同；编译后的梯度程序（memory_analysis）
    的临时内存不到直接反向传播的 1/16，也不到“只在循环体上 checkpoint”的 1/6。
    Write segmented_simulate: its result and gradient equal simulate's; the compiled gradient's
    temporary memory (memory_analysis) is under 1/16 of plain backprop's, and under 1/6 of
    checkpointing only the loop body.
    """
    rng = np.random.default_rng(0)
    u0, w = jnp.asarray(rng.normal(size=N)), jnp.asarray(rng.normal(size=N))

    def body_only(u0, k):
        return lax.scan(jax.checkpoint(lambda u, _: (step(u, k), None)), u0, length=STEPS)[0]

    def gradient_program(solve):
        return jax.jit(jax.grad(lambda k: jnp.sum(w * solve(u0, k)))).lower(1.0).compile()

    mine, plain, body = (gradient_program(s) for s in (segmented_simulate, simulate, body_only))
    np.testing.assert_allclose(
        jax.jit(segmented_simulate)(u0, 1.0), jax.jit(simulate)(u0, 1.0), rtol=1e-12
    )
    np.testing.assert_allclose(mine(1.0), plain(1.0), rtol=1e-10)
    temp = {
        name: program.memory_analysis().temp_size_in_bytes
        for name, program in (("segments", mine), ("plain", plain), ("body", body))
    }
    print(temp)
    state = u0.nbytes  # one state, in bytes / 一个状态的字节数
    assert temp["plain"] > 2 * STEPS * state  # about 3T states / 约 3T 个状态
    assert temp["segments"] < 5 * SEGMENT * state  # about 4√T states / 约 4√T 个状态
    assert temp["segments"] < temp["plain"] / 16
    assert temp["segments"] < temp["body"] / 6
