"""03 · 从 pmap 到现代写法 / from pmap to the modern APIs.

`jax.pmap` 还在，但在 0.12 里它只是一层外壳：`jit` 套 `shard_map`，映射轴是一个一维 mesh，
轴名就是 pmap 的 `axis_name`（没给时叫 `_internal_pmap_axis_name`）。本文件把 pmap 的每个惯用法和它的现代写法并排放：
`jax.shard_map`（每个设备一块，显式集合通信）、带 `NamedSharding` 的 `jit`（全局视角，
编译器插入通信）、`jax.device_put(x, NamedSharding(...))`（代替被删掉的
`device_put_replicated` / `device_put_sharded`）。被删掉的 API 都用真实的异常证明。

`jax.pmap` still exists, but on 0.12 it is a shell: `jit` around `shard_map` over a 1-D mesh
whose axis is pmap's `axis_name` (`_internal_pmap_axis_name` when none is given). This file puts every pmap idiom next to its
modern form: `jax.shard_map` (one block per device, explicit collectives), `jit` with
`NamedSharding` (a global view; the compiler inserts the communication) and
`jax.device_put(x, NamedSharding(...))` (instead of the removed `device_put_replicated` /
`device_put_sharded`). Every removed API is proven removed by its real exception.
"""

import importlib
import inspect
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly, todo, warns_exactly  # noqa: F401  (the koans' blanks)
from jaxkoans.api.program import read

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8  # 本章的网格用 8 个设备（chapter.toml: devices = 8）/ this chapter's meshes use 8 devices


def mesh_1d(name="i"):
    """一维网格，N 个设备，轴名 name（make_mesh 默认 Explicit 轴）。
    A 1-D mesh of N devices on axis `name` (make_mesh gives Explicit axes by default)."""
    return jax.make_mesh((N,), (name,))


def put(x, mesh, spec):
    """把 x 按 spec 放到 mesh 上。/ Place x on mesh as spec says."""
    return jax.device_put(x, NamedSharding(mesh, spec))


def blocks(array):
    """每个设备上的那一块，按网格里设备的顺序。/ Each device's block, in the mesh's device order."""
    by_device = {s.device: np.asarray(s.data) for s in array.addressable_shards}
    return [by_device[d] for d in array.sharding.mesh.devices.flat]


def count_ops(hlo_text, op):
    """编译后 HLO 文本里某种指令出现的次数（异步的 -start 形式也算）。
    How many instructions of kind `op` the compiled HLO text holds (async -start forms too)."""
    return len(re.findall(rf"\b{op}(?:-start)?\(", hlo_text))


def linear_loss(params, x, y):
    w, b = params
    return jnp.mean((x @ w + b - y) ** 2)


def regression_data():
    """参数 (w, b) 与一批 32 个样本，NumPy 生成（不用编译）。/ Params and a batch of 32 (NumPy)."""
    rng = np.random.default_rng(0)
    w, x, y = (rng.standard_normal(s, dtype=np.float32) for s in [(4, 2), (32, 4), (32, 2)])
    return (w, np.zeros(2, np.float32)), x, y


# ---- 检查 / checks ----------------------------------------------------------------------


def test_pmap_body_sees_a_slice_shard_map_sees_a_block():
    """❌ 旧写法 / ✅ 推荐写法：pmap 把映射轴“拿掉”，每个设备看到 x[k]；shard_map 把数组切块，
    每个设备看到带着这根轴的一块 x[k:k+1]。所以 shard_map 的行数可以是设备数的整数倍，pmap 不行。
    pmap removes the mapped axis: device k sees x[k]. shard_map cuts the array into blocks:
    device k sees a block that keeps the axis, x[k:k+1]. So shard_map takes any multiple of the
    device count as the number of rows; pmap does not.
    """
    seen = {}

    def spy(name):
        def double(v):
            seen[name] = v.shape
            return v * 2

        return double

    x = np.arange(24.0, dtype=np.float32).reshape(8, 3)
    mesh = mesh_1d()
    old = jax.pmap(spy("pmap"))(x)
    new = jax.shard_map(spy("shard_map"), mesh=mesh, in_specs=P("i"), out_specs=P("i"))(
        put(x, mesh, P("i"))
    )
    np.testing.assert_array_equal(old, new)
    assert seen["pmap"] == __
    assert seen["shard_map"] == __

    x16 = np.arange(48.0, dtype=np.float32).reshape(16, 3)
    jax.shard_map(spy("shard_map"), mesh=mesh, in_specs=P("i"), out_specs=P("i"))(
        put(x16, mesh, P("i"))
    )
    assert seen["shard_map"] == __
    with raises_exactly(__):  # 16 行放不进 8 个设备的 pmap / 16 rows do not fit pmap
        jax.pmap(spy("pmap"))(x16)


