"""10 · 分片下的随机数 / randomness under sharding.

训练大模型时随机数总是和分片一起出现：参数在网格上初始化，dropout 掩码跟着激活的分片走，
每个设备只该生成自己那一块。本文件在 8 个 CPU 设备上检查：哪些 PRNG 实现能分片生成、
Explicit 网格上的 `out_sharding=` 写法、数据 × 模型二维网格上每个设备该用哪个 key、
一个 key 在任何网格上都给出同样参数的初始化，以及实验性的有状态生成器 `StatefulPRNG`。

Training a large model, random numbers always come with sharding: parameters are initialised
on a mesh, dropout masks follow the activations' sharding, and each device should generate only
its own block. This file checks on 8 CPU devices which PRNG implementations can generate
sharded, the `out_sharding=` idiom of Explicit meshes, which key each device of a 2-D data ×
model mesh should use, an initialisation that gives the same parameters from one key on any
mesh, and the experimental stateful generator `StatefulPRNG`.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import random as stateful
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives, first_failing_stage

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8  # 本章的网格用 8 个设备（chapter.toml: devices = 8）/ this chapter's meshes use 8 devices
SHAPE = (64, 16)


def largest_u32_buffer(hlo: str) -> int:
    """编译后 HLO 里最大的 u32 数组有几个元素：一个设备上同时存在的随机比特最多有多少个字。
    The element count of the largest u32 array in compiled HLO: the most random words one
    device holds at once."""
    sizes = [
        int(np.prod([int(d) for d in dims.split(",")]))
        for dims in re.findall(r"u32\[(\d+(?:,\d+)*)\]", hlo)
    ]
    return max(sizes)


def same_keys(a, b) -> bool:
    return bool(np.array_equal(jax.random.key_data(a), jax.random.key_data(b)))


def auto_mesh(shape, names, devices=None):
    """An Auto mesh over the first prod(shape) devices."""
    if devices is None:
        return jax.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(shape))
    return Mesh(np.array(devices).reshape(shape), names)


# ---- 检查 / checks ----------------------------------------------------------------------


def test_which_implementations_generate_sharded():
    """同一个分片生成程序（jit + out_shardings，按行切到 8 个设备）换不同的 PRNG 实现编译：
    threefry（partitionable）每个设备只为自己的块生成比特；rbg / unsafe_rbg 能编译、值也对，但
    每个设备都生成整个数组再取自己那一块。读 HLO 里每个设备最大的随机比特缓冲。（philox 是下一个
    koan。）
    Compile the same sharded generation (jit + out_shardings, rows split over 8 devices) with
    different PRNG implementations: threefry (partitionable) makes bits for each device's block
    only; rbg / unsafe_rbg compile and give the right values, but every device generates the
    whole array and cuts out its block. Read each device's largest buffer of random words from
    the HLO. (philox is the next koan.)
    """
    sharding = NamedSharding(auto_mesh((N,), ("x",)), P("x"))

    def generate(key):
        return jax.random.uniform(key, SHAPE)

    sharded = jax.jit(generate, out_shardings=sharding)
    largest = {}
    for impl in ("threefry2x32", "rbg", "unsafe_rbg"):
        key = jax.random.key(42, impl=impl)
        compiled = sharded.lower(key).compile()
        hlo = compiled.as_text()
        np.testing.assert_array_equal(compiled(key), generate(key))
        assert collectives(hlo) == {}  # no communication in any of them
        largest[impl] = largest_u32_buffer(hlo)
    assert largest == {"threefry2x32": 128, "rbg": 1024, "unsafe_rbg": 1024}


def test_philox_fails_on_several_devices_because_of_mulhi(capfd):
    """⚠️ 陷阱 / trap：philox 的分片生成会失败，但原因不在 philox，也不在分片本身：
    philox 的每一轮用 lax.mulhi（32 位乘法的高 32 位），它降级成 StableHLO 里的 chlo.mulhi；
    为多个设备准备的程序（任何分片标注，连“复制到 8 个设备”也算，或者 shard_map）要先转换
    一遍，这一步不认识 chlo.mulhi，把它当成 mhlo.unknown 而失败。所以单独一个 mulhi 也一样失败；
    下一个会想到的办法——在 shard_map 里每个设备用 fold_in(axis_index) 各自抽 philox——也一样。
    只有一个设备的程序（普通 jit，或者只有 1 个设备的网格）没有这一步，能运行。能用的办法：
    threefry（上一个 koan）；或者在单设备程序里抽 philox，再 device_put 到网格上（整个数组先在
    一个设备上生成）。philox 在哪一步（lower / compile / execute）失败、以哪个异常失败？
    ⚠️ trap: philox's sharded generation fails, but the cause is neither philox nor
    sharding as such: each philox round uses lax.mulhi (the high 32 bits of a 32-bit product),
    which lowers to chlo.mulhi in the StableHLO; a program meant for several devices (any
    sharding annotation, even "replicated over 8 devices", or a shard_map) goes through one more
    conversion, which does not know chlo.mulhi, turns it into mhlo.unknown and fails. So a lone
    mulhi fails the same way, and so does the next idea one reaches for: per-device philox
    draws in shard_map, each device folding in its axis_index. A one-device program (plain jit,
    or a mesh of one device) has no such step and runs. What works: threefry (the koan
    before); or draw with philox in a one-device program and device_put the result onto the
    mesh (the whole array is made on one device first). At which stage (lower / compile /
    execute) does philox fail, and with which exception?
    """
    mesh = auto_mesh((N,), ("x",))
    sharding = NamedSharding(mesh, P("x"))

    def generate(key):
        return jax.random.uniform(key, SHAPE)

    sharded = jax.jit(generate, out_shardings=sharding)
    philox = jax.random.key(42, impl="philox4x32")
    assert "chlo.mulhi" in jax.jit(generate).lower(philox).as_text()  # philox's rounds
    jax.block_until_ready(jax.jit(generate)(philox))  # one device: fine
    stage = first_failing_stage(sharded, philox)
    assert stage == "compile"
    with raises_exactly(jax.errors.JaxRuntimeError) as info:
        sharded(philox)
    assert "Unable to convert MHLO to StableHLO" in str(info.value)
    # the converter's own diagnostic goes to stderr / 转换器自己的诊断写在标准错误里
    assert "failed to legalize operation 'mhlo.unknown'" in capfd.readouterr().err

    words = jnp.arange(SHAPE[0] * SHAPE[1], dtype=jnp.uint32).reshape(SHAPE)
    one_device = auto_mesh((1,), ("x",), jax.devices()[:1])
    in_manual = jax.shard_map(
        lambda a: lax.mulhi(a, a), mesh=mesh, in_specs=P("x"), out_specs=P("x")
    )

    def per_device(key):  # each device folds in its position and draws its own block
        k = jax.random.fold_in(key, lax.axis_index("x"))
        return jax.random.uniform(k, (SHAPE[0] // N, SHAPE[1]))

    drawn = jax.shard_map(per_device, mesh=mesh, in_specs=P(), out_specs=P("x"))
    replicated = NamedSharding(mesh, P())
    assert first_failing_stage(jax.jit(lax.mulhi, out_shardings=sharding), words, words) == stage
    assert first_failing_stage(jax.jit(lax.mulhi, out_shardings=replicated), words, words) == stage
    assert first_failing_stage(in_manual, words) == stage
    assert first_failing_stage(drawn, philox) == stage
    on_one = NamedSharding(one_device, P("x"))
    assert first_failing_stage(jax.jit(lax.mulhi, out_shardings=on_one), words, words) is None

    placed = jax.device_put(jax.jit(generate)(philox), sharding)  # what works with philox
    assert placed.sharding.spec == P("x")
    np.testing.assert_array_equal(placed, generate(philox))


def test_explicit_meshes_take_out_sharding_in_the_draw():
    """✅ 两种写法 / two idioms：Auto 网格上，分片写在 jit 的 `out_shardings=`（一个
    NamedSharding）里；Explicit 网格（`jax.make_mesh` 的默认）上分片是类型的一部分，
    jax.random 的函数直接收 `out_sharding=`（一个 PartitionSpec），不必 jit。两种写法都按行切到
    8 个设备，值和不分片生成的逐位相同。
    ✅ two idioms: on an Auto mesh the sharding goes into jit's `out_shardings=` (a
    NamedSharding); on an Explicit mesh (`jax.make_mesh`'s default) the sharding is part of the
    type and jax.random's functions take `out_sharding=` (a PartitionSpec) themselves, no jit
    needed. Both split the rows over 8 devices, and the values equal the unsharded draw bit for
    bit.
    """
    key = jax.random.key(42)

    def normal(k):
        return jax.random.normal(k, SHAPE)

    reference = normal(key)

    auto = auto_mesh((N,), ("x",))
    by_jit = jax.jit(normal, out_shardings=NamedSharding(auto, P("x")))(key)

    explicit = jax.make_mesh((N,), ("x",))
    assert explicit.axis_types == (AxisType.Explicit,)
    with jax.set_mesh(explicit):
        in_the_draw = jax.random.normal(key, SHAPE, out_sharding=P("x"))
        unsharded_type = jax.typeof(jax.random.normal(key, SHAPE))
    assert str(jax.typeof(in_the_draw)) == "float32[64@x,16]"  # the sharding is in the type
    assert str(unsharded_type) == "float32[64,16]"  # without out_sharding: replicated

    for drawn in (by_jit, in_the_draw):
        assert len(drawn.sharding.device_set) == N
        assert {s.data.shape for s in drawn.addressable_shards} == {(8, 16)}
        np.testing.assert_array_equal(drawn, reference)


# 数据 × 模型二维网格：4 份数据，每份由 2 个模型并行的设备共同处理。
# A 2-D data × model mesh: 4 data shards, each processed by 2 model-parallel devices.
DATA, MODEL = 4, 2


def dropout_key(key):
    """在 shard_map（网格轴 "data" 和 "model"）里调用：返回这个设备的 dropout 用的 key。同一份
    数据的两个模型并行副本必须用同一个掩码（它们算的是同一批样本的同一个激活），不同的数据分片
    要用不同的掩码，而且要和第 d 个数据分片的 fold_in(key, d) 一致。约 1 行。
    Called inside shard_map (mesh axes "data" and "model"): return the key this device's dropout
    uses. The two model-parallel replicas of one data shard must use the same mask (they compute
    the same activation of the same examples), different data shards different masks, equal to
    fold_in(key, d) for data shard d. About 1 line.
    """
    return jax.random.fold_in(key, lax.axis_index("data"))


def whole_device_key(key):
    """⚠️ 常见的错法 / the usual mistake: fold in the index of the whole device."""
    return jax.random.fold_in(key, lax.axis_index(("data", "model")))


def _masks_per_device(key_of_device, key, x, mesh):
    """Every device's dropout mask, stacked: shape (DATA, MODEL, rows per data shard, cols)."""

    def body(k, x):
        return jax.random.bernoulli(key_of_device(k), 0.5, x.shape)[None]

    run = jax.shard_map(
        body, mesh=mesh, in_specs=(P(), P("data", None)), out_specs=P(("data", "model"))
    )
    masks = np.asarray(jax.jit(run)(key, x))
    return masks.reshape(DATA, MODEL, *masks.shape[1:])


def _dropout_layer(key_of_device, mesh):
    """Dropout on activations sharded over "data" and replicated over "model"."""

    def body(k, x):
        keep = jax.random.bernoulli(key_of_device(k), 0.5, x.shape)
        return jnp.where(keep, x / 0.5, 0.0)

    return jax.jit(
        jax.shard_map(body, mesh=mesh, in_specs=(P(), P("data", None)), out_specs=P("data", None))
    )


def test_dropout_keys_on_a_data_model_mesh():
    """⚠️ 陷阱 / trap：在数据 × 模型网格上，把整个设备的序号 fold_in 进 key，会让同一份数据的
    模型并行副本得到不同的 dropout 掩码：它们本该算同一个激活，现在却各算各的。只 fold_in 数据轴
    的序号才对。shard_map 的复制检查（check_vma）能在追踪时发现错的那一种：输出声明为在
    "model" 轴上复制，值却随 "model" 变化。
    ⚠️ trap: on a data × model mesh, folding the whole device index into the key gives the
    model-parallel replicas of one data shard different dropout masks: they should compute one
    activation and now each computes its own. Fold in the data-axis index only. shard_map's
    replication check (check_vma) catches the wrong one at trace time: the output is declared
    replicated over "model", yet the value varies along "model".
    """
    mesh = jax.make_mesh((DATA, MODEL), ("data", "model"))
    key = jax.random.key(0)
    x = jax.device_put(np.ones((8, 16), np.float32), NamedSharding(mesh, P("data", None)))

    masks = _masks_per_device(dropout_key, key, x, mesh)
    for d in range(DATA):
        np.testing.assert_array_equal(masks[d, 0], masks[d, 1])  # replicas share the mask
        reference = jax.random.bernoulli(jax.random.fold_in(key, d), 0.5, masks.shape[2:])
        np.testing.assert_array_equal(masks[d, 0], reference)
    assert len({masks[d, 0].tobytes() for d in range(DATA)}) == DATA  # one mask per data shard
    other = jax.random.key(1)  # another key, other masks: the key handed in decides them
    other_masks = _masks_per_device(dropout_key, other, x, mesh)
    for d in range(DATA):
        reference = jax.random.bernoulli(jax.random.fold_in(other, d), 0.5, masks.shape[2:])
        np.testing.assert_array_equal(other_masks[d, 1], reference)
    out = _dropout_layer(dropout_key, mesh)(key, x)
    assert out.shape == (8, 16)

    wrong = _masks_per_device(whole_device_key, key, x, mesh)
    assert not any(np.array_equal(wrong[d, 0], wrong[d, 1]) for d in range(DATA))
    with raises_exactly(ValueError) as info:
        _dropout_layer(whole_device_key, mesh)(key, x)
    assert "replicated across mesh axis 'model'" in str(info.value)


def init_params(key):
    """A two-layer MLP's weights from one key (given)."""
    k_up, k_down = jax.random.split(key)
    return {
        "up": 0.02 * jax.random.normal(k_up, (64, 256)),
        "down": 0.02 * jax.random.normal(k_down, (256, 64)),
    }


SPECS = {"up": P(None, "model"), "down": P("model", None)}  # Megatron: columns, then rows


def sharded_init(mesh):
    """返回一个 jit 过的函数 key → 参数：和 init_params(key) 的值相同，但参数一出生就按
    SPECS 分片在 mesh 上，每个设备只生成自己那一块（不先在一个设备上造出整个数组再切）。
    约 2 行。
    Return a jitted function key → parameters: the values of init_params(key), but born sharded
    on mesh by SPECS, each device generating only its own block (not the whole array on one
    device, then cut). About 2 lines.
    """
    shardings = jax.tree.map(lambda spec: NamedSharding(mesh, spec), SPECS)
    return jax.jit(init_params, out_shardings=shardings)


def local_init(key, mesh):
    """⚠️ 常见的错法 / the usual mistake: each device draws its block with its own key."""

    def body(k):
        k = jax.random.fold_in(k, lax.axis_index("model"))
        width = 256 // mesh.shape["model"]
        return 0.02 * jax.random.normal(k, (64, width))

    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(), out_specs=P(None, "model")))(key)


