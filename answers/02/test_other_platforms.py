"""02 · 在这台 CPU 机器上读另一个平台会编译的程序 / the program another platform would compile, read here.

`jax.jit(f).trace(x).lower(lowering_platforms=(...))` 不需要那个平台的硬件：它给出 JAX 为
GPU（"cuda"、"rocm"）或 TPU（"tpu"）写出的 StableHLO，可以在 CPU 上读、数、比较。
逐元素的代码在各平台上是同一个程序；不同之处在于 JAX 为某个平台挑选的专用实现——线性代数
调用各平台的库或 XLA 自己的实现（custom_call），`lax.platform_dependent` 按平台选分支。
一次为几个平台降级时，程序多出一个平台索引参数，用 `stablehlo.case` 在运行时选分支。
编译则需要一个认识程序里每个调用的后端：GPU 程序调用的 cuSOLVER 在这台机器上编译不了。

`jax.jit(f).trace(x).lower(lowering_platforms=(...))` needs no hardware of that platform: it
gives the StableHLO that JAX writes for GPUs ("cuda", "rocm") or TPUs ("tpu"), to read, count
and compare on a CPU. Elementwise code is the same program on every platform; what differs is
the platform-specific implementation JAX picks: linear algebra calls each platform's library
or XLA's own implementation (a custom_call), `lax.platform_dependent` picks a branch per
platform. Lowered for several platforms at once, the program takes a platform index as an
extra argument and picks the branch at run time with `stablehlo.case`. Compiling needs a
backend that knows every call in the program: the GPU program's cuSOLVER call cannot be
compiled on this machine.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax import export, lax

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import as_if_on


def custom_call_targets(text):
    """StableHLO 文本里 custom_call 的目标（去重、排序）/ the custom_call targets in a StableHLO text."""
    return sorted(set(re.findall(r"stablehlo\.custom_call @(\w+)", text)))


def custom_calls(lowered):
    """降级程序里 custom_call 的目标 / the custom_call targets of a lowered program."""
    return custom_call_targets(lowered.as_text())


def main_parameters(lowered):
    """入口函数 @main 的参数类型 / the types of the entry function's parameters."""
    signature = lowered.as_text().split("func.func public @main(")[1].split(") ->")[0]
    return re.findall(r"%arg\d+: (tensor<[^>]*>)", signature)


def spd_matrix():
    """一个对称正定矩阵（特征值与 Cholesky 分解的输入）/ a symmetric positive definite matrix."""
    a = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    return jnp.asarray(a @ a.T + 4 * np.eye(4, dtype=np.float32))


def test_lower_for_gpu_and_tpu_on_this_cpu():
    """同一个 jit 函数，三个平台的程序：本机 CPU、GPU（"cuda"）和 TPU。对称矩阵的特征值在每个平台上
    由不同的实现求出，从 StableHLO 就能读出来；逐元素的部分在各平台上一字不差。
    为 GPU 降级的程序可以读，却不能在这台机器上编译：CPU 的运行时里没有它调用的那个库函数。
    One jitted function, the programs of three platforms: this CPU, a GPU ("cuda") and a TPU.
    Each platform computes a symmetric matrix's eigenvalues its own way, which the StableHLO
    shows; the elementwise part is the same text everywhere. The GPU program can be read but not compiled
    on this machine: the CPU runtime has no handler for the library function it calls.
    """
    traced = jax.jit(jnp.linalg.eigvalsh).trace(spd_matrix())
    on_cpu = traced.lower()
    for_gpu = traced.lower(lowering_platforms=("cuda",))
    for_tpu = traced.lower(lowering_platforms=("tpu",))

    assert custom_calls(on_cpu) == ["lapack_ssyevd_ffi"]  # LAPACK, linked into jaxlib
    assert custom_calls(for_gpu) == ["cusolver_syevd_ffi"]  # NVIDIA's library of dense solvers
    assert custom_calls(for_tpu) == ["Eigh"]  # no library: XLA's own eigensolver, by the op's name

    elementwise = jax.jit(lambda x: jnp.sin(x) * 2.0 + x.sum()).trace(spd_matrix())
    texts = {
        p: elementwise.lower(lowering_platforms=(p,)).as_text() for p in ("cpu", "cuda", "tpu")
    }
    assert texts["cpu"] == texts["cuda"] == texts["tpu"]

    with raises_exactly(jax.errors.JaxRuntimeError) as info:
        for_gpu.compile()
    (gpu_call,) = custom_calls(for_gpu)
    assert f"No FFI handler registered for {gpu_call}" in str(info.value)
    eigenvalues = on_cpu.compile()(spd_matrix())
    np.testing.assert_allclose(eigenvalues, np.linalg.eigvalsh(spd_matrix()), rtol=1e-5)


