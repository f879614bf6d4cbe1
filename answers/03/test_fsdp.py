"""03 · FSDP：把参数和优化器状态切开 / FSDP: sharding the parameters and the optimizer state.

数据并行时每个设备都存一整份参数和优化器状态。FSDP（fully sharded data parallel，也叫
ZeRO-3）把它们沿设备切开，每个设备只存 1/N；用到某个权重时才把它收齐（all-gather），梯度
算完再求和并切开（reduce-scatter），每个设备只更新自己那一块。手写的 fsdp_loss 里每个权重
只在前向收齐一次，收齐的副本一直留到反向用完它为止；要让反向再收齐一次、前向之后就丢掉
完整的权重（ZeRO-3 的本意），每一层得放进 `jax.checkpoint`：倒数第二个 koan 在 HLO 里数这件事。这个
两层的模型只看得出收齐的次数，看不出内存：加不加重算，编译出的临时内存一样大；最后一个 koan 换成
lax.scan 走过的 8 层，量出省下的内存。
本文件的字节数都从数组的分片（`addressable_shards` 的 `nbytes`）和编译器的
`memory_analysis()` 里量出来。模型：w1 (64, 96)、b1 (96,)、w2 (96, 10)、b2 (10,)，float32。

In data parallelism every device stores the whole parameters and optimizer state. FSDP
(fully sharded data parallel, a.k.a. ZeRO-3) splits them over the devices, each storing 1/N;
a weight is gathered (all-gather) when it is used, and the gradients are summed and split
(reduce-scatter), so each device updates only its own piece. In the hand-written fsdp_loss
each weight is gathered once, in the forward pass, and the gathered copy stays alive until
the backward pass has used it; to gather again in the backward pass and drop the whole weight
after the forward one (what ZeRO-3 means), each layer goes inside `jax.checkpoint`: the koan
before last counts that in the HLO. This two-layer model shows the gathers only, not the
memory: its compiled temporary memory is the same with and without the recomputation; the
last koan measures the memory saved over 8 layers walked by lax.scan. Every byte count here is measured from the arrays' shards (`nbytes` of
`addressable_shards`) and from the compiler's `memory_analysis()`. The model: w1 (64, 96),
b1 (96,), w2 (96, 10), b2 (10,), float32.
"""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8  # 本章的网格用 8 个设备（chapter.toml: devices = 8）/ this chapter's meshes use 8 devices

MODEL_SHAPES = {"w1": (64, 96), "b1": (96,), "w2": (96, 10), "b2": (10,)}
# 模型各参数的 FSDP 切法：第 0 轴能被 N 整除就沿它切开，否则每个设备一整份。
# The model's FSDP layout: axis 0 split where N divides it, otherwise a whole copy everywhere.
MODEL_SPECS = {name: P("fsdp") if s[0] % N == 0 else P() for name, s in MODEL_SHAPES.items()}


def make_model():
    """参数和一批 32 个样本（NumPy 生成）。/ Parameters and a batch of 32 samples (NumPy)."""
    rng = np.random.default_rng(0)
    params = {
        "w1": rng.standard_normal(MODEL_SHAPES["w1"], dtype=np.float32) * 0.1,
        "b1": np.zeros(MODEL_SHAPES["b1"], np.float32),
        "w2": rng.standard_normal(MODEL_SHAPES["w2"], dtype=np.float32) * 0.1,
        "b2": np.zeros(MODEL_SHAPES["b2"], np.float32),
    }
    x = rng.standard_normal((32, 64), dtype=np.float32)
    y = rng.standard_normal((32, 10), dtype=np.float32)
    return params, x, y


def loss(params, x, y):
    hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
    return jnp.mean((hidden @ params["w2"] + params["b2"] - y) ** 2)


def fsdp_mesh(axis_types=None):
    return jax.make_mesh((N,), ("fsdp",), axis_types=axis_types)


def place(tree, mesh, specs):
    """按 specs（与 tree 同结构，或一个 P 用于全部）放到 mesh 上。/ Place tree as specs say."""
    if isinstance(specs, P):
        specs = jax.tree.map(lambda _: specs, tree)
    return jax.tree.map(lambda a, s: jax.device_put(a, NamedSharding(mesh, s)), tree, specs)