def test_sharded_initialisation_is_the_same_on_any_mesh():
    """在网格上直接生成的参数只取决于 key 和形状，与网格无关：8 路、4 路（前四个设备，或后四个
    倒序）、2 × 4、4 × 2（模型轴在前）的网格给出同样的参数，和不分片的 init_params 逐位相同。
    所以换一个网格恢复训练、或者在另一台机器上复现，数都不变。每个设备用自己的 key 生成自己
    那一块（local_init）时还是这样吗？
    Parameters generated directly on a mesh depend only on the key and the shapes, not on the
    mesh: 8-way, 4-way (the first four devices, or the last four reversed), 2 × 4 and 4 × 2
    meshes give the same parameters, bit for bit those of the unsharded init_params. So
    resuming on another mesh, or reproducing on another machine, keeps the numbers. Does that
    still hold when each device draws its block with its own key (local_init)?
    """
    key = jax.random.key(0)
    reference = init_params(key)
    devices = jax.devices()
    meshes = {
        "8": auto_mesh((8,), ("model",)),
        "4": auto_mesh((4,), ("model",), devices[:4]),
        # 后四个设备，倒序 / the last four devices, reversed
        "4 others": auto_mesh((4,), ("model",), devices[:3:-1]),
        "2x4": auto_mesh((2, 4), ("data", "model")),
        "4x2": auto_mesh((4, 2), ("model", "data")),  # the model axis first
    }
    other = jax.random.key(1)  # the function draws from the key it is called with
    other_reference = init_params(other)
    for name, mesh in meshes.items():
        compiled = sharded_init(mesh).lower(key).compile()
        params = compiled(key)
        for leaf in ("up", "down"):
            np.testing.assert_array_equal(params[leaf], reference[leaf], err_msg=name)
            np.testing.assert_array_equal(compiled(other)[leaf], other_reference[leaf])
            assert params[leaf].sharding.is_equivalent_to(NamedSharding(mesh, SPECS[leaf]), 2)
        block = 64 * 256 // mesh.shape["model"]
        assert largest_u32_buffer(compiled.as_text()) == block, name

    on_8 = local_init(key, meshes["8"])
    on_4 = local_init(key, meshes["4"])
    assert on_8.shape == on_4.shape == (64, 256)
    assert bool(np.array_equal(on_8, on_4)) is False


