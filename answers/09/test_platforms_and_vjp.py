"""09 · 多平台、vjp_order 与 call 的限制 / several platforms, vjp_order, and what call cannot do.

一个产物可以同时为几个平台降级；序列化时可以带上反向传播用的 VJP 模块；但被调用的导出函数
对 JAX 来说是一个不透明的原语（call_exported），很多变换对它不可用。
One artifact may be lowered for several platforms at once; serialization may carry VJP
modules for reverse mode; but a called exported function is an opaque primitive
(call_exported) to JAX, and many transformations do not apply to it.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)
from jaxkoans.api import program


def loss(x):
    return jnp.sum(jnp.sin(x) ** 2)


def loss_grad(x):
    """d/dx sum(sin(x)²) = sin(2x)，用 NumPy 算 / computed with NumPy."""
    return np.sin(2 * x)


def main_arguments(module_text):
    """StableHLO 文本里 @main 的参数列表 / the parameter list of @main in StableHLO text."""
    return re.search(r"func\.func public @main\((.*?)\) ->", module_text).group(1)


def test_one_artifact_for_several_platforms():
    """platforms=("cpu", "cuda") 得到一个两用的产物：运行时调用方要告诉模块它在哪个平台上
    （jax.global_constant = "_platform_index"）。数一数两个产物的 @main 各有几个参数。只为别的
    平台导出的产物可以在本机生成，但在本机调用会被平台检查拒绝。
    platforms=("cpu", "cuda") gives one artifact for both: at run time the caller tells the
    module which platform it runs on (jax.global_constant = "_platform_index"). Count the
    parameters of each artifact's @main. An artifact exported only for another platform can be
    produced here, but calling it here is refused by the platform check.
    """
    spec = jax.ShapeDtypeStruct((4,), jnp.float32)
    single = export.export(jax.jit(loss))(spec)
    multi = export.export(jax.jit(loss), platforms=("cpu", "cuda"))(spec)

    assert (single.platforms, multi.platforms) == (("cpu",), ("cpu", "cuda"))
    counts = [main_arguments(e.mlir_module()).count("%arg") for e in (single, multi)]
    assert counts == [1, 2]
    assert "_platform_index" in multi.mlir_module()
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(multi.call(x), np.sum(np.sin(x) ** 2), rtol=1e-6)

    cuda_only = export.export(jax.jit(loss), platforms=("cuda",))(spec)  # no GPU needed
    with raises_exactly(ValueError) as info:
        cuda_only.call(x)
    assert "exported for platforms" in str(info.value)


def test_gradients_need_vjp_order_at_serialization():
    """同一进程里的 Exported 能求导；但 serialize() 默认 vjp_order=0，不带任何 VJP，反序列化后
    grad 报 "No VJP is available"。vjp_order=k 带上 1..k 阶的 VJP 模块，产物也随之变大。
    An in-process Exported differentiates, but serialize() defaults to vjp_order=0 and carries
    no VJP: after deserialization grad says "No VJP is available". vjp_order=k carries VJP
    modules up to order k, and the artifact grows accordingly.
    """
    x = np.arange(4, dtype=np.float32)
    exp = export.export(jax.jit(loss))(jax.ShapeDtypeStruct((4,), jnp.float32))
    np.testing.assert_allclose(jax.grad(exp.call)(x), loss_grad(x), rtol=1e-6, atol=1e-6)

    plain = export.deserialize(exp.serialize())
    with raises_exactly(ValueError) as info:
        jax.grad(plain.call)(x)
    assert "No VJP is available" in str(info.value)

    # The smallest artifact that still trains: its VJP carries no VJP of its own.
    # 还能训练的最小产物：它的 VJP 自己不再带 VJP。
    assert not (trainable := export.deserialize(exp.serialize(vjp_order=1))).vjp().has_vjp()
    np.testing.assert_allclose(jax.grad(trainable.call)(x), loss_grad(x), rtol=1e-6, atol=1e-6)
    with raises_exactly(ValueError) as info:  # so a second order fails / 所以二阶求导失败
        jax.grad(lambda x: jnp.sum(jax.grad(trainable.call)(x)))(x)
    assert "No VJP is available" in str(info.value)
    assert len(exp.serialize(vjp_order=1)) > len(exp.serialize())  # the VJP module rides along


def test_exported_functions_are_reverse_mode_only():
    """⚠️ 陷阱 / trap：导出函数的导数以 custom_vjp 的形式接上，只有反向模式，而且不能批处理：
    jax.hessian（jacfwd 套 jacrev）因为前向模式失败，jacrev 套 jacrev 因为要 vmap 反向函数而失败。
    二阶信息要用“反向套反向”的 Hessian-向量积，并且序列化时 vjp_order 至少为 2；两阶导数都要
    来自读回的产物，而不是对本地的 loss 求导（检查的是 HVP 的程序）。
    ⚠️ trap: an exported function's derivative is attached as a custom_vjp: reverse mode only,
    and not batchable. jax.hessian (jacfwd of jacrev) fails for forward mode, jacrev of jacrev
    fails because it vmaps the pullback. Get second-order information as a reverse-over-reverse
    Hessian-vector product, from an artifact serialized with vjp_order of at least 2; both
    derivatives must come from the artifact read back, not from differentiating the local loss
    (the HVP's program is checked).
    """
    x, v = np.arange(4, dtype=np.float32), np.array([1.0, 0.0, -1.0, 2.0], np.float32)
    spec = jax.ShapeDtypeStruct((4,), jnp.float32)
    shipped = export.export(jax.jit(loss))(spec).serialize(vjp_order=2)
    twice = export.deserialize(shipped)  # only the bytes are kept / 只留下字节

    with raises_exactly(TypeError) as info:
        jax.hessian(twice.call)(x)
    assert "forward-mode" in str(info.value)
    with raises_exactly(NotImplementedError) as info:
        jax.jacrev(jax.jacrev(twice.call))(x)
    assert "call_exported" in str(info.value)

    def hvp(x):
        return jax.grad(lambda x: jnp.vdot(jax.grad(twice.call)(x), v))(x)

    np.testing.assert_allclose(hvp(x), 2 * np.cos(2 * x) * v, rtol=1e-5, atol=1e-5)  # diagonal
    # Both derivatives come from the artifact: the HVP's program calls the exported modules and
    # holds none of loss's own arithmetic (sin, cos, the square), at any depth.
    # 两阶导数都来自产物：HVP 的程序调用导出的模块，任何一层都没有 loss 自己的运算。
    hvp_program = program.of(hvp, x)
    assert hvp_program.on_path("call_exported")
    assert not {"sin", "cos", "integer_pow"} & set(hvp_program.every())


def test_an_exported_function_is_batched_before_export():
    """call_exported 没有批处理规则：vmap 一个导出函数会失败。办法是在导出之前就把批维写进去：
    导出 jax.vmap(f)，并把批维声明为符号维度。
    call_exported has no batching rule: vmapping an exported function fails. The way out is to
    put the batch in before exporting: export jax.vmap(f) with a symbolic batch dimension.
    """
    xs = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    one = export.export(jax.jit(loss))(jax.ShapeDtypeStruct((4,), jnp.float32))
    with raises_exactly(NotImplementedError) as info:
        jax.vmap(one.call)(xs)
    assert "call_exported" in str(info.value)

    spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, 4"), jnp.float32)
    batched = export.export(jax.jit(jax.vmap(loss)))(spec)
    np.testing.assert_allclose(batched.call(xs), jax.vmap(loss)(xs), rtol=1e-6)
    assert batched.call(xs[:1]).shape == (1,)