def test_one_program_for_several_platforms_takes_a_platform_index():
    """一次为两个平台降级（lowering_platforms=("cuda", "tpu")）得到一个程序，
    运行时由一个额外的参数决定执行哪个平台的代码。数一数 @main 的参数，看看它们的类型。
    Lowered for two platforms at once (lowering_platforms=("cuda", "tpu")), you get one
    program; an extra argument decides at run time which platform's code runs. Count @main's
    parameters and look at their types.
    """
    traced = jax.jit(jnp.linalg.cholesky).trace(spd_matrix())
    single = traced.lower(lowering_platforms=("cuda",))
    multi = traced.lower(lowering_platforms=("cuda", "tpu"))

    assert main_parameters(single) == ["tensor<4x4xf32>"]
    assert main_parameters(multi) == ["tensor<i32>", "tensor<4x4xf32>"]
    assert '{jax.global_constant = "_platform_index"}' in multi.as_text()
    assert "stablehlo.case" in multi.as_text() and "stablehlo.case" not in single.as_text()
    assert custom_calls(multi) == ["cusolver_potrf_ffi"]
    assert ("stablehlo.cholesky" in multi.as_text()) is True


def gelu(x):
    """GELU：TPU 上用 tanh 近似（jax.nn.gelu(x, approximate=True)），其他平台用精确的 erf 形式
    （approximate=False）。
    - 选择必须写进程序里，由降级的目标平台决定（lax.platform_dependent），而不是在追踪时用
      Python 判断当前机器（jax.default_backend() 在这台机器上永远是 "cpu"）。
    - 大约 3 行。
    GELU: the tanh approximation on TPUs (jax.nn.gelu(x, approximate=True)), the exact erf form
    elsewhere (approximate=False).
    - The choice must be in the program, decided by the platform it is lowered for
      (lax.platform_dependent), not by Python looking at this machine while tracing
      (jax.default_backend() is always "cpu" here).
    - About 3 lines.
    """
    return lax.platform_dependent(
        x,
        tpu=lambda x: jax.nn.gelu(x, approximate=True),
        default=lambda x: jax.nn.gelu(x, approximate=False),
    )


def test_write_a_platform_dependent_gelu():
    """✍️ 实现 gelu：一个函数，按平台选实现。在本机上运行它只能检验 CPU 的分支；其他平台的分支
    要从它们的降级程序里检验：TPU 的程序里应该有 tanh、没有 erf，GPU 的相反。它们的值也要检验：
    as_if_on 在这台机器上运行程序，让每个 platform_index 替另一个平台作答，于是每个分支都在 CPU 上跑一遍。
    Write gelu: one function that picks its implementation by platform. Running it here can
    only check the CPU branch; the other platforms' branches are checked in their lowered
    programs: the TPU program should hold a tanh and no erf, the GPU program the opposite.
    Their values are checked too: as_if_on runs the program here with each platform_index
    answering for another platform, so each branch is run on the CPU.
    """
    x = jnp.linspace(-3.0, 3.0, 16)
    exact = jax.nn.gelu(x, approximate=False)  # the erf form written out agrees to rounding
    np.testing.assert_allclose(jax.jit(gelu)(x), exact, rtol=1e-6, atol=1e-6)
    for platform, approximate in [("tpu", True), ("cuda", False), ("rocm", False)]:
        np.testing.assert_allclose(  # each platform's branch, run here
            as_if_on(platform, jax.jit(gelu))(x),
            jax.nn.gelu(x, approximate=approximate),
            rtol=1e-6,
            atol=1e-6,  # the two forms differ by 1e-4 and more: rounding does not
            err_msg=platform,
        )

    traced = jax.jit(gelu).trace(x)
    for_tpu = traced.lower(lowering_platforms=("tpu",)).as_text()
    for_gpu = traced.lower(lowering_platforms=("cuda",)).as_text()
    assert "stablehlo.tanh" in for_tpu and "erf" not in for_tpu
    assert "erf" in for_gpu and "stablehlo.tanh" not in for_gpu
    both = traced.lower(lowering_platforms=("cpu", "tpu"))
    assert main_parameters(both)[0] == "tensor<i32>"  # the platform index picks the branch
    assert "stablehlo.tanh" in both.as_text() and "erf" in both.as_text()


