"""09 · 导出拒绝什么，怎样明确地放行 / what export refuses, and how to let it through on purpose.

`jax.export` 只保证它能保证的东西：StableHLO 本身、JAX 自己维护的 custom call（如 LAPACK 的
`lapack_spotrf_ffi`）。你自己的 FFI 内核没有兼容性保证，导出默认拒绝；主机回调根本不能序列化。
放行要写明：`export.DisabledSafetyCheck.custom_call(目标名)` 对一个目标关掉检查，
`DisabledSafetyCheck.platform()` 关掉调用时的平台检查；关掉的检查记在产物里，责任也随之转给
使用产物的一方。

`jax.export` guarantees only what it can: StableHLO itself and the custom calls JAX maintains
(such as LAPACK's `lapack_spotrf_ffi`). Your own FFI kernels carry no compatibility guarantee,
and export refuses them by default; host callbacks cannot be serialized at all. Letting
something through is written out: `export.DisabledSafetyCheck.custom_call(target)` switches
the check off for one target, `DisabledSafetyCheck.platform()` switches off the platform check
at call time; the switched-off checks are recorded in the artifact, and the responsibility
passes to whoever uses it.
"""

import inspect
import json
import os
import re
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api import cbuild
from jaxkoans.api.probes import run_python


def with_two_kernels(x):
    """两个自己的 FFI 内核（本进程没有登记它们的实现），再加一次 JAX 自带的 Cholesky 分解。
    Two FFI kernels of our own (no implementation registered in this process), then one
    Cholesky factorisation of JAX's own.
    """
    a = jax.ffi.ffi_call("fused_scale", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    b = jax.ffi.ffi_call("fused_shift", jax.ShapeDtypeStruct(x.shape, x.dtype))(a)
    return jnp.linalg.cholesky(b @ b.T + jnp.eye(x.shape[0]))


def with_one_kernel(x):
    return jnp.linalg.cholesky(
        jax.ffi.ffi_call("row_norm", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    )


def without_kernels(x):
    return jnp.linalg.cholesky(x @ x.T + jnp.eye(x.shape[0]))


def with_kernels(names):
    """一个模型，依次调用名为 names 的自己的内核，再调用两个 JAX 担保的目标：ApproxTopK 和
    LAPACK 的 Cholesky。/ A model calling kernels of our own, by name, then two targets JAX
    guarantees: ApproxTopK and LAPACK's Cholesky."""

    def model(x):
        for name in names:
            x = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
        x = x + lax.approx_max_k(x, 1)[0]  # a custom call that is no LAPACK's / 不是 LAPACK 的
        return jnp.linalg.cholesky(x @ x.T + jnp.eye(x.shape[0]))

    return model


def export_trusting_own_kernels(fn, *specs):
    """把 jax.jit(fn) 在 specs 上导出，为导出拒绝的那些 custom call 目标（只为它们）各关掉一次
    检查，返回 jax.export.Exported。
    - 先照常导出；被拒绝时 ValueError 的消息里列出了被拒绝的调用，每个写作
      "stablehlo.custom_call @目标名("；用 export.DisabledSafetyCheck.custom_call(目标名)
      为它们关掉检查再导出一次。JAX 自己保证的目标（如 LAPACK 的）不要关。没有被拒绝就原样返回。
    - 大约 8 行。
    Export jax.jit(fn) at specs, switching the check off once for each custom call target
    export refuses (and for those only); return a jax.export.Exported.
    - Export as usual first; when refused, the ValueError's message lists the refused calls,
      each written "stablehlo.custom_call @TARGET("; switch their checks off with
      export.DisabledSafetyCheck.custom_call(TARGET) and export again. Leave the targets JAX
      guarantees (LAPACK's, say) alone. If nothing is refused, return the export as it is.
    - About 8 lines.
    """
    try:
        return export.export(jax.jit(fn))(*specs)
    except ValueError as refusal:
        targets = sorted(set(re.findall(r"stablehlo\.custom_call @(\w+)\(", str(refusal))))
    checks = [export.DisabledSafetyCheck.custom_call(t) for t in targets]
    return export.export(jax.jit(fn), disabled_checks=checks)(*specs)


def register_shipped_kernels(exp, library):
    """使用方：产物为哪些 custom call 目标关掉了检查（exp.disabled_safety_checks；一项检查的
    is_custom_call() 给出它的目标名，别的种类的检查给出 None），就在 cpu 平台上以这些名字各登记
    一次 library 里的处理函数 LeakySum（jax.ffi.pycapsule(library.LeakySum)）；按顺序返回登记的
    名字列表。它会被原样复制进一个全新的进程：import 写在函数里。大约 6 行。
    The consumer side: for each custom call target whose check the artifact switched off
    (exp.disabled_safety_checks; a check's is_custom_call() gives its target name, and None for
    a check of another kind), register library's handler LeakySum
    (jax.ffi.pycapsule(library.LeakySum)) under that name for the cpu platform; return the
    names registered, in order. It is copied verbatim into a fresh process: import inside the
    function. About 6 lines.
    """
    import jax

    names = [c.is_custom_call() for c in exp.disabled_safety_checks]
    names = [name for name in names if name is not None]
    for name in names:
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(library.LeakySum), platform="cpu")
    return names


def custom_call_targets(module_text):
    return sorted(set(re.findall(r"stablehlo\.custom_call @(\w+)\(", module_text)))


@pytest.mark.parametrize(
    ("fn", "own"),
    [
        (with_two_kernels, ["fused_scale", "fused_shift"]),
        (with_one_kernel, ["row_norm"]),
        (without_kernels, []),
    ],
)
def test_export_refuses_kernels_without_a_guarantee(fn, own):
    """✍️ 写 export_trusting_own_kernels。你的推理模型里有自己写的 FFI 内核：导出默认拒绝它们，
    因为 JAX 不知道明年的服务端上同名的内核还算不算同一个东西。为每一个这样的目标明确地关掉
    检查；产物记下关掉了哪些，序列化后也还在；JAX 自己保证的 LAPACK 调用不需要放行。产物在这个
    进程里跑不起来：这里没有登记这些内核的实现，这正是现在由使用方负责的事。
    Write export_trusting_own_kernels. Your inference model holds FFI kernels of your own:
    export refuses them by default, since JAX cannot know whether a kernel of the same name on
    next year's server is still the same thing. Switch the check off for each such target
    explicitly; the artifact records which, also after serialization; the LAPACK call JAX
    guarantees needs no pass. The artifact does not run in this process: nothing here
    registers those kernels, which is now the user's business.
    """
    spec = jax.ShapeDtypeStruct((4, 4), jnp.float32)
    module = jax.jit(fn).lower(spec).as_text()
    assert custom_call_targets(module) == sorted([*own, "lapack_spotrf_ffi"])
    if own:
        with raises_exactly(ValueError):
            export.export(jax.jit(fn))(spec)

    exported = export_trusting_own_kernels(fn, spec)
    assert custom_call_targets(exported.mlir_module()) == sorted([*own, "lapack_spotrf_ffi"])
    recorded = sorted(str(c) for c in exported.disabled_safety_checks)
    assert recorded == [f"custom_call:{t}" for t in own]
    shipped = export.deserialize(exported.serialize())
    assert sorted(str(c) for c in shipped.disabled_safety_checks) == recorded
    # 名字在运行时才定的内核 / kernels whose names are made as the koan runs
    renamed = sorted(f"{t}_{os.getpid()}" for t in own)
    again = export_trusting_own_kernels(with_kernels(renamed), spec)
    assert sorted(str(c) for c in again.disabled_safety_checks) == [
        f"custom_call:{t}" for t in renamed
    ]

    m = np.eye(4, dtype=np.float32) * 2
    if own:
        with raises_exactly(jax.errors.JaxRuntimeError) as info:
            shipped.call(m)
        assert f"No FFI handler registered for {own[0]}" in str(info.value)
    else:
        np.testing.assert_allclose(shipped.call(m), np.linalg.cholesky(m @ m.T + np.eye(4)))


def leaky_model(target, decay, reverse):
    """一个模型，中间一步是第 05 章的 C++ 内核（csrc/leaky_sum.cc：沿最后一根轴的漏积分），
    以 target 这个名字调用。A model whose middle step is chapter 05's C++ kernel
    (csrc/leaky_sum.cc: a leaky running sum along the last axis), called under the name target.
    """

    def forward(x):
        kernel = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, x.dtype))
        return kernel(2.0 * x, decay=np.float32(decay), reverse=reverse) - x

    return forward