def bytes_per_device(tree):
    """{设备: 它持有的所有分片的字节数}，从 addressable_shards 量出来。
    {device: bytes of all the shards it holds}, measured from addressable_shards."""
    held = {}
    for leaf in jax.tree.leaves(tree):
        for shard in leaf.addressable_shards:
            held[shard.device] = held.get(shard.device, 0) + shard.data.nbytes
    return held


def peak_bytes(tree):
    """持有最多的那个设备的字节数。/ The bytes of the device that holds the most."""
    return max(bytes_per_device(tree).values())


def elements(hlo_type):
    """HLO 结果类型里的元素个数，例如 "f32[8,12]" → 96：不管收齐的结果是什么形状，它带来多少个数。
    The element count of an HLO result type, e.g. "f32[8,12]" → 96: how many numbers a
    gather brings, whatever shape its result has."""
    return math.prod(int(d) for d in re.findall(r"\d+", hlo_type.partition("[")[2]))


# ---- 你来实现 / your code ---------------------------------------------------------------


def fsdp_spec(shape):
    """一个参数的 FSDP 切法：找第一根长度能被 N 整除的轴，沿网格轴 "fsdp" 切开它，其余轴不切
    （例如 (10, 16) → P(None, "fsdp")）；哪根轴都不行就返回 P()（整份复制）。大约 4 行。

    A parameter's FSDP layout: split the first axis whose length N divides along mesh axis
    "fsdp", leaving the other axes whole (e.g. (10, 16) → P(None, "fsdp")); if no axis
    qualifies, return P() (a whole copy everywhere). About 4 lines.
    """
    for axis, length in enumerate(shape):
        if length % N == 0:
            return P(*([None] * axis), "fsdp")
    return P()


def fsdp_loss(params, x, y):
    """shard_map 里每个设备执行的损失（网格轴 "fsdp"）：params 是本设备的参数块（按
    MODEL_SPECS 切），x、y 是本设备的那 32/N 个样本。用到权重之前把切开的参数收齐成完整的
    （切不开的参数本来就是完整的），算本地损失，再在设备间取平均，使返回值就是整批的损失。大约 4 行。

    The per-device loss inside shard_map (mesh axis "fsdp"): params holds this device's blocks
    (split as MODEL_SPECS says), x and y its 32/N samples. Gather the split parameters into
    whole ones before they are used (an unsplit parameter is whole already), compute the local loss, and average
    it over the devices, so that the result is the whole batch's loss. About 4 lines.
    """
    full = {
        name: lax.all_gather(block, "fsdp", tiled=True) if MODEL_SPECS[name] == P("fsdp") else block
        for name, block in params.items()
    }
    return lax.pmean(loss(full, x, y), "fsdp")


