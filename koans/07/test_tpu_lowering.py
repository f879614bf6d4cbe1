"""07 · 在 CPU 机器上为 TPU 降级 / lowering for TPU on a CPU machine.

不需要 TPU 也能检查内核能否为 TPU 降级：`jax.jit(f).trace(x).lower(lowering_platforms=("tpu",))`
走一遍 Pallas 的 TPU 降级（Mosaic），块形状违反规则时在这里就报错。二维及以上的块：最后两维
要分别能被 8 和 128 整除，或者等于整个数组对应的维度；一维的块有自己的规则，而且要先用
AbstractMesh 说明目标是哪一代 TPU。降级不是编译：块是否放得进 VMEM，降级时并不检查。

You can check without a TPU that a kernel lowers for TPU: `jax.jit(f).trace(x).lower(
lowering_platforms=("tpu",))` runs Pallas's TPU lowering (Mosaic), which rejects illegal block
shapes right there. Blocks of rank 2 or more: the last two dims must be divisible by 8 and 128
respectively, or equal the array's dims; 1-D blocks have their own rule and need an AbstractMesh
naming the TPU generation. Lowering is not compiling: whether a block fits in VMEM is not checked
when lowering.
"""

import base64
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.extend.mlir import ir
from jax.sharding import AbstractDevice, AbstractMesh

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def _double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def _tiled_double(shape, block):
    """编译用（没有 interpret=True）的分块内核。/ A tiled kernel meant for compilation."""
    spec = pl.BlockSpec(block, lambda i, j: (i, j))
    return pl.pallas_call(
        _double_kernel,
        out_shape=jax.ShapeDtypeStruct(shape, jnp.float32),
        grid=(pl.cdiv(shape[0], block[0]), pl.cdiv(shape[1], block[1])),
        in_specs=[spec],
        out_specs=spec,
    )


def _lower_for_tpu(shape, block):
    x = jax.ShapeDtypeStruct(shape, jnp.float32)
    return jax.jit(_tiled_double(shape, block)).trace(x).lower(lowering_platforms=("tpu",))


def test_legal_block_lowers_to_a_tpu_custom_call():
    """合法的块 (8, 128) 在 CPU 机器上就能降级为 TPU 程序：内核成为一个 tpu_custom_call
    （里面是序列化的 Mosaic 内核，还没有编译）。同一个内核（没有 interpret）为这台机器自己的
    CPU 降级呢？抛出哪个异常？
    A legal (8, 128) block lowers to a TPU program on this CPU machine: the kernel becomes a
    tpu_custom_call (holding the serialized Mosaic kernel, not yet compiled). And the same
    kernel (no interpret) lowered for this machine's own CPU? Which exception does it raise?
    """
    x = jax.ShapeDtypeStruct((256, 512), jnp.float32)
    kernel = jax.jit(_tiled_double((256, 512), (8, 128)))
    lowered = kernel.trace(x).lower(lowering_platforms=("tpu",))
    assert "tpu_custom_call" in lowered.as_text()
    with raises_exactly(__) as info:
        kernel.trace(x).lower(lowering_platforms=("cpu",))
    assert "Only interpret mode is supported on CPU" in str(info.value)


def test_illegal_block_fails_with_the_block_shape_rule():
    """块 (4, 128) 的倒数第二维 4 不能被 8 整除，也不等于数组的 256：TPU 降级报错并说明规则。
    A (4, 128) block: 4 is not divisible by 8 and not the array's 256, so the TPU lowering fails
    and states the rule.
    """
    with raises_exactly(__) as info:
        _lower_for_tpu((256, 512), (4, 128))
    assert "divisible by 8 and 128" in str(info.value)


def test_which_block_shapes_lower_for_tpu():
    """对每个 (数组形状, 块形状) 预测 TPU 降级是否成功：整除 (8, 128) 或等于整个数组的维度都行。
    Predict for each (array shape, block shape) whether the TPU lowering succeeds: divisible by
    (8, 128), or equal to the array's dims, both qualify.
    """
    cases = [
        ((256, 512), (128, 256)),
        ((256, 512), (8, 100)),
        ((20, 300), (20, 300)),  # odd sizes, but the whole array
        ((24, 300), (8, 300)),  # rows divisible by 8, columns the whole width
        ((24, 300), (24, 128)),
        ((24, 256), (12, 256)),
    ]
    lowers = []
    for shape, block in cases:
        try:
            _lower_for_tpu(shape, block)
            lowers.append(True)
        except Exception as err:  # whatever the lowering raises (the koan above names it)
            assert "divisible by 8 and 128" in str(err)
            lowers.append(False)
    assert lowers == __


