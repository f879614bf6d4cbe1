"""03 · Megatron 式张量并行 MLP / a Megatron tensor-parallel MLP.

两层 MLP y = gelu(x @ W1) @ W2，放在 N 个设备上。Megatron-LM 的切法：W1 按列切
（P(None, "m")，每个设备算隐藏层的一部分特征），W2 按行切（P("m", None)，每个设备用自己那部分
特征算出 y 的一个部分和）。gelu 是逐元素的，正好夹在中间不需要通信：整个前向只需要在最后
做一次 all-reduce。本文件先让你用 shard_map 手写它，再看 jit 自己推出同样的程序，
再数反向传播和“切反了”时的通信，最后在二维网格上把数据并行和张量并行合成一个训练步。

The two-layer MLP y = gelu(x @ W1) @ W2 on N devices. Megatron-LM's split: W1 by columns
(P(None, "m"): each device computes some of the hidden features), W2 by rows (P("m", None):
each device turns its features into a partial sum of y). gelu is elementwise, so it sits in
between without communication: the whole forward pass needs a single all-reduce at the end.
You first write it by hand with shard_map, then watch jit derive the same program, and
then count the communication of the backward pass and of the split done the wrong way,
and finally combine data and tensor parallelism in one training step on a 2-D mesh.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8  # 本章的网格用 8 个设备（chapter.toml: devices = 8）/ this chapter's meshes use 8 devices
# x 复制、W1 按列、W2 按行 / x replicated, W1 by columns, W2 by rows
MEGATRON = (P(), P(None, "m"), P("m", None))


@jax.jit
def mlp(x, w1, w2):
    """不切分的参考模型。/ The unsharded reference model."""
    return jax.nn.gelu(x @ w1) @ w2


def model(batch=16, d=32, hidden=64, seed=0):
    """x: (batch, d)，W1: (d, hidden)，W2: (hidden, d)，NumPy 生成。/ Made with NumPy."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, d), dtype=np.float32)
    w1 = rng.standard_normal((d, hidden), dtype=np.float32) / np.sqrt(d)
    w2 = rng.standard_normal((hidden, d), dtype=np.float32) / np.sqrt(hidden)
    return x, w1, w2


def place(mesh, x, w1, w2, specs=MEGATRON):
    """按 specs 放好 x、W1、W2（默认 Megatron 切法）。/ Place x, W1, W2 (Megatron's split by default)."""
    pairs = zip((x, w1, w2), specs, strict=True)
    return tuple(jax.device_put(a, NamedSharding(mesh, s)) for a, s in pairs)


# ---- 你来实现 / your code ---------------------------------------------------------------


def megatron_mlp(x, w1_block, w2_block):
    """shard_map 里每个设备执行的函数（网格轴 "m"）：x 是完整的 (batch, d)，w1_block 是 W1 的
    一组列 (d, hidden/N)，w2_block 是 W2 对应的一组行 (hidden/N, d)。返回完整的 y（每个设备
    都一样）。只许一次集合通信。大约 3 行。

    The per-device function inside shard_map (mesh axis "m"): x is the whole (batch, d),
    w1_block a group of W1's columns (d, hidden/N), w2_block the matching rows of W2
    (hidden/N, d). Return the whole y (equal on every device). One collective only. About
    3 lines.
    """
    todo("megatron_mlp: 列并行、gelu、行并行、一次 psum / column-parallel, gelu, row-parallel, one psum")


def dp_tp_loss(params, x, y):
    """二维网格 ("data": 2, "model": 4) 上 shard_map 里每个设备执行的损失：x、y 是本设备所在数据组的
    那一半批次 (batch/2, d)，params["w1"] 是 W1 的一组列 (d, hidden/4)，params["w2"] 是 W2 对应的
    一组行 (hidden/4, d)。沿 "model" 做 Megatron 的前向，算本组样本上的均方误差，再让返回值成为
    整批的均值损失（沿 "data" 平均）。这样 jax.grad 给出的权重梯度已经在数据组之间平均过了。
    大约 3 行。

    The per-device loss inside shard_map on the 2-D mesh ("data": 2, "model": 4): x and y are
    the half of the batch of this device's data group (batch/2, d), params["w1"] is a group of
    W1's columns (d, hidden/4) and params["w2"] the matching rows of W2 (hidden/4, d). Run
    Megatron's forward pass along "model", take the mean squared error over this group's
    samples, and make the result the whole batch's mean loss (averaged along "data"). Then the
    weight gradients jax.grad returns are already averaged over the data groups. About 3 lines.
    """
    todo("dp_tp_loss: 沿 model 做 Megatron 前向，损失沿 data 平均 / Megatron along model, the loss averaged along data")