def leaky_sum_numpy(x, decay, reverse):
    """NumPy 参考 / the NumPy reference: y[i] = decay * y[i -/+ 1] + x[i]."""
    x = np.flip(x, -1) if reverse else x
    y, carry = np.empty_like(x), np.zeros(x.shape[:-1], x.dtype)
    for i in range(x.shape[-1]):
        carry = decay * carry + x[..., i]
        y[..., i] = carry
    return np.flip(y, -1) if reverse else y


# The consumer process: the learner's registration, then a main that calls each artifact before
# and after registering, and reports. 使用方进程：学习者的登记函数，再加上一个 main。
CONSUMER = """
import ctypes
import json
import sys

import numpy as np
from jax import export

directory, library = sys.argv[1], ctypes.CDLL(sys.argv[2])
x = np.load(f"{directory}/x.npy")
report = {}
for name in sys.argv[3:]:
    exp = export.deserialize(bytearray(open(f"{directory}/{name}.jaxexport", "rb").read()))
    try:
        exp.call(x)
        before = "ran"
    except Exception as error:  # only its class is reported / 只报告它的类
        before = type(error).__name__
    registered = register_shipped_kernels(exp, library)
    np.save(f"{directory}/{name}.npy", exp.call(x))
    report[name] = {"before": before, "registered": registered}
print(json.dumps(report))
"""


