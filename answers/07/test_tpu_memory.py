"""07 · TPU 的内存：原地更新、两个核、VMEM 预算 / TPU memory: in place, two cores, the VMEM budget.

pallas_call 默认为每个输出分配新的 HBM 缓冲区。input_output_aliases={输入序号: 输出序号} 让输出
就是那个输入的缓冲区：内核没写到的块保留原来的值，一次只写一行的 KV 缓存不必把整个缓存复制一遍。
有两个 TensorCore 的芯片（megacore：TPU v4、v5p；v5e、v6e 每个设备只有一个）上，pltpu.CORE_PARALLEL
把一个 grid 轴标成分给各个核；
每个 BlockSpec 默认在 VMEM 里占两个缓冲区（算这一块时预取下一块），scratch 占一个；加起来是内核的
VMEM 预算，CompilerParams(vmem_limit_bytes=...) 把上限交给编译器。

A pallas_call allocates a fresh HBM buffer for each output by default.
input_output_aliases={input index: output index} makes the output that input's buffer: the blocks
the kernel does not write keep their old values, and a KV cache written one row at a time is not
copied whole. On a chip with two TensorCores per device (megacore: TPU v4 and v5p; v5e and
v6e have one), pltpu.CORE_PARALLEL marks a grid axis to be split over the cores. By default each BlockSpec takes two VMEM buffers (the next block is prefetched
while this one is computed), each scratch one; their sum is the kernel's VMEM budget, and
CompilerParams(vmem_limit_bytes=...) hands a limit to the compiler.
"""

import base64
import functools
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

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import equations, pallas_call_structure

ROWS = 8  # rows per block: the smallest second-to-last block dim a TPU accepts


def _tpu_mesh(device_kind="TPU v5 lite", num_cores=1):
    """声明一种 TPU 的 AbstractMesh（有些降级要知道型号）。/ An AbstractMesh declaring a TPU
    generation (some lowerings need to know it)."""
    device = AbstractDevice(device_kind=device_kind, num_cores=num_cores, platform="tpu")
    return AbstractMesh((1,), ("x",), abstract_device=device)


def _lower_for_tpu(fn, *args, mesh=None, **jit_kwargs):
    """fn(interpret=False) 为 TPU 降级（CPU 上，不编译）。/ fn(interpret=False) lowered for
    TPU (on the CPU, not compiled)."""
    f = jax.jit(functools.partial(fn, interpret=False), **jit_kwargs)
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    with jax.sharding.use_abstract_mesh(mesh or _tpu_mesh()):
        return f.trace(*specs).lower(lowering_platforms=("tpu",))


def _mosaic(lowered):
    """降级后唯一的 tpu_custom_call：(它的配置, 序列化的 Mosaic 内核的文本)。/ The lowered
    program's one tpu_custom_call: (its config, the text of its serialized Mosaic kernel)."""
    module = lowered.compiler_ir("stablehlo")
    calls = []
    for func in module.body.operations:
        for block in func.regions[0].blocks:
            calls += [op for op in block.operations if op.operation.name == "stablehlo.custom_call"]
    [call] = calls
    config = json.loads(ir.StringAttr(call.attributes["backend_config"]).value_bytes)
    body = base64.b64decode(config["custom_call_config"]["body"])
    with module.context as context:
        context.allow_unregistered_dialects = True
        return config, str(ir.Module.parse(body))


# ---- 原地更新 KV 缓存 / a KV cache updated in place ---------------------------------------