def _tpu(device_kind):
    """一个 1 设备的抽象网格，说明目标是哪一代 TPU。/ A 1-device abstract mesh naming the TPU."""
    return AbstractMesh(
        (1,),
        ("x",),
        abstract_device=AbstractDevice(device_kind=device_kind, num_cores=1, platform="tpu"),
    )


def _lower_1d_for_tpu(n, block, dtype=jnp.float32):
    spec = pl.BlockSpec((block,), lambda i: (i,))
    kernel = pl.pallas_call(
        _double_kernel,
        out_shape=jax.ShapeDtypeStruct((n,), dtype),
        grid=(pl.cdiv(n, block),),
        in_specs=[spec],
        out_specs=spec,
    )
    return (
        jax.jit(kernel).trace(jax.ShapeDtypeStruct((n,), dtype)).lower(lowering_platforms=("tpu",))
    )


def test_one_d_blocks_follow_their_own_rule():
    """一维的块不适用 (8, 128) 规则。先用 jax.sharding.use_abstract_mesh(AbstractMesh) 说明目标
    芯片（不说明时降级直接拒绝），再预测哪些一维块能降级：等于整个数组、是 1024 的倍数，或者
    是不小于 128（float32 时）的 2 的幂。
    1-D blocks do not follow the (8, 128) rule. Name the target chip first with
    jax.sharding.use_abstract_mesh(AbstractMesh) (without it the lowering refuses outright),
    then predict which 1-D blocks lower: the whole array, a multiple of 1024, or a power of two
    of at least 128 (for float32).
    """
    with pytest.raises(Exception, match="use_abstract_mesh"):
        _lower_1d_for_tpu(4096, 1024)

    cases = [(4096, 1024), (4096, 384), (4096, 256), (1000, 1000), (4096, 64), (6144, 3072)]
    lowers = []
    with jax.sharding.use_abstract_mesh(_tpu("TPU v5 lite")):
        for n, block in cases:
            try:
                _lower_1d_for_tpu(n, block)
                lowers.append(True)
            except Exception as err:  # the lowering's error, as above
                assert "rank 1 block shapes" in str(err)
                lowers.append(False)
    assert lowers == __


def test_lowering_is_not_compiling():
    """⚠️ 陷阱 / trap：降级成功不等于能在 TPU 上运行。一个 1 GiB 的 float32 块（比任何一代 TPU 的
    VMEM 都大得多）照样降级：降级不检查 VMEM。这台机器也没法往下编译：compile() 找不到
    tpu_custom_call 的实现。
    A successful lowering does not mean the kernel runs on a TPU. A 1 GiB float32 block (far
    larger than any TPU generation's VMEM) lowers all the same: lowering does not check VMEM.
    Nor can this machine go on to compile: compile() finds no implementation of
    tpu_custom_call.
    """
    shape, block = (16384, 32768), (16384, 16384)
    block_bytes = block[0] * block[1] * 4
    assert block_bytes == 2**30
    largest_vmem = max(
        pltpu.get_tpu_info_for_chip(chip, 1).vmem_capacity_bytes for chip in pltpu.ChipVersion
    )
    assert block_bytes > 4 * largest_vmem

    lowered = _lower_for_tpu(shape, block)
    assert "tpu_custom_call" in lowered.as_text()
    with raises_exactly(__) as info:
        lowered.compile()
    assert "tpu_custom_call" in str(info.value)


def _exp_twice_kernel(x_ref, o_ref):
    o_ref[...] = jnp.exp(x_ref[...]) * 2.0


def _cost_in_tpu_config(cost_estimate):
    """降级后 tpu_custom_call 的配置里记下的成本。/ The cost recorded in the lowered
    tpu_custom_call's config."""
    x = jax.ShapeDtypeStruct((256, 512), jnp.float32)
    kernel = pl.pallas_call(_exp_twice_kernel, out_shape=x, cost_estimate=cost_estimate)
    text = jax.jit(kernel).trace(x).lower(lowering_platforms=("tpu",)).as_text()
    config = re.search(r'backend_config = "(.*?)"[,}]', text).group(1)
    return {
        name: int(value)
        for name, value in re.findall(
            r"\\22(flops|transcendentals|bytes_accessed)\\22: *(\d+)", config
        )
    }