def explicit_init(key):
    """在 Explicit 网格（jax.set_mesh）里调用：和 init_params(key) 的值相同，但每个参数的类型
    带着 SPECS 里的分片，每个设备只生成自己那一块。不用 jit 的 out_shardings（Explicit 模式下
    分片写在抽样本身）。约 5 行。
    Called under an Explicit mesh (jax.set_mesh): the values of init_params(key), but each
    parameter's type carries its sharding from SPECS, and each device generates only its own
    block. No jit out_shardings (in Explicit mode the sharding goes into the draw itself).
    About 5 lines.
    """
    k_up, k_down = jax.random.split(key)
    return {
        "up": 0.02 * jax.random.normal(k_up, (64, 256), out_sharding=SPECS["up"]),
        "down": 0.02 * jax.random.normal(k_down, (256, 64), out_sharding=SPECS["down"]),
    }


def test_explicit_meshes_shard_the_init_in_the_draw():
    """Explicit 网格上同样的初始化：分片写进每次抽样，参数的类型（jax.typeof）里就带着分片，
    值仍和不分片的 init_params 逐位相同，8 路和 2 × 4 的网格都一样。⚠️ 先不分片地抽、再
    `jax.sharding.reshard` 到 SPECS，类型和值都对，但编译后每个设备都生成了整个数组：读 HLO
    里每个设备最大的随机比特缓冲。
    The same initialisation on Explicit meshes: the sharding goes into each draw, the
    parameters' types (jax.typeof) carry it, and the values are still bit for bit those of the
    unsharded init_params, on 8-way and 2 × 4 meshes alike. ⚠️ Drawing unsharded and then
    `jax.sharding.reshard`-ing to SPECS gives the right types and values, but compiled, every
    device generates the whole array: read each device's largest buffer of random words from
    the HLO.
    """
    key = jax.random.key(0)
    reference = init_params(key)
    whole = 64 * 256
    for shape, names in (((8,), ("model",)), ((2, 4), ("data", "model"))):
        mesh = jax.make_mesh(shape, names)  # Explicit axes by default
        with jax.set_mesh(mesh):
            compiled = jax.jit(explicit_init).lower(key).compile()  # one compilation per mesh
            params = compiled(key)
            from_other = compiled(jax.random.key(1))  # another key, its own parameters
        np.testing.assert_array_equal(from_other["down"], init_params(jax.random.key(1))["down"])
        types = {leaf: str(jax.typeof(value)) for leaf, value in params.items()}
        assert types == {"up": "float32[64,256@model]", "down": "float32[256@model,64]"}
        hlo = compiled.as_text()
        for leaf in ("up", "down"):
            np.testing.assert_array_equal(params[leaf], reference[leaf], err_msg=str(shape))
        assert largest_u32_buffer(hlo) == whole // mesh.shape["model"], shape

    def reshard_after(k):  # ⚠️ the whole arrays first, then cut
        return jax.sharding.reshard(init_params(k), SPECS)

    with jax.set_mesh(jax.make_mesh((8,), ("model",))):
        cut_compiled = jax.jit(reshard_after).lower(key).compile()
        cut = cut_compiled(key)
    assert str(jax.typeof(cut["up"])) == "float32[64,256@model]"
    np.testing.assert_array_equal(cut["up"], reference["up"])
    cut_hlo = cut_compiled.as_text()
    assert largest_u32_buffer(cut_hlo) == 16384


