"""05 · C++ 内核与 XLA FFI / a C++ kernel through the XLA FFI.

csrc/leaky_sum.cc holds the kernel: a leaky running sum along the last axis of a float32
array (every leading axis is a batch axis), y[i] = decay * y[i - 1] + x[i], or from the end
backwards when reverse is true. jaxkoans.api.cbuild compiles it once with this machine's C++
compiler against jax.ffi.include_dir() into build/ffi/; ctypes loads it. Without a C++
compiler these koans are skipped, like those of test_ffi_sharding_and_aliases.py (whose
custom_partitioning koan checks its rule on a jnp twin before it skips).
"""

from functools import partial

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.interpreters import mlir
from jax.test_util import check_grads

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api import cbuild
from jaxkoans.api.probes import first_failing_stage


def like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def leaky_sum_numpy(x, decay, reverse=False):
    """The plain reference: a Python loop over the last axis."""
    x = np.asarray(x, dtype=np.float64)
    y, carry = np.empty_like(x), np.zeros(x.shape[:-1])
    order = range(x.shape[-1] - 1, -1, -1) if reverse else range(x.shape[-1])
    for i in order:
        carry = decay * carry + x[..., i]
        y[..., i] = carry
    return y


def leaky_sum_jnp(x, decay, reverse=False):
    """The same in JAX (differentiable), to check gradients against."""

    def step(carry, xi):
        carry = decay * carry + xi
        return carry, carry

    _, ys = lax.scan(step, jnp.zeros(x.shape[:-1]), jnp.moveaxis(x, -1, 0), reverse=reverse)
    return jnp.moveaxis(ys, 0, -1)


def test_register_a_cpp_handler_and_call_it():
    """共享库导出一个 XLA FFI 处理函数（一个 C 符号，名字写在 csrc/leaky_sum.cc 里）。
    jax.ffi.pycapsule 把它包成胶囊，register_ffi_target 以一个名字注册到某个平台；ffi_call
    按名字调用，输出的形状和 dtype 由调用方声明（内核无法告诉 JAX）。
    The shared library exports an XLA FFI handler, a C symbol whose name csrc/leaky_sum.cc
    gives. jax.ffi.pycapsule wraps it in a capsule, register_ffi_target registers it under a
    name for a platform; ffi_call calls it by name, and the caller declares the output's shape
    and dtype (the kernel cannot tell JAX).
    """
    lib = cbuild.ffi_library("leaky_sum.cc")
    capsule = jax.ffi.pycapsule(__)
    jax.ffi.register_ffi_target("koans_leaky_sum_register", capsule, platform=__)
    x = jnp.array([1.0, 2.0, 3.0, 4.0])
    call = jax.ffi.ffi_call("koans_leaky_sum_register", like(x))
    forward = call(x, decay=np.float32(0.5), reverse=False)
    np.testing.assert_allclose(forward, leaky_sum_numpy(x, 0.5))
    np.testing.assert_allclose(call(x, decay=np.float32(0.5), reverse=True), __)


def test_attributes_must_have_the_kernels_dtype():
    """⚠️ 陷阱 / trap: 关键字参数成为 FFI 属性，类型必须与 C++ 绑定完全一致。.Attr<float>
    要 F32，而 Python float 被当成 F64（HLO 里看得到）。预测：类型不符在 lower、compile、
    execute 哪一步暴露、抛出哪种异常？np.float32 标量是对的；另外三种写法（float16 标量、0 维
    float32 数组、int32 标量）又各在哪一步失败？
    Keyword arguments become FFI attributes, whose types must match the C++ binding exactly.
    .Attr<float> wants F32, but a Python float arrives as F64 (the HLO shows it). Predict at
    which stage (lower, compile, execute) the mismatch surfaces and what it raises. An np.float32
    scalar is right; and at which stage does each of three other spellings fail (a float16
    scalar, a 0-d float32 array, an int32 scalar)?
    """
    target = cbuild.ffi_target("koans_leaky_sum_attrs", "leaky_sum.cc", "LeakySum")
    x = jnp.arange(4.0)

    def with_decay(decay):
        return lambda x: jax.ffi.ffi_call(target, like(x))(x, decay=decay, reverse=False)

    hlo = jax.jit(with_decay(0.5)).lower(x).as_text()
    assert "decay = 5.000000e-01 : f64" in hlo  # what the Python float became
    assert first_failing_stage(with_decay(0.5), x) == __
    with raises_exactly(__) as info:
        jax.jit(with_decay(0.5))(x)
    assert "expected F32 but got F64" in str(info.value)

    good = with_decay(np.float32(0.5))
    np.testing.assert_allclose(jax.jit(good)(x), leaky_sum_numpy(x, 0.5))
    assert "decay = 5.000000e-01 : f32" in jax.jit(good).lower(x).as_text()
    others = {
        "f16 scalar": np.float16(0.5),
        "0-d f32 array": np.array(0.5, np.float32),
        "i32": np.int32(1),
    }
    stages = {name: first_failing_stage(with_decay(value), x) for name, value in others.items()}
    assert stages == __
    # Attributes are static: a JAX scalar cannot be one.
    with pytest.raises(TypeError):
        with_decay(jnp.float32(0.5))(x)