def test_cost_estimate_travels_with_the_tpu_kernel():
    """对 XLA 来说，TPU 内核是一个看不进去的 custom_call（里面是序列化的 Mosaic 内核）。
    pallas_call 的 cost_estimate 在降级时写进 tpu_custom_call 的配置，交给 XLA；不给就没有。
    pl.estimate_cost 按一个等价的 jnp 函数估算。为 (256, 512) float32 上的 exp(x) * 2 手算：
    exp 算作超越函数而不是 flop，字节数是读一次输入加写一次输出。
    To XLA a TPU kernel is a custom_call it cannot look into (it holds the serialized Mosaic
    kernel). The pallas_call's cost_estimate is written into the tpu_custom_call's config when
    lowering, for XLA to use; without one there is none. pl.estimate_cost estimates it from an
    equivalent jnp function. Work it out by hand for exp(x) * 2 on a (256, 512) float32: exp
    counts as a transcendental, not a flop, and the bytes are one read of the input plus one
    write of the output.
    """
    cost = pl.CostEstimate(flops=__, transcendentals=__, bytes_accessed=__)
    x = jax.ShapeDtypeStruct((256, 512), jnp.float32)
    assert cost == pl.estimate_cost(lambda v: jnp.exp(v) * 2.0, x)
    assert _cost_in_tpu_config(None) == {}
    assert _cost_in_tpu_config(cost) == {
        "flops": cost.flops,
        "transcendentals": cost.transcendentals,
        "bytes_accessed": cost.bytes_accessed,
    }


def _scale_rows_kernel(x_ref, w_ref, o_ref):
    o_ref[...] = x_ref[...] * w_ref[...]


def _scale_rows(x_mode, w_mode, interpret=False, w_map=lambda i: (0, 0)):
    """x 的 (8, 128) 块随 grid 移动；w 的 (8, 128) 块由 w_map 选（默认总是 (0, 0)）；
    pipeline_mode 为 None 时不给这个参数。/ x's (8, 128) blocks move with the grid; w's (8, 128)
    block is chosen by w_map (by default always (0, 0)); a pipeline_mode of None leaves the
    argument out."""

    def spec(index_map, mode):
        extra = {} if mode is None else {"pipeline_mode": mode}
        return pl.BlockSpec((8, 128), index_map, **extra)

    return pl.pallas_call(
        _scale_rows_kernel,
        out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32),
        grid=(8,),
        in_specs=[spec(lambda i: (i, 0), x_mode), spec(w_map, w_mode)],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        interpret=interpret,
    )


def _synchronous_windows(kernel, w_rows=8):
    """为 TPU 降级（x 是 (64, 128)，w 是 (w_rows, 128)），读出序列化的 Mosaic 内核里每个窗口
    （先输入后输出）是否标成 pipeline_mode<synchronous>（只有一个缓冲区：不预取下一块）。
    Lowers for TPU (x is (64, 128), w is (w_rows, 128)) and reads, from the serialized Mosaic
    kernel, whether each window (inputs, then the output) is marked pipeline_mode<synchronous>
    (a single buffer: no prefetch of the next block)."""
    args = (
        jax.ShapeDtypeStruct((64, 128), jnp.float32),
        jax.ShapeDtypeStruct((w_rows, 128), jnp.float32),
    )
    module = (
        jax.jit(kernel).trace(*args).lower(lowering_platforms=("tpu",)).compiler_ir("stablehlo")
    )
    calls = []
    for func in module.body.operations:
        for block in func.regions[0].blocks:
            calls += [op for op in block.operations if op.operation.name == "stablehlo.custom_call"]
    [call] = calls
    config = json.loads(ir.StringAttr(call.attributes["backend_config"]).value_bytes)
    body = base64.b64decode(config["custom_call_config"]["body"])
    with module.context as context:
        context.allow_unregistered_dialects = True
        text = str(ir.Module.parse(body))
    windows = re.search(r"window_params = \[\{(.*?)\}\]", text).group(1).split("}, {")
    return ["pipeline_mode<synchronous>" in window for window in windows]