def test_an_auto_constraint_reaches_back_into_the_draw():
    """Auto 网格上，抽样之后（哪怕中间隔着逐元素运算）的 `lax.with_sharding_constraint` 不只管
    它自己那一个值：分区器沿数据流向回传播分片。值仍和不分片的抽样逐位相同；每个设备最多同时
    持有几个随机比特的字？Explicit 网格上同样的约束会怎样，改用 `reshard` 又要生成多少？
    On an Auto mesh a `lax.with_sharding_constraint` after the draw (even with an elementwise op
    in between) does not govern its one value only: the partitioner propagates shardings back
    along the data flow. The values are still bit for bit those of the unsharded draw; how many
    random words does each device hold at most? What does the same constraint do on an
    Explicit mesh, and how much does `reshard` generate instead?
    """
    key = jax.random.key(0)
    shape = (64, 256)
    reference = 2.0 * jax.random.normal(key, shape)

    def draw(k):
        return 2.0 * jax.random.normal(k, shape)

    columns = NamedSharding(auto_mesh((N,), ("model",)), P(None, "model"))
    compiled = (
        jax.jit(lambda k: lax.with_sharding_constraint(draw(k), columns)).lower(key).compile()
    )
    np.testing.assert_array_equal(compiled(key), reference)
    assert largest_u32_buffer(compiled.as_text()) == 2048

    with jax.set_mesh(jax.make_mesh((N,), ("model",))):  # Explicit axes by default
        with raises_exactly(AssertionError) as info:
            jax.jit(lambda k: lax.with_sharding_constraint(draw(k), P(None, "model"))).lower(key)
        cut_compiled = (
            jax.jit(lambda k: jax.sharding.reshard(draw(k), P(None, "model"))).lower(key).compile()
        )
    assert "acts as an assert" in str(info.value)
    np.testing.assert_array_equal(cut_compiled(key), reference)
    assert largest_u32_buffer(cut_compiled.as_text()) == 16384