def zero3_loss(params, x, y):
    """与 fsdp_loss 相同的损失，但按 ZeRO-3 的做法：每一层在自己里面收齐自己的权重，并且整层放进
    jax.checkpoint，这样反向传播重算这一层时会再收齐一次，而不是把前向收齐的完整权重一直留着。
    第 1 层：relu(x @ w1 + b1)；第 2 层：h @ w2 + b2（照 MODEL_SPECS 收齐切开的）。返回值和 fsdp_loss
    一样取过 pmean。大约 8 行。

    The same loss as fsdp_loss, done the ZeRO-3 way: each layer gathers its own weights inside
    itself, and the whole layer goes inside jax.checkpoint, so that the backward pass, when it
    recomputes the layer, gathers them again instead of keeping the whole weights from the
    forward pass alive. Layer 1: relu(x @ w1 + b1); layer 2: h @ w2 + b2 (gather what
    MODEL_SPECS splits).
    Return the pmean'd loss, like fsdp_loss. About 8 lines.
    """

    def gather(block):
        return lax.all_gather(block, "fsdp", tiled=True)

    @jax.checkpoint
    def layer1(w1, b1, h):
        return jax.nn.relu(h @ gather(w1) + gather(b1))

    @jax.checkpoint
    def layer2(w2, b2, h):
        return h @ gather(w2) + b2

    out = layer2(params["w2"], params["b2"], layer1(params["w1"], params["b1"], x))
    return lax.pmean(jnp.mean((out - y) ** 2), "fsdp")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_fsdp_spec_splits_the_first_divisible_axis():
    """你的 fsdp_spec 给每种形状选切法；放到网格上后，每个设备的块只有原来的 1/N（切得开的话）。
    Your fsdp_spec picks a layout per shape; once placed, each device's block is 1/N of the
    whole (where it can be split).
    """
    assert fsdp_spec((64, 96)) == P("fsdp")
    assert fsdp_spec((10, 16)) == P(None, "fsdp")
    assert fsdp_spec((3, 5, 24)) == P(None, None, "fsdp")
    assert fsdp_spec((10,)) == P()
    assert fsdp_spec((3, 5, 7, 9, 16)) == P(None, None, None, None, "fsdp")  # any rank
    assert fsdp_spec(()) == P()
    rng = np.random.default_rng(5)  # and shapes no table holds / 以及任何表里都没有的形状
    for shape in [tuple(int(d) for d in rng.integers(1, 40, rng.integers(1, 5))) for _ in range(40)]:
        divisible = [axis for axis, length in enumerate(shape) if length % N == 0]
        spec = fsdp_spec(shape)
        if not divisible:
            assert spec == P(), (shape, spec)
        else:
            assert tuple(spec) == (None,) * divisible[0] + ("fsdp",), (shape, spec)

    params, _, _ = make_model()
    specs = jax.tree.map(lambda a: fsdp_spec(a.shape), params)
    placed = place(params, fsdp_mesh(), specs)
    for name, shards in {k: v.addressable_shards for k, v in placed.items()}.items():
        whole = params[name]
        split = whole.shape[0] % N == 0
        assert {s.data.nbytes for s in shards} == {whole.nbytes // N if split else whole.nbytes}


def test_fsdp_divides_the_parameter_bytes_per_device():
    """每个设备存多少字节的参数？复制时是整个模型；FSDP 之后，切得开的参数每个设备只存 1/N，
    切不开的那个仍然每个设备一整份。说出是哪个参数拖了后腿。原课程写的是 26144 B → 5956 B：
    那是它自己的模型，层的形状没有给出，所以字节数对不上；这里的模型是 7210 个 float32，
    28840 B → 3640 B（测试量出这两个数）。比值也不同：这里切不开的只有几十字节，比值接近 8；
    原课程的比值只有 4.4，按同样的规则、同样 8 个设备算，5956 = (26144 − k)/8 + k 给出
    k = 3072 B 切不开。
    How many parameter bytes does each device store? Replicated: the whole model. After FSDP,
    every parameter that can be split costs 1/N per device, and the one that cannot still
    costs a whole copy on every device. Name the parameter that holds things back. The
    original course shows 26144 B → 5956 B: that is its own model, whose layer shapes it does
    not give, so the bytes cannot match; this model has 7210 float32, 28840 B → 3640 B (the test
    measures both). The ratios differ too: here only some tens of bytes cannot be split, and
    the ratio is close to 8; the course's is only 4.4, and by the same rule on the same 8
    devices, 5956 = (26144 − k)/8 + k gives k = 3072 B that could not be split.
    """
    params, _, _ = make_model()
    mesh = fsdp_mesh()
    replicated = bytes_per_device(place(params, mesh, P()))
    sharded = bytes_per_device(place(params, mesh, MODEL_SPECS))
    before, after = max(replicated.values()), max(sharded.values())
    assert set(replicated.values()) == {sum(a.nbytes for a in params.values())}
    assert len(set(sharded.values())) == 1  # 每个设备一样多 / the same on every device

    kept = params["b2"].nbytes
    assert after == (before - kept) // N + kept
    assert before / after > 7.9
    assert (before, after) == (28840, 3640)  # 原课程的模型 / the course's model: 26144 → 5956


def test_adam_state_follows_the_parameter_sharding():
    """optax.adam 的状态里有两份与参数同形状的矩估计（mu、nu），外加一个 int32 的步数 count。
    急切地（不 jit）调用 opt.init，mu 和 nu 用 zeros_like 生成，分片跟着参数走。持有最多的设备
    存多少字节的优化器状态？用参数的每设备字节数 after 表示。
    optax.adam's state holds two moment estimates shaped like the parameters (mu, nu) plus an
    int32 step count. Called eagerly (not jitted), opt.init makes mu and nu with zeros_like, and
    their sharding follows the parameters. How many bytes of optimizer state does the fullest
    device store? Express it with the parameters' per-device bytes, after.
    """
    params, _, _ = make_model()
    mesh = fsdp_mesh()
    opt = optax.adam(1e-3)
    replicated, sharded = place(params, mesh, P()), place(params, mesh, MODEL_SPECS)
    after = peak_bytes(sharded)

    state = opt.init(sharded)
    assert state[0].mu["w1"].sharding.spec == sharded["w1"].sharding.spec
    assert peak_bytes(state) == 2 * after + 4

    everything_before = peak_bytes(replicated) + peak_bytes(opt.init(replicated))
    everything_after = after + peak_bytes(state)
    assert everything_before / everything_after > 7.9


def test_jit_of_opt_init_the_mesh_context_decides_where_the_state_lands():
    """⚠️ 陷阱 / trap：把 opt.init 包进 jit，zeros_like 的输出分片不跟着参数走，由追踪时的上下文
    网格决定。没有上下文网格时（无论参数在哪种网格上），状态落在几个设备上？持有它的设备各要存
    两份完整的模型。jax.set_mesh 一个 Auto 网格之下，编译器选了哪种 spec（第 06 章量的就是这种
    情况）？jax.set_mesh 一个 Explicit 网格之下呢？（参数要放在上下文的那个网格上。）急切调用
    opt.init（上一个 koan）则不依赖上下文。
    Wrap opt.init in jit and the sharding of zeros_like's output no longer follows the
    parameters: the context mesh at trace time decides it. With no context mesh (whatever
    mesh the parameters live on), on how many devices does the state land? Each device holding
    it stores two whole copies of the model. Under jax.set_mesh of an Auto mesh, which spec
    does the compiler choose (the case chapter 06 measures)? And under jax.set_mesh of an
    Explicit mesh? (The parameters must live on the context's mesh.) Calling opt.init eagerly
    (the koan before) does not depend on the context.
    """
    params, _, _ = make_model()
    opt = optax.adam(1e-3)
    auto, explicit = fsdp_mesh((AxisType.Auto,)), fsdp_mesh((AxisType.Explicit,))
    on_auto, on_explicit = place(params, auto, MODEL_SPECS), place(params, explicit, MODEL_SPECS)
    model_bytes = sum(a.nbytes for a in params.values())

    for sharded in (on_auto, on_explicit):
        no_context = jax.jit(opt.init)(sharded)
        assert len(no_context[0].mu["w1"].sharding.device_set) == 1
        assert peak_bytes(no_context) == 2 * model_bytes + 4

    spec = {}
    for name, mesh, sharded in (("auto", auto, on_auto), ("explicit", explicit, on_explicit)):
        with jax.set_mesh(mesh):
            state = jax.jit(opt.init)(sharded)
        assert len(state[0].mu["w1"].sharding.device_set) == N
        spec[name] = state[0].mu["w1"].sharding.spec
    assert spec["auto"] == P()
    assert spec["explicit"] == P("fsdp", None)


def test_fsdp_loss_and_gradients_equal_the_unsharded_ones():
    """你的 fsdp_loss 放进 shard_map，与不切分的模型给出同样的损失和梯度；梯度回来时的切法
    和参数一样（每个设备正好拿到更新自己那块所需的梯度）。
    Your fsdp_loss inside shard_map gives the unsharded model's loss and gradients, and the
    gradients come back split like the parameters (each device gets exactly the gradient it
    needs to update its own piece).
    """
    params, x, y = make_model()
    want_loss, want_grads = jax.jit(jax.value_and_grad(loss))(params, x, y)
    mesh = fsdp_mesh()
    step = jax.jit(
        jax.shard_map(
            jax.value_and_grad(fsdp_loss),
            mesh=mesh,
            in_specs=(MODEL_SPECS, P("fsdp"), P("fsdp")),
            out_specs=(P(), MODEL_SPECS),
        )
    )
    sharded = place(params, mesh, MODEL_SPECS)
    got_loss, got_grads = step(sharded, *place((x, y), mesh, P("fsdp")))
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-6)
    for name, param in sharded.items():
        np.testing.assert_allclose(got_grads[name], want_grads[name], rtol=1e-5, atol=1e-6)
        assert got_grads[name].sharding.is_equivalent_to(param.sharding, param.ndim)