def test_buffered_chooses_how_many_buffers_a_block_gets():
    """⚠️ 陷阱 / trap：BlockSpec 默认给每块两个 VMEM 缓冲区（算这一块时预取下一块）；
    pipeline_mode=pl.Buffered(1) 要一个（不预取），Buffered(2) 要两个。
    为 TPU 降级后，只有一个缓冲区的窗口在 Mosaic 内核里标成 pipeline_mode<synchronous>。
    但降级并不总照你要的做：它先看每个窗口是不是“平凡的”（Pallas 的
    BlockMapping.has_trivial_window，在 jax/_src/pallas/core.py 里，读它），平凡的窗口另有
    安排。x 的块随 grid 移动。w 的块：前三种写法里 w 就是 (8, 128)、index map 总是 (0, 0)；
    “w 更高” 里 w 有 16 行、块还是前 8 行；“w 乘零” 里 index map 写成 (i * 0, 0)。
    预测五种写法下，x、w、输出三个窗口各自是否只有一个缓冲区。这条降级路径不接受 Buffered(3)
    （更深的流水线要用 pltpu.emit_pipeline）；TPU 解释器在这台 CPU 上照样运行它。
    A BlockSpec gives each block two VMEM buffers by default (the next block is prefetched
    while this one is computed); pipeline_mode=pl.Buffered(1) asks for one (no prefetch),
    Buffered(2) for two. Lowered for TPU, a window with a single buffer is marked
    pipeline_mode<synchronous> in the Mosaic kernel. But the lowering does not always do as
    asked: it first checks whether each window is "trivial" (Pallas's
    BlockMapping.has_trivial_window in jax/_src/pallas/core.py: read it), and a trivial window
    gets its own treatment. x's block moves with the grid. w's block: in the first three cases
    w is (8, 128) and its index map always answers (0, 0); in "w taller" w has 16 rows and the
    block is still the first 8; in "w times zero" the index map is written (i * 0, 0).
    Predict, for the five cases, whether each of the three windows (x, w, the output) has a
    single buffer. This lowering path refuses Buffered(3) (deeper pipelines take
    pltpu.emit_pipeline); the TPU interpreter runs it on this CPU anyway.
    """
    cases = {
        "default": ((None, None), {}, 8),
        "x single": ((pl.Buffered(1), None), {}, 8),
        "w double": ((None, pl.Buffered(2)), {}, 8),
        "w taller": ((None, None), {}, 16),
        "w times zero": ((None, None), {"w_map": lambda i: (i * 0, 0)}, 8),
    }
    single = {
        name: _synchronous_windows(_scale_rows(*modes, **extra), w_rows)
        for name, (modes, extra, w_rows) in cases.items()
    }
    assert single["default"] == __
    assert single["x single"] == __
    assert single["w double"] == __
    assert single["w taller"] == __
    assert single["w times zero"] == __

    with pytest.raises(Exception, match=re.escape("Only single (1) and double (2) buffering")):
        _synchronous_windows(_scale_rows(pl.Buffered(3), None))
    x = jax.random.normal(jax.random.key(0), (64, 128))
    w = jax.random.normal(jax.random.key(1), (8, 128))
    interpreted = _scale_rows(pl.Buffered(3), pl.Buffered(1), interpret=pltpu.InterpretParams())
    np.testing.assert_allclose(jax.jit(interpreted)(x, w), x * jnp.tile(w, (8, 1)), rtol=1e-6)


def _doubled_from_any(interpret=False):
    """输入留在 pl.ANY（在 TPU 上就是 HBM），内核却直接读它的 Ref，没有先拷进 VMEM。
    The input stays in pl.ANY (HBM on a TPU), yet the kernel reads its Ref directly, with no
    copy into VMEM first."""

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((16, 128), lambda: (0, 0)),
        interpret=interpret,
    )


def test_a_kernel_cannot_load_an_any_ref_directly():
    """⚠️ 陷阱 / trap：pl.ANY 的输入不会被流水线拷进 VMEM；在 TPU 上它留在 HBM，向量单元读不到，
    只能用 DMA（pltpu.sync_copy、pltpu.make_async_copy）拷进 VMEM 再算。这个内核却直接读它。
    三种方式各自接不接受它：通用解释器（interpret=True）、TPU 解释器
    （interpret=pltpu.InterpretParams()）、为 TPU 降级？TPU 解释器拒绝时抛出哪个异常？
    ⚠️ trap: an input in pl.ANY is not copied into VMEM by the pipeline; on a TPU it stays in
    HBM, which the vector unit cannot load from: only a DMA (pltpu.sync_copy,
    pltpu.make_async_copy) brings it into VMEM to compute on. This kernel reads it directly
    anyway. Which of three accept it: the generic interpreter (interpret=True), the TPU
    interpreter (interpret=pltpu.InterpretParams()), the TPU lowering? When the TPU interpreter
    refuses, which exception does it raise?
    """
    x = jnp.ones((16, 128), jnp.float32)

    def accepted(run):
        try:
            run()
        except Exception:
            return False
        return True

    verdicts = [
        accepted(lambda: jax.jit(_doubled_from_any(True))(x)),
        accepted(lambda: jax.jit(_doubled_from_any(pltpu.InterpretParams()))(x)),
        accepted(lambda: jax.jit(_doubled_from_any()).trace(x).lower(lowering_platforms=("tpu",))),
    ]
    assert verdicts == __
    with raises_exactly(__) as info:
        jax.jit(_doubled_from_any(pltpu.InterpretParams()))(x)
    assert "sync_copy" in str(info.value)