def test_stateful_prng_where_it_helps():
    """✅ `StatefulPRNG` 的用处：像 NumPy 的 `default_rng` 那样写，不必把 key 一路传下去。闭包
    里的生成器在 scan 的循环体里每一轮都前进（每轮一个新 key，不放进 carry）；给 vmap 用时，
    生成器自己能造出一批子生成器，每个样本一个。最后数一数：根 key 一共发出了几个 key？
    ✅ where `StatefulPRNG` helps: code written as with NumPy's `default_rng`, no key threaded
    through. A generator in a closure advances at every iteration of a scan body (a new key per
    iteration, none in the carry); for vmap, the generator itself makes a batch of child
    generators, one per example. Count at the end: how many keys has the root handed out?
    """
    root = jax.random.key(0)
    rng = stateful.stateful_rng(0)
    _, noise = lax.scan(lambda c, _: (c, rng.normal(size=(2,))), None, None, length=3)
    for i in range(3):  # iteration i drew with fold_in(root, i)
        np.testing.assert_array_equal(
            noise[i], jax.random.normal(jax.random.fold_in(root, i), (2,))
        )

    def jitter(r, x):
        return x + r.uniform(size=x.shape)

    xs = jnp.zeros((4, 3))
    jittered = jax.vmap(jitter)(rng.split(4), xs)
    children = jax.random.split(jax.random.fold_in(root, 3), 4)  # one child key per example
    for i, child in enumerate(children):
        expected = jax.random.uniform(jax.random.fold_in(child, 0), (3,))
        np.testing.assert_array_equal(jittered[i], expected)
    assert len({row.tobytes() for row in np.asarray(jittered)}) == 4  # one jitter per example
    assert same_keys(rng.key(), jax.random.fold_in(root, 4))