def test_fsdp_gathers_weights_in_the_step_and_scatters_gradients():
    """（先写好 fsdp_loss。）编译后的训练步里，权重在步内收齐：每条 all-gather 带来多少个元素（收齐
    时用不用 tiled，结果的形状不同，元素个数相同）？它们只作为临时值存在。all_gather 的转置是
    psum_scatter：有几条 reduce-scatter？损失的 pmean 和复制的那个参数的梯度求和要几条 all-reduce
    （XLA 的 CPU pass cpu-all-reduce-combiner 会合并同时可做的求和）？编译器看到的参数只是本
    设备的分片：argument_size_in_bytes 正是每设备的参数和批次字节数。
    (Write fsdp_loss first.) In the compiled step the weights are gathered inside the step:
    how many elements does each all-gather bring (gathered tiled or not, the result's shape
    differs, its element count does not)? They exist as temporaries only. all_gather
    transposes to psum_scatter: how many reduce-scatters? How many all-reduces for the loss's
    pmean and the gradient sum of the replicated parameter (XLA's CPU pass
    cpu-all-reduce-combiner combines sums that can run together)? The compiler sees only this device's shards as arguments:
    argument_size_in_bytes is exactly the per-device bytes of parameters and batch.
    """
    params, x, y = make_model()
    mesh = fsdp_mesh()
    args = (place(params, mesh, MODEL_SPECS), *place((x, y), mesh, P("fsdp")))
    step = jax.shard_map(
        jax.value_and_grad(fsdp_loss),
        mesh=mesh,
        in_specs=(MODEL_SPECS, P("fsdp"), P("fsdp")),
        out_specs=(P(), MODEL_SPECS),
    )
    compiled = jax.jit(step).lower(*args).compile()
    found = collectives(compiled.as_text())
    assert sorted(map(elements, found["all-gather"])) == [96, 960, 6144]
    assert len(found["reduce-scatter"]) == 3
    assert len(found["all-reduce"]) == 1
    assert compiled.memory_analysis().argument_size_in_bytes == peak_bytes(args)  # 4824 B