def append_to_cache(cache, row, pos, *, interpret=True):
    """把 row [1, D] 写进 cache [L, D] 的第 pos[0] 行，原地写：输出就是 cache 的缓冲区。
    - pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(1,), ...)：pos 是预取进 SMEM
      的标量，调用顺序是 (pos, row, cache)；每个 index map 在 grid 下标之后多收到 pos 的 Ref；
    - row 的块是整个 (1, D)；cache 和输出的块是 (ROWS, D)，选第 pos[0] // ROWS 块：只有这一块
      进出 VMEM；
    - 内核：这一块里第 pos[0] % ROWS 行换成 row，其余行照抄 cache 的块（iota 比较 + jnp.where）；
    - input_output_aliases 让输出 0 用 cache（pallas_call 的第几个参数？预取的 pos 也算）的缓冲区；
      没写的块于是保留原值；interpret=interpret。大约 20 行。

    Writes row [1, D] into row pos[0] of cache [L, D], in place: the output is cache's buffer.
    - pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(1,), ...): pos is a scalar
      prefetched into SMEM, and the call's order is (pos, row, cache); every index map gets pos's
      Ref after the grid indices;
    - row's block is the whole (1, D); cache's and the output's are (ROWS, D), block
      pos[0] // ROWS: only that block travels through VMEM;
    - the kernel: row pos[0] % ROWS of that block becomes row, the other rows copy cache's block
      (an iota comparison and jnp.where);
    - input_output_aliases gives output 0 the buffer of cache (which operand of the pallas_call?
      the prefetched pos counts too); the blocks not written keep their values;
      interpret=interpret. About 20 lines.
    """
    d = cache.shape[1]

    def kernel(pos_ref, row_ref, cache_ref, o_ref):
        rows = jax.lax.broadcasted_iota(jnp.int32, (ROWS, d), 0)
        o_ref[...] = jnp.where(rows == pos_ref[0] % ROWS, row_ref[...], cache_ref[...])

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(1,),
        in_specs=[
            pl.BlockSpec((1, d), lambda i, p: (0, 0)),
            pl.BlockSpec((ROWS, d), lambda i, p: (p[0] // ROWS, 0)),
        ],
        out_specs=pl.BlockSpec((ROWS, d), lambda i, p: (p[0] // ROWS, 0)),
    )
    return pl.pallas_call(
        kernel,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct(cache.shape, cache.dtype),
        input_output_aliases={2: 0},
        interpret=interpret,
    )(pos, row, cache)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_a_kv_cache_row_is_written_in_place(dtype):
    """✍️ 实现 append_to_cache。检查：TPU 解释器下（未初始化的内存是 NaN，竞争检测开着），在
    第一行、中间、最后一行写入后，结果等于 cache.at[pos].set(row)：没写的 7 块完整保留（不别名时
    它们是新缓冲区里的 NaN）；结构：块形状 (1, D)、(ROWS, D)、(ROWS, D)，pallas_call 的
    input_output_aliases 是 ((2, 0),)，返回的就是 pallas_call 的输出（之后不再算什么）；为 TPU
    降级（donate 了 cache）后，tpu_custom_call 带着 output_operand_aliases（operand_index = 2），
    入口参数 0 标着 tf.aliasing_output。float32 和 bfloat16 都检查。
    Write append_to_cache. Checked: under the TPU interpreter (uninitialized memory NaN, race
    detection on), after writing the first, a middle and the last row the result equals
    cache.at[pos].set(row): the 7 blocks not written are kept whole (without the alias they are
    NaN in a fresh buffer); the structure: blocks (1, D), (ROWS, D), (ROWS, D), and the
    pallas_call's input_output_aliases ((2, 0),), the result being the pallas_call's output
    itself (nothing computed after it); lowered for TPU (cache donated), the tpu_custom_call
    carries output_operand_aliases (operand_index = 2) and the entry's argument 0 is marked
    tf.aliasing_output. Both float32 and bfloat16.
    """
    length, d = 8 * ROWS, 128
    cache = jax.random.normal(jax.random.key(0), (length, d)).astype(dtype)
    row = jax.random.normal(jax.random.key(1), (1, d)).astype(dtype)
    params = pltpu.InterpretParams(detect_races=True, uninitialized_memory="nan")
    write = jax.jit(functools.partial(append_to_cache, interpret=params))
    try:
        for position in (0, 19, length - 1):
            pos = jnp.array([position], jnp.int32)
            np.testing.assert_array_equal(write(cache, row, pos), cache.at[position].set(row[0]))
    finally:
        pltpu.reset_tpu_interpret_mode_state()

    kernel = pallas_call_structure(append_to_cache, cache, row, pos)
    assert kernel["blocks"] == [(1, d), (ROWS, d), (ROWS, d)]  # row, cache, the output
    (call,) = equations("pallas_call", append_to_cache, cache, row, pos)
    assert call.params["input_output_aliases"] == ((2, 0),)
    # 写这一行的是内核：返回值就是 pallas_call 的输出 / the kernel writes the row: the result is
    # the pallas_call's own output, not something computed from it afterwards
    program = jax.make_jaxpr(append_to_cache)(cache, row, pos).jaxpr
    last = [e.primitive.name for e in program.eqns if e.outvars == program.outvars]
    assert last == ["pallas_call"]

    text = _lower_for_tpu(append_to_cache, cache, row, pos, donate_argnums=0).as_text()
    assert text.count("tpu_custom_call") == 1
    assert re.search(r"output_operand_alias<output_tuple_indices = \[\], operand_index = 2,", text)
    assert re.search(r"%arg0: tensor<\d+x\d+x\w+> \{tf.aliasing_output = 0", text)


# ---- megacore：两个 TensorCore / megacore: two TensorCores ------------------------------


def double_on_both_cores(x, *, interpret=True):
    """2·x，x 是 [2·n·ROWS, C]：grid = (2, n)，第一个轴挑核（上一半行给核 0，下一半给核 1），
    标成 pltpu.CORE_PARALLEL；第二个轴在一个核里按顺序走它那一半的 (ROWS, C) 块，标成 "arbitrary"。
    块 (ROWS, C) 的 index map 从 (核, 步) 算出行块号；interpret=interpret。大约 12 行。

    2·x for x [2·n·ROWS, C]: grid = (2, n), the first axis picks the core (the upper half of the
    rows to core 0, the lower half to core 1), marked pltpu.CORE_PARALLEL; the second walks that
    half's (ROWS, C) blocks in order on one core, marked "arbitrary". The index map of the
    (ROWS, C) blocks computes the row block from (core, step); interpret=interpret. About 12
    lines.
    """
    rows, cols = x.shape
    per_core = rows // (2 * ROWS)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    spec = pl.BlockSpec((ROWS, cols), lambda c, i: (c * per_core + i, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(2, per_core),
        in_specs=[spec],
        out_specs=spec,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=(pltpu.CORE_PARALLEL, pltpu.ARBITRARY)
        ),
        interpret=interpret,
    )(x)


@pytest.mark.parametrize(("shape", "dtype"), [((64, 128), jnp.float32), ((32, 256), jnp.bfloat16)])
def test_megacore_splits_the_core_parallel_axis(shape, dtype):
    """✍️ 实现 double_on_both_cores。检查：TPU 解释器模拟两个核（num_cores_or_threads=2）、开着
    竞争检测，结果是 2·x，没有竞争；结构：grid (2, n)、块 (ROWS, C)、每个块只被一个 grid 点
    读写；为一块 megacore 的 TPU v4（两个核）降级后，Mosaic 内核记着
    dimension_semantics<core_parallel> 和 arbitrary。float32 和 bfloat16。只有 TPU v4、v5p 每个设备
    有两个 TensorCore；用 `pytest --tpu` 在 v5e、v6e 这样的单核芯片上运行时，这个内核在芯片上跳过并说明
    原因。竞争检测只检查解释器模拟的东西：它把
    CORE_PARALLEL 轴的各点放在哪些模拟的核上，是下一个 koan 的问题。
    Write double_on_both_cores. Checked: with the TPU interpreter simulating two cores
    (num_cores_or_threads=2) and race detection on, the result is 2·x with no race; the
    structure: the grid (2, n), (ROWS, C) blocks, each block read and written by one grid point;
    lowered for a megacore TPU v4 (two cores), the Mosaic kernel records
    dimension_semantics<core_parallel> and arbitrary. float32 and bfloat16. Only TPU v4 and v5p
    have two TensorCores per device; run with `pytest --tpu` on a one-core chip such as v5e or
    v6e, this kernel is skipped on the chip, saying why. The race detector checks only what the
    interpreter simulates: on which simulated cores it puts the points of a CORE_PARALLEL axis
    is the next koan's question.
    """
    x = jax.random.normal(jax.random.key(0), shape).astype(dtype)
    params = pltpu.InterpretParams(detect_races=True, num_cores_or_threads=2, random_seed=0)
    try:
        out = jax.jit(functools.partial(double_on_both_cores, interpret=params))(x)
    finally:
        pltpu.reset_tpu_interpret_mode_state()
    np.testing.assert_array_equal(out, 2 * x)

    n = shape[0] // (2 * ROWS)
    kernel = pallas_call_structure(double_on_both_cores, x)
    assert kernel["grid"] == (2, n)
    assert kernel["blocks"] == [(ROWS, shape[1]), (ROWS, shape[1])]
    (call,) = equations("pallas_call", double_on_both_cores, x)
    index_map = call.params["grid_mapping"].block_mappings[0].index_map_jaxpr
    run = functools.partial(jax.core.eval_jaxpr, index_map.jaxpr, index_map.consts)
    blocks = sorted(int(run(jnp.int32(c), jnp.int32(i))[0]) for c in range(2) for i in range(n))
    assert blocks == list(range(2 * n)), "每块恰好一次 / every block exactly once"

    lowered = _lower_for_tpu(double_on_both_cores, x, mesh=_tpu_mesh("TPU v4", 2))
    _, text = _mosaic(lowered)
    semantics = re.search(r"dimension_semantics = \[(.*?)\]", text).group(1)
    assert re.findall(r"dimension_semantics<(\w+)>", semantics) == ["core_parallel", "arbitrary"]


def _double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


def _cores_of_each_point(semantics):
    """TPU 解释器模拟两个核时，grid 的每个点在哪个核上运行（grid_point_recorder 记下）。
    Which simulated core runs each grid point when the TPU interpreter simulates two cores
    (recorded by grid_point_recorder)."""
    cores = {}

    def record(token, point, core):
        cores[tuple(int(v) for v in point)] = int(core)
        return token

    params = pltpu.InterpretParams(
        num_cores_or_threads=2, detect_races=True, random_seed=0, grid_point_recorder=record
    )
    spec = pl.BlockSpec((ROWS, 128), lambda c, i: (c * 4 + i, 0))
    kernel = pl.pallas_call(
        _double_kernel,
        out_shape=jax.ShapeDtypeStruct((8 * ROWS, 128), jnp.float32),
        grid=(2, 4),
        in_specs=[spec],
        out_specs=spec,
        compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics, "arbitrary")),
        interpret=params,
    )
    try:
        jax.block_until_ready(kernel(jnp.ones((8 * ROWS, 128), jnp.float32)))
    finally:
        pltpu.reset_tpu_interpret_mode_state()
    assert len(cores) == 8
    return cores


