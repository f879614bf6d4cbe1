"""09 · 导出真实的模型并提供服务 / exporting real models and serving them.

真实的部署比一个函数多三件事：模型是 Flax NNX 的对象（它的状态不是普通的 pytree），程序
可能是分片的（产物记着设备数和分片方式，服务端必须对得上），请求的批大小各不相同（每个
新形状都要编译一次，所以要分桶、预热）。
A real deployment adds three things to one function: the model is a Flax NNX object (its
state is not a plain pytree), the program may be sharded (the artifact records its device
count and shardings, and the server must match them), and requests come in every batch size
(each new shape compiles once, so pad to buckets and warm up).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax import export
from jax.sharding import AbstractMesh, AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import counting_compiles

# ---- 给定代码 / given code -------------------------------------------------------------


class Classifier(nnx.Module):
    """一个小的 NNX 模型 / a small NNX model."""

    def __init__(self, rngs):
        self.hidden = nnx.Linear(3, 8, rngs=rngs)
        self.out = nnx.Linear(8, 2, rngs=rngs)

    def __call__(self, x):
        return self.out(jax.nn.relu(self.hidden(x)))


def batch(n, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 3)).astype(np.float32)


def mesh_of(devices):
    """一维的 "data" 网格（Explicit 轴）/ a 1-D "data" mesh with an Explicit axis."""
    return Mesh(np.array(devices), ("data",), axis_types=(AxisType.Explicit,))


def layer(w, x):
    """导出方的源码 / the exporting side's source."""
    return jnp.tanh(x @ w)


def export_tanh(mesh, w_spec):
    """导出 tanh(x @ w)（序列化再读回）：x 是 [8, 3]，行沿 "data" 切开；w 是 [3, 2]，按 w_spec。
    Export tanh(x @ w), serialized and read back: x is [8, 3] with its rows split over "data",
    w is [3, 2] sharded by w_spec."""
    on_w, rows = NamedSharding(mesh, w_spec), NamedSharding(mesh, P("data", None))
    forward = jax.jit(lambda w, x: jnp.tanh(x @ w), in_shardings=(on_w, rows))
    specs = (
        jax.ShapeDtypeStruct((3, 2), jnp.float32, sharding=on_w),
        jax.ShapeDtypeStruct((8, 3), jnp.float32, sharding=rows),
    )
    return export.deserialize(export.export(forward)(*specs).serialize())


# ---- 你来实现 / your code ---------------------------------------------------------------


def export_nnx(model, x_spec):
    """把 NNX 模型导出成一个能序列化的 Exported，调用方式是 exp.call(params, x)，其中 params
    是 nnx.to_pure_dict(nnx.state(model))：只有字典和数组的树。做法：nnx.split 得到 graphdef
    和 state；被导出的函数收到纯字典后用 nnx.replace_by_pure_dict 填回一份 state，再
    nnx.merge 出模型来调用。大约 8 行。

    Export the NNX model as a serializable Exported called as exp.call(params, x), where params
    is nnx.to_pure_dict(nnx.state(model)): a tree of dicts and arrays only. The way: nnx.split
    gives graphdef and state; the exported function receives the pure dict, fills a copy of the
    state with nnx.replace_by_pure_dict, and calls the model nnx.merge builds. About 8 lines.
    """
    todo("export_nnx: split, to_pure_dict, replace_by_pure_dict, merge / 拆开、纯字典、填回、合并")


def serving_mesh(exp, devices):
    """只凭产物搭出服务端的网格：不给网格时，exp.in_shardings_jax() 返回导出时记下的
    NamedSharding，它们的 .mesh 是一个 AbstractMesh（轴名 axis_names、轴长 axis_sizes、
    轴类型 axis_types，没有设备）。用 devices 里的设备（够用就行，多的不要）排成一个轴名、轴长、
    轴类型都一样的 Mesh。大约 3 行。
    Build the server's mesh from the artifact alone: without a mesh, exp.in_shardings_jax()
    returns the NamedShardings recorded at export, whose .mesh is an AbstractMesh (axis_names,
    axis_sizes and axis_types, no devices). Lay devices out (as many as needed, no more) as a
    Mesh with the same axis names, sizes and types. About 3 lines.
    """
    todo("serving_mesh: 按产物记下的网格排设备 / the recorded mesh, on these devices")