def test_the_kernel_checks_its_operands_when_it_runs():
    """XLA 不知道处理函数的签名，只知道它的名字。预测三种输入各在哪一步出错：一个 f32 矩阵、
    一个 int32 向量、一个没人注册的目标名；内核自己返回的错误（ffi::Error）又以哪种异常
    抛出（它带着内核的消息）？
    XLA does not know the handler's signature, only its name. Predict the stage at which each
    goes wrong: an f32 matrix, an int32 vector, a target name nobody registered; and which
    exception carries the kernel's own error (ffi::Error), with the kernel's message.
    """
    target = cbuild.ffi_target("koans_leaky_sum_errors", "leaky_sum.cc", "LeakySum")

    def run(x, name=target):
        return jax.ffi.ffi_call(name, like(x))(x, decay=np.float32(0.5), reverse=False)

    unknown = partial(run, name="koans_no_such_target")
    stages = {
        "f32 matrix": first_failing_stage(run, jnp.ones((2, 3))),
        "i32 vector": first_failing_stage(run, jnp.arange(4)),
        "no handler": first_failing_stage(unknown, jnp.ones(3)),
    }
    assert stages == __

    with raises_exactly(__) as info:
        jax.jit(run)(jnp.float32(1.0))  # a 0-d input: the kernel returns InvalidArgument
    assert "the input must have at least one axis" in str(info.value)


def test_vmap_of_an_ffi_call_needs_a_vmap_method():
    """和 pure_callback 一样，ffi_call 要有 vmap_method 才能 vmap。内核本来就把前面的轴当
    批次。预测：三种 vmap_method 各让 HLO 里有几个 while 循环、几次内核调用？
    Like pure_callback, ffi_call needs a vmap_method to be vmapped. The kernel already treats
    leading axes as batch axes. Predict, for each of three vmap_methods, how many while loops
    and kernel calls the HLO holds.
    """
    target = cbuild.ffi_target("koans_leaky_sum_vmap", "leaky_sum.cc", "LeakySum")

    def leaky(x, method):
        call = jax.ffi.ffi_call(target, like(x), vmap_method=method)
        return call(x, decay=np.float32(0.5), reverse=False)

    xs = jnp.arange(12.0).reshape(3, 4)
    with raises_exactly(__):
        jax.vmap(partial(leaky, method=None))(xs)

    def shape_of(method):
        hlo = jax.jit(jax.vmap(partial(leaky, method=method))).lower(xs).as_text()
        return hlo.count("stablehlo.while"), hlo.count("stablehlo.custom_call")

    methods = ("sequential", "expand_dims", "broadcast_all")
    for method in methods:
        got = jax.vmap(partial(leaky, method=method))(xs)
        np.testing.assert_allclose(got, leaky_sum_numpy(xs, 0.5))
    assert {m: shape_of(m) for m in methods} == __


def _kernel(x, decay, reverse):
    call = jax.ffi.ffi_call("koans_leaky_sum_vjp", like(x), vmap_method="broadcast_all")
    return call(x, decay=np.float32(decay), reverse=reverse)


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def leaky_sum(x, decay):
    """The kernel as a differentiable JAX function (decay is a static float)."""
    return _kernel(x, decay, reverse=False)


def leaky_sum_fwd(x, decay):
    """Forward pass of the custom_vjp: return (output, residuals). The map is linear in x, so
    the backward pass needs nothing from the forward pass (residuals can be None). 1–2 lines.
    前向：返回 (输出, 残差)。映射对 x 线性，反向不需要前向的任何东西（残差可以是 None）。
    """
    todo("leaky_sum_fwd: 输出和残差 / output and residuals")


def leaky_sum_bwd(decay, residuals, ct):
    """Backward pass: return a 1-tuple with the cotangent of x. The transpose of the
    recurrence is the same recurrence run backwards: call the same kernel, with reverse
    flipped (the kernel is its own backward kernel). 1 line.
    反向：返回 x 的余切组成的 1 元组。递推的转置就是反向运行的同一个递推：同一个内核，reverse 取反。
    """
    todo("leaky_sum_bwd: 反向内核 / the backward kernel")


leaky_sum.defvjp(leaky_sum_fwd, leaky_sum_bwd)