def test_a_shipped_kernel_runs_where_the_consumer_registers_it(tmp_path):
    """✍️ 写 register_shipped_kernels。另一面：带着自己 FFI 内核的产物照样能交付，只要使用方
    自己登记内核。产物记着它为哪些目标关掉了检查，使用方就从这里读出要登记的名字，从它手里的
    共享库里取出处理函数。两个团队用不同的名字调用同一个内核；其中一个还关掉了平台检查（那不是
    内核）。在全新的进程里：登记之前调用失败，登记之后反序列化的产物给出与 NumPy 一样的结果。
    Write register_shipped_kernels. The other side: an artifact with FFI kernels of its own
    ships all the same, as long as its consumer registers them. The artifact records which
    targets it switched the check off for, so the consumer reads the names to register from
    there and takes the handler from the shared library it holds. Two teams call the same
    kernel under different names; one of them also switched off the platform check (not a
    kernel). In a fresh process: before registering the call fails; after registering, the
    deserialized artifact gives the same result as NumPy.
    """
    loaded = cbuild.ffi_library("leaky_sum.cc")  # skips without a C++ compiler / 没有编译器就跳过
    library = cbuild.build("leaky_sum.cc")
    x = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    spec = jax.ShapeDtypeStruct(x.shape, jnp.float32)
    # Here first: an artifact whose only switched-off check is the platform's needs no kernel,
    # though its module holds a custom call (ApproxTopK: one of the targets JAX guarantees).
    # 先在本进程：只关掉了平台检查的产物不需要任何内核，尽管它的模块里有一个 custom call
    # （ApproxTopK：JAX 担保的目标之一）。
    unchecked = [export.DisabledSafetyCheck.platform()]
    top_two = jax.jit(lambda x: lax.approx_max_k(jnp.sin(x), 2)[0])
    platform_only = export.export(top_two, disabled_checks=unchecked)(spec)
    assert "custom_call @ApproxTopK(" in platform_only.mlir_module()
    assert register_shipped_kernels(platform_only, loaded) == []
    teams = {"acme_leaky_sum": (0.5, False), "ZetaDecayScanRev": (0.25, True)}
    for target, (decay, reverse) in teams.items():
        checks = [export.DisabledSafetyCheck.custom_call(target)]
        if reverse:
            checks.append(export.DisabledSafetyCheck.platform())
        exp = export.export(jax.jit(leaky_model(target, decay, reverse)), disabled_checks=checks)
        (tmp_path / f"{target}.jaxexport").write_bytes(exp(spec).serialize())
    np.save(tmp_path / "x.npy", x)

    script = tmp_path / "consumer.py"
    script.write_text(textwrap.dedent(inspect.getsource(register_shipped_kernels)) + CONSUMER)
    out = run_python("-I", str(script), str(tmp_path), str(library), *teams)
    report = json.loads(out.strip().splitlines()[-1])
    for target, (decay, reverse) in teams.items():
        assert report[target] == {"before": "JaxRuntimeError", "registered": [target]}
        served = np.load(tmp_path / f"{target}.npy")
        expected = leaky_sum_numpy(2.0 * x, decay, reverse) - x
        np.testing.assert_allclose(served, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "debugging",
    [
        lambda x: (jax.debug.print("x = {}", x), x + 1)[1],
        lambda x: jax.pure_callback(np.negative, jax.ShapeDtypeStruct((4,), jnp.float32), x),
        lambda x: jax.experimental.io_callback(
            np.negative, jax.ShapeDtypeStruct((4,), jnp.float32), x
        ),
    ],
    ids=["debug.print", "pure_callback", "io_callback"],
)
def test_export_refuses_host_callbacks(debugging):
    """⚠️ 陷阱 / trap：回调在运行时调用这个进程里的一个 Python 函数；产物要交给别的进程，那个
    函数却带不过去。所以导出拒绝每一种主机回调，连只用来调试的 jax.debug.print 也不例外，
    而且在 export(...) 本身就拒绝，不等到 serialize()；DisabledSafetyCheck 也放不过去：关掉回调的
    custom call 目标和平台的检查，照样拒绝。在 jit 里它们都照常运行。
    A callback calls a Python function of this process at run time; an artifact goes to
    another process, and the function cannot travel with it. So export refuses every kind of
    host callback, even jax.debug.print used only to debug, and does so in export(...)
    itself, before any serialize(); no DisabledSafetyCheck lets it through: with the check of
    the callback's custom-call target and the platform check disabled, it is still refused.
    Under jit they all run as usual.
    """
    x = jnp.arange(4.0)
    assert jax.jit(debugging)(x).shape == (4,)
    with raises_exactly(NotImplementedError) as info:
        trusting = [  # the callback's custom-call target, and the platform check
            export.DisabledSafetyCheck.custom_call("xla_ffi_python_cpu_callback"),
            export.DisabledSafetyCheck.platform(),
        ]
        export.export(jax.jit(debugging), disabled_checks=trusting)(
            jax.ShapeDtypeStruct((4,), jnp.float32)
        )
    assert "host_callbacks" in str(info.value)


