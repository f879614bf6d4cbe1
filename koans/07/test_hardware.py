"""07 · 硬件上的 Pallas，在 CPU 上检查 / Pallas as it runs on hardware, checked on CPU.

interpret=True 是最宽松的解释器：grid 严格按顺序运行，未初始化的内存是 NaN。真实硬件不这样：
TPU 把 "parallel" 的 grid 轴分给多个核（顺序不定），GPU 上的程序实例同时运行。TPU 解释器
（interpret=pltpu.InterpretParams(...)）在 CPU 上模拟这些：它打乱 "parallel" 轴的顺序。
累加器放在 scratch_shapes 里（TPU 上是 VMEM），bf16 输入用 float32 累加；为 GPU 降级
（Triton）在这台机器上也能检查，只要用 AbstractMesh 说明目标 GPU；Mosaic GPU 的内核还能由 GPU
解释器（plgpu.InterpretGPUParams）在 CPU 上运行。

interpret=True is the most forgiving interpreter: the grid runs strictly in order, and
uninitialized memory is NaN. Real hardware does not work like that: a TPU spreads "parallel"
grid axes over its cores (in no fixed order), and on a GPU the program instances run at the
same time. The TPU interpreter (interpret=pltpu.InterpretParams(...)) simulates this on CPU: it
shuffles the "parallel" axes. Accumulators live in scratch_shapes (VMEM on TPU), bf16 inputs
accumulate in float32; the lowering for GPU (Triton) can be checked on this machine too, with
an AbstractMesh naming the target GPU, and a Mosaic GPU kernel can even run on this CPU in the
GPU interpreter (plgpu.InterpretGPUParams).
"""

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.experimental.pallas import tpu as pltpu
from jax.extend.mlir import ir
from jax.sharding import AbstractDevice, AbstractMesh

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import pallas_call_structure

# The TPU interpreter, with a fixed seed for its shuffling of "parallel" axes.
TPU_INTERPRETER = pltpu.InterpretParams(random_seed=0)