def export_for_devices(fn, exp, devices):
    """产物定死了设备数：要在 len(devices) 个设备上服务，就从源码 fn 重新导出。输入照产物的原样：
    形状和 dtype 来自 exp.in_avals，PartitionSpec 来自 exp.in_shardings_jax()（不给网格时记下的
    NamedSharding 的 .spec），用 exp.in_tree 放回原位；网格是一维的，轴名、轴类型与产物记下的
    AbstractMesh 相同，轴长是 len(devices)，用的是 devices。返回新的 Exported。大约 8 行。
    An artifact fixes its device count: to serve on len(devices) devices, export the source fn
    again. The inputs are the artifact's: shapes and dtypes from exp.in_avals, PartitionSpecs
    from exp.in_shardings_jax() (the .spec of each NamedSharding recorded, no mesh given), put
    back in place with exp.in_tree; the mesh is 1-D with the axis name and axis type of the
    artifact's AbstractMesh, of size len(devices), over devices. Return the new Exported.
    About 8 lines.
    """
    todo("export_for_devices: the recorded specs on a new mesh, export fn again")


def bucket_server(exp, buckets):
    """返回 serve(x)：把 x 的批（第 0 维）用 0 补到 buckets 里不小于它的最小那个，调用
    exp.call，再切掉补出来的行，返回 NumPy 数组（对 jax.Array 切片会为每个大小再编译一次）。
    buckets 是升序的 Python int 列表，x 的批不会超过最大的桶。
    大约 6 行。
    Return serve(x): pad x's batch (axis 0) with zeros up to the smallest bucket that is not
    smaller, call exp.call, and cut the padded rows off again. buckets is an ascending list of
    Python ints, and x's batch never exceeds the largest. About 6 lines.
    """
    todo("bucket_server: pad to a bucket, call, cut / 补齐、调用、切掉")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_an_nnx_model_exports_over_a_pure_dict():
    """⚠️ 陷阱 / trap：直接对 nnx.State 导出可以，调用也可以，但序列化会失败：pytree 结构里有
    NNX 的 Param 类型，jax.export 不知道怎么写它。把状态换成纯字典（to_pure_dict）再导出，
    产物里就只剩字典和数组，新进程里不需要模型的类也能调用；参数是调用时传进去的，换一组权重
    也用同一个产物。
    ⚠️ trap: exporting over an nnx.State works and so does calling it, but serializing fails:
    the pytree structure holds NNX's Param type, which jax.export cannot write. Export over a
    pure dict (to_pure_dict) instead and the artifact holds only dicts and arrays, callable in a
    fresh process without the model's class; the parameters are passed at the call, so other
    weights use the same artifact.
    """
    model = Classifier(nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    over_state = export.export(jax.jit(lambda s, x: nnx.merge(graphdef, s)(x)))(state, batch(4))
    np.testing.assert_allclose(over_state.call(state, batch(4)), model(batch(4)), rtol=1e-6)
    with raises_exactly(__) as info:
        over_state.serialize()
    assert "unregistered type" in str(info.value) and "Param" in str(info.value)

    (b,) = export.symbolic_shape("b")
    exp = export_nnx(model, jax.ShapeDtypeStruct((b, 3), jnp.float32))
    again = export.deserialize(exp.serialize())
    assert "Param" not in str(again.in_tree)
    params = nnx.to_pure_dict(nnx.state(model))
    for n in (1, 5):
        np.testing.assert_allclose(again.call(params, batch(n)), model(batch(n)), rtol=1e-6)
    other = Classifier(nnx.Rngs(7))  # other weights, the same artifact / 换一组权重，同一个产物
    other_params = nnx.to_pure_dict(nnx.state(other))
    np.testing.assert_allclose(again.call(other_params, batch(5)), other(batch(5)), rtol=1e-6)


def test_a_sharded_export_fixes_the_device_count():
    """写 serving_mesh。分片导出的产物记着设备数（nr_devices）和每个输入的分片：模块里的
    sdy.sharding 属性，以及 in_shardings_jax() 给出的、建在 AbstractMesh 上的 NamedSharding。
    2026 年 3 月以前的指南读的字段 in_shardings_hlo 在今天的产物里每一项都是 None。服务端只凭
    产物就能搭出轴名、轴长、轴类型都相同的网格，用的可以是别的设备；in_shardings_jax(网格) 在
    它上面重建分片。一维的 Explicit 网格和二维的 Auto 网格的产物都这样服务。设备数不同的网格和
    调用被拒绝。
    Write serving_mesh. A sharded export records its device count (nr_devices) and each
    input's sharding: the sdy.sharding attributes in the module, and the NamedShardings over an
    AbstractMesh that in_shardings_jax() returns. The field in_shardings_hlo, which guides
    written before March 2026 read, holds None for every input in today's artifact. From the
    artifact alone a server builds a mesh with the same axis names, sizes and types, on other
    devices too, and in_shardings_jax(mesh) rebuilds the shardings on it. Artifacts of a 1-D
    Explicit mesh and of a 2-D Auto mesh are served alike. A mesh or a call with another
    device count is refused.
    """
    devices = jax.devices()
    exp = export_tanh(mesh_of(devices[:4]), P())
    assert exp.nr_devices == __
    module = exp.mlir_module()
    assert 'sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>' in module  # x's rows over "data"
    assert exp.in_shardings_hlo == (None, None)  # the old field: empty in today's artifacts
    assert all(isinstance(s.mesh, AbstractMesh) for s in exp.in_shardings_jax())  # no devices
    data_model = Mesh(np.array(devices[:4]).reshape(2, 2), ("data", "model"))  # Auto axes
    exp_2d = export_tanh(data_model, P(None, "model"))  # w's columns over "model"

    w, x = np.ones((3, 2), np.float32), batch(8)
    for artifact in (exp, exp_2d):
        for spare in (devices[4:], devices[1::2]):  # other devices / 别的设备
            server = serving_mesh(artifact, spare)
            assert server.devices.size == artifact.nr_devices
            shardings = artifact.in_shardings_jax(server)
            placed = (jax.device_put(a, s) for a, s in zip((w, x), shardings, strict=True))
            y = artifact.call(*placed)
            np.testing.assert_allclose(y, np.tanh(x @ w), rtol=1e-6)
            assert y.sharding.device_set == set(spare)

    small = mesh_of(devices[:2])
    with raises_exactly(__) as info:
        exp.in_shardings_jax(small)
    assert "does not match the mesh used for export" in str(info.value)
    on_two = [jax.device_put(a, NamedSharding(small, p)) for a, p in ((w, P()), (x, P("data")))]
    with raises_exactly(__) as info:
        exp.call(*on_two)
    assert "size of the mesh 4" in str(info.value)


@pytest.mark.parametrize(
    ("split_rows", "axis_type"),
    [(True, AxisType.Explicit), (False, AxisType.Auto)],
    ids=["rows-explicit", "replicated-auto"],
)
def test_another_device_count_needs_a_new_export(split_rows, axis_type):
    """写 export_for_devices。在 4 个设备的网格上导出的产物，放到有 8 个设备的服务端上：用上全部 8 个
    设备的参数去调用它，会被拒绝。不带分片导出的产物记着几个设备？拿 8 个设备上按行切开的参数去
    调用它，结果的每一块是什么形状？要让分片的模型用上 8 个设备，得回到源码、按产物记下的输入
    （形状、dtype、PartitionSpec、轴名、轴类型）重新导出。另一个产物，形状和轴名都不同，也照样
    重新导出。
    Write export_for_devices. An artifact exported on a 4-device mesh meets a server with 8: called
    with arguments on all 8 devices, it is refused. How many devices does an artifact exported
    without shardings record? Called with arguments split by rows over the 8 devices, what shape
    is each piece of its result? For the sharded model to use all 8 devices, go back to the
    source and export again with the inputs the artifact records (shapes, dtypes,
    PartitionSpecs, axis names and types). An artifact with other shapes and another axis name
    is exported again the same way.
    """
    devices = jax.devices()

    def data_mesh(devices, name="data"):
        return Mesh(np.array(devices), (name,), axis_types=(axis_type,))

    def x_spec_on(name):  # x's rows over the axis, or x replicated / x 的行沿这个轴切开，或复制
        return P(name, None) if split_rows else P()

    x_spec = x_spec_on("data")

    four_devices = data_mesh(devices[:4])
    specs = (
        jax.ShapeDtypeStruct((3, 2), jnp.float32, sharding=NamedSharding(four_devices, P())),
        jax.ShapeDtypeStruct((8, 3), jnp.float32, sharding=NamedSharding(four_devices, x_spec)),
    )
    four = export.deserialize(export.export(jax.jit(layer))(*specs).serialize())

    w, x = np.full((3, 2), 0.5, np.float32), batch(8)
    everywhere = data_mesh(devices)
    on_eight = [
        jax.device_put(w, NamedSharding(everywhere, P())),
        jax.device_put(x, NamedSharding(everywhere, x_spec)),
    ]
    with raises_exactly(__) as info:
        four.call(*on_eight)
    assert {"4", "8"} <= set(re.findall(r"\d+", str(info.value)))  # the two device counts

    # An export without shardings. 不带分片的导出。
    plain = [jax.ShapeDtypeStruct(s.shape, s.dtype) for s in specs]
    single = export.deserialize(export.export(jax.jit(layer))(*plain).serialize())
    assert single.nr_devices == __
    rows = jax.device_put(x, NamedSharding(everywhere, P("data", None)))
    y = single.call(on_eight[0], rows)
    np.testing.assert_allclose(y, np.tanh(x @ w), rtol=1e-6)
    assert y.addressable_shards[0].data.shape == __

    eight = export_for_devices(layer, four, devices)
    assert eight.nr_devices == 8
    assert [str(a) for a in eight.in_avals] == [str(a) for a in four.in_avals]
    assert [s.spec for s in eight.in_shardings_jax()] == [s.spec for s in four.in_shardings_jax()]
    recorded = four.in_shardings_jax()[0].mesh, eight.in_shardings_jax()[0].mesh
    assert len({(m.axis_names, m.axis_types) for m in recorded}) == 1  # only the size changed
    shardings = eight.in_shardings_jax(everywhere)
    y = eight.call(*(jax.device_put(a, s) for a, s in zip((w, x), shardings, strict=True)))
    np.testing.assert_allclose(y, np.tanh(x @ w), rtol=1e-6)
    assert y.sharding.device_set == set(devices)

    # Another artifact: its own shapes and axis name, re-exported for two devices.
    # 另一个产物：自己的形状和轴名，为两个设备重新导出。
    batch_axis = data_mesh(devices[:4], name="batch")
    wider = (
        jax.ShapeDtypeStruct((3, 5), jnp.float32, sharding=NamedSharding(batch_axis, P())),
        jax.ShapeDtypeStruct(
            (12, 3), jnp.float32, sharding=NamedSharding(batch_axis, x_spec_on("batch"))
        ),
    )
    two = export_for_devices(layer, export.export(jax.jit(layer))(*wider), devices[:2])
    assert two.nr_devices == 2 and [a.shape for a in two.in_avals] == [(3, 5), (12, 3)]
    assert two.in_shardings_jax()[0].mesh.axis_names == ("batch",)
    assert [s.spec for s in two.in_shardings_jax()] == [P(), x_spec_on("batch")]

    # Inputs in a dict: exp.in_tree puts the flat avals back in their places.
    # 输入放在字典里：exp.in_tree 把展平的 aval 放回原位。
    def dict_layer(params, x):
        return layer(params["w"], x)

    nested = export.export(jax.jit(dict_layer))({"w": wider[0]}, wider[1])
    again = export_for_devices(dict_layer, nested, devices[:2])
    assert again.nr_devices == 2 and again.in_tree == nested.in_tree


class Recording:
    """exp 的替身：照常调用 exp.call，并记下每次调用收到的批大小（第 0 维）。
    A stand-in for exp: calls exp.call as usual and notes the batch size (axis 0) each call
    receives."""

    def __init__(self, exp):
        self.exp, self.batches = exp, []

    def call(self, *args):
        self.batches.append(args[0].shape[0])
        return self.exp.call(*args)

    def __getattr__(self, name):
        return getattr(self.exp, name)


def test_buckets_and_warm_up_bound_the_compilations():
    """写 bucket_server：一个批维是符号的产物可以服务任何批大小，但每个新形状第一次调用时都要
    编译。把请求补到几个固定的桶，编译次数就只有桶的个数；启动时先用每个桶调用一次（预热），
    之后的请求就一次也不用编译。补到比装得下的最小的桶更大的桶，结果和编译次数都不变，但每个
    请求都白算了扔掉的那些行：exp 的替身记下每次调用收到的批大小。
    Write bucket_server: an artifact with a symbolic batch serves every batch size, but each
    new shape compiles on its first call. Pad requests to a few fixed buckets and there are only
    as many compilations as buckets; call each bucket once at start-up (warm-up) and later
    requests compile nothing. Padding past the smallest bucket that fits changes neither the
    results nor the compilations, but each request then computes rows only to throw them away:
    a stand-in for exp notes the batch each call receives.
    """
    w1, w2 = np.random.default_rng(2).normal(size=(2, 3, 3)).astype(np.float32)

    def predict(x):
        return jnp.tanh(x @ w1) @ w2

    (b,) = export.symbolic_shape("b")
    exp = Recording(export.export(jax.jit(predict))(jax.ShapeDtypeStruct((b, 3), jnp.float32)))
    buckets = [4, 8, 16]
    serve = bucket_server(exp, buckets)

    with counting_compiles() as warm_up:
        for size in buckets:
            serve(batch(size))
    with counting_compiles() as during_requests:
        served = {n: serve(batch(n, seed=n)) for n in range(1, 17)}
    assert len(warm_up) == 3
    assert during_requests == []
    for n, y in served.items():
        assert y.shape == (n, 3)
        np.testing.assert_allclose(y, predict(batch(n, seed=n)), rtol=1e-5, atol=1e-6)
    assert exp.batches == buckets + [4] * 4 + [8] * 4 + [16] * 8  # one call per request

    exp.batches.clear()
    other = bucket_server(exp, [5, 12])  # the buckets are the caller's
    with counting_compiles() as other_buckets:
        for n in (1, 5, 6, 12):
            np.testing.assert_allclose(
                other(batch(n, seed=n)), predict(batch(n, seed=n)), rtol=1e-5, atol=1e-6
            )
    assert len(other_buckets) == 2
    assert exp.batches == [5, 5, 12, 12]