def test_custom_vjp_makes_the_kernel_differentiable():
    """⚠️ 陷阱 / trap: JAX 不知道内核算的是什么，对 ffi_call 求导直接报错。用 custom_vjp 给它
    反向规则：写出 leaky_sum_fwd 和 leaky_sum_bwd（反向内核就是 reverse 取反的同一个内核）。
    JAX has no idea what the kernel computes, so differentiating an ffi_call raises. Give it a
    backward rule with custom_vjp: write leaky_sum_fwd and leaky_sum_bwd (the backward kernel is
    the same kernel with reverse flipped). The gradient's compiled program is checked: the
    kernel's custom call must be in it, forwards and backwards, with no jnp scan standing in.
    梯度的程序也会被检查：内核的 custom_call 必须出现在其中，前向和反向各一次，不能用 jnp 的 scan 代替。
    """
    cbuild.ffi_target("koans_leaky_sum_vjp", "leaky_sum.cc", "LeakySum")
    x = jnp.array([0.5, -1.0, 2.0, 0.25, 1.0])
    with raises_exactly(__) as info:
        jax.grad(lambda x: _kernel(x, 0.8, reverse=False).sum())(x)
    assert "custom_vjp" in str(info.value)

    def loss(x):
        return jnp.sum(jnp.tanh(leaky_sum(x, 0.8)) ** 2)

    def reference_loss(x):
        return jnp.sum(jnp.tanh(leaky_sum_jnp(x, 0.8)) ** 2)

    np.testing.assert_allclose(leaky_sum(x, 0.8), leaky_sum_numpy(x, 0.8), rtol=1e-6)
    np.testing.assert_allclose(jax.grad(loss)(x), jax.grad(reference_loss)(x), rtol=1e-5)
    ct = jnp.array([1.0, 0.0, 0.0, 0.0, -1.0])
    forward, pullback = jax.vjp(lambda v: leaky_sum(v, 0.8), x)  # forward: what leaky_sum_fwd returned
    (vjp,) = pullback(ct)
    np.testing.assert_allclose(forward, leaky_sum_numpy(x, 0.8), rtol=1e-6)
    np.testing.assert_allclose(vjp, leaky_sum_numpy(ct, 0.8, reverse=True), rtol=1e-6)
    check_grads(lambda v: leaky_sum(v, 0.8), (x,), order=1, modes=["rev"])
    # The gradient's program: the kernel runs forwards in leaky_sum_fwd and backwards in leaky_sum_bwd.
    hlo = jax.jit(jax.grad(loss)).lower(x).as_text()
    calls = [line for line in hlo.splitlines() if "stablehlo.custom_call @koans_leaky_sum_vjp" in line]
    forwards = [line for line in calls if "reverse = false" in line]
    backwards = [line for line in calls if "reverse = true" in line]
    assert forwards and backwards, "两个规则都调用内核 / both rules call the kernel"
    assert "stablehlo.while" not in hlo, "不要用 scan 模仿内核 / no scan standing in for the kernel"


def test_a_primitive_can_lower_to_an_ffi_target():
    """✅ 推荐写法 / recommended: 自定义原语的 lowering 可以直接是一次 FFI 调用：jax.ffi 能从
    目标名生成这样一条 lowering 规则，用 mlir.register_lowering 为 "cpu" 注册。原语的 params
    变成 FFI 属性（类型同样要和绑定一致）。只为 CPU 注册时，为 TPU lowering 会怎样？
    A custom primitive's lowering can be an FFI call itself: jax.ffi makes such a lowering rule
    from a target's name, and mlir.register_lowering registers it for "cpu". The primitive's
    params become FFI attributes (of the binding's types again). Registered for CPU only, what
    happens when lowering for TPU?
    """
    target = cbuild.ffi_target("koans_leaky_sum_primitive", "leaky_sum.cc", "LeakySum")
    prim = jax.extend.core.Primitive("leaky_sum_ffi")
    prim.def_abstract_eval(lambda x, *, decay, reverse: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(prim, __, platform="cpu")

    def f(x):
        return prim.bind(x, decay=np.float32(0.25), reverse=True)

    x = jnp.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(jax.jit(f)(x), leaky_sum_numpy(x, 0.25, reverse=True))
    assert f"stablehlo.custom_call @{target}" in jax.jit(f).lower(x).as_text()
    with raises_exactly(__) as info:
        jax.jit(f).trace(x).lower(lowering_platforms=("tpu",))
    assert "platform tpu" in str(info.value)


def test_capstone_the_kernel_under_jit_vmap_and_grad():
    """综合 / capstone: 带 custom_vjp 的内核可以任意组合 jit、vmap、grad。预测：逐样本梯度的
    HLO 里内核被调用几次、哪一次是 reverse=true？
    The kernel with its custom_vjp composes with jit, vmap and grad. Predict: how many times
    does the per-example gradient's HLO call the kernel, and which call has reverse = true?
    """
    cbuild.ffi_target("koans_leaky_sum_vjp", "leaky_sum.cc", "LeakySum")

    def loss(x):
        return jnp.mean((leaky_sum(x, 0.9) - 1.0) ** 2)

    def reference_loss(x):
        return jnp.mean((leaky_sum_jnp(x, 0.9) - 1.0) ** 2)

    xs = jnp.cos(jnp.arange(20.0)).reshape(4, 5)
    per_example = jax.jit(jax.vmap(jax.grad(loss)))
    np.testing.assert_allclose(per_example(xs), jax.vmap(jax.grad(reference_loss))(xs), rtol=1e-5)

    hlo = per_example.lower(xs).as_text()
    kernel = "stablehlo.custom_call @koans_leaky_sum_vjp"
    calls = [line for line in hlo.splitlines() if kernel in line]
    assert len(calls) == __
    assert ["reverse = true" in line for line in calls] == __
    assert all("tensor<4x5xf32>" in line for line in calls)  # the whole batch in each call