def _scratch_matmul(x, y, *, semantics, interpret, block=8):
    """一个正确的分块矩阵乘（float32 scratch 累加器），dimension_semantics 由参数给出。
    A correct tiled matmul (a float32 scratch accumulator) with the given dimension_semantics."""
    m, k = x.shape
    _, n = y.shape

    def kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // block, n // block, k // block),
        in_specs=[
            pl.BlockSpec((block, block), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((block, block), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((block, block), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((block, block), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=semantics),
        interpret=interpret,
    )(x, y)


def test_the_k_axis_must_be_arbitrary():
    """⚠️ 陷阱 / trap：同一个正确的矩阵乘内核，只改 dimension_semantics。"parallel" 告诉编译器
    这个轴的各步互相独立、可以任意顺序或分给不同的核；K 轴的各步却都在累加同一个输出块。
    interpret=True 总是按顺序跑，看不出区别；TPU 解释器会打乱 "parallel" 轴。预测哪些组合
    在 TPU 解释器下仍然算对。
    The same correct matmul kernel, only dimension_semantics changes. "parallel" tells the
    compiler that the steps of an axis are independent, to be run in any order or on different
    cores; yet the K steps all accumulate into the same output block. interpret=True always
    runs in order and shows no difference; the TPU interpreter shuffles "parallel" axes.
    Predict which combinations still compute the right result under the TPU interpreter.
    """
    x = jax.random.normal(jax.random.key(0), (16, 32))
    y = jax.random.normal(jax.random.key(1), (32, 16))
    cases = {
        "k arbitrary": ("parallel", "parallel", "arbitrary"),
        "all parallel": ("parallel", "parallel", "parallel"),
        "all arbitrary": ("arbitrary", "arbitrary", "arbitrary"),
    }
    in_order, shuffled = {}, {}
    for name, semantics in cases.items():
        for results, interpret in ((in_order, True), (shuffled, TPU_INTERPRETER)):
            run = jax.jit(
                functools.partial(_scratch_matmul, semantics=semantics, interpret=interpret)
            )
            results[name] = bool(np.allclose(run(x, y), x @ y, rtol=1e-4, atol=1e-4))
    assert in_order == dict.fromkeys(cases, True)  # interpret=True cannot tell them apart
    assert shuffled == __


def _accumulate_into_one_block(semantics):
    """4 个程序实例都写同一个 (8, 128) 输出块，在两个核上、开着竞争检测运行。
    Four program instances all write the same (8, 128) output block, run on two cores with the
    race detector on."""

    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += x_ref[...]

    call = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        grid=(4,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics,)),
        interpret=pltpu.InterpretParams(detect_races=True, num_cores_or_threads=2, random_seed=0),
    )
    return jax.block_until_ready(jax.jit(call)(jnp.ones((32, 128))))


def test_the_race_detector_catches_parallel_writes_to_one_block():
    """InterpretParams(detect_races=True, num_cores_or_threads=2) 把 "parallel" 轴分给两个模拟的
    核，并检查内存访问之间的先后关系。所有程序实例都累加进同一个输出块时，"arbitrary" 的轴
    留在一个核上、按顺序运行，结果正确；标成 "parallel" 后两个核同时写这个块，检测器报告
    竞争（解释器在一个回调里抛错，JAX 再把它包装起来）。出错之后要重置解释器的状态。
    InterpretParams(detect_races=True, num_cores_or_threads=2) spreads "parallel" axes over two
    simulated cores and checks the ordering of memory accesses. When every program instance
    accumulates into the same output block, an "arbitrary" axis stays on one core, in order,
    and the result is right; marked "parallel", two cores write the block at once and the
    detector reports a race (the interpreter raises inside a callback, and JAX wraps that). After
    an error, reset the interpreter's state.
    """
    np.testing.assert_array_equal(_accumulate_into_one_block("arbitrary"), np.full((8, 128), 4.0))
    try:
        with raises_exactly(__) as info:
            _accumulate_into_one_block("parallel")
    finally:
        pltpu.reset_tpu_interpret_mode_state()
    assert "RACE DETECTED" in str(info.value)


@functools.partial(jax.jit, static_argnames=("bm", "bn", "bk", "interpret"))
def matmul_bf16(x, y, *, bm, bn, bk, interpret=True):
    """bf16 输入、bf16 输出的分块矩阵乘，在 float32 里累加：
    - grid = (M // bm, N // bn, K // bk)，块与 test_kernels.py 的 matmul 相同；
    - 累加器是 scratch_shapes 里的一个 pltpu.VMEM((bm, bn), jnp.float32)，它作为最后一个 Ref
      参数传给内核；k == 0 时清零，每步加上 jnp.dot(..., preferred_element_type=jnp.float32)；
    - 只在最后一个 k 步把累加器转成 bf16 写进输出；
    - compiler_params=pltpu.CompilerParams(dimension_semantics=...)：i、j 是 "parallel"，
      k 是 "arbitrary"；
    - interpret=interpret（测试也会用 TPU 解释器来跑）。大约 25 行。

    A tiled matmul with bf16 inputs and a bf16 output that accumulates in float32:
    - grid = (M // bm, N // bn, K // bk), blocks as in test_kernels.py's matmul;
    - the accumulator is a pltpu.VMEM((bm, bn), jnp.float32) in scratch_shapes, passed to the
      kernel as its last Ref; zero it when k == 0, add jnp.dot(...,
      preferred_element_type=jnp.float32) at every step;
    - only on the last k step cast the accumulator to bf16 and write the output;
    - compiler_params=pltpu.CompilerParams(dimension_semantics=...): i and j "parallel", k
      "arbitrary";
    - interpret=interpret (the test runs it under the TPU interpreter too). About 25 lines.
    """
    todo("matmul_bf16: float32 scratch 累加器 / a float32 scratch accumulator")


@pytest.mark.parametrize(
    ("m", "k", "n", "bm", "bk", "bn"), [(16, 256, 16, 8, 32, 8), (8, 128, 8, 8, 8, 8)]
)
def test_bf16_matmul_accumulates_in_f32_scratch(m, k, n, bm, bk, bn):
    """在 float32 里累加：结果与 float32 参考的差距不超过把参考舍入到 bf16 本身的误差的 1.5 倍
    （在 bf16 输出里累加会差 2 到 4 倍）。结构：bf16 输出、一个 (bm, bn) float32 scratch、块形状、
    ("parallel", "parallel", "arbitrary")；在 TPU 解释器下结果完全一样，两个模拟的核、开着竞争检测也
    一样（没有竞争）；在 TPU 接受的块形状上，它为 TPU v5 lite 降级成一个 tpu_custom_call。
    Accumulating in float32: the result is off the float32 reference by no more than 1.5 times
    the error of rounding the reference itself to bf16 (accumulating in the bf16 output is 2 to
    4 times off). The
    structure: a bf16 output, one (bm, bn) float32 scratch, the block shapes, ("parallel",
    "parallel", "arbitrary"); under the TPU interpreter the result is identical, also with two
    simulated cores and race detection (no race); and at a block shape a TPU accepts it lowers
    for a TPU v5 lite to one tpu_custom_call.
    """
    x = jax.random.normal(jax.random.key(0), (m, k)).astype(jnp.bfloat16)
    y = jax.random.normal(jax.random.key(1), (k, n)).astype(jnp.bfloat16)
    exact = jnp.dot(x.astype(jnp.float32), y.astype(jnp.float32))
    rounding = float(jnp.max(jnp.abs(exact.astype(jnp.bfloat16).astype(jnp.float32) - exact)))

    out = matmul_bf16(x, y, bm=bm, bn=bn, bk=bk)
    assert out.dtype == jnp.bfloat16
    # Half a bf16 rounding more than the reference's own: the float32 partial sums may round
    # differently from one whole dot; accumulating in bf16 here is 2-4 times off.
    assert float(jnp.max(jnp.abs(out.astype(jnp.float32) - exact))) <= 1.5 * rounding
    shuffled = matmul_bf16(x, y, bm=bm, bn=bn, bk=bk, interpret=TPU_INTERPRETER)
    np.testing.assert_array_equal(shuffled, out)
    two_cores = pltpu.InterpretParams(detect_races=True, num_cores_or_threads=2, random_seed=0)
    try:
        np.testing.assert_array_equal(
            matmul_bf16(x, y, bm=bm, bn=bn, bk=bk, interpret=two_cores), out
        )
    finally:
        pltpu.reset_tpu_interpret_mode_state()

    device = AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
    legal = functools.partial(matmul_bf16, bm=8, bn=128, bk=128, interpret=False)
    specs = [jax.ShapeDtypeStruct(s, jnp.bfloat16) for s in ((16, 256), (256, 128))]
    with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=device)):
        text = jax.jit(legal).trace(*specs).lower(lowering_platforms=("tpu",)).as_text()
    assert text.count("tpu_custom_call") == 1

    kernel = pallas_call_structure(functools.partial(matmul_bf16, bm=bm, bn=bn, bk=bk), x, y)
    assert kernel["grid"] == (m // bm, n // bn, k // bk)
    assert kernel["blocks"] == [(bm, bk), (bk, bn), (bm, bn)]
    assert kernel["scratch"] == [((bm, bn), jnp.float32)]
    assert kernel["semantics"] == ("parallel", "parallel", "arbitrary")  # strings or enums


def _double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def _lower_for_gpu(mesh, shape, block):
    spec = pl.BlockSpec(block, lambda i, j: (i, j))
    kernel = pl.pallas_call(
        _double_kernel,
        out_shape=jax.ShapeDtypeStruct(shape, jnp.float32),
        grid=(pl.cdiv(shape[0], block[0]), pl.cdiv(shape[1], block[1])),
        in_specs=[spec],
        out_specs=spec,
    )
    x = jax.ShapeDtypeStruct(shape, jnp.float32)
    # The Triton backend warns that it is deprecated (Mosaic GPU is its successor).
    with (
        jax.sharding.use_abstract_mesh(mesh),
        pytest.warns(DeprecationWarning, match="Triton backend is deprecated"),
    ):
        return jax.jit(kernel).trace(x).lower(lowering_platforms=("cuda",))


def h100_mesh():
    """一个 1 设备的 AbstractMesh（轴名 "x"），它的 abstract_device 是一块 H100：
    AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None, platform=...)，平台名
    就是 lowering_platforms 里写的那个。一行。
    A 1-device AbstractMesh (axis name "x") whose abstract_device is an H100:
    AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None, platform=...), the
    platform being the name used in lowering_platforms. One line.
    """
    todo("h100_mesh: 一个 H100 的 AbstractMesh / an H100 AbstractMesh")


def test_lowering_for_cuda_goes_through_triton():
    """没有 GPU 也能为 CUDA 降级：没有抽象设备时降级拒绝（不知道目标是哪块 GPU）；给出一个
    H100 的 AbstractMesh 后，内核成为一个调用 Triton 的 custom_call。这条 Triton 后端在 JAX 0.12
    里已被标为弃用（降级时发出 DeprecationWarning），它的继任者是 Mosaic GPU。
    Lowering for CUDA works without a GPU: without an abstract device the lowering refuses (it
    does not know which GPU it targets); given an H100 AbstractMesh, the kernel becomes a
    custom_call into Triton. JAX 0.12 marks this Triton backend deprecated (the lowering emits a
    DeprecationWarning); its successor is Mosaic GPU.
    """
    x = jax.ShapeDtypeStruct((256, 512), jnp.float32)
    spec = pl.BlockSpec((16, 128), lambda i, j: (i, j))
    kernel = pl.pallas_call(
        _double_kernel, out_shape=x, grid=(16, 4), in_specs=[spec], out_specs=spec
    )
    with pytest.warns(DeprecationWarning), raises_exactly(__) as info:
        jax.jit(kernel).trace(x).lower(lowering_platforms=("cuda",))
    assert "AbstractDevice" in str(info.value)

    text = _lower_for_gpu(h100_mesh(), (256, 512), (16, 128)).as_text()
    assert "custom_call @__gpu$xla.gpu.triton" in text


def test_gpu_blocks_must_be_powers_of_two():
    """Triton 降级要求内核里每个数组的大小都是 2 的幂。TPU 上合法的块（等于整个数组的
    (20, 300)、(8, 96) 之类）在 GPU 上照样被拒绝。预测哪些能降级。
    The Triton lowering wants every array inside the kernel to have a power-of-two size. Blocks
    that are legal on TPU (the whole array (20, 300), or (8, 96)) are refused for GPU all the
    same. Predict which ones lower.
    """
    cases = [
        ((256, 512), (16, 128)),
        ((256, 512), (6, 100)),
        ((20, 300), (20, 300)),
        ((64, 64), (32, 64)),
    ]
    lowers = []
    for shape, block in cases:
        try:
            _lower_for_gpu(h100_mesh(), shape, block)
            lowers.append(True)
        except ValueError as err:
            assert "power of 2" in str(err)
            lowers.append(False)
    assert lowers == __


def mosaic_gpu_double(shape):
    """用 Mosaic GPU 写同一个加倍内核：plgpu.kernel(内核, out_type=...)，out_type 是形状 shape 的
    float32 jax.ShapeDtypeStruct；内核用上面的 _double_kernel。一行。
    The same doubling kernel for Mosaic GPU: plgpu.kernel(kernel, out_type=...), out_type a float32
    jax.ShapeDtypeStruct of the given shape; the kernel is _double_kernel above. One line.
    """
    todo("mosaic_gpu_double: 一个 Mosaic GPU 内核 / a Mosaic GPU kernel")


def test_mosaic_gpu_lowers_without_triton():
    """Mosaic GPU 是 Triton 后端的继任者，在这台机器上也能为 CUDA 降级（不需要 AbstractMesh）。
    和 pallas_call 不同，plgpu.kernel 没有 BlockSpec：内核拿到的 Ref 是 GMEM 里的整个数组。
    内核成为一个 mosaic_gpu_v2 custom_call，不经过 Triton，也没有弃用警告；它的规则也不同：
    (20, 300) 这样的数组在布局推断时被拒绝。
    Mosaic GPU is the Triton backend's successor, and it too lowers for CUDA on this machine
    (with no AbstractMesh). Unlike pallas_call, plgpu.kernel has no BlockSpecs: the kernel's
    Refs are the whole arrays, in GMEM. The kernel becomes a mosaic_gpu_v2 custom_call, with no
    Triton and no deprecation warning; its rules differ too: an array such as (20, 300) is
    refused at layout inference.
    """
    x = jax.ShapeDtypeStruct((128, 128), jnp.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no DeprecationWarning this time
        text = (
            jax.jit(mosaic_gpu_double((128, 128)))
            .trace(x)
            .lower(lowering_platforms=("cuda",))
            .as_text()
        )
    assert "custom_call @mosaic_gpu_v2" in text and "triton" not in text

    odd = jax.ShapeDtypeStruct((20, 300), jnp.float32)
    with pytest.raises(ValueError, match="infer a possible set of layouts"):
        jax.jit(mosaic_gpu_double((20, 300))).trace(odd).lower(lowering_platforms=("cuda",))


# ---- Mosaic GPU：经过 SMEM，用屏障等待 / Mosaic GPU: staged through SMEM, waited on with a barrier


def double_through_smem(x_gmem, o_gmem, x_smem, barrier):
    """Mosaic GPU 内核体：x_gmem、o_gmem 是 GMEM 里的整个数组，x_smem 是同样形状的 SMEM 缓冲区，
    barrier 是一个屏障（都由下面测试里的 plgpu.kernel 分配）。按顺序：
    - plgpu.copy_gmem_to_smem(x_gmem, x_smem, barrier) 发起异步拷贝（TMA），完成时通知屏障；
    - plgpu.barrier_wait(barrier) 等它到达；
    - 在 SMEM 里把数据乘 2（x_smem[...] = ...）；
    - plgpu.commit_smem() 让这些写入对异步拷贝可见；
    - plgpu.copy_smem_to_gmem(x_smem, o_gmem) 把结果拷回 GMEM，plgpu.wait_smem_to_gmem(0)
      等它完成后内核才能结束。
    大约 6 行。

    The Mosaic GPU kernel body: x_gmem and o_gmem are the whole arrays in GMEM, x_smem an SMEM
    buffer of the same shape, barrier a barrier (all allocated by the test's plgpu.kernel below).
    In order:
    - plgpu.copy_gmem_to_smem(x_gmem, x_smem, barrier) starts an asynchronous copy (TMA) that
      signals the barrier when it completes;
    - plgpu.barrier_wait(barrier) waits for it;
    - double the data in SMEM (x_smem[...] = ...);
    - plgpu.commit_smem() makes those writes visible to asynchronous copies;
    - plgpu.copy_smem_to_gmem(x_smem, o_gmem) copies the result back to GMEM, and
      plgpu.wait_smem_to_gmem(0) waits for it before the kernel may end.
    About 6 lines.
    """
    todo("double_through_smem: TMA 拷贝、屏障、fence / a TMA copy, a barrier, a fence")


def _mosaic_gpu_module(lowered):
    """降级结果里 mosaic_gpu_v2 custom_call 带的 Mosaic GPU 模块（MLIR 字节码）的文本。
    The text of the Mosaic GPU module (MLIR bytecode) carried by the lowered module's
    mosaic_gpu_v2 custom_call."""
    module = lowered.compiler_ir("stablehlo")
    found = []

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name == "stablehlo.custom_call":
                        config = ir.DictAttr(inner.attributes["mhlo.backend_config"])
                        found.append(ir.StringAttr(config["module"]).value_bytes)
                    walk(inner.operation)

    walk(module.operation)
    assert len(found) == 1, f"expected one Mosaic GPU kernel, found {len(found)}"
    with module.context as context:
        context.allow_unregistered_dialects = True  # stable_mosaic_gpu.* ops
        return str(ir.Module.parse(found[0]))


# What each step becomes in the lowered kernel (PTX in inline asm, or NVVM ops).
GPU_STEPS = {
    "TMA copy GMEM -> SMEM, completing on an mbarrier": "cp.async.bulk.tensor.2d.shared::cta.global.mbarrier",
    "wait on the mbarrier": "mbarrier.try_wait.parity",
    "fence for the async proxy": "nvvm.fence.proxy",
    "bulk copy SMEM -> GMEM": "cp.async.bulk.global.shared::cta",
    "wait for the bulk copies": "nvvm.cp.async.bulk.wait_group",
}


def test_mosaic_gpu_stages_through_smem_with_a_barrier():
    """Mosaic GPU 的内核自己搬运数据：GMEM → SMEM 是一次异步的 TMA 拷贝，完成时通知一个
    mbarrier；读 SMEM 之前要等这个屏障，把写过的 SMEM 交给异步拷贝之前要一道 fence，拷回 GMEM
    之后要等拷贝结束。GPU 解释器（plgpu.InterpretGPUParams(detect_races=True)）在这台 CPU 上
    真的运行这个内核，漏掉任何一次等待都会被它报成竞争或没完成的拷贝；为 CUDA 降级后，
    mosaic_gpu_v2 custom_call 里的模块按顺序含有这五步。
    A Mosaic GPU kernel moves its own data: GMEM → SMEM is an asynchronous TMA copy that signals
    an mbarrier when done; reading SMEM must wait on that barrier, handing written SMEM to an
    asynchronous copy needs a fence, and the copy back to GMEM must be waited for. The GPU
    interpreter (plgpu.InterpretGPUParams(detect_races=True)) really runs this kernel on this
    CPU and reports any missing wait as a race or an unfinished copy; lowered for CUDA, the
    module inside the mosaic_gpu_v2 custom_call holds these five steps, in order.
    """
    x = jax.random.normal(jax.random.key(0), (128, 128), jnp.float32)

    def smem_double(interpret=None):
        return plgpu.kernel(
            double_through_smem,
            out_type=jax.ShapeDtypeStruct(x.shape, jnp.float32),
            scratch_types=[plgpu.SMEM(x.shape, jnp.float32), plgpu.Barrier(num_arrivals=1)],
            interpret=interpret,
        )

    interpreted = smem_double(interpret=plgpu.InterpretGPUParams(detect_races=True))
    np.testing.assert_array_equal(jax.jit(interpreted)(x), 2.0 * x)

    lowered = (
        jax.jit(smem_double())
        .trace(jax.ShapeDtypeStruct(x.shape, x.dtype))
        .lower(lowering_platforms=("cuda",))
    )
    assert "custom_call @mosaic_gpu_v2" in lowered.as_text()
    text = _mosaic_gpu_module(lowered)
    positions = [text.find(marker) for marker in GPU_STEPS.values()]
    assert -1 not in positions, dict(zip(GPU_STEPS, positions, strict=True))
    assert positions == sorted(positions)