def test_pmap_is_now_jit_of_shard_map():
    """pmap 在 0.12 里不再有自己的实现：它的 jaxpr 最外层是一个 jit，里面是哪个变换？它的结果
    不再是旧的 ShardedDeviceArray，而是普通的全局 jax.Array：分片是哪个类，每个设备上的块是什么
    形状？
    On 0.12 pmap has no implementation of its own: the outermost equation of its jaxpr is a
    jit; which transformation is inside? Its result is no longer the old ShardedDeviceArray
    but an ordinary global jax.Array: what class is its sharding, and what shape is each
    device's block?
    """
    x = jnp.arange(8.0)
    pmapped = jax.pmap(lambda v: v * 2, axis_name="i")
    outer = jax.make_jaxpr(pmapped)(x).eqns[0]
    assert outer.primitive.name == "jit"
    assert outer.params["jaxpr"].eqns[0].primitive.name == __

    y = pmapped(x)
    assert type(y.sharding).__name__ == __
    assert y.sharding.shard_shape(y.shape) == __
    assert y.sharding.mesh.axis_names == ("i",)  # pmap 的 axis_name 成了网格的轴名 / the mesh axis


def test_in_axes_none_and_out_axes_none_become_empty_specs():
    """❌ 旧写法 / ✅ 推荐写法：pmap 的 in_axes=None（广播参数）和 out_axes=None（输出在所有设备上
    相同）在 shard_map 里写成同一个 PartitionSpec：说“不切分，每个设备一份完整的”的那一个。
    pmap's in_axes=None (a broadcast argument) and out_axes=None (an output equal on every
    device) become one and the same PartitionSpec in shard_map: the one that says "not split,
    every device holds all of it".
    """
    x, scale = np.arange(8.0, dtype=np.float32), np.float32(3.0)

    def scaled_total(v, s):
        return lax.psum(v * s, "i")

    old = jax.pmap(scaled_total, axis_name="i", in_axes=(0, None), out_axes=None)(x, scale)
    mesh = mesh_1d()
    new = jax.shard_map(scaled_total, mesh=mesh, in_specs=(P("i"), __), out_specs=__)(
        put(x, mesh, P("i")), put(scale, mesh, P())
    )
    assert float(old) == float(np.sum(x * scale))
    np.testing.assert_array_equal(new, old)


def test_device_put_replicated_and_sharded_are_gone():
    """❌ 旧写法 / ✅ 推荐写法：jax.device_put_replicated 和 jax.device_put_sharded 已被删除，连属性
    都不存在了。现在都用 jax.device_put(x, NamedSharding(mesh, spec))：一个 spec 把 x 完整复制到
    每个设备，P("i") 沿第 0 轴切开，第 k 块放在网格的第 k 个设备上。
    jax.device_put_replicated and jax.device_put_sharded are removed: not even the attributes
    exist. Both are jax.device_put(x, NamedSharding(mesh, spec)) now: one spec copies x whole
    to every device; P("i") cuts axis 0 and puts block k on the mesh's device k.
    """
    for removed in ("device_put_replicated", "device_put_sharded"):
        with raises_exactly(__):
            getattr(jax, removed)

    mesh = mesh_1d()
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    replicated = jax.device_put(x, NamedSharding(mesh, __))
    assert [b.shape for b in blocks(replicated)] == [(2, 3)] * N

    # device_put_sharded 的输入：每个设备一块 / device_put_sharded's input: one piece per device
    pieces = [np.full((2,), float(k), np.float32) for k in range(N)]
    stacked = jax.device_put(np.stack(pieces), NamedSharding(mesh, P("i")))
    assert blocks(stacked)[3].tolist() == __