def act(x):
    return lax.platform_dependent(x, cpu=jnp.sin, cuda=jnp.cos, default=jnp.tanh)


def test_switching_off_the_platform_check_runs_another_platforms_branch():
    """⚠️ 陷阱 / trap：只为 CUDA 导出的产物在 CPU 上调用会被平台检查拒绝。
    DisabledSafetyCheck.platform() 让它照样编译、运行，不报错。lax.platform_dependent 是在什么
    时候、按什么选定分支的？比较三个分支，看这里实际算的是哪一个（列出相符的分支名）。
    ⚠️ trap: an artifact exported for CUDA alone is refused by the platform check when called
    on a CPU. DisabledSafetyCheck.platform() lets it compile and run anyway, without an
    error. When, and by what, does lax.platform_dependent choose its branch? Compare the
    three branches and see which one runs here (list the branch names that match).
    """
    x = jnp.linspace(0.1, 1.5, 4)
    spec = jax.ShapeDtypeStruct((4,), jnp.float32)
    for_gpu = export.export(jax.jit(act), platforms=("cuda",))(spec)
    with raises_exactly(ValueError):
        for_gpu.call(x)

    unchecked = export.export(
        jax.jit(act), platforms=("cuda",), disabled_checks=[export.DisabledSafetyCheck.platform()]
    )(spec)
    out = unchecked.call(x)
    branches = {"cpu": jnp.sin, "cuda": jnp.cos, "default": jnp.tanh}
    assert [name for name, f in branches.items() if np.allclose(out, f(x))] == ["cuda"]
    assert "stablehlo.sine" not in unchecked.mlir_module()  # sin, the CPU branch, is not in it
