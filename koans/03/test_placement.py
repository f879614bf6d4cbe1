"""03 · 把数据放上设备 / placing data on the devices.

分片之前先得把数据放上去，这里有几件实际工作里天天遇到的事：长度除不尽网格的批次（device_put
直接拒绝，补齐再遮掉）；`jax.make_array_from_callback` 让每个设备只读自己那一块（读大文件或
多主机加载时不必先在一处拼出整个数组），数据已经在设备上时
`jax.make_array_from_single_device_arrays` 把每个设备的那一块就地包成全局数组；内存种类（memory kind）`pinned_host` 把数组放在主机
内存里（卸载优化器状态或激活值；`jax.checkpoint` 的一种策略在前向之后把带名字的激活值送过去）；`jax.debug.visualize_array_sharding` 画出哪个设备拿着哪一块。

Before anything is sharded, the data must get onto the devices, and a few things come up
every day: a batch whose length the mesh does not divide (device_put refuses it; pad it and
mask the padding); `jax.make_array_from_callback`, which lets each device read only its own piece (no
need to assemble the whole array in one place when reading a large file or loading on many
hosts), and when the data is already on the devices `jax.make_array_from_single_device_arrays`
wraps each device's block, where it is, into a global array; the memory kind `pinned_host`, which keeps an array in host memory (offloading
optimizer state or activations; one `jax.checkpoint` policy sends a named activation there
after the forward pass); and `jax.debug.visualize_array_sharding`, which draws which
device holds which piece.
"""

import contextlib
import io
import itertools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives, equations

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8  # 本章的网格用 8 个设备（chapter.toml: devices = 8）/ this chapter's meshes use 8 devices


def put(x, mesh, spec):
    """把 x 按 spec 放到 mesh 上。/ Place x on mesh as spec says."""
    return jax.device_put(x, NamedSharding(mesh, spec))


def blocks(array):
    """每个设备上的那一块，按网格里设备的顺序。/ Each device's block, in the mesh's device order."""
    by_device = {s.device: np.asarray(s.data) for s in array.addressable_shards}
    return [by_device[d] for d in array.sharding.mesh.devices.flat]


def pad_rows(a, multiple):
    """沿第 0 轴补零，使长度成为 multiple 的倍数。/ Zero-pad axis 0 to a multiple of `multiple`."""
    missing = -len(a) % multiple
    return np.pad(a, [(0, missing)] + [(0, 0)] * (a.ndim - 1))


def row_losses(w, x, y):
    """每一行的平方误差。/ The squared error of every row."""
    return (x @ w - y) ** 2


def shard_map_blocks(fn, *args):
    """fn(*args) 的 jaxpr 里每个 shard_map 的函数体看到的输入块形状。
    The block shapes that the body of each shard_map in fn(*args)'s jaxpr receives."""
    shard_maps = equations("shard_map", fn, *args)
    return [[tuple(v.aval.shape) for v in e.params["jaxpr"].invars] for e in shard_maps]