def test_stateful_prng_is_fold_in_with_a_counter_in_a_ref():
    """`jax.experimental.random.stateful_rng(seed)` 给出一个 `StatefulPRNG`：一个根 key 加一个
    放在 `jax.Ref` 里的计数器，每要一个 key 就返回 fold_in(根 key, 计数器) 并把计数器加 1。
    jit 过的抽样也会推进它吗？数一数发出了几个 key。方便是有代价的：它不能当 scan 的 carry
    （Ref 不能从被追踪的函数里返回），对用到它的函数求 grad 在 0.12 上会失败：各是哪个异常类？
    （grad 的失败不是文档写明的规则，是 0.12 的实现里求导碰上计数器的更新时出的错，以后的版本可能
    换一种报法，所以这里只问异常类，不问消息。）
    需要这些变换的地方，用 rng.key() 取出一个普通 key。
    `jax.experimental.random.stateful_rng(seed)` gives a `StatefulPRNG`: a root key plus a
    counter held in a `jax.Ref`; each key requested is fold_in(root key, counter) and the counter
    goes up by one. Does a jitted draw advance it too? Count the keys handed out. The
    convenience has a price: it cannot be a scan carry (a Ref cannot be returned from a traced
    function), and grad of a function that uses it fails on 0.12: with which exception classes?
    (The grad failure is no documented rule but 0.12's differentiation tripping over the
    counter's update, which a later version may report otherwise: so only the class is asked,
    not the message.) Where those transformations are needed, take a plain key out with
    rng.key().
    """
    root = jax.random.key(0)
    rng = stateful.stateful_rng(0)
    assert isinstance(rng, stateful.StatefulPRNG)
    first, second = rng.key(), rng.key()
    assert same_keys(first, jax.random.fold_in(root, 0))
    assert same_keys(second, jax.random.fold_in(root, 1))
    draw = jax.jit(rng.uniform)
    a, b = draw(), draw()
    assert bool(a == b) is False
    assert same_keys(rng.key(), jax.random.fold_in(root, 4))

    with raises_exactly(ValueError) as info:
        lax.scan(lambda r, _: (r, r.uniform()), rng, None, length=3)
    assert "mutable array references cannot be returned" in str(info.value)
    with raises_exactly(TypeError):
        jax.grad(lambda x: x * rng.uniform())(1.0)
    plain = rng.key()  # the way out: an ordinary key for the transformed code
    assert jax.grad(lambda x: x * jax.random.uniform(plain))(1.0) == jax.random.uniform(plain)


