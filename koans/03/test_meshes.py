"""03 · 网格与轴类型 / meshes and axis types.

网格（Mesh）给设备排成多维阵列，每根轴一个名字；PartitionSpec 说数组的哪根轴沿网格的哪根轴
切开。0.12 的网格轴有类型：`jax.make_mesh` 默认 Explicit——分片写进数组的类型里
（`jax.typeof(x)` 显示形如 `float32[8@X,4]` 的类型），在追踪时就按规则传播，有歧义时要你用
`out_sharding=` 或 `jax.sharding.reshard` 说清楚；Auto 轴（`Mesh(...)` 的默认）把这些交给
编译器决定。`jax.set_mesh` 设置上下文网格，之后只写 PartitionSpec 即可。

A mesh arranges the devices in a named n-d array; a PartitionSpec says which array axis is
split along which mesh axis. On 0.12 mesh axes have types: `jax.make_mesh` defaults to
Explicit, where the sharding is part of the array's type (`jax.typeof(x)` shows types
such as `float32[8@X,4]`), propagates by rules at trace time and, where ambiguous, must be spelled
out with `out_sharding=` or `jax.sharding.reshard`; Auto axes (the default of `Mesh(...)`)
leave all that to the compiler. `jax.set_mesh` sets the context mesh, after which a bare
PartitionSpec is enough.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------


def mesh_4x2(axis_types=None):
    """4×2 网格，轴名 X、Y，8 个设备。/ A 4×2 mesh of 8 devices, axes X and Y."""
    return jax.make_mesh((4, 2), ("X", "Y"), axis_types=axis_types)


def matrix():
    return np.arange(32.0, dtype=np.float32).reshape(8, 4)


def count_ops(hlo_text, op):
    """编译后 HLO 文本里某种指令出现的次数。/ How many `op` instructions the compiled HLO holds."""
    return len(re.findall(rf"\b{op}(?:-start)?\(", hlo_text))


# ---- 检查 / checks ----------------------------------------------------------------------


def test_make_mesh_defaults_to_explicit_axes():
    """jax.make_mesh 和直接构造的 Mesh(...) 默认给出不同类型的轴（jax.sharding.AxisType）。两种
    网格上同样的 NamedSharding 把数据放得一模一样；区别在类型：一种轴把分片写进 jax.typeof
    （形如 float32[8@X,...]），另一种只写形状。
    jax.make_mesh and a Mesh(...) built directly give axes of different types by default
    (jax.sharding.AxisType). The same NamedSharding lays the data out identically on both; the
    difference is the type: one kind of axis writes the sharding into jax.typeof (as in
    float32[8@X,...]), the other writes only the shape.
    """
    explicit = mesh_4x2()
    legacy = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("X", "Y"))
    assert explicit.axis_types == __
    assert legacy.axis_types == __

    on_explicit = jax.device_put(matrix(), NamedSharding(explicit, P("X", "Y")))
    on_auto = jax.device_put(matrix(), NamedSharding(legacy, P("X", "Y")))
    assert on_explicit.sharding.shard_shape((8, 4)) == on_auto.sharding.shard_shape((8, 4))
    assert str(jax.typeof(on_explicit)) == __
    assert str(jax.typeof(on_auto)) == __


def test_explicit_shardings_propagate_by_rules():
    """Explicit 模式下每个运算的输出分片在追踪时就按规则算出来：逐元素运算保持分片，转置交换，
    沿某轴求和就去掉那根轴，把两根切开的轴合成一根时两个网格轴合在一起。规则推不出来时
    （比如 (8,4) 改成 (4,8)）直接报错，要你用 out_sharding 指定。
    In Explicit mode each op's output sharding is computed by rules at trace time: elementwise
    ops keep it, a transpose swaps it, a sum over an axis drops that axis, and merging two split
    axes into one merges their mesh axes. Where no rule applies (say (8,4) into (4,8)) it fails
    and asks for out_sharding.
    """
    x = jax.device_put(matrix(), NamedSharding(mesh_4x2(), P("X", "Y")))
    assert str(jax.typeof(x * 2 + 1)) == __
    assert str(jax.typeof(x.T)) == __
    assert str(jax.typeof(x.sum(axis=0))) == __
    assert str(jax.typeof(x.reshape(32))) == __
    with pytest.raises(Exception, match="out_sharding"):
        x.reshape(4, 8)


def test_explicit_mode_asks_you_to_choose_a_matmul_output():
    """⚠️ 陷阱 / trap：x 按 P("X", "Y") 切，y 按 P("Y", None) 切，两边的收缩轴都沿 Y 切开。
    每个设备只能算出部分和，结果该怎么切有好几种选择，Explicit 模式不替你选：直接 x @ y
    会报错（消息提到 out_sharding）。在 jax.set_mesh 之下用 out_sharding=PartitionSpec 说出你要的
    布局：每个设备拿到结果的完整的行（2×4）。沿 Y 的部分和要相加：编译后的 HLO 里有几条 all-reduce？
    x is split P("X", "Y") and y P("Y", None): the contracted axis is split along Y on both
    sides. Each device can only form partial sums, and the result could be laid out several
    ways; Explicit mode does not choose for you: a plain x @ y fails (the message names
    out_sharding). Under jax.set_mesh, say which layout you want with out_sharding=a
    PartitionSpec: every device gets whole rows of the result (2×4). The partial sums along Y
    must be added: how many all-reduces does the compiled HLO hold?
    """
    mesh = mesh_4x2()
    x = jax.device_put(matrix(), NamedSharding(mesh, P("X", "Y")))
    y = jax.device_put(np.eye(4, dtype=np.float32), NamedSharding(mesh, P("Y", None)))
    with pytest.raises(Exception, match="out_sharding"):
        x @ y
    with jax.set_mesh(mesh):
        product = jax.jit(lambda a, b: jnp.matmul(a, b, out_sharding=__))
        out = product(x, y)
        hlo = product.lower(x, y).compile().as_text()
    np.testing.assert_array_equal(out, matrix())
    assert out.sharding.shard_shape(out.shape) == (2, 4)
    assert count_ops(hlo, "all-reduce") == __


def test_set_mesh_lets_a_bare_partition_spec_name_the_mesh():
    """没有上下文网格时，只给 PartitionSpec 的地方（device_put、reshard、out_sharding）都会
    报错：不知道是哪个网格。`with jax.set_mesh(mesh):` 设置上下文网格，之后 P 就够了，
    shard_map 也可以不传 mesh=；离开 with 块，上下文网格恢复为空。
    Without a context mesh, every place that takes a bare PartitionSpec (device_put, reshard,
    out_sharding) raises an error: which mesh? `with jax.set_mesh(mesh):` sets the context
    mesh; a P is then enough, and shard_map may omit mesh=. Leaving the with block restores the
    empty context mesh.
    """
    mesh = mesh_4x2()
    with raises_exactly(__):
        jax.device_put(matrix(), P("X", "Y"))
    with jax.set_mesh(__):
        assert jax.sharding.get_abstract_mesh().axis_names == ("X", "Y")
        x = jax.device_put(matrix(), P("X", "Y"))
        row_sums = jax.shard_map(
            lambda v: lax.psum(v.sum(axis=1), "Y"), in_specs=P("X", "Y"), out_specs=P("X")
        )(x)
    np.testing.assert_array_equal(row_sums, matrix().sum(axis=1))
    assert jax.sharding.get_abstract_mesh().empty


def test_reshard_changes_the_layout_not_the_values():
    """jax.sharding.reshard 把数组换一种切法，数值不变。从 P("X", "Y") 换到 P(None, "Y")：
    每个设备的块变成什么形状？8 个设备里有几种不同的块，每种块有几份副本（replica_id）？
    编译器用哪种集合通信把沿 X 切开的行收齐？
    jax.sharding.reshard gives an array another layout with the same values. From P("X", "Y")
    to P(None, "Y"): what shape does each device's block take? How many different blocks are
    there among the 8 devices, and how many copies (replica_id) of each? Which collective does
    the compiler use to collect the rows split along X?
    """
    mesh = mesh_4x2()
    x = jax.device_put(matrix(), NamedSharding(mesh, P("X", "Y")))
    with jax.set_mesh(mesh):
        to_columns = jax.jit(lambda a: jax.sharding.reshard(a, P(None, "Y")))
        columns = to_columns(x)
        hlo = to_columns.lower(x).compile().as_text()
    np.testing.assert_array_equal(columns, matrix())
    assert str(jax.typeof(columns)) == __
    shards = columns.addressable_shards
    assert {s.data.shape for s in shards} == __
    assert len({str(s.index) for s in shards}) == __
    assert sorted({s.replica_id for s in shards}) == __
    collectives = ["all-gather", "all-reduce", "all-to-all", "collective-permute"]
    assert [op for op in collectives if count_ops(hlo, op)] == __


def test_shard_map_on_an_explicit_mesh_checks_the_input_sharding():
    """⚠️ 陷阱 / trap：Auto 网格上，shard_map 会悄悄把未切分的输入按 in_specs 挪好；Explicit
    网格上，输入的分片（写在类型里）必须和 in_specs 一致，否则报错。先用 reshard 放好，
    in_specs 甚至可以省略：shard_map 从参数的类型里推断出来。
    On an Auto mesh shard_map quietly moves an unsplit input as in_specs says; on an Explicit
    mesh the input's sharding (part of its type) must match in_specs, or it fails. Place it
    first with reshard, and in_specs may even be omitted: shard_map infers it from the
    argument's type.
    """
    seen = []

    def double(v):
        seen.append(v.shape)
        return v * 2

    auto = mesh_4x2((AxisType.Auto,) * 2)
    out = jax.shard_map(double, mesh=auto, in_specs=P("X"), out_specs=P("X"))(matrix())
    np.testing.assert_array_equal(out, matrix() * 2)

    explicit = mesh_4x2()
    with raises_exactly(__):
        jax.shard_map(double, mesh=explicit, in_specs=P("X"), out_specs=P("X"))(matrix())
    with jax.set_mesh(explicit):
        x = jax.sharding.reshard(matrix(), __)
        out = jax.shard_map(double, out_specs=P("X"))(x)  # in_specs inferred / 推断出来
    np.testing.assert_array_equal(out, matrix() * 2)
    assert seen[-1] == __  # 沿 X 切，沿 Y 复制 / split along X, copied along Y


def test_a_2d_mesh_reduces_along_one_axis_or_both():
    """二维网格取代嵌套 pmap：一次 shard_map，集合通信指定沿哪根轴。4×2 网格上每个设备拿
    一个数，e[r, c] = 2r + c。沿 "Y" 求和是每行的和，沿 "X" 是每列的和，沿 ("X", "Y") 是全体之和；
    axis_index(("X", "Y")) 是设备在网格里的行优先编号。逐个设备预测。
    A 2-D mesh replaces nested pmap: one shard_map, and each collective names its axes. On the
    4×2 mesh each device holds one number, e[r, c] = 2r + c. A psum along "Y" gives each row's
    sum, along "X" each column's, along ("X", "Y") the total; axis_index(("X", "Y")) is the
    device's row-major number in the mesh. Predict device by device.
    """
    mesh = mesh_4x2()
    e = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    x = jax.device_put(e, NamedSharding(mesh, P("X", "Y")))

    def each_device(f):
        spread = jax.shard_map(f, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))
        return np.asarray(jax.jit(spread)(x)).tolist()

    assert each_device(lambda v: lax.psum(v, "Y")) == __
    assert each_device(lambda v: lax.psum(v, "X")) == __
    assert each_device(lambda v: lax.psum(v, ("X", "Y"))) == __
    assert each_device(lambda v: v * 0 + lax.axis_index(("X", "Y"))) == __


def test_shard_shapes_follow_from_the_partition_spec():
    """一个 (8, 4) 数组放在 4×2 网格上，不同的 PartitionSpec 给出不同的块形状：沿某网格轴切开的
    维度除以那根轴的大小，一个维度沿两根轴切（("X", "Y")）就除以两者之积，没提到的网格轴上
    数据被复制。不用放数据：NamedSharding.shard_shape 直接算。
    An (8, 4) array on the 4×2 mesh gets a different block shape under each PartitionSpec: a
    dimension split along a mesh axis is divided by that axis's size, one split along two axes
    (("X", "Y")) by their product, and the data is copied along the mesh axes not mentioned. No
    data needed: NamedSharding.shard_shape computes it.
    """
    mesh = mesh_4x2()

    def shard_shape(spec):
        return NamedSharding(mesh, spec).shard_shape((8, 4))

    assert shard_shape(P("X", "Y")) == __
    assert shard_shape(P("Y", "X")) == __
    assert shard_shape(P(("X", "Y"))) == __
    assert shard_shape(P(None, "Y")) == __
    assert shard_shape(P()) == __