def test_nested_pmap_fails_a_named_vmap_or_a_2d_mesh_replaces_it():
    """❌ 旧写法 / ✅ 推荐写法：0.12 的 pmap 文档仍写着“嵌套 pmap 时各映射轴大小之积不得超过设备数”，
    这里 2·4 = 8 正好够，嵌套的 pmap 却照样报错：每个 pmap 都给自己建一个一维网格再调用
    shard_map，内层的网格与外层设下的上下文网格不一致（消息说 context mesh … should match），
    与轴的大小无关：1×1 的嵌套也失败。不支持的是嵌套本身——在一个 pmap 里再调用 pmap。
    不受影响的是 pmap 里面套一个带 axis_name 的变换：内层那根轴留在每个设备上向量化，集合通信
    照样能指名它。jax.experimental.maps（xmap）整个模块都没了。两根轴都要
    跨设备时用一个二维网格：一次 shard_map，每根轴一个名字，集合通信指定沿哪根轴。
    pmap's own 0.12 docstring still says nested pmaps need the product of the mapped sizes to
    fit the device count; here 2·4 = 8 fits, and nested pmap fails all the same: every pmap
    builds a 1-D mesh of its own and calls shard_map with it, and the inner mesh disagrees with
    the context mesh the outer one has set (the message says context mesh … should match),
    whatever the sizes: a 1×1 nesting fails too. What is unsupported is the nesting itself, a
    pmap called inside a pmap. What still works is pmap around a transformation that takes an
    axis_name: the inner axis stays on each device, vectorised, and collectives can still name
    it. The whole jax.experimental.maps module (xmap) is gone. When both axes must span
    devices, use one 2-D mesh: one shard_map, one name per axis, and each collective says along
    which axis it runs.
    """

    def center_rows(v):  # subtract the mean of the "inner" group / 减去 inner 组的均值
        return v - lax.pmean(v, "inner")

    x = np.arange(8.0, dtype=np.float32).reshape(2, 4) ** 2
    want = x - x.mean(axis=1, keepdims=True)
    nested = jax.pmap(jax.pmap(center_rows, axis_name="inner"), axis_name="outer")
    for shape in [(2, 4), (1, 1)]:  # 与大小无关，1×1 也一样 / whatever the sizes, 1×1 too
        with raises_exactly(__) as info:
            nested(np.ones(shape, np.float32))
        assert "should match the mesh passed to shard_map" in str(info.value)
    inner_on_each_device = jax.pmap(__(center_rows, axis_name="inner"), axis_name="outer")
    np.testing.assert_allclose(inner_on_each_device(x), want)
    with raises_exactly(__):
        importlib.import_module("jax.experimental.maps")

    mesh = jax.make_mesh(__, ("outer", "inner"))
    out = jax.shard_map(
        center_rows, mesh=mesh, in_specs=P("outer", "inner"), out_specs=P("outer", "inner")
    )(put(x, mesh, P("outer", "inner")))
    np.testing.assert_allclose(out, want)
    assert len(out.sharding.device_set) == 8  # both axes span devices / 两个轴都分布在设备上


def test_experimental_shard_map_is_deprecated():
    """❌ 旧写法 / ✅ 推荐写法：jax.experimental.shard_map.shard_map 还能导入，但会发出一个警告
    （本课程把警告当错误）；它的 check_rep 参数在 jax.shard_map 里换了名字：新名字说的是 vma
    （varying manual axes，类型里记录每个值沿哪些网格轴不同）。查 jax.shard_map 的签名。
    jax.experimental.shard_map.shard_map still imports, with a warning (an error in this
    course); its check_rep argument has a new name in jax.shard_map, one that speaks of vma
    (varying manual axes: the type records along which mesh axes a value differs). Look at
    jax.shard_map's signature.
    """
    # JAX warns once per process (its deprecated attribute is behind functools.cache): import
    # the module afresh so the warning comes however many times this runs.
    sys.modules.pop("jax.experimental.shard_map", None)
    with warns_exactly(__, match="jax.shard_map"):
        from jax.experimental.shard_map import shard_map as old_shard_map
    assert "check_rep" in inspect.signature(old_shard_map).parameters
    assert __ in inspect.signature(jax.shard_map).parameters
    assert "check_rep" not in inspect.signature(jax.shard_map).parameters