def replicated_key(rng, mesh):
    """从 StatefulPRNG 取下一个 key，交给在 mesh 上分片的 jit 程序用：rng 的计数器加 1，返回
    的 key 就是 rng.key() 的值，但放在 mesh 的全部设备上（复制）。约 1 行。
    Take rng's next key for a jitted program sharded over mesh: rng's counter goes up by one,
    and the key returned has the value of rng.key(), but lives on all of mesh's devices
    (replicated). About 1 line.
    """
    return jax.device_put(rng.key(), NamedSharding(mesh, P()))


def test_a_stateful_prng_hands_sharded_code_a_plain_key():
    """⚠️ 陷阱 / trap：StatefulPRNG 的计数器 Ref 放在一个设备上（设备 0），它发出的 key 也被
    “钉”在那个设备上。一个在 8 个设备上分片的 jit 程序拒收这样的 key，也拒收闭包里的生成器
    本身：是哪个异常？生成器不能 device_put 到网格上（Ref 不能），能搬过去的是它发出的普通 key，
    搬到哪个网格都行，不论那个网格由哪几个设备组成。
    ⚠️ trap: a StatefulPRNG keeps its counter Ref on one device (device 0), and the keys it
    hands out are committed to that device too. A jit program sharded over 8 devices refuses
    such a key, and refuses the generator itself in a closure: with which exception? The
    generator cannot be device_put onto the mesh (a Ref cannot), but the plain keys it hands out
    can, onto any mesh, whichever devices that mesh is made of.
    """
    mesh = auto_mesh((N,), ("x",))
    sharded = jax.jit(
        lambda k: jax.random.uniform(k, SHAPE), out_shardings=NamedSharding(mesh, P("x"))
    )
    root = jax.random.key(0)
    rng = stateful.stateful_rng(0)
    committed = rng.key()  # fold_in(root, 0), on device 0
    assert committed.sharding.device_set == {jax.devices()[0]}
    with raises_exactly(ValueError) as info:
        sharded(committed)
    assert "incompatible devices" in str(info.value)
    closure = jax.jit(
        lambda: jax.random.uniform(rng.key(), SHAPE), out_shardings=NamedSharding(mesh, P("x"))
    )
    with raises_exactly(ValueError):
        closure()
    with raises_exactly(TypeError):  # the generator itself cannot move
        jax.device_put(rng, NamedSharding(mesh, P()))

    first, second = replicated_key(rng, mesh), replicated_key(rng, mesh)
    for count, key in ((1, first), (2, second)):
        assert key.sharding.device_set == set(mesh.devices.flat)
        assert same_keys(key, jax.random.fold_in(root, count))
        drawn = sharded(key)
        assert {s.data.shape for s in drawn.addressable_shards} == {(8, 16)}
        np.testing.assert_array_equal(
            drawn, jax.random.uniform(jax.random.fold_in(root, count), SHAPE)
        )
    # a mesh over a few devices picked at run time: the key goes onto that mesh's devices only
    picked = np.random.default_rng(0).permutation(N)[: N // 2]
    few = auto_mesh((N // 2,), ("x",), [jax.devices()[i] for i in picked])
    third = replicated_key(rng, few)
    assert third.sharding.device_set == set(few.devices.flat)
    assert same_keys(third, jax.random.fold_in(root, 3))
    assert same_keys(rng.key(), jax.random.fold_in(root, 4))
    seeded = stateful.stateful_rng(5)  # another seed: the key is the generator's own next key
    assert same_keys(replicated_key(seeded, mesh), jax.random.fold_in(jax.random.key(5), 0))