def export_for_cpu_and_nvidia(f, *args):
    """把 jax.jit(f) 在 args 的形状上导出（jax.export）成一个制品，让同一个程序既能在这台 CPU 上运行，
    也能交给 NVIDIA GPU 运行。
    - 返回 jax.export.Exported；平台名与 lowering_platforms 里的写法相同。
    - 1 行。
    Export jax.jit(f) at the shapes of args (jax.export) as one artifact whose single program
    runs on this CPU and can also be shipped to NVIDIA GPUs.
    - Return a jax.export.Exported; platform names are spelled as in lowering_platforms.
    - 1 line.
    """
    return export.export(jax.jit(f), platforms=("cpu", "cuda"))(*args)


def test_write_one_artifact_for_this_cpu_and_a_gpu():
    """✍️ 实现 export_for_cpu_and_nvidia：为几个平台降级的程序可以存下来运到别处（jax.export），
    不必在每台机器上重新追踪。制品记下它的平台表；程序里每个平台保留自己的实现（与只为那个平台
    降级时的 custom_call 相同），平台索引却不是制品的输入——由调用它的机器填上。所以它在这台 CPU 上
    能跑，序列化再读回来也能跑；一个只为 GPU 导出的制品在这里拒绝运行。
    Write export_for_cpu_and_nvidia: a program lowered for several platforms can be stored and
    shipped elsewhere (jax.export) instead of being traced again on every machine. The
    artifact records its platforms; each platform keeps its own implementation in the program
    (the custom_calls of a lowering for that platform alone), yet the platform index is no
    input of the artifact: the machine that calls it fills it in. So it runs on this CPU, also
    after a serialization round trip, while an artifact exported for GPUs only refuses to run
    here.
    """
    m = spd_matrix()
    references = {jnp.linalg.eigvalsh: np.linalg.eigvalsh, jnp.linalg.cholesky: np.linalg.cholesky}
    for f, reference in references.items():
        exported = export_for_cpu_and_nvidia(f, m)
        assert sorted(exported.platforms) == ["cpu", "cuda"]
        traced = jax.jit(f).trace(m)
        each_alone = {
            p: custom_calls(traced.lower(lowering_platforms=(p,))) for p in exported.platforms
        }
        assert custom_call_targets(exported.mlir_module()) == sorted(
            set().union(*each_alone.values())
        )  # both implementations, side by side
        assert [a.shape for a in exported.in_avals] == [m.shape]  # no platform index to pass
        assert '"_platform_index"' in exported.mlir_module()
        np.testing.assert_allclose(exported.call(m), reference(np.asarray(m)), rtol=1e-4, atol=1e-5)
        restored = export.deserialize(exported.serialize())  # bytes, as shipped
        np.testing.assert_allclose(restored.call(m), exported.call(m))
        if f is jnp.linalg.eigvalsh:
            # the GPU implementation survives the round trip / GPU 的实现在往返之后还在
            assert set(each_alone["cuda"]) <= set(custom_call_targets(restored.mlir_module()))

    b = jnp.arange(1.0, 5.0)  # a function of two arrays: the artifact takes both
    solved = export_for_cpu_and_nvidia(jnp.linalg.solve, m, b)
    assert [a.shape for a in solved.in_avals] == [m.shape, b.shape]
    np.testing.assert_allclose(solved.call(m, b), np.linalg.solve(m, b), rtol=1e-4, atol=1e-5)

    gpu_only = export.export(jax.jit(jnp.linalg.eigvalsh), platforms=("cuda",))(m)
    with raises_exactly(ValueError) as info:
        gpu_only.call(m)
    assert "exported for platforms" in str(info.value)