def test_which_simulated_cores_run_the_grid():
    """⚠️ 陷阱 / trap：上一个 koan 在两个模拟的核上跑得对，可这说明不了核之间怎么分。
    grid_point_recorder 记下 TPU 解释器（num_cores_or_threads=2，JAX 0.12.0.1）在哪个模拟的核上
    运行每个 grid 点。同一个 (2, 4) 的 grid，第一个轴分别标成 "parallel" 和 pltpu.CORE_PARALLEL：
    各用到了哪些核（写成集合）？
    The previous koan runs right on two simulated cores, but that says nothing of how the cores
    split the work. grid_point_recorder records on which simulated core the TPU interpreter
    (num_cores_or_threads=2, JAX 0.12.0.1) runs each grid point. The same (2, 4) grid, its first
    axis marked "parallel", then pltpu.CORE_PARALLEL: which cores does each use (as a set)?
    """
    assert set(_cores_of_each_point("parallel").values()) == {0, 1}
    assert set(_cores_of_each_point(pltpu.CORE_PARALLEL).values()) == {0}


# ---- VMEM 预算 / the VMEM budget ----------------------------------------------------------


def _matmul_with_scratch(x, y, *, bm, bk, bn, vmem_limit_bytes=None, interpret=False):
    """bf16 的分块矩阵乘，float32 scratch 累加（test_hardware.py 的 matmul_bf16）。/ The
    tiled bf16 matmul with a float32 scratch accumulator (test_hardware.py's matmul_bf16)."""

    def kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    (m, k), n = x.shape, y.shape[1]
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary"),
            vmem_limit_bytes=vmem_limit_bytes,
        ),
        interpret=interpret,
    )(x, y)


