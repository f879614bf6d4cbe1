"""03 · 一个程序里的 Auto、Explicit 与 Manual / Auto, Explicit and Manual in one program.

真实的程序很少整个只用一种模式。Auto 模式里编译器决定中间值怎么切，`with_sharding_constraint`
给它一个必须遵守的约束；Explicit 模式里分片是类型的一部分，同一个调用变成断言，挪数据
要换一个函数；`auto_axes` / `explicit_axes` 让一段函数换一种模式。`shard_map` 的
`axis_names=` 只把一部分网格轴交给你手写（Manual），其余的轴仍由编译器管；`jax.smap` 是只映射
一根网格轴的 shard_map，写法像 vmap 的 in_axes / out_axes。

Real programs seldom use one mode throughout. In Auto mode the compiler decides how
intermediates are split and `with_sharding_constraint` gives it a constraint it must obey; in
Explicit mode the sharding is part of the type, the same call becomes an assertion, and moving
data takes another function; `auto_axes` / `explicit_axes` switch the mode for one function.
`shard_map`'s `axis_names=` hands only some mesh axes to you (Manual) and leaves the others to
the compiler; `jax.smap` is a shard_map over a single mesh axis, spelled like vmap's in_axes /
out_axes.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives, equations

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8  # 本章的网格用 8 个设备（chapter.toml: devices = 8）/ this chapter's meshes use 8 devices


def put(x, mesh, spec):
    """把 x 按 spec 放到 mesh 上。/ Place x on mesh as spec says."""
    return jax.device_put(x, NamedSharding(mesh, spec))


def square():
    return np.arange(64.0, dtype=np.float32).reshape(8, 8)


def data_model_mesh():
    """2×4 网格：数据并行轴 "data"、模型并行轴 "model"（Explicit）。
    A 2×4 mesh: a data-parallel axis "data" and a model-parallel axis "model" (Explicit)."""
    return jax.make_mesh((2, 4), ("data", "model"))


def shard_map_specs(fn, *args):
    """fn(*args) 的 jaxpr 里每个 shard_map 的 (in_specs, out_specs)。
    The (in_specs, out_specs) of each shard_map in fn(*args)'s jaxpr."""
    shard_maps = equations("shard_map", fn, *args)
    return [(e.params["in_specs"], e.params["out_specs"]) for e in shard_maps]


# ---- 检查 / checks ----------------------------------------------------------------------


def test_with_sharding_constraint_moves_data_in_auto_mode_and_asserts_in_explicit():
    """Auto 网格上，x 按行切开，jit 里一个中间值用 lax.with_sharding_constraint 约束成另一种切法：
    这是编译器必须遵守的约束（文档说：不是提示），它为此插入通信。要让每个设备最后拿着完整的一列（块形状 (8, 1)），约束写成什么？
    编译器用哪种集合通信把按行切的数据换成按列切？Explicit 网格上同一个调用不挪数据，只检查：
    类型里的分片与约束不符就报错（哪个异常类？）；在 Explicit 模式里挪数据用 jax.sharding 里的
    哪个函数（test_meshes.py 用过）？
    On an Auto mesh, x is split by rows and, inside jit, an intermediate is constrained with
    lax.with_sharding_constraint to another layout: a constraint the compiler must obey (not
    a hint, its documentation says), so it inserts the communication. For every device to end up with one whole column (blocks of (8, 1)), what is
    the constraint? Which collective turns rows into columns? On an Explicit mesh the same call
    moves nothing, it checks: when the sharding in the type disagrees it fails (which exception
    class?); in Explicit mode, which function of jax.sharding moves data (test_meshes.py used
    it)?
    """
    auto = jax.make_mesh((N,), ("i",), axis_types=(AxisType.Auto,))
    x = put(square(), auto, P("i"))

    def by_columns(a):
        b = jnp.sin(a)
        return lax.with_sharding_constraint(b, NamedSharding(auto, __)) * 2

    hinted = jax.jit(by_columns)
    out = hinted(x)
    np.testing.assert_allclose(out, np.sin(square()) * 2, rtol=1e-6)
    assert out.sharding.shard_shape(out.shape) == (8, 1)
    assert list(collectives(hinted.lower(x).compile().as_text())) == [__]

    explicit = jax.make_mesh((N,), ("i",))
    x = put(square(), explicit, P("i"))
    with jax.set_mesh(explicit):
        with raises_exactly(__) as info:
            jax.jit(lambda a: lax.with_sharding_constraint(jnp.sin(a), P()))(x)
        assert "acts as an assert" in str(info.value)
        gathered = jax.jit(lambda a: __(jnp.sin(a), P()))
        out = gathered(x)
        found = collectives(gathered.lower(x).compile().as_text())
    assert str(jax.typeof(out)) == "float32[8,8]"
    assert list(found) == ["all-gather"]