def test_zero3_gathers_every_weight_again_in_the_backward_pass():
    """（先写好 fsdp_loss 和 zero3_loss。）你的 zero3_loss 与不切分的模型给出同样的损失和梯度。
    编译后的训练步里每个切开的权重被收齐两次：前向一次，反向重算这一层时又一次——和 fsdp_loss
    的训练步比，all-gather 正好翻倍；reduce-scatter 一样多。反向是一层一层重算的：第 1 层的权重要等
    第 2 层的梯度切开（reduce-scatter）之后才再收齐，所以反向里同一时刻只收齐着一层的权重。这个
    koan 数的是收齐的次数和先后，不是字节数。
    (Write fsdp_loss and zero3_loss first.) Your zero3_loss gives the unsharded model's loss
    and gradients. In the compiled step every split weight is gathered twice: once in the
    forward pass and again when the backward pass recomputes its layer: against fsdp_loss's
    step, exactly twice the all-gathers and as many reduce-scatters. The backward pass
    recomputes layer by layer: layer 1's weights are gathered again only after layer 2's
    gradient has been scattered (reduce-scatter), so the backward pass holds one layer's
    gathered weights at a time. This koan counts the gathers and their order, not bytes.
    """
    params, x, y = make_model()
    want_loss, want_grads = jax.jit(jax.value_and_grad(loss))(params, x, y)
    mesh = fsdp_mesh()
    args = (place(params, mesh, MODEL_SPECS), *place((x, y), mesh, P("fsdp")))
    step = jax.jit(
        jax.shard_map(
            jax.value_and_grad(zero3_loss),
            mesh=mesh,
            in_specs=(MODEL_SPECS, P("fsdp"), P("fsdp")),
            out_specs=(P(), MODEL_SPECS),
        )
    )
    got_loss, got_grads = step(*args)
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-6)
    for name in params:
        np.testing.assert_allclose(got_grads[name], want_grads[name], rtol=1e-5, atol=1e-6)

    hlo = step.lower(*args).compile().as_text()
    found = collectives(hlo)
    specs = {"in_specs": (MODEL_SPECS, P("fsdp"), P("fsdp")), "out_specs": (P(), MODEL_SPECS)}
    fsdp_step = jax.jit(jax.shard_map(jax.value_and_grad(fsdp_loss), mesh=mesh, **specs))
    once = collectives(fsdp_step.lower(*args).compile().as_text())
    assert once["all-gather"]
    twice = sorted(map(elements, once["all-gather"] * 2))
    assert sorted(map(elements, found["all-gather"])) == twice
    assert len(found["reduce-scatter"]) == len(once["reduce-scatter"])
    # 按运行的先后（已调度的 HLO 按顺序打印）：第一次切开梯度之后还收齐了哪些权重？
    # In the order they run (a scheduled HLO prints in order): what is gathered after the
    # first gradient is scattered?
    ran = re.findall(r"= (\w+\[[\d,]*\])\S* (all-gather|reduce-scatter)\(", hlo)
    kinds = [kind for _, kind in ran]
    assert "reduce-scatter" in kinds
    later = [shape for shape, kind in ran[kinds.index("reduce-scatter") :] if kind == "all-gather"]
    assert sorted(map(elements, later)) == [96, 6144]  # b1、w1：第 1 层 / layer 1's


