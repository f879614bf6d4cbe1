"""05 · 已移除的接口与替代写法 / removed APIs and their replacements (JAX 0.12)."""

import importlib
import inspect

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from jax.interpreters import mlir, xla
from jaxlib import xla_client

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import first_failing_stage


def like(x):
    """The result description a callback needs: same shape and dtype as x."""
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def test_host_callback_is_gone():
    """❌ 旧写法 / ✅ 推荐写法: jax.experimental.host_callback（id_tap、id_print、call）已被
    删除；观察值改用 jax.debug 模块里的回调，有副作用的调用用 io_callback，纯函数用 pure_callback。
    jax.experimental.host_callback (id_tap, id_print, call) is gone: observe values with the
    callback of the jax.debug module, call effectful code with io_callback, pure code with
    pure_callback.
    """
    with raises_exactly(__):
        importlib.import_module("jax.experimental.host_callback")

    taps = []
    tap = __  # what id_tap became: a callback that returns nothing

    @jax.jit
    def f(x):
        tap(lambda v: taps.append(np.asarray(v)), x)
        return x * 2

    np.testing.assert_allclose(f(jnp.arange(3.0)), [0.0, 2.0, 4.0])
    jax.effects_barrier()
    np.testing.assert_array_equal(taps[0], [0.0, 1.0, 2.0])


def test_to_dlpack_is_gone():
    """❌ 旧写法 / ✅ 推荐写法: jax.dlpack.to_dlpack(x) 已删除。jax.Array 自己实现了
    __dlpack__，直接把数组交给对方框架的 DLPack 导入函数（NumPy 就有一个），不用先转胶囊。
    jax.dlpack.to_dlpack(x) is gone. A jax.Array implements __dlpack__ itself: hand the array
    straight to the other framework's DLPack importer (NumPy has one), no capsule first.
    """
    x = jnp.arange(4.0)
    with raises_exactly(__):
        jax.dlpack.to_dlpack(x)

    view = __(x)
    np.testing.assert_array_equal(view, [0.0, 1.0, 2.0, 3.0])
    assert view.ctypes.data == x.unsafe_buffer_pointer()  # the same memory, no copy
    # What keeps JAX's buffer alive under the view: the DLPack capsule (a view made through
    # NumPy's buffer protocol would hold a memoryview instead).
    assert type(view.base).__name__ == "PyCapsule"


def test_raw_capsules_are_refused():
    """❌ 旧写法 / ✅ 推荐写法: jax.dlpack.from_dlpack 不再接受裸 DLPack 胶囊（PyCapsule），
    它要一个有 __dlpack__ 和 __dlpack_device__ 的对象：把生产者对象本身交给它。
    jax.dlpack.from_dlpack no longer accepts a raw DLPack capsule (PyCapsule): it wants an object
    with __dlpack__ and __dlpack_device__. Pass the producer object itself.
    """
    a = np.arange(6, dtype=np.float32)
    capsule = a.__dlpack__()
    assert type(capsule).__name__ == "PyCapsule"
    with raises_exactly(__) as info:
        jax.dlpack.from_dlpack(capsule)
    assert "__dlpack__" in str(info.value)

    y = jax.dlpack.from_dlpack(__)
    assert isinstance(y, jax.Array)
    np.testing.assert_array_equal(y, a)


def test_primitive_moved_to_jax_extend():
    """❌ 旧写法 / ✅ 推荐写法: jax.core.Primitive 已从 jax.core 移除；自定义原语的类搬进了
    jax.extend（它需要单独 import）。
    jax.core.Primitive was removed from jax.core; the class of custom primitives moved into
    jax.extend (which needs its own import).
    """
    with raises_exactly(__):
        jax.core.Primitive  # noqa: B018  (the attribute lookup is the test)

    Primitive = __
    twice_p = Primitive("twice")
    twice_p.def_impl(lambda x: 2 * x)
    twice_p.def_abstract_eval(lambda x: jax.core.ShapedArray(x.shape, x.dtype))
    np.testing.assert_allclose(twice_p.bind(jnp.arange(3.0)), [0.0, 2.0, 4.0])
    eqn = jax.make_jaxpr(twice_p.bind)(jnp.arange(3.0)).eqns[0]
    assert eqn.primitive is twice_p


