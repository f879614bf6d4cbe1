"""09 · 自定义 pytree 节点的序列化 / serializing a custom pytree node.

产物的调用约定包括输入和输出的 pytree 结构（in_tree / out_tree）。jax.export 自己会写字典、列表、
元组和 None；别的 pytree 节点类型（自己的 dataclass、NNX 的 Param）要先登记序列化：给它一个
名字，再说明它的辅助数据（aux data，节点里静态的那部分）怎么变成字节、怎么变回来。辅助数据是
调用约定的一部分：它被写死在产物里。导出方和使用方两个进程都要登记。

An artifact's calling convention includes the pytree structure of its inputs and outputs
(in_tree / out_tree). jax.export itself writes dicts, lists, tuples and None; any other pytree
node type (your own dataclass, NNX's Param) must first be registered for serialization: a name
for it, and how its aux data (the static part of the node) turns into bytes and back. The aux
data is part of the calling convention: the artifact bakes it in. Both the exporting and the
consuming process must register the type.
"""

import dataclasses
import inspect
import json  # noqa: F401  (register_for_export may use it)
import textwrap
import uuid

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import run_python

# ---- 给定代码 / given code -------------------------------------------------------------


def make_layer_class():
    """造一个新的 pytree 节点类型 Layer(w, b, config)：w、b 是数组（子节点），config 是
    (激活函数名, 缩放) 元组，作为辅助数据。每次调用都是一个新类：一个类型的序列化登记在一个
    进程里只能做一次。
    Makes a fresh pytree node type Layer(w, b, config): w and b are arrays (children), config a
    (activation name, scale) tuple kept as aux data. Each call makes a new class: a type's
    serialization can be registered only once per process.
    """

    @dataclasses.dataclass
    class Layer:
        w: jax.Array
        b: jax.Array
        config: tuple

    jax.tree_util.register_pytree_node(
        Layer,
        lambda layer: ((layer.w, layer.b), layer.config),
        lambda config, children: Layer(*children, config),
    )
    return Layer


def apply(layer, x):
    activation, scale = layer.config
    act = {"tanh": jnp.tanh, "relu": jax.nn.relu}[activation]
    return scale * act(x @ layer.w + layer.b)


def fresh_name():
    """每次运行一个新的序列化名字 / a serialized name of its own for every run."""
    return f"jaxkoans.Layer.{uuid.uuid4().hex}"


# ---- 你来实现 / your code ---------------------------------------------------------------


def register_for_export(cls, name):
    """用 export.register_pytree_node_serialization 把 pytree 节点类型 cls 登记给 jax.export，
    序列化名字是 name。cls 的辅助数据是一个 (str, float) 元组：把它写成字节，再原样读回来——
    读回的必须与原来的相等，类型也一样（列表不等于元组，否则调用时 pytree 结构对不上）。
    返回 cls。它还会被原样复制进另一个进程：那里只导入了 json、jax 和 jax.export，别的 import
    写在函数里。大约 8 行。
    Register the pytree node type cls with jax.export through
    export.register_pytree_node_serialization, under the serialized name `name`. cls's aux data
    is a (str, float) tuple: write it as bytes and read it back as it was: equal to the original
    and of the same type (a list is not a tuple, and the call's pytree structure would not
    match). Return cls. It is also copied verbatim into another process, which imports only
    json, jax and jax.export: do any other import inside the function. About 8 lines.
    """

    def to_bytes(config):
        activation, scale = config
        return json.dumps([activation, scale]).encode("utf-8")

    def from_bytes(data):
        activation, scale = json.loads(data.decode("utf-8"))
        return (activation, float(scale))

    export.register_pytree_node_serialization(
        cls, serialized_name=name, serialize_auxdata=to_bytes, deserialize_auxdata=from_bytes
    )
    return cls


# ---- 检查 / checks ----------------------------------------------------------------------


