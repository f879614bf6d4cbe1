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
from jax.extend.core import Literal

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import equations, pallas_call_structure

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
    n, cols = x.shape[0] // ROWS, x.shape[1]

    def kernel(x_hbm, o_ref, buf, sems):
        i = pl.program_id(0)

        def copy(block, slot):
            rows = x_hbm.at[pl.ds(block * ROWS, ROWS)]
            return pltpu.make_async_copy(rows, buf.at[slot], sems.at[slot])

        @pl.when(i == 0)
        def _():
            copy(0, 0).start()

        @pl.when(i + 1 < n)
        def _():
            copy(i + 1, (i + 1) % 2).start()

        copy(i, i % 2).wait()
        o_ref[...] = buf[i % 2] * 2.0

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(n,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((ROWS, cols), lambda i: (i, 0)),
        scratch_shapes=[pltpu.VMEM((2, ROWS, cols), x.dtype), pltpu.SemaphoreType.DMA((2,))],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
        interpret=interpret,
    )(x)


def _scalar(index):
    """一个下标：算出来的标量是 int，其余（切片、算不出的）按它的文本。/ An index: a computed
    scalar as an int, anything else (a slice, an unknown) by its text."""
    return int(index) if isinstance(index, int | np.integer | np.ndarray) else str(index)


def _copies_in_order(fn, x):
    """每个 grid 步里按顺序发起（"start"）和等待（"wait"）的拷贝，各记它从 x 的哪一行开始
    （一次等待完成的是它那个信号量上还没完成的拷贝）：逐步走一遍内核的 jaxpr，用这一步的
    program_id 算出标量，pl.when 只走它选中的分支。
    For each grid step, the copies started ("start") and waited for ("wait") in order, each
    with the row of x it begins at (a wait completes the copy pending on its semaphore): the
    kernel's jaxpr walked step by step, the scalars computed from that step's program_id, a
    pl.when followed only into the branch it picks."""
    (call,) = equations("pallas_call", fn, x)
    grid = tuple(call.params["grid_mapping"].grid)

    def run(jaxpr, values, point, events):
        env = dict(zip(jaxpr.invars, values, strict=True))
        for eqn in jaxpr.eqns:
            ins = [v.val if isinstance(v, Literal) else env.get(v) for v in eqn.invars]
            name, params, outs = eqn.primitive.name, eqn.params, [None] * len(eqn.outvars)
            if name in ("program_id", "num_programs"):
                outs = [np.int32((point if name == "program_id" else grid)[params["axis"]])]
            elif name in ("dma_start", "dma_wait"):
                source, _, semaphore = jax.tree.unflatten(params["tree"], ins)[:3]
                row = source.transforms[0].indices[0]
                events.append((name[4:], getattr(row, "start", row), semaphore.transforms))
            elif name == "cond":
                branches = params["branches"]
                if ins[0] is None:
                    events.append(("unknown", None, ()))  # a choice that reads data
                else:
                    run(branches[int(ins[0])].jaxpr, ins[1:], point, events)
            elif name in ("jit", "pjit", "closed_call"):
                outs = run(params["jaxpr"].jaxpr, ins, point, events)
            elif "jaxpr" in str(params.keys()):  # a loop inside the kernel: not read here
                events.append(("unknown", None, ()))
            elif all(v is not None and np.ndim(v) == 0 for v in ins) and not eqn.effects:
                outs = eqn.primitive.bind(*ins, **params)
                outs = [np.asarray(o) for o in (outs if eqn.primitive.multiple_results else [outs])]
            env.update(zip(eqn.outvars, outs, strict=True))
        return [v.val if isinstance(v, Literal) else env.get(v) for v in jaxpr.outvars]

    kernel, steps, pending = call.params["jaxpr"], [], {}
    for point in np.ndindex(*grid):
        events = []
        run(kernel, [None] * len(kernel.invars), point, events)
        steps.append([])
        for kind, row, semaphore in events:  # a wait completes its semaphore's pending copy
            slot = str([[_scalar(i) for i in t.indices] for t in semaphore])
            if kind == "start":
                pending[slot] = row
            steps[-1].append((kind, pending.pop(slot, None) if kind == "wait" else row))
    return [[(kind, None if row is None else int(row)) for kind, row in s] for s in steps]


@pytest.mark.parametrize("shape", [(32, 128), (16, 256), (8, 128)])
def test_a_double_buffered_kernel_prefetches_the_next_block(shape):
    """✍️ 实现 double_with_prefetch。检查：TPU 解释器下（DMA 在 wait 时执行，或一发起就执行；开着竞争检测）
    结果都是 2·x；结构：输入不分块（整个数组，留在 HBM）、输出按 (ROWS, C) 分块、scratch 是
    一个 (2, ROWS, C) 的缓冲区和两个 DMA 信号量、("arbitrary",)；内核里有 dma_start 和
    dma_wait；逐步读内核的程序：每块只拷一次，第 i 步等块 i 之前已经发起了块 i + 1 的拷贝：
    先等再预取、或每步只拷自己那一块的内核不算流水线。最后它为 TPU 降级成一个 tpu_custom_call。
    Write double_with_prefetch. Checked: under the TPU interpreter (DMAs run at their wait, or
    as soon as they start; race detection on) the result is 2·x with no race; the structure: the input not blocked (the whole
    array, left in HBM), the output in (ROWS, C) blocks, the scratch one (2, ROWS, C) buffer and
    two DMA semaphores, ("arbitrary",); dma_start and dma_wait in the kernel; the kernel's
    program read step by step: each block copied once, and step i starts the copy of block i + 1
    before it waits for block i: a kernel that waits first and prefetches afterwards, or copies
    only its own block each step, is no pipeline. Finally it lowers for TPU to one tpu_custom_call.
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
    steps = _copies_in_order(fn, x)
    started = sorted(row for events in steps for kind, row in events if kind == "start")
    assert started == list(range(0, shape[0], ROWS)), "每块拷一次 / each block copied once"
    for i, events in enumerate(steps):  # 先发起下一块，再等这一块 / the next block, then wait
        assert ("wait", i * ROWS) in events, f"第 {i} 步没等自己的块 / step {i}: {events}"
        ahead = events[: events.index(("wait", i * ROWS))]
        assert i + 1 == len(steps) or ("start", (i + 1) * ROWS) in ahead, f"{i}: {events}"

    tpu = functools.partial(double_with_prefetch, interpret=False)
    lowered = jax.jit(tpu).trace(x).lower(lowering_platforms=("tpu",))
    assert lowered.as_text().count("tpu_custom_call") == 1