def all_reduces_by_axes(hlo_text):
    """编译后 HLO 里的 all-reduce 按网格轴分组：{"{'model'}": [结果类型, ...]}。元组的元素逐个
    计入，所以 XLA 的 CPU pass cpu-all-reduce-combiner 合并与否不影响结果。
    The compiled HLO's all-reduces grouped by mesh axes: {"{'model'}": [result type, ...]}. A
    tuple's elements count one by one, so whether XLA's CPU pass cpu-all-reduce-combiner
    merged them does not change the answer."""
    found = {}
    pattern = r"= (\(.*?\)|\S+) all-reduce(?:-start)?\(.*?replica_groups=mesh\[[^\]]*\] (\{[^}]*\})"
    for types, axes in re.findall(pattern, hlo_text):
        found.setdefault(axes, []).extend(re.findall(r"[a-z]+\d*\[[\d,]*\]", types))
    return {axes: sorted(types) for axes, types in found.items()}


def test_megatron_mlp_equals_the_unsharded_model_with_one_all_reduce():
    """你的 megatron_mlp 放进 shard_map，与不切分的模型一致（几种大小），编译后的 HLO 里恰好
    一条 all-reduce，传的是 (batch, d) 的输出，而不是更大的隐藏层。
    Your megatron_mlp inside shard_map equals the unsharded model (several sizes), and the
    compiled HLO holds exactly one all-reduce, carrying the (batch, d) output, not the larger
    hidden layer.
    """
    mesh = jax.make_mesh((N,), ("m",))
    tensor_parallel = jax.jit(
        jax.shard_map(megatron_mlp, mesh=mesh, in_specs=MEGATRON, out_specs=P())
    )
    for batch, d, hidden in [(16, 32, 64), (4, 8, 128)]:
        x, w1, w2 = model(batch, d, hidden, seed=batch)
        out = tensor_parallel(*place(mesh, x, w1, w2))
        np.testing.assert_allclose(out, mlp(x, w1, w2), rtol=1e-5, atol=1e-5)

    hlo = tensor_parallel.lower(*place(mesh, *model())).compile().as_text()
    assert collectives(hlo) == {"all-reduce": ["f32[16,32]"]}


def test_jit_derives_the_same_program_from_the_weight_shardings():
    """不写 shard_map 也行：Explicit 网格上把 W1 按列、W2 按行放好，直接 jit 普通的 mlp。
    隐藏层是怎么切的？在类型里看得到。输出要复制（out_sharding=P()），编译器为此插入的通信和
    手写的一模一样。
    No shard_map needed: on an Explicit mesh, place W1 by columns and W2 by rows and jit the
    plain mlp. How is the hidden layer split? The type shows it. The output is to be replicated
    (out_sharding=P()), and the communication the compiler inserts for it is exactly the
    hand-written one.
    """
    mesh = jax.make_mesh((N,), ("m",))
    x, w1, w2 = place(mesh, *model())
    types = {}

    def spy_mlp(x, w1, w2):
        hidden = jax.nn.gelu(x @ w1)
        types["hidden"] = str(jax.typeof(hidden))
        return jnp.matmul(hidden, w2, out_sharding=P())

    with jax.set_mesh(mesh):
        compiled = jax.jit(spy_mlp).lower(x, w1, w2).compile()
    assert types["hidden"] == __
    assert collectives(compiled.as_text()) == {"all-reduce": ["f32[16,32]"]}
    np.testing.assert_allclose(compiled(x, w1, w2), mlp(*model()), rtol=1e-5, atol=1e-5)


def test_the_backward_pass_adds_one_all_reduce_for_the_input_gradient():
    """反向传播要通信吗？每个设备的权重梯度只用到本设备的块和复制的 x；输入 x 的梯度却是每个设备
    各算了一部分（Megatron 论文里的 f / g 算子对）。数一数：只对权重求导时一共几条 all-reduce
    （含前向的那条）？连 x 一起求导呢？
    Does the backward pass communicate? Each device's weight gradients use only its own blocks
    and the replicated x; the gradient of the input x, though, is computed piecewise, a part
    on every device (the f / g operator pair of the Megatron paper). Count: how many
    all-reduces in all (the forward's included) when differentiating for the weights only? And
    with x as well?
    """
    mesh = jax.make_mesh((N,), ("m",))
    args = place(mesh, *model())

    def loss(x, w1, w2):
        return jnp.sum(jnp.matmul(jax.nn.gelu(x @ w1), w2, out_sharding=P()) ** 2)

    def all_reduces(argnums):
        with jax.set_mesh(mesh):  # 在 jit 外面 / outside jit: set_mesh refuses to run inside
            hlo = jax.jit(jax.grad(loss, argnums=argnums)).lower(*args).compile().as_text()
        return len(collectives(hlo).get("all-reduce", []))

    assert all_reduces((1, 2)) == __
    assert all_reduces((0, 1, 2)) == __


