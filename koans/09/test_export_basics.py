"""09 · jax.export 导出程序 / the program, with jax.export.

`jax.export.export(jax.jit(f))(*specs)` 把 f 追踪、降级成 StableHLO，得到一个 `Exported`：
它带着输入输出的抽象值、平台、调用约定版本和模块本身，可以序列化成字节（flatbuffers），
在另一个进程里反序列化后直接调用，不需要 f 的 Python 源码。
`jax.export.export(jax.jit(f))(*specs)` traces f and lowers it to StableHLO, giving an
`Exported`: it carries the input and output abstract values, the platforms, the calling
convention version and the module itself, serializes to bytes (flatbuffers), and can be
deserialized and called in another process without f's Python source.
"""

import importlib
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------


def predict(params, x):
    """两层 MLP / a two-layer MLP."""
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"]


def make_params():
    rng = np.random.default_rng(1)
    tree = {"w1": rng.normal(size=(3, 4)), "b1": np.zeros(4), "w2": rng.normal(size=(4, 2))}
    return jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), tree)


def main_arguments(module_text):
    """StableHLO 文本里 @main 的参数列表 / the parameter list of @main in StableHLO text."""
    return re.search(r"func\.func public @main\((.*?)\) ->", module_text).group(1)


# ---- 练习 / koans ----------------------------------------------------------------------


def test_export_wants_a_jitted_function():
    """export 只接受 jax.jit 的结果：导出的是“一次 jit 降级”，静态参数的值被写死在模块里，
    shardings 记在产物上。普通 Python 函数会被拒绝。
    export accepts only the result of jax.jit: what it exports is one jit lowering, with the
    values of static arguments baked into the module and the shardings recorded on the
    artifact. A plain Python function is refused.
    """
    params, x = make_params(), np.ones((5, 3), np.float32)
    with raises_exactly(__) as info:
        export.export(predict)(params, x)
    assert "must be the result of `jit`" in str(info.value)

    exp = export.export(jax.jit(predict))(params, x)
    assert isinstance(exp, export.Exported)
    assert exp.fun_name == "predict"
    np.testing.assert_allclose(exp.call(params, x), jax.jit(predict)(params, x), rtol=1e-6)


def test_donation_is_recorded_but_call_does_not_donate():
    """⚠️ 陷阱 / trap：jit 的 donate_argnums 会记进模块（@main 参数上的 tf.aliasing_output）。
    可是 Exported.call 会不会真的捐出调用方的缓冲区？调用之后看看 x。服务端要确保这块内存被
    捐出，就得让一个会捐出参数的 jit 来调用产物。
    ⚠️ trap: jit's donate_argnums is recorded in the module (tf.aliasing_output on a @main
    parameter). But does Exported.call really give the caller's buffer away? Look at x after
    the call. A server that must get the memory back has the artifact called by a jit that
    donates.
    """

    def double(x):
        return 2 * x

    spec = jax.ShapeDtypeStruct((4,), jnp.float32)
    exp = export.export(jax.jit(double, donate_argnums=0))(spec)
    assert "tf.aliasing_output" in main_arguments(exp.mlir_module())  # recorded

    x = jnp.ones(4)
    np.testing.assert_array_equal(exp.call(x), np.full(4, 2.0))
    assert x.is_deleted() is __

    serve = __
    y = jnp.ones(4)
    np.testing.assert_array_equal(serve(y), np.full(4, 2.0))
    assert y.is_deleted()
    assert "call_exported" in str(jax.make_jaxpr(serve)(jnp.ones(4)))  # it runs the artifact


def test_experimental_export_is_gone():
    """❌ 旧写法 / ✅ 推荐写法：早期的 `jax.experimental.export` 模块和它的
    `export.call_exported(exp)(x)` 已经删除；现在是 `jax.export`，调用写成 Exported 自己的方法。
    ❌ old / ✅ recommended: the early `jax.experimental.export` module and its
    `export.call_exported(exp)(x)` are gone; today it is `jax.export`, and calling is a method of
    the Exported itself.
    """
    with raises_exactly(__):
        importlib.import_module("jax.experimental.export")
    assert not hasattr(export, "call_exported")

    exp = export.export(jax.jit(jnp.cos))(jax.ShapeDtypeStruct((), jnp.float32))
    call = exp.call
    assert float(call(np.float32(0.0))) == 1.0
    assert "call_exported" in str(jax.make_jaxpr(call)(np.float32(0.0)))  # not jnp.cos


