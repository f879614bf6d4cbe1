"""07 · 手写流水线：DMA、信号量与双缓冲 / pipelining by hand: DMA, semaphores, double buffering.

BlockSpec 让 Pallas 替你把每一块从 HBM 搬进 VMEM，并在算这一块时预取下一块。输入写成
pl.BlockSpec(memory_space=pl.ANY) 时，内核拿到的是留在 HBM 里的整个数组，搬运由你自己来：
pltpu.make_async_copy(源, 目的, 信号量) 描述一次 DMA，.start() 发起，.wait() 等信号量；
scratch 里放 VMEM 缓冲区和 pltpu.SemaphoreType.DMA 信号量。TPU 解释器
（interpret=pltpu.InterpretParams()）在这台 CPU 上真的执行这些 DMA 和信号量，也能为 TPU 降级。

A BlockSpec has Pallas move each block from HBM into VMEM for you, prefetching the next block
while the current one is computed. With pl.BlockSpec(memory_space=pl.ANY) the kernel gets the
whole array, left in HBM, and the moving is yours: pltpu.make_async_copy(src, dst, semaphore)
describes a DMA, .start() issues it, .wait() waits on its semaphore; the scratch holds the VMEM
buffers and the pltpu.SemaphoreType.DMA semaphores. The TPU interpreter
(interpret=pltpu.InterpretParams()) really runs those DMAs and semaphores on this CPU, and the
kernel lowers for TPU too.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import equations, pallas_call_structure, primitives

ROWS = 8  # rows per block


def double_with_prefetch(x, *, interpret=True):
    """x [n·ROWS, C] 留在 HBM 里（in_specs=[pl.BlockSpec(memory_space=pl.ANY)]），输出 2·x，按
    (ROWS, C) 的块写出（out_specs 是普通的 BlockSpec，随 program_id 0 移动）；grid = (n,)，
    dimension_semantics=("arbitrary",)（一步接一步：第 i 步要用第 i - 1 步发起的拷贝）。
    - scratch_shapes：一个 (2, ROWS, C) 的 VMEM 双缓冲，和两个 DMA 信号量
      pltpu.SemaphoreType.DMA((2,))：块 b 放在槽 b % 2，用信号量 b % 2；
    - 第 0 步先发起块 0 的拷贝；每一步在等自己的块之前，先发起下一块（若还有）的拷贝，
      这样 DMA 和计算重叠；然后等块 i，从它的槽里算 2·x 写进 o_ref。
    拷贝用 pltpu.make_async_copy(x_hbm.at[pl.ds(起始行, ROWS)], buf.at[槽], sems.at[槽])。
    大约 20 行。

    x [n·ROWS, C] stays in HBM (in_specs=[pl.BlockSpec(memory_space=pl.ANY)]); the output is
    2·x, written in (ROWS, C) blocks (out_specs an ordinary BlockSpec moving with program_id 0);
    grid = (n,), dimension_semantics=("arbitrary",) (step after step: step i uses the copy
    step i - 1 started).
    - scratch_shapes: a (2, ROWS, C) VMEM double buffer and two DMA semaphores,
      pltpu.SemaphoreType.DMA((2,)): block b goes into slot b % 2, with semaphore b % 2;
    - step 0 first starts the copy of block 0; every step, before waiting for its own block,
      starts the copy of the next block (if there is one), so that the DMA overlaps the
      compute; then it waits for block i and writes 2·x from its slot into o_ref.
    Copy with pltpu.make_async_copy(x_hbm.at[pl.ds(first row, ROWS)], buf.at[slot],
    sems.at[slot]). About 20 lines.
    """
    todo("double_with_prefetch: 双缓冲的手写 DMA / hand-written double-buffered DMA")


def _starts_before_the_first_wait(fn, x):
    """内核 jaxpr 顶层方程里，第一个 dma_wait 之前有几个含 dma_start 的方程（pl.when 是 cond）。
    How many top-level equations of the kernel's jaxpr hold a dma_start before the first
    dma_wait (a pl.when is a cond)."""
    (call,) = equations("pallas_call", fn, x)
    starts = 0
    for eqn in call.params["jaxpr"].eqns:
        inside = {eqn.primitive.name} | set().union(
            *(primitives(getattr(b, "jaxpr", b)) for b in eqn.params.get("branches", ()))
        )
        if "dma_wait" in inside:
            return starts
        starts += "dma_start" in inside
    return starts


@pytest.mark.parametrize("shape", [(32, 128), (16, 256), (8, 128)])
def test_a_double_buffered_kernel_prefetches_the_next_block(shape):
    """✍️ 实现 double_with_prefetch。检查：TPU 解释器下（DMA 在 wait 时执行，或一发起就执行；开着竞争检测）
    结果都是 2·x；结构：输入不分块（整个数组，留在 HBM）、输出按 (ROWS, C) 分块、scratch 是
    一个 (2, ROWS, C) 的缓冲区和两个 DMA 信号量、("arbitrary",)；内核里有 dma_start 和
    dma_wait；第一次 dma_wait 之前发起了两处拷贝（块 0，和下一块）：先等再预取的内核不算
    流水线。最后它为 TPU 降级成一个 tpu_custom_call。
    Write double_with_prefetch. Checked: under the TPU interpreter (DMAs run at their wait, or
    as soon as they start; race detection on) the result is 2·x with no race; the structure: the input not blocked (the whole
    array, left in HBM), the output in (ROWS, C) blocks, the scratch one (2, ROWS, C) buffer and
    two DMA semaphores, ("arbitrary",); dma_start and dma_wait in the kernel; two copies issued
    before the first dma_wait (block 0, and the next block): a kernel that waits first and
    prefetches afterwards is no pipeline. Finally it lowers for TPU to one tpu_custom_call.
    """
    x = jax.random.normal(jax.random.key(0), shape, jnp.float32)
    try:
        for mode in ("on_wait", "eager"):
            params = pltpu.InterpretParams(dma_execution_mode=mode, detect_races=True)
            out = jax.jit(functools.partial(double_with_prefetch, interpret=params))(x)
            np.testing.assert_array_equal(out, 2 * x)
    finally:
        pltpu.reset_tpu_interpret_mode_state()

    fn = functools.partial(double_with_prefetch, interpret=pltpu.InterpretParams())
    kernel = pallas_call_structure(fn, x)
    assert kernel["grid"] == (shape[0] // ROWS,)
    assert kernel["blocks"] == [shape, (ROWS, shape[1])]  # x whole (in HBM), then the output
    (buffer, buffer_dtype), (semaphores, semaphore_dtype) = kernel["scratch"]
    assert (buffer, buffer_dtype) == ((2, ROWS, shape[1]), jnp.float32)
    assert semaphores == (2,) and "dma" in str(semaphore_dtype)
    assert kernel["semantics"] == ("arbitrary",)
    assert {"dma_start", "dma_wait"} <= kernel["kernel_ops"]
    assert _starts_before_the_first_wait(fn, x) == 2, "先预取，再等 / prefetch, then wait"

    tpu = functools.partial(double_with_prefetch, interpret=False)
    lowered = jax.jit(tpu).trace(x).lower(lowering_platforms=("tpu",))
    assert lowered.as_text().count("tpu_custom_call") == 1