def test_splitting_the_other_way_round_communicates_more():
    """⚠️ 陷阱 / trap：把切法反过来——W1 按行、W2 按列——第一个矩阵乘法就只能得到部分和，而
    gelu 不是线性的，不能对部分和分别求值。这时 all-reduce 传的是什么（看它的结果类型）？最后输出
    是按列切开的，要复制它还需要哪种集合通信？
    Split the other way round (W1 by rows, W2 by columns) and the first matmul only yields
    partial sums, while gelu is not linear and cannot be applied to them separately. What does
    the all-reduce carry now (look at its result type)? The output ends up split by columns:
    which other collective does replicating it take?
    """
    mesh = jax.make_mesh((N,), ("m",))
    args = place(mesh, *model(), specs=(P(), P("m", None), P(None, "m")))
    with jax.set_mesh(mesh):
        reversed_mlp = jax.jit(lambda a, b, c: jnp.matmul(jax.nn.gelu(a @ b), c, out_sharding=P()))
        found = collectives(reversed_mlp.lower(*args).compile().as_text())
    assert found["all-reduce"] == __
    assert sorted(found) == __


def test_a_2d_mesh_trains_data_and_tensor_parallel_at_once():
    """（先写好 dp_tp_loss。）2×4 网格上同时做数据并行和张量并行：批次沿 "data" 切成两组，每组
    4 个设备按 Megatron 切分权重。一步 SGD 之后的损失和参数与单设备的一样。HLO 里的通信分两种：
    沿 "model" 的一条前向 all-reduce，传本组的 (batch/2, d) 输出；沿 "data" 的梯度平均，只传
    每个设备自己的权重块（和损失），从不收齐完整的权重。
    (Write dp_tp_loss first.) Data and tensor parallelism at once on the 2×4 mesh: the batch
    is split into two groups along "data", and the 4 devices of each group split the weights
    Megatron's way. After one SGD step the loss and the parameters equal one device's. The
    HLO's communication is of two kinds: one forward all-reduce along "model", carrying the
    group's (batch/2, d) output, and the gradient average along "data", carrying only each
    device's own weight blocks (and the loss), never gathering a whole weight.
    """
    x, w1, w2 = model()
    y = np.random.default_rng(1).standard_normal(x.shape, dtype=np.float32)
    params = {"w1": w1, "w2": w2}
    specs = {"w1": P(None, "model"), "w2": P("model", None)}
    mesh = jax.make_mesh((2, 4), ("data", "model"))

    def sgd_step(p, x, y):
        value, grads = jax.value_and_grad(dp_tp_loss)(p, x, y)
        return value, jax.tree.map(lambda w, g: w - 0.1 * g, p, grads)

    step = jax.jit(
        jax.shard_map(
            sgd_step, mesh=mesh, in_specs=(specs, P("data"), P("data")), out_specs=(P(), specs)
        )
    )
    placed = {k: jax.device_put(v, NamedSharding(mesh, specs[k])) for k, v in params.items()}
    args = (placed, *(jax.device_put(a, NamedSharding(mesh, P("data"))) for a in (x, y)))
    compiled = step.lower(*args).compile()
    got_loss, updated = compiled(*args)

    def reference(p):
        return jnp.mean((mlp(x, p["w1"], p["w2"]) - y) ** 2)

    want_loss, want_grads = jax.jit(jax.value_and_grad(reference))(params)
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5)
    for name in params:
        want = params[name] - 0.1 * np.asarray(want_grads[name])
        np.testing.assert_allclose(updated[name], want, rtol=1e-5, atol=1e-6)

    def hlo_type(shape):
        return f"f32[{','.join(map(str, shape))}]"

    group_output = hlo_type((x.shape[0] // 2, x.shape[1]))  # f32[8,32]
    weight_blocks = [hlo_type(placed[k].sharding.shard_shape(w.shape)) for k, w in params.items()]
    hlo = compiled.as_text()
    assert set(collectives(hlo)) == {"all-reduce"}
    assert all_reduces_by_axes(hlo) == {
        "{'model'}": [group_output],
        "{'data'}": sorted(["f32[]", *weight_blocks]),  # f32[32,16], f32[16,32]
    }