def test_translation_rules_became_mlir_lowerings():
    """❌ 旧写法 / ✅ 推荐写法: xla.register_translation（XLA 翻译规则）已删除；原语的编译规则
    现在是 MLIR lowering：mlir.register_lowering(原语, 规则)，最简单的规则用
    mlir.lower_fun 从一个 JAX 函数生成。
    xla.register_translation (XLA translation rules) is gone; a primitive's compilation rule is
    now an MLIR lowering, mlir.register_lowering(primitive, rule); the simplest rule is made
    from a JAX function by mlir.lower_fun.
    """
    with raises_exactly(__):
        xla.register_translation  # noqa: B018

    cube_p = jax.extend.core.Primitive("cube")
    cube_p.def_abstract_eval(lambda x: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(cube_p, __)

    f = jax.jit(cube_p.bind)
    np.testing.assert_allclose(f(jnp.arange(4.0)), [0.0, 1.0, 8.0, 27.0])
    assert f.lower(jnp.arange(4.0)).as_text().count("stablehlo.multiply") == 2


def test_custom_call_targets_became_xla_ffi():
    """❌ 旧写法 / ✅ 推荐写法: 公开路径 jax.lib.xla_client 和 jax.extend.ffi 都没有了。
    register_custom_call_target 本身还在 jaxlib 自己的模块 jaxlib.xla_client 里：
    jax.ffi.register_ffi_target 只是转调它，默认用类型化的 FFI，它的 api_version 比旧的无类型
    CustomCall（api_version=0）高。现在用 jax.ffi：register_ffi_target 注册处理函数，ffi_call
    调用；ffi_call 降级成 stablehlo.custom_call，处理函数在编译时按名字查找。
    The public paths jax.lib.xla_client and jax.extend.ffi are both gone.
    register_custom_call_target itself lives on in jaxlib's own module jaxlib.xla_client:
    jax.ffi.register_ffi_target merely forwards to it, with the typed FFI by default, whose
    api_version is above the old untyped CustomCall's (api_version=0). Use jax.ffi now:
    register_ffi_target registers a handler, ffi_call calls it; ffi_call lowers to a
    stablehlo.custom_call, and the handler is looked up by name when compiling.
    """
    with raises_exactly(__):
        jax.lib.xla_client  # noqa: B018
    with raises_exactly(__):
        importlib.import_module("jax.extend.ffi")
    assert callable(xla_client.register_custom_call_target)  # still in jaxlib
    legacy = inspect.signature(xla_client.register_custom_call_target).parameters["api_version"]
    typed = inspect.signature(jax.ffi.register_ffi_target).parameters["api_version"]
    assert (legacy.default, typed.default) == (0, __)

    def f(x):
        out = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return jax.ffi.ffi_call("koan_target_never_registered", out)(x)

    x = jnp.ones(3)
    assert "stablehlo.custom_call @koan_target_never_registered" in jax.jit(f).lower(x).as_text()
    assert first_failing_stage(f, x) == __


def test_vectorized_became_vmap_method():
    """❌ 旧写法 / ✅ 推荐写法: pure_callback 的 vectorized=True 已移除。现在它不会报错，而是被
    当成普通关键字参数转交给回调；vmap 时照样失败。用 vmap_method 说明回调如何处理批次。
    pure_callback's vectorized=True was removed. It no longer raises: it is forwarded to the
    callback as an ordinary keyword argument, and vmap still fails. Say how the callback handles
    a batch with vmap_method.
    """
    received = []

    def host_double(v, **kwargs):
        received.append(sorted(kwargs))
        return 2 * np.asarray(v)

    def old(x):
        return jax.pure_callback(host_double, like(x), x, vectorized=True)

    xs = jnp.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(old(xs[0]), [0.0, 2.0])
    assert received == __
    with raises_exactly(__):
        jax.vmap(old)(xs)

    received.clear()

    def new(x):
        return jax.pure_callback(host_double, like(x), x, vmap_method=__)

    np.testing.assert_allclose(jax.vmap(new)(xs), 2 * xs)
    assert received == [[]]  # called once, for the whole batch, and without stray keywords