def drawn(array):
    """visualize_array_sharding 画出的图（不带颜色），作为字符串。/ The picture, as a string."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        jax.debug.visualize_array_sharding(array, use_color=False)
    return out.getvalue()


# 4×2 网格上一个 (8, 4) 数组的两种切法画出来的样子 / two layouts of an (8, 4) array on the 4×2 mesh
COLUMNS_PICTURE = """\
┌───────────┬───────────┐
│           │           │
│           │           │
│           │           │
│           │           │
│CPU 0,2,4,6│CPU 1,3,5,7│
│           │           │
│           │           │
│           │           │
│           │           │
└───────────┴───────────┘
"""
STRIPES_PICTURE = """\
┌──────────┐
│  CPU 0   │
├──────────┤
│  CPU 1   │
├──────────┤
│  CPU 2   │
├──────────┤
│  CPU 3   │
├──────────┤
│  CPU 4   │
├──────────┤
│  CPU 5   │
├──────────┤
│  CPU 6   │
├──────────┤
│  CPU 7   │
└──────────┘
"""


# ---- 你来实现 / your code ---------------------------------------------------------------


def padded_mse(w, x, y, valid):
    """补齐后的批次上的均方误差：x (B, 3) 与 y (B,) 的末尾几行是补的零，valid (B,) 标出真实的行。
    补的行不能算进去：结果必须等于只用真实样本算的 mean((x @ w - y) ** 2)。jit 之下 valid 是
    追踪值，不能用它做布尔下标（形状会依赖数值）。大约 3 行。

    The mean squared error on a padded batch: the last rows of x (B, 3) and y (B,) are zero
    padding, and valid (B,) marks the real rows. The padding must not count: the result must
    equal mean((x @ w - y) ** 2) over the real samples only. Under jit valid is a tracer, so it
    cannot serve as a boolean index (the shape would depend on the values). About 3 lines.
    """
    todo("padded_mse: 只对 valid 的行求均值 / the mean over the valid rows only")


def mean_loss_on_mesh(w, x, y, mesh):
    """x (B, 3) 与 y (B,) 的均方误差 mean(row_losses(w, x, y))，用 jax.shard_map 沿 mesh 的轴 "i"
    算：每个设备只算自己那几行。B 不一定能被设备数整除（shard_map 不补齐，会报错），所以先在
    jit 里沿第 0 轴补零（B 和设备数都是静态的 Python 整数），再用一个 valid 掩码让补的行不算数；
    函数体里把本设备真实行的误差和与行数分别沿 "i" 加起来再相除。不许先把所有行收到一个设备上
    （不要 all_gather）。w 不切分（P()）。大约 10 行。

    The mean squared error mean(row_losses(w, x, y)) of x (B, 3) and y (B,), computed with
    jax.shard_map along the mesh axis "i": each device computes its own rows only. B need not
    be divisible by the number of devices (shard_map pads nothing and fails), so first pad
    axis 0 with zeros inside jit (B and the device count are static Python ints), then let a
    valid mask keep the padded rows from counting; in the body add up this device's sum of real
    rows' errors and its number of real rows along "i", each, then divide. Gathering all rows
    onto one device first is not allowed (no all_gather). w is not split (P()). About 10 lines.
    """
    todo("mean_loss_on_mesh: 在 jit 里补齐、遮掉、沿 i 相加 / pad inside jit, mask, add up along i")


def stitch(pieces, mesh, spec):
    """pieces 是 {设备: 这个设备上已经算好的那一块}（单设备数组，每个设备一块，顺序任意）。把它们
    拼成按 NamedSharding(mesh, spec) 分片的一个全局数组，不移动、不复制任何数据：每一块就地成为
    全局数组在那个设备上的分片。全局形状要你算：块沿每根轴的长度，乘以 spec 在那根轴上写的网格轴
    的大小（spec 的一项可以是 None、一个轴名或几个轴名的元组；mesh.shape 是 {轴名: 大小}）。
    不许先在一处拼出整个数组（np.concatenate 和 jax.device_put 整个数组都会复制；
    make_array_from_callback 要的是主机上的数据，在加速器上就是绕主机走一趟）。大约 6 行。
    pieces is {device: the block already computed on that device} (single-device arrays, one
    per device, in any order). Stitch them into one global array sharded by
    NamedSharding(mesh, spec) without moving or copying any data: each block becomes, where it
    is, the global array's shard on that device. Work out the global shape: the block's length
    along each axis times the sizes of the mesh axes spec names for that axis (an entry of spec
    is None, one axis name or a tuple of names; mesh.shape is {name: size}). Never assemble
    the whole array in one place (np.concatenate and jax.device_put of the whole array copy;
    make_array_from_callback wants host data, a round trip through the host on an
    accelerator). About 6 lines.
    """
    todo("stitch: 全局形状，再把每块就地包起来 / the global shape, then wrap each block where it is")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_a_batch_the_mesh_does_not_divide_is_padded_and_masked():
    """10 个样本放不进按 P("i") 切的 8 个设备：device_put 不做不均匀的切分，直接报错（哪个
    异常类？）。办法是补到 8 的倍数，再在损失里遮掉补的行：写好 padded_mse。补齐后每个设备
    2 行，各个设备上真实的行各有几行？
    10 samples do not fit 8 devices split by P("i"): device_put does no uneven split and fails
    (which exception class?). The remedy is to pad to a multiple of 8 and mask the padded
    rows in the loss: write padded_mse. Once padded each device holds 2 rows: how many of them
    are real, device by device?
    """
    rng = np.random.default_rng(0)
    w = rng.standard_normal(3, dtype=np.float32)
    x = rng.standard_normal((10, 3), dtype=np.float32)
    y = rng.standard_normal(10, dtype=np.float32)
    mesh = jax.make_mesh((N,), ("i",))
    with raises_exactly(__):
        put(x, mesh, P("i"))

    valid = pad_rows(np.ones(10, bool), N)
    args = (put(w, mesh, P()), *(put(pad_rows(a, N), mesh, P("i")) for a in (x, y, valid)))
    assert [int(b.sum()) for b in blocks(args[3])] == __

    def reference(w):
        return jnp.mean((x @ w - y) ** 2)

    loss, grad = jax.jit(jax.value_and_grad(padded_mse))(*args)
    want_loss, want_grad = jax.jit(jax.value_and_grad(reference))(w)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6)


def test_an_uneven_split_is_padded_by_auto_mode_and_refused_by_explicit_and_shard_map():
    """⚠️ 陷阱 / trap：10 行切给 8 个设备。jit 的 in_shardings 和上一个 koan 的 device_put
    一样拒绝它（Auto 网格上报的是 JAX 内部的一个异常子类）。jit 里面 Auto 模式的
    with_sharding_constraint 却接受它：编译器自己补齐。编译后的 HLO
    里把结果收回来的 all-gather 是什么类型（补齐后的形状）？这样约束过的值作为 jit 的输出时
    成了什么分片（文档说过）？Explicit 模式里的 reshard 不补齐，报哪个异常类？shard_map
    （Manual）也不补齐：自己补。写好 mean_loss_on_mesh：在 jit 里补齐、用掩码遮掉补的行、
    沿 "i" 加起来；检查值和梯度等于不补齐的参照（几种批大小，有一批很大；真实的行也可能全是 0、目标也是 0：
    掩码只看行数），每个设备的块有几行，还有 HLO 里没有 all-gather。
    ⚠️ Trap: 10 rows split over 8 devices. jit's in_shardings refuses it like the device_put of
    the koan before (on an Auto mesh with an exception subclass internal to JAX). Inside jit,
    Auto mode's with_sharding_constraint accepts it: the
    compiler pads by itself. In the compiled HLO, what type has the all-gather that
    brings the result back (the padded shape)? Which sharding does such a constrained value
    have as jit's output (the documentation says)? Explicit mode's reshard pads nothing: which
    exception class does it raise? shard_map (Manual) pads nothing either: pad yourself. Write
    mean_loss_on_mesh: pad inside jit, mask the padded rows, add up along "i"; the koan checks
    the value and gradient against the unpadded reference (batches of several sizes, a large
    one too; a real row may be all zeros with a zero target: the mask counts rows), how many
    rows each device's block holds, and that the HLO has no all-gather.
    """
    rng = np.random.default_rng(0)
    x = rng.standard_normal((10, 3), dtype=np.float32)
    auto = jax.make_mesh((N,), ("i",), axis_types=(AxisType.Auto,))
    with pytest.raises(Exception, match="partitioned 8 times"):
        jax.jit(jnp.sin, in_shardings=NamedSharding(auto, P("i")))(x)

    def constrained(a):
        return lax.with_sharding_constraint(jnp.sin(a), NamedSharding(auto, P("i"))) * 2

    padded_by_xla = jax.jit(constrained)
    out = padded_by_xla(x)
    np.testing.assert_allclose(out, np.sin(x) * 2, rtol=1e-6)
    assert collectives(padded_by_xla.lower(x).compile().as_text()) == {"all-gather": [__]}
    assert out.sharding.spec == __

    explicit = jax.make_mesh((N,), ("i",))
    with jax.set_mesh(explicit), raises_exactly(__):
        jax.jit(lambda a: jax.sharding.reshard(jnp.sin(a), P("i")))(x)
    with pytest.raises(Exception, match="not evenly divisible"):
        jax.jit(jax.shard_map(jnp.sin, mesh=auto, in_specs=P("i"), out_specs=P("i")))(x)

    w = rng.standard_normal(3, dtype=np.float32)
    for batch, rows_per_device in [(1000, 125), (10, 2), (3, 1), (16, 2)]:
        xb = rng.standard_normal((batch, 3), dtype=np.float32)
        yb = rng.standard_normal(batch, dtype=np.float32)
        xb[1], yb[1] = 0.0, 0.0  # a real row of zeros with a zero target is still a real row

        def loss(w, xb=xb, yb=yb):
            return mean_loss_on_mesh(w, xb, yb, auto)

        def reference(w, xb=xb, yb=yb):
            return jnp.mean(row_losses(w, xb, yb))

        step = jax.jit(jax.value_and_grad(loss))
        got, want = step(w), jax.jit(jax.value_and_grad(reference))(w)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
        blocks_seen = shard_map_blocks(loss, w)
        assert blocks_seen and all((rows_per_device, 3) in b for b in blocks_seen), blocks_seen
        found = collectives(step.lower(w).compile().as_text())
        assert "all-gather" not in found and "all-reduce" in found, found


def test_make_array_from_callback_asks_each_device_for_its_piece():
    """jax.make_array_from_callback(shape, sharding, load) 为每个设备调用一次 load(index)：index 是
    一组 slice，说这个设备那一块在全局数组里的位置；load 返回那一块。这样谁也不用先拿着整个数组
    （source 在这里代表磁盘上的文件）。4×2 网格上按 P("X") 切：load 被调用几次？其中有几种不同的
    index（沿 Y 的设备要同一块）？
    jax.make_array_from_callback(shape, sharding, load) calls load(index) once per device:
    index is a tuple of slices saying where that device's block sits in the global array, and
    load returns that block. Nobody has to hold the whole array first (source stands for a file
    on disk). Split by P("X") on the 4×2 mesh: how many times is load called? How many
    different indices are there (the devices along Y want the same block)?
    """
    source = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    asked = []

    def load(index):
        asked.append(index)
        return source[__]

    mesh = jax.make_mesh((4, 2), ("X", "Y"))
    x = jax.make_array_from_callback(source.shape, NamedSharding(mesh, P("X")), load)
    np.testing.assert_array_equal(x, source)
    assert len(asked) == __
    assert len(set(map(str, asked))) == __
    assert asked[0] == (slice(0, 2), slice(None))


def test_make_array_from_single_device_arrays_wraps_the_buffers_where_they_are():
    """数据已经在设备上时（每个设备自己算出、或自己从磁盘读进了它那一块），
    jax.make_array_from_single_device_arrays(shape, sharding, arrays) 把每个设备一个的单设备数组
    包成一个全局数组：它只检查每一块的形状和设备，不移动数据——全局数组在每个设备上的分片还是原来
    那块缓冲区吗（unsafe_buffer_pointer 是缓冲区的地址）？把同样的值 jax.device_put 上去呢？块的形状
    不对时抛出什么？
    When the data is already on the devices (each device computed, or read from disk, its own
    block), jax.make_array_from_single_device_arrays(shape, sharding, arrays) wraps the
    single-device arrays, one per device, into one global array: it checks each block's shape
    and device and moves no data. Is the global array's shard on each device still the very
    buffer it was given (unsafe_buffer_pointer is the buffer's address)? And after a
    jax.device_put of the same values? What is raised when a block has the wrong shape?
    """
    source = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    mesh = jax.make_mesh((4, 2), ("X", "Y"))
    sharding = NamedSharding(mesh, P("X"))
    where = sharding.addressable_devices_indices_map(source.shape)  # {设备: 它那一块的位置}
    pieces = [jax.device_put(source[index], device) for device, index in where.items()]
    address = {p.devices().pop(): p.unsafe_buffer_pointer() for p in pieces}

    def same_buffers(array):
        return all(s.data.unsafe_buffer_pointer() == address[s.device] for s in array.addressable_shards)

    wrapped = jax.make_array_from_single_device_arrays(source.shape, sharding, pieces)
    np.testing.assert_array_equal(wrapped, source)
    assert wrapped.sharding.shard_shape(wrapped.shape) == __
    assert same_buffers(wrapped) is __
    assert same_buffers(jax.device_put(source, sharding)) is __
    with raises_exactly(__):
        jax.make_array_from_single_device_arrays(source.shape, sharding, [p[:1] for p in pieces])


@pytest.mark.parametrize("spec", [P("X"), P("Y", "X"), P(None, ("Y", "X")), P("Y")], ids=str)
def test_stitch_per_device_results_into_one_global_array(spec):
    """（先写好 stitch。）每个设备手里已经有自己那一块（顺序打乱了给你）。stitch 返回的全局数组
    形状、分片、数值都对（四种 spec、两种全局形状、三种网格形状，其中一种有一根 spec 不提的轴：沿它复制），
    并且每个分片正是给你的那块缓冲区：没有一个字节被复制。
    (Write stitch first.) Each device already holds its own block (handed to you in shuffled
    order). The global array stitch returns has the right shape, sharding and values (four
    specs, two global shapes, three mesh shapes, one with an axis no spec names: copies along
    it), and every shard is the very buffer you were given: not one byte was copied.
    """
    meshes = [jax.make_mesh(axes, ("X", "Y")) for axes in ((4, 2), (2, 4))]  # sizes: mesh.shape
    meshes.append(jax.make_mesh((2, 2, 2), ("X", "Y", "Z")))  # Z: named by no spec
    for mesh, (rows, columns) in itertools.product(meshes, ((8, 16), (4, 24))):
        source = np.arange(float(rows * columns), dtype=np.float32).reshape(rows, columns)
        where = NamedSharding(mesh, spec).addressable_devices_indices_map(source.shape)
        pieces = {d: jax.device_put(source[i] * 1.0, d) for d, i in reversed(where.items())}
        address = {d: p.unsafe_buffer_pointer() for d, p in pieces.items()}

        out = stitch(pieces, mesh, spec)
        assert out.shape == source.shape
        assert out.sharding == NamedSharding(mesh, spec)
        np.testing.assert_array_equal(out, source)
        assert {s.device: s.data.unsafe_buffer_pointer() for s in out.addressable_shards} == address


def test_pinned_host_memory_keeps_an_array_off_the_device():
    """每个设备有几种内存（memory kind）；pinned_host 是卸载（offload）用的主机内存。内存种类是类型
    的一部分（jax.typeof 打印的类型里写着它）。输入在主机内存里时，jit 的结果默认放在哪种
    内存里？在 jit 里把一个值送到主机内存，要给 jax.device_put 一个 jax.memory.Space 枚举的
    成员。编译后的程序在入口布局里给主机内存里的缓冲区标上内存空间 S(5)。在 CPU 上两种内存
    都是同一块主机 RAM：这里检查的是放在哪里、怎么编译，量不出节省。
    Each device offers several memories (memory kinds); pinned_host is the host memory that
    offloading uses. The memory kind is part of the type (the type jax.typeof prints shows it).
    When the input lives in host memory, in which memory does a jit result land by default? To
    send a value to host memory inside jit, give jax.device_put a member of the
    jax.memory.Space enum. The compiled program's entry layout marks buffers in host memory
    with memory space S(5). On a CPU both memories are the same host RAM: this koan checks
    where arrays are placed and how they are compiled, not a saving.
    """
    mesh = jax.make_mesh((N,), ("i",))
    x = put(np.arange(16.0, dtype=np.float32), mesh, P("i"))
    kinds = sorted(m.kind for m in jax.devices()[0].addressable_memories())
    assert kinds == __

    on_host = jax.device_put(x, NamedSharding(mesh, P("i"), memory_kind="pinned_host"))
    assert str(jax.typeof(on_host)) == __
    assert jax.jit(lambda v: v * 2)(on_host).sharding.memory_kind == __

    with jax.set_mesh(mesh):
        offload = jax.jit(lambda v: jax.device_put(v * 2, __))
        out = offload(x)
        hlo = offload.lower(x).compile().as_text()
    np.testing.assert_array_equal(out, np.arange(16.0) * 2)
    assert out.sharding.memory_kind == "pinned_host"
    layout = re.search(r"entry_computation_layout=\{(.*?)\}, ", hlo).group(1)
    assert layout == "(f32[2]{0})->f32[2]{0:S(5)}"


def test_a_remat_policy_offloads_a_named_activation_to_pinned_host():
    """激活值卸载（activation offloading）：jax.checkpoint 的策略决定前向算出的哪些中间值留给反向
    （residual），哪些到反向时重算；jax.checkpoint_policies 里有一种策略还能把带名字的中间值
    （checkpoint_name）在前向之后送到 pinned_host 内存，反向用时再取回来，设备内存里就不必一直
    存着它。写出这个策略：名为 "hidden" 的激活值卸载到主机，别的什么都不存。检查的是 jit 过的
    jax.vjp 留下的 residual 数组各在哪种内存里，还有梯度不变；CPU 上两种内存是同一块 RAM，
    量不出节省。
    Activation offloading: jax.checkpoint's policy decides which intermediates of the forward
    pass are kept for the backward pass (residuals) and which are recomputed there; one policy
    in jax.checkpoint_policies can also send a named intermediate (checkpoint_name) to
    pinned_host memory after the forward pass and fetch it back when the backward pass needs
    it, so device memory need not hold it meanwhile. Write that policy: the activation named
    "hidden" offloaded to the host, nothing else saved. The koan checks in which memory each
    residual array of a jitted jax.vjp lives, and that the gradients do not change; on a CPU
    both memories are the same RAM, so no saving can be measured.
    """

    def layer(w, x):
        hidden = checkpoint_name(jnp.sin(x @ w), "hidden")
        return jnp.sum(jnp.cos(hidden @ w))

    def residuals(f, w, x):
        """(形状, 内存种类)：jit 过的 vjp 为反向留下的数组 / what a jitted vjp keeps for backward."""
        _, backward = jax.jit(lambda w, x: jax.vjp(f, w, x))(w, x)
        leaves = [a for a in jax.tree.leaves(backward) if isinstance(a, jax.Array)]
        return sorted((a.shape, a.sharding.memory_kind) for a in leaves)

    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.standard_normal((16, 16), dtype=np.float32) / 4)
    x = jnp.asarray(rng.standard_normal((4, 16), dtype=np.float32))

    policy = __(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=["hidden"],
        offload_src="device",
        offload_dst=__,
    )
    offloaded = jax.checkpoint(layer, policy=policy)
    np.testing.assert_allclose(
        jax.jit(jax.grad(offloaded))(w, x), jax.jit(jax.grad(layer))(w, x), rtol=1e-5
    )
    kept = residuals(offloaded, w, x)
    assert kept == [((4, 16), "device"), ((4, 16), "pinned_host"), ((16, 16), "device")]
    # 什么都不存时只剩两个输入，hidden 在反向里重算 / saving nothing leaves the two inputs
    nothing = residuals(
        jax.checkpoint(layer, policy=jax.checkpoint_policies.nothing_saveable), w, x
    )
    assert nothing == [((4, 16), "device"), ((16, 16), "device")]


def test_visualize_array_sharding_draws_who_holds_what():
    """jax.debug.visualize_array_sharding 把一个一维或二维数组的分片画成表格：每格是一块，格里写
    持有它的设备。（它用 rich 画图，rich 随 flax 一起装好了。）4×2 网格上，哪两种 PartitionSpec
    画出下面两张图？
    jax.debug.visualize_array_sharding draws the sharding of a 1-D or 2-D array as a table:
    each cell is a block, labelled with the devices that hold it. (It draws with rich, which
    comes installed with flax.) On the 4×2 mesh, which two PartitionSpecs draw the two pictures
    below?
    """
    mesh = jax.make_mesh((4, 2), ("X", "Y"))
    a = np.zeros((8, 4), np.float32)
    assert drawn(put(a, mesh, __)) == COLUMNS_PICTURE
    assert drawn(put(a, mesh, __)) == STRIPES_PICTURE