def test_auto_axes_and_explicit_axes_switch_the_mode_for_one_function():
    """Explicit 模式下 (8, 4) → (4, 8) 的 reshape 没有传播规则（test_meshes.py 里它报错）。
    jax.sharding.auto_axes 把一段函数交给编译器：函数里面的类型不带分片，出来时按 out_sharding
    切开。让结果的每个设备拿到连续的一行（沿 X 切第 0 轴），out_sharding 写什么？反过来，
    Auto 网格上 jax.sharding.explicit_axes 让一段函数按 in_sharding 以 Explicit 类型运行：
    函数里面看到的类型是什么？
    In Explicit mode a reshape of (8, 4) into (4, 8) has no propagation rule (it fails in
    test_meshes.py). jax.sharding.auto_axes hands one function to the compiler: inside it the
    types carry no sharding, and the result comes out split as out_sharding says. For every
    device to get one whole row of the result (axis 0 split along X), what is out_sharding?
    The other way round, on an Auto mesh jax.sharding.explicit_axes runs one function with
    Explicit types, as in_sharding says: what type does the function see inside?
    """
    seen = {}

    def regroup(a):
        seen["auto inside"] = str(jax.typeof(a))
        return a.reshape(4, 8)

    explicit = jax.make_mesh((4, 2), ("X", "Y"))
    x = put(np.arange(32.0, dtype=np.float32).reshape(8, 4), explicit, P("X", "Y"))
    with jax.set_mesh(explicit):
        out = jax.jit(jax.sharding.auto_axes(regroup, out_sharding=__))(x)
    np.testing.assert_array_equal(out, np.arange(32.0).reshape(4, 8))
    assert seen["auto inside"] == __
    assert out.sharding.shard_shape(out.shape) == (1, 8)
    assert str(jax.typeof(out)) == __

    def doubled(a):
        seen["explicit inside"] = str(jax.typeof(a))
        return a * 2

    auto = jax.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)
    x = put(np.arange(32.0, dtype=np.float32).reshape(8, 4), auto, P("X", "Y"))
    with jax.set_mesh(auto):
        jax.jit(jax.sharding.explicit_axes(doubled, in_sharding=P("X", "Y")))(x)
    assert seen["explicit inside"] == __


def test_partial_manual_shard_map_leaves_the_other_axes_to_the_compiler():
    """shard_map 的 axis_names= 说哪些网格轴是 Manual（你写集合通信），没提到的轴仍由编译器按
    类型切分。2×4 网格上要让函数看到的块是 float32[4,8@model]{V:data}：只按一根轴切（4 行），
    列仍由编译器沿另一根轴切着。哪根轴是 Manual？填出 axis_names。沿 data 的 psum 只传每个设备自己的那几列：
    all-reduce 的结果类型是什么？Manual 之外的轴不能在集合通信里指名：沿 "model" 的 psum 报哪个
    异常类？
    shard_map's axis_names= says which mesh axes are Manual (you write the collectives); the
    axes not named are still split by the compiler, as the types say. On the 2×4 mesh the block
    the function sees is to be float32[4,8@model]{V:data}: split along one axis only (4
    rows), its columns still split by the compiler along the other. Which axis is Manual?
    Fill in axis_names. The
    psum along data moves only each device's own columns: what is the all-reduce's result
    type? An axis that is not Manual cannot be named by a collective: which exception class
    does a psum along "model" raise?
    """
    types = {}

    def column_sums(block):
        types["block"] = str(jax.typeof(block))
        return lax.psum(block.sum(axis=0), "data")

    mesh = data_model_mesh()
    x = put(square(), mesh, P("data", "model"))
    with jax.set_mesh(mesh):
        sums = jax.jit(
            jax.shard_map(column_sums, in_specs=P("data"), out_specs=P(), axis_names={__})
        )
        out = sums(x)
        found = collectives(sums.lower(x).compile().as_text())
    np.testing.assert_array_equal(out, square().sum(axis=0))
    assert types["block"] == "float32[4,8@model]{V:data}"
    assert str(jax.typeof(out)) == __
    assert found == {"all-reduce": [__]}

    def sum_along_model(block):
        return lax.psum(block, "model")

    with jax.set_mesh(mesh), raises_exactly(__):
        jax.jit(
            jax.shard_map(
                sum_along_model, in_specs=P("data"), out_specs=P("data"), axis_names={"data"}
            )
        )(x)