_BYTES = {"bf16": 2, "f32": 4, "i32": 4}


def _vmem_bytes(mosaic_text):
    """从 Mosaic 内核读出 VMEM 预算：每个窗口（BlockSpec）的 memref 乘它的缓冲区个数
    （pipeline_mode<synchronous> 是 1，否则 2），加上其后每个 VMEM scratch 的 memref。
    The VMEM budget read from the Mosaic kernel: each window's (BlockSpec's) memref times its
    buffer count (1 for pipeline_mode<synchronous>, else 2), plus each VMEM scratch memref
    after them."""
    windows = re.search(r"window_params = \[\{(.*?)\}\]", mosaic_text).group(1).split("}, {")
    signature = re.search(r"\^bb0\((.*?)\):", mosaic_text).group(1)
    memrefs = re.findall(r"memref<([\dx]+)x(\w+), #tpu.memory_space<vmem>>", signature)
    total = 0
    for index, (dims, dtype) in enumerate(memrefs):
        size = _BYTES[dtype]
        for dim in dims.split("x"):
            size *= int(dim)
        single = index >= len(windows) or "pipeline_mode<synchronous>" in windows[index]
        total += size * (1 if single else 2)
    return total


def test_the_vmem_budget_of_a_tiled_matmul():
    """为 TPU 降级 bf16 的 (256, 512) × (512, 256) 分块矩阵乘：x 的块 (128, 256)、y 的块
    (256, 128)、输出的块 (128, 128) 都是 bf16，各有两个缓冲区；float32 的 (128, 128) 累加器在
    scratch 里，只有一个。预测 Mosaic 内核里这些 VMEM 缓冲区一共多少字节。把这个数交给
    vmem_limit_bytes，它原样写进 tpu_custom_call 的配置（scoped_memory_configs）；降级不检查它：
    只给一半也照样降级，要到 TPU 上编译时才会被拒绝。
    Lower for TPU a tiled bf16 (256, 512) × (512, 256) matmul: the x block (128, 256), the y
    block (256, 128) and the output block (128, 128) are bf16, with two buffers each; the float32
    (128, 128) accumulator is in scratch, with one. Predict how many bytes these VMEM buffers of
    the Mosaic kernel take in all. Handed to vmem_limit_bytes, that number is written as it is
    into the tpu_custom_call's config (scoped_memory_configs); the lowering does not check it:
    half of it lowers all the same, and only compiling on a TPU would refuse it.
    """
    x = jax.ShapeDtypeStruct((256, 512), jnp.bfloat16)
    y = jax.ShapeDtypeStruct((512, 256), jnp.bfloat16)
    blocks = {"bm": 128, "bk": 256, "bn": 128}
    _, text = _mosaic(_lower_for_tpu(functools.partial(_matmul_with_scratch, **blocks), x, y))
    budget = _vmem_bytes(text)
    assert budget == 393216

    for limit in (budget, budget // 2):
        kernel = functools.partial(_matmul_with_scratch, vmem_limit_bytes=limit, **blocks)
        config, _ = _mosaic(_lower_for_tpu(kernel, x, y))
        assert config["scoped_memory_configs"] == [{"memory_space": 1, "offset": 0, "size": limit}]