def test_registered_nodes_round_trip_with_their_aux_data():
    """写 register_for_export：登记之前，对 Layer 导出、在本进程里调用都可以，序列化却不行。
    登记之后产物能序列化、读回；读回的 in_tree 与原来的相同，连辅助数据也一样。辅助数据写死在
    产物里：用另一种 config 的 Layer 去调用，调用方式就对不上。
    Write register_for_export: before registering, exporting over a Layer and calling it in this
    process both work, but serializing does not. Once registered, the artifact serializes and
    reads back, with the same in_tree as before, aux data included. The aux data is baked into
    the artifact: a Layer of another config does not fit its calling convention.
    """
    rng = np.random.default_rng(5)
    w, b = rng.normal(size=(3, 2)).astype(np.float32), np.float32([0.1, -0.2])
    x = rng.normal(size=(4, 3)).astype(np.float32)
    x_spec = jax.ShapeDtypeStruct((4, 3), jnp.float32)

    unregistered = make_layer_class()
    plain = unregistered(w, b, ("tanh", 0.5))
    exp = export.export(jax.jit(apply))(plain, x_spec)
    np.testing.assert_allclose(exp.call(plain, x), apply(plain, x), rtol=1e-6)
    with raises_exactly(ValueError) as info:
        exp.serialize()
    assert "unregistered type" in str(info.value)

    Layer = make_layer_class()
    assert register_for_export(Layer, fresh_name()) is Layer
    for config in (("tanh", 0.5), ("relu", 1 / 3)):  # 1/3: no short binary fraction
        layer = Layer(w, b, config)
        exp = export.export(jax.jit(apply))(layer, x_spec)
        again = export.deserialize(exp.serialize())
        assert again.in_tree == exp.in_tree  # the aux data came back as it was
        np.testing.assert_allclose(again.call(layer, x), apply(layer, x), rtol=1e-6)

    refused = ""
    try:
        again.call(Layer(w, b, ("tanh", 0.5)), x)  # exported for ("relu", 1 / 3)
    except Exception as error:  # noqa: BLE001  (only its message matters here)
        refused = str(error)
    assert "structural differences" in refused


# The consuming process: the given class and the learner's registration, then a main.
CONSUMER = """
import sys

import numpy as np

directory, name = sys.argv[1], sys.argv[2]
Layer = make_layer_class()
blob = bytearray(open(f"{directory}/layer.jaxexport", "rb").read())
try:
    export.deserialize(blob)
except Exception as error:  # only its message is checked / 只核对消息
    print("before registering:", "unregistered type" in str(error))
register_for_export(Layer, name)
again = export.deserialize(blob)
w, b, x = (np.load(f"{directory}/{k}.npy") for k in ("w", "b", "x"))
np.save(f"{directory}/y.npy", again.call(Layer(w, b, ("relu", 0.7)), x))
"""


def test_the_consumer_registers_the_same_name(tmp_path):
    """使用方是另一个进程：它读得回产物，前提是它也用同一个名字登记了同一种节点。没登记时
    deserialize 就失败，因为产物里只写着那个名字。
    The consumer is another process: it reads the artifact back only once it too has registered
    the same kind of node under the same name. Before that, deserialize fails, for the artifact
    holds nothing but that name.
    """
    rng = np.random.default_rng(6)
    w, b = rng.normal(size=(3, 2)).astype(np.float32), np.float32([0.3, 0.0])
    x = rng.normal(size=(4, 3)).astype(np.float32)
    name = fresh_name()
    Layer = register_for_export(make_layer_class(), name)
    layer = Layer(w, b, ("relu", 0.7))
    exp = export.export(jax.jit(apply))(layer, jax.ShapeDtypeStruct((4, 3), jnp.float32))
    (tmp_path / "layer.jaxexport").write_bytes(exp.serialize())
    for key, value in (("w", w), ("b", b), ("x", x)):
        np.save(tmp_path / f"{key}.npy", value)

    header = "import dataclasses\nimport json\n\nimport jax\nimport jax.numpy as jnp\n"
    header += "from jax import export\n\n"
    given = (make_layer_class, register_for_export)
    sources = [textwrap.dedent(inspect.getsource(f)) for f in given]
    script = tmp_path / "consumer.py"
    script.write_text(header + "\n\n".join(sources) + CONSUMER, encoding="utf-8")
    out = run_python("-I", str(script), str(tmp_path), name)
    assert "before registering: True" in out
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), apply(layer, x), rtol=1e-6)