def test_smap_maps_one_mesh_axis_the_way_vmap_maps_an_array_axis():
    """jax.smap(f, in_axes=…, out_axes=…, axis_name=…) 是只对一根网格轴 Manual 的 shard_map，参数
    写法像 vmap：in_axes=1 说第 1 轴沿 axis_name 切开。和 vmap 不同，函数看到的是一块，映射轴还在
    （长度除以轴的大小）。写出同一个程序的 shard_map：in_specs 和 out_specs 是什么？函数里看到的
    类型是什么？
    jax.smap(f, in_axes=…, out_axes=…, axis_name=…) is a shard_map that is Manual over one mesh
    axis, with arguments spelled like vmap's: in_axes=1 says axis 1 is split along axis_name.
    Unlike vmap, the function sees a block, and the mapped axis is still there (its length
    divided by the axis size). Write the same program as a shard_map: what are in_specs and
    out_specs? What type does the function see?
    """
    seen = {}

    def centered(block):
        seen["block"] = str(jax.typeof(block))
        return block - lax.pmean(block, "model")

    mesh = data_model_mesh()
    x = put(square(), mesh, P("data", "model"))
    with jax.set_mesh(mesh):
        by_smap = jax.jit(jax.smap(centered, in_axes=1, out_axes=1, axis_name="model"))(x)
        assert seen["block"] == __
        by_shard_map = jax.jit(
            jax.shard_map(
                centered,
                in_specs=__,
                out_specs=__,
                axis_names={"model"},
            )
        )(x)
    group_means = square().reshape(8, 4, 2).mean(axis=1)  # 4 个设备上同一位置的均值
    np.testing.assert_allclose(by_smap, square() - np.tile(group_means, (1, 4)), rtol=1e-6)
    np.testing.assert_array_equal(by_shard_map, by_smap)


def test_vmap_spmd_axis_name_keeps_a_vmapped_batch_split_along_a_mesh_axis():
    """per_example 函数只看一个样本 (8,)，里面按 "model" 做分片的事：一个沿 model 的 shard_map（每个
    设备平方和再 psum），或者一个沿 model 的 with_sharding_constraint。vmap 给它们加上批次维时，
    这一维怎么切？默认什么都不说：shard_map 的 in_specs（从 jaxpr 里读出）里批次维是 None（不切），每个设备都要整批
    数据，编译器先把沿 data 切开的 x 收齐——那条 all-gather 是什么类型？with_sharding_constraint
    的批次维则留给编译器决定；输入是复制的时，它就一直复制着：块形状是什么？jax.vmap 的
    spmd_axis_name 说批次维沿哪根网格轴切：写出 batched，让批次沿 data 切开（Auto 网格）。
    A per_example function sees one example (8,) and does sharded work along "model" inside: a
    shard_map along model (each device squares and sums, then a psum), or a
    with_sharding_constraint along model. When vmap adds the batch dimension, how is that
    dimension split? By default nothing says: in the shard_map's in_specs (read from the jaxpr)
    the batch dimension is None (not split), every device needs the whole batch, and the
    compiler first gathers x, split along data: what type has that all-gather? The with_sharding_constraint leaves the
    batch dimension to the compiler; with a replicated input it stays replicated: what block
    shape? jax.vmap's spmd_axis_name says along which mesh axis the batch dimension is split:
    write batched so that the batch is split along data (an Auto mesh).
    """
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)

    def squared_norm(v):
        def local(block):
            return lax.psum(jnp.sum(block * block), "model")

        return jax.shard_map(local, mesh=mesh, in_specs=P("model"), out_specs=P())(v)

    def doubled_by_columns(v):
        return lax.with_sharding_constraint(jnp.sin(v), NamedSharding(mesh, P("model"))) * 2

    def batched(per_example):
        return jax.jit(__)

    x = put(square(), mesh, P("data"))
    plain = jax.jit(jax.vmap(squared_norm))
    [((in_spec,), (out_spec,))] = shard_map_specs(plain, x)
    assert in_spec[0] is None and out_spec == P(None)  # the batch dimension is not split
    found = collectives(plain.lower(x).compile().as_text())
    assert found == {"all-gather": [__], "all-reduce": ["f32[8]"]}

    norms = batched(squared_norm)
    out = norms(x)
    assert shard_map_specs(norms, x) == [((P("data", "model"),), (P("data"),))]
    np.testing.assert_allclose(out, (square() ** 2).sum(axis=1), rtol=1e-6)
    assert collectives(norms.lower(x).compile().as_text()) == {"all-reduce": ["f32[4]"]}
    assert out.sharding.spec == P("data")

    replicated = put(square(), mesh, P())
    left = jax.jit(jax.vmap(doubled_by_columns))(replicated)
    assert left.sharding.shard_shape(left.shape) == __
    out = batched(doubled_by_columns)(replicated)
    np.testing.assert_allclose(out, np.sin(square()) * 2, rtol=1e-6)
    assert out.sharding.shard_shape(out.shape) == (4, 2)