def test_pmap_grad_then_pmean_overcounts_under_shard_map():
    """⚠️ 陷阱 / trap：pmap 的经典数据并行写法“每个设备求梯度，再 pmean”在 pmap 下是对的，逐字搬进
    shard_map 却算错了。shard_map 默认检查 vma：参数 p 按 P() 传入，是“不变的”（每个设备相同），
    它的梯度在转置时已经自动 psum 过一次了；再 pmean 什么也不改。错了多少倍？正确写法：对全局
    损失（pmean 过的损失）求导。
    pmap's classic data-parallel recipe, "grad on each device, then pmean", is right under pmap
    and wrong when copied into shard_map. shard_map checks vma by default: p comes in as P(),
    an invariant (equal on every device), so its gradient is already psum'd by the transpose;
    the pmean then changes nothing. Off by what factor? Right: differentiate the global
    (pmean'd) loss.
    """
    params, x, y = regression_data()
    reference = jax.grad(linear_loss)(params, x, y)

    def ported(p, xb, yb):
        return lax.pmean(jax.grad(linear_loss)(p, xb, yb), "batch")

    by_pmap = jax.pmap(ported, axis_name="batch", in_axes=(None, 0, 0))(
        params, x.reshape(N, -1, 4), y.reshape(N, -1, 2)
    )
    np.testing.assert_allclose(by_pmap[0][0], reference[0], rtol=1e-5)  # right under pmap

    mesh = mesh_1d("batch")
    args = (put(params, mesh, P()), put(x, mesh, P("batch")), put(y, mesh, P("batch")))
    specs = {"mesh": mesh, "in_specs": (P(), P("batch"), P("batch")), "out_specs": P()}
    by_shard_map = jax.jit(jax.shard_map(ported, **specs))(*args)
    ratio = np.asarray(by_shard_map[0]) / np.asarray(reference[0])
    np.testing.assert_allclose(ratio, np.full((4, 2), __), rtol=1e-5)

    def fixed(p, xb, yb):
        return jax.grad(lambda q: __)(p)

    for got, want in zip(jax.jit(jax.shard_map(fixed, **specs))(*args), reference, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_jit_with_a_sharded_batch_writes_the_all_reduce_for_you():
    """✅ 推荐写法：数据并行不必手写集合通信。把批次按 P("batch") 切开、参数复制，直接 jit 普通的
    grad：编译器自己插入跨设备求和，结果与单设备一致。数一数编译后 HLO 里的 all-reduce：两个梯度
    （w 和 b）的求和被 XLA 合并成了几条指令？这个数取决于 XLA 的 CPU 优化 pass
    cpu-all-reduce-combiner：用 XLA_FLAGS=--xla_disable_hlo_passes=cpu-all-reduce-combiner 关掉它，
    就是每个梯度一条；别的后端或 XLA 版本可能合并得不一样。
    Data parallelism needs no hand-written collective: shard the batch with P("batch"),
    replicate the parameters, and jit the plain grad; the compiler inserts the cross-device sum
    and the result equals one device's. Count the all-reduces in the compiled HLO: into how
    many instructions did XLA combine the sums of the two gradients (w and b)? The count is
    the work of XLA's CPU pass cpu-all-reduce-combiner: with
    XLA_FLAGS=--xla_disable_hlo_passes=cpu-all-reduce-combiner there is one per gradient, and
    another backend or XLA version may combine differently.
    """
    params, x, y = regression_data()
    reference = jax.grad(linear_loss)(params, x, y)
    mesh = mesh_1d("batch")
    args = (put(params, mesh, P()), put(x, mesh, P("batch")), put(y, mesh, P("batch")))
    grad_fn = jax.jit(jax.grad(linear_loss))
    for got, want in zip(grad_fn(*args), reference, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    hlo = grad_fn.lower(*args).compile().as_text()
    assert count_ops(hlo, "all-reduce") == __
    assert count_ops(hlo, "all-gather") == 0


# ---- 你来实现 / your code ---------------------------------------------------------------

MICROBATCHES = 4  # 每个设备把自己的 4 个样本分成 4 个微批次 / each device's block in 4 microbatches


def loop_and_entry_all_reduces(hlo_text):
    """编译后 HLO 里唯一的 while 循环：(它跑几次, 循环体里几条 all-reduce, ENTRY 里几条)。
    The compiled HLO's one while loop: (its trip count, the all-reduces in its body, those
    in ENTRY)."""
    pattern = r" while\(.*?body=(%[\w.]+).*?\"known_trip_count\":\{\"n\":\"(\d+)\""
    loops = re.findall(pattern, hlo_text)
    assert len(loops) == 1, f"expected one while loop, found {len(loops)}"
    body, trips = loops[0]
    computations = {c.split(" ")[0]: c for c in re.split(r"\n(?=\S)", hlo_text)}

    def all_reduces(text):
        return len(re.findall(r" all-reduce(?:-start)?\(", text))

    return int(trips), all_reduces(computations[body]), all_reduces(computations["ENTRY"])


def pmean_every_microbatch(p, xb, yb):
    """给定的对照：每个微批次都对 pmean 过的损失求导，梯度在循环里求和。
    The given contrast: each microbatch differentiates the pmean'd loss inside the loop."""
    xs, ys = xb.reshape(MICROBATCHES, -1, 4), yb.reshape(MICROBATCHES, -1, 2)

    def step(total, batch):
        grads = jax.grad(lambda q: lax.pmean(linear_loss(q, *batch), "batch"))(p)
        return jax.tree.map(jnp.add, total, grads), None

    total, _ = lax.scan(step, jax.tree.map(jnp.zeros_like, p), (xs, ys))
    return jax.tree.map(lambda g: g / MICROBATCHES, total)


def accumulated_grads(p, xb, yb):
    """梯度累积（gradient accumulation）：在 shard_map 里用 lax.scan 逐个走过本设备的
    MICROBATCHES 个微批次（xb.reshape(MICROBATCHES, -1, 4)），把各微批次上 linear_loss 的梯度
    累加起来，整个循环里不做任何通信；循环之后只 pmean 一次，返回整批平均损失的梯度。难点在 vma：
    p 按 P() 传入，是不变的，对它求导时转置会自动插入一次跨设备求和——在循环里就是每个微批次一次
    （上面给定的对照也是这样）。先把 p 变成沿 "batch" varying 的副本再求导，梯度就只是本地的。
    大约 8 行。
    Gradient accumulation: inside shard_map, walk this device's MICROBATCHES microbatches
    (xb.reshape(MICROBATCHES, -1, 4)) with lax.scan, adding up linear_loss's gradients with
    no communication inside the loop; after the loop pmean once and return the gradient of
    the whole batch's mean loss. The catch is vma: p comes in as P(), an invariant, and
    differentiating with respect to it makes the transpose insert a cross-device sum, in a
    loop once per microbatch (as the given contrast above does). Differentiate with respect to
    a copy of p made varying along "batch", and the gradients stay local. About 8 lines.
    """
    todo("accumulated_grads: 循环里不通信 / no communication inside the loop")


def test_gradient_accumulation_communicates_once_after_the_loop():
    """（先写好 accumulated_grads。）它和整批的梯度相同。编译后的 HLO 里 while 循环跑
    MICROBATCHES 次：给定的对照在循环体里做 all-reduce，每个微批次一次；你的循环体里一条也没有，
    all-reduce 都在循环之后（ENTRY 里）。条数本身取决于 XLA 的 CPU pass cpu-all-reduce-combiner
    （它把 w 和 b 的两次求和并成一条），在循环里还是循环外则不取决于它。梯度的运算都在循环里：
    循环之外几乎没有浮点运算（Program.costs 按位置数）；循环的每一趟只算一个微批次：循环里的浮点运算和给定的
    对照差不多，不是它的 MICROBATCHES 倍。
    (Write accumulated_grads first.) It equals the whole batch's gradient. In the compiled
    HLO the while loop runs MICROBATCHES times: the given contrast all-reduces inside the loop
    body, once per microbatch; your loop body holds none, and the all-reduces come after the
    loop (in ENTRY). Their number depends on XLA's CPU pass cpu-all-reduce-combiner (which
    merges the sums of w and b into one); whether they sit inside or outside the loop does not.
    The gradients' arithmetic is the loop's: next to no flops happen beside it (Program.costs
    counts them by place), and each trip works on one microbatch: the loop's flops are about
    the given contrast's, not MICROBATCHES times them.
    """
    params, x, y = regression_data()
    reference = jax.grad(linear_loss)(params, x, y)
    mesh = mesh_1d("batch")
    args = (put(params, mesh, P()), put(x, mesh, P("batch")), put(y, mesh, P("batch")))
    specs = {"mesh": mesh, "in_specs": (P(), P("batch"), P("batch")), "out_specs": P()}

    for fn in (pmean_every_microbatch, accumulated_grads):
        step = jax.jit(jax.shard_map(fn, **specs))
        for got, want in zip(step(*args), reference, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    contrast = jax.jit(jax.shard_map(pmean_every_microbatch, **specs))
    trips, in_loop, after = loop_and_entry_all_reduces(contrast.lower(*args).compile().as_text())
    assert (trips, after) == (MICROBATCHES, 0) and in_loop >= 1

    mine = jax.jit(jax.shard_map(accumulated_grads, **specs))
    trips, in_loop, after = loop_and_entry_all_reduces(mine.lower(*args).compile().as_text())
    assert (trips, in_loop) == (MICROBATCHES, 0) and after >= 1
    # the loop does the gradients' arithmetic: next to none beside it (a whole-batch gradient
    # outside the scan, the scan's sum selected away, is the other program)
    program = read(jax.make_jaxpr(jax.shard_map(accumulated_grads, **specs))(*args).jaxpr)
    flops = program.costs(("scan",)).flops
    assert flops["outside"] < 0.25 * flops["technique"], flops
    # each trip one microbatch's gradient (the whole block's, taken in one trip of the loop and
    # the other trips idle, is MICROBATCHES times the work)
    contrast_jaxpr = jax.make_jaxpr(jax.shard_map(pmean_every_microbatch, **specs))(*args).jaxpr
    assert flops["technique"] < 2 * read(contrast_jaxpr).costs(("scan",)).flops["technique"], flops