def test_exported_carries_flat_avals_platforms_and_devices():
    """Exported 里的 in_avals 是压平后的元组（pytree 结构另存在 in_tree 里，字典按键排序压平），
    out_avals 同理；platforms 默认是导出时的后端；nr_devices 是降级时的设备数。
    An Exported's in_avals is a flat tuple (the pytree structure lives apart in in_tree, and a
    dict flattens in sorted key order); so is out_avals. platforms defaults to the backend at
    export time; nr_devices is the number of devices it was lowered for.
    """
    params = make_params()
    x_spec = jax.ShapeDtypeStruct((5, 3), jnp.float32)
    exp = export.export(jax.jit(predict))(params, x_spec)  # arrays or specs: only shape/dtype count

    in_avals, out_avals = [str(a) for a in exp.in_avals], [str(a) for a in exp.out_avals]
    assert in_avals == __
    assert out_avals == __
    assert exp.platforms == __
    assert exp.nr_devices == 1
    # in_tree rebuilds (args, kwargs) from the flat avals.
    (params_avals, x_aval), kwargs = jax.tree.unflatten(exp.in_tree, exp.in_avals)
    assert sorted(params_avals) == ["b1", "w1", "w2"] and kwargs == {}
    assert str(x_aval) == "float32[5,3]"


def test_unused_arguments_are_dropped_from_the_module():
    """mlir_module() 是可读的 StableHLO 文本。没有用到的参数仍留在 in_avals 里（调用方式不变），
    但不会成为 @main 的参数：module_kept_var_idx 记录了哪些压平后的参数真正传给模块。
    mlir_module() is readable StableHLO text. An unused argument stays in in_avals (the call
    signature does not change) but is not a parameter of @main: module_kept_var_idx records
    which flat arguments really reach the module.
    """

    def scale(x, unused, s):
        return jnp.tanh(x) * s

    spec = jax.ShapeDtypeStruct((3,), jnp.float32)
    exp = export.export(jax.jit(scale))(spec, spec, spec)
    text = exp.mlir_module()

    assert "stablehlo.tanh" in text
    assert len(exp.in_avals) == 3
    assert exp.module_kept_var_idx == __
    assert main_arguments(text).count("%arg") == __
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(exp.call(x, x, 2 * x), np.tanh(x) * 2 * x, rtol=1e-6)


def test_serialize_and_deserialize_round_trip(tmp_path):
    """serialize() 把 Exported 变成字节（flatbuffers 格式，需要 flatbuffers 包）；deserialize
    读回来后 pytree 结构、抽象值都在，call 的调用方式和导出时一样——结构不符会被拒绝。
    serialize() turns an Exported into bytes (flatbuffers, needs the flatbuffers package);
    deserialize reads them back with the pytree structure and avals intact, and call takes the
    same arguments as at export time; a different structure is refused.
    """
    params, x = make_params(), np.linspace(-1.0, 1.0, 15, dtype=np.float32).reshape(5, 3)
    exp = export.export(jax.jit(predict))(params, x)

    blob = exp.serialize()
    assert isinstance(blob, __)
    (tmp_path / "predict.jaxexport").write_bytes(blob)

    again = export.deserialize((tmp_path / "predict.jaxexport").read_bytes())
    assert again.in_avals == exp.in_avals and again.in_tree == exp.in_tree
    np.testing.assert_allclose(again.call(params, x), jax.jit(predict)(params, x), rtol=1e-6)

    without_w2 = {"w1": params["w1"], "b1": params["b1"]}
    with raises_exactly(__) as info:
        again.call(without_w2, x)
    assert "same pytree structure" in str(info.value)