def test_zero3_memory_shows_in_a_scan_over_layers():
    """上一个 koan 数的是收齐的次数。两层、展开写的 zero3_loss 在内存上看不出区别：它和 fsdp_loss 的
    训练步编译出的临时内存（memory_analysis 的 temp_size_in_bytes）都是 28432 B，重算只改变了收齐的
    次数。放进 lax.scan 就看得出来：8 层 (256, 256) 的权重叠成 (8, 256, 256)，沿第 1 轴按 FSDP 切开，
    scan 一层一层走，每一步在层里收齐这一层的权重。不加 jax.checkpoint 时，scan 的反向要用每一步的
    残差，每一层收齐的完整权重都留到反向：临时内存至少是 8 份完整的权重。把层放进 jax.checkpoint，
    反向在每一步重算这一层（又收齐一次）：训练步的临时内存是几份完整权重的大小（取整数部分）？
    The last koan counts gathers. The two-layer, unrolled zero3_loss shows no difference in
    memory: its training step and fsdp_loss's compile to the same temporary memory
    (memory_analysis's temp_size_in_bytes), 28432 B; the recomputation changes the number of
    gathers only. A lax.scan shows it: 8 layers of (256, 256) weights stacked into
    (8, 256, 256), split FSDP's way along axis 1, the scan walking layer by layer and each step
    gathering its own layer's weights inside the layer. Without jax.checkpoint the scan's
    backward pass needs every step's residuals, and every layer's gathered whole weight is kept
    for it: the temporary memory is at least 8 whole weights. Put the layer inside
    jax.checkpoint and the backward pass recomputes it at each step (gathering again): how many
    whole weights is the step's temporary memory (the integer part)?
    """
    layers, width = 8, 256
    rng = np.random.default_rng(1)
    weights = rng.standard_normal((layers, width, width), dtype=np.float32) / np.sqrt(width)
    x = rng.standard_normal((4 * N, width), dtype=np.float32)
    mesh = fsdp_mesh()
    args = (place(weights, mesh, P(None, "fsdp")), place(x, mesh, P("fsdp")))
    whole = width * width * 4  # 一份完整的权重 / one whole weight

    def layer(h, w):
        return jnp.tanh(h @ lax.all_gather(w, "fsdp", tiled=True)), None

    def temp_bytes(body):
        def scanned(ws, h):
            h, _ = lax.scan(body, h, ws)
            return lax.pmean(jnp.mean(h**2), "fsdp")

        specs = {"in_specs": (P(None, "fsdp"), P("fsdp")), "out_specs": P(None, "fsdp")}
        step = jax.jit(jax.shard_map(jax.grad(scanned), mesh=mesh, **specs))
        return step.lower(*args).compile().memory_analysis().temp_size_in_bytes

    kept = temp_bytes(layer)
    regathered = temp_bytes(jax.checkpoint(layer))
    assert kept >= layers * whole  # 每层收齐的权重都是残差 / every gathered weight a residual
    assert regathered // whole == 1
