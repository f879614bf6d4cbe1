"""03 · 专家并行 / expert parallelism.

混合专家层（mixture of experts, MoE）里每个 token 只经过一个专家（这里是 top-1 路由）。专家太多、
一个设备放不下时，把专家分给设备：设备 e 只存专家 e 的权重，token 则被送到它的专家所在的设备，
算完再送回来——一次 all_to_all 去、一次 all_to_all 回。all_to_all 的缓冲区形状在编译时就要定下来，
所以每个设备给每个专家最多送 capacity 个 token（容量），多出来的 token 被丢掉（输出 0，真实模型里
由残差连接把它原样带过去）。这里 8 个设备各有 16 个 token、各存一个专家 tanh(x @ W_e)。

In a mixture-of-experts (MoE) layer each token goes through one expert only (top-1 routing
here). When the experts are too many for one device, they are split over the devices: device e
stores expert e's weights only, and each token is sent to the device of its expert and, once
computed, sent back: one all_to_all there, one back. An all_to_all's buffers have shapes fixed
at compile time, so each device sends each expert at most `capacity` tokens; the tokens beyond
it are dropped (their output is 0; a real model carries them over by the residual connection).
Here each of 8 devices holds 16 tokens and stores one expert tanh(x @ W_e).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives, first_failing_stage

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8  # 专家数 = 设备数（chapter.toml: devices = 8）/ experts = devices
TOKENS, D = 16, 8  # 每个设备的 token 数和特征数 / tokens per device, features
CAPACITY = 3  # 每个设备送给每个专家的 token 上限 / tokens each device may send each expert
SPECS = {"in_specs": (P("e"), P(), P("e")), "out_specs": P("e")}


def route(x, w_gate):
    """top-1 路由（每个设备对自己的 token 各算一次）：每个 token 的专家 expert、门控权重 gate
    （softmax 后那个专家的概率）、它在本设备送往同一专家的 token 里排第几（slot，从 0 起），
    以及 kept = slot < CAPACITY（容量放得下）。
    Top-1 routing (each device for its own tokens): every token's expert, its gate (the
    softmax probability of that expert), its rank among this device's tokens bound for the
    same expert (slot, from 0), and kept = slot < CAPACITY (it fits)."""
    logits = x @ w_gate
    expert = jnp.argmax(logits, axis=-1)
    gate = jnp.take_along_axis(jax.nn.softmax(logits, axis=-1), expert[:, None], axis=1)[:, 0]
    onehot = jax.nn.one_hot(expert, w_gate.shape[1], dtype=jnp.int32)
    slot = jnp.sum((jnp.cumsum(onehot, axis=0) - 1) * onehot, axis=1)
    return expert, gate, slot, slot < CAPACITY


def moe_reference(x, w_gate, w_experts):
    """不切分的参考：x 是所有设备的 token（N·TOKENS 行），每 TOKENS 行按 route 路由一次，每个
    token 直接乘自己专家的权重。/ The unsharded reference: x holds every device's tokens, each
    TOKENS rows routed once by route, and each token multiplied by its own expert's weights."""
    ys = []
    for block in x.reshape(N, -1, x.shape[1]):
        expert, gate, _, kept = route(block, w_gate)
        y = jnp.tanh(jnp.einsum("td,tdf->tf", block, w_experts[expert]))
        ys.append(jnp.where(kept[:, None], gate[:, None] * y, 0.0))
    return jnp.concatenate(ys)


def model(seed=0):
    """所有设备的 token (N·TOKENS, D)、路由器 (D, N)、N 个专家的权重 (N, D, D)。
    Every device's tokens, the router, the N experts' weights."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N * TOKENS, D), dtype=np.float32)
    w_gate = rng.standard_normal((D, N), dtype=np.float32)
    w_experts = rng.standard_normal((N, D, D), dtype=np.float32) / np.sqrt(D)
    return x, w_gate, w_experts


def compiled_moe(layer, x, w_gate, w_experts):
    """编译好的 shard_map(layer)：token 和专家按 P("e") 切开，路由器复制。
    The compiled shard_map(layer): tokens and experts split by P("e"), the router replicated."""
    mesh = jax.make_mesh((N,), ("e",))
    args = tuple(
        jax.device_put(a, NamedSharding(mesh, s))
        for a, s in zip((x, w_gate, w_experts), SPECS["in_specs"], strict=True)
    )
    step = jax.jit(jax.shard_map(layer, mesh=mesh, **SPECS))
    return step.lower(*args).compile(), args


# ---- 检查 / checks ----------------------------------------------------------------------


def test_ragged_all_to_all_runs_only_where_the_backend_implements_it():
    """lax.ragged_all_to_all 不用容量：每个设备告诉它每段从哪里开始、有多长，它只送真实的 token。
    它在 JAX 里追踪、lower 都没问题，但 XLA 的 CPU 后端没有实现这条指令：在哪一步失败、抛出
    什么？所以本文件在 CPU 上用定长的 all_to_all 加容量（GPU、TPU 上两种都能用）。
    lax.ragged_all_to_all needs no capacity: each device says where each segment starts and
    how long it is, and only real tokens travel. JAX traces and lowers it fine, but XLA's CPU
    backend does not implement the instruction: at which stage does it fail, raising what?
    That is why this file uses the fixed-shape all_to_all with a capacity on the CPU (GPU and
    TPU take both).
    """
    mesh = jax.make_mesh((N,), ("e",))
    ones = jnp.ones(N, jnp.int32)  # 每个设备给每个设备送 1 行 / one row to every device

    def exchange(x):
        starts = jnp.arange(N, dtype=jnp.int32)
        there = lax.axis_index("e") * ones  # 我的行在接收方排第几 / where mine land
        return lax.ragged_all_to_all(x, jnp.zeros_like(x), starts, ones, there, ones, axis_name="e")

    ragged = jax.shard_map(exchange, mesh=mesh, in_specs=P("e"), out_specs=P("e"))
    x = jax.device_put(jnp.arange(N * N * 1.0).reshape(N * N, 1), NamedSharding(mesh, P("e")))
    assert "ragged_all_to_all" in jax.jit(ragged).lower(x).as_text()
    assert first_failing_stage(ragged, x) == "compile"
    with raises_exactly(jax.errors.JaxRuntimeError):
        jax.jit(ragged)(x)


# ---- 你来实现 / your code ---------------------------------------------------------------


def moe_layer(x, w_gate, w_block):
    """专家并行的 MoE 层，在 shard_map 里每个设备跑一份：x 是本设备的 (TOKENS, D) 个 token，
    w_gate 是复制的路由器，w_block 是本设备那一个专家的权重 (1, D, D)。
    1. 派发（dispatch）：用 route 路由，把每个 kept 的 token 放进形状 (N, CAPACITY, D) 的零缓冲区的
       [expert, slot] 位置（.at[…].set(…, mode="drop") 会丢掉 slot 越界的 token）；
    2. lax.all_to_all 沿第 0 轴（tiled=True）把缓冲区的第 j 段送给设备 j：收到的第 0 轴变成“从哪个
       设备来”；
    3. 用本设备的专家算 tanh(tokens @ W)；
    4. 再一次 all_to_all 送回去；
    5. 合并（combine）：每个 token 从送回来的缓冲区的 [expert, slot] 取出结果，乘它的 gate；没被
       kept 的 token 输出 0。
    不许收集 token 或专家权重（all_gather）。大约 7 行。
    The expert-parallel MoE layer, run once per device in shard_map: x is this device's
    (TOKENS, D) tokens, w_gate the replicated router, w_block this device's one expert (1, D, D).
    1. Dispatch: route, then put every kept token into a zero buffer of shape
       (N, CAPACITY, D) at [expert, slot] (.at[…].set(…, mode="drop") drops the slots out of
       range);
    2. lax.all_to_all along axis 0 (tiled=True) sends piece j of the buffer to device j: axis 0
       of what arrives says which device it came from;
    3. apply this device's expert, tanh(tokens @ W);
    4. send it back with a second all_to_all;
    5. combine: each token takes its result from the returned buffer at [expert, slot] and
       multiplies it by its gate; a token not kept outputs 0.
    No gathering of tokens or expert weights (all_gather). About 7 lines.
    """
    expert, gate, slot, kept = route(x, w_gate)
    sent = jnp.zeros((N, CAPACITY, x.shape[1]), x.dtype).at[expert, slot].set(x, mode="drop")
    arrived = lax.all_to_all(sent, "e", 0, 0, tiled=True)
    done = jnp.tanh(arrived @ w_block[0])
    back = lax.all_to_all(done, "e", 0, 0, tiled=True)
    return jnp.where(kept[:, None], gate[:, None] * back[expert, slot], 0.0)


def test_moe_sends_each_token_to_its_expert_and_back_with_two_all_to_alls():
    """（先写好 moe_layer。）它和不切分的参考值相同（两组数据，都有 token 因容量被丢掉；第三组
    每个设备只有一半 token），HLO 里的集合通信只有两条 all-to-all：每条是 N 段，每段是一个设备
    送给另一个设备的 (1, CAPACITY, D) 个数。每个设备送出的字节由容量决定，与 token 怎么路由
    无关——这就是定长的代价：空的槽位也要送。没有 all-gather：token 和专家权重都不收集。
    (Write moe_layer first.) It equals the unsharded reference (two data sets, both with
    tokens dropped for capacity, and a third with half the tokens on each device), and the
    HLO's only collectives are two all-to-alls: each has N pieces, each piece the
    (1, CAPACITY, D) numbers one device sends another. The bytes each device sends follow from
    the capacity, not from how the tokens were routed: the price of fixed shapes is that empty
    slots travel too. No all-gather: neither the tokens nor the expert weights are collected.
    """
    for seed in (0, 1):
        x, w_gate, w_experts = model(seed)
        compiled, args = compiled_moe(moe_layer, x, w_gate, w_experts)
        np.testing.assert_allclose(
            compiled(*args), moe_reference(x, w_gate, w_experts), rtol=1e-5, atol=1e-6
        )
        kept = jax.vmap(lambda b: route(b, w_gate)[3])(x.reshape(N, TOKENS, D))
        assert 0 < int(jnp.sum(~kept)) < N * TOKENS // 2  # 有 token 被丢掉 / some are dropped
    x, w_gate, w_experts = model(2)
    x = x.reshape(N, TOKENS, D)[:, : TOKENS // 2].reshape(-1, D)  # 每个设备一半 / half each
    half, args = compiled_moe(moe_layer, x, w_gate, w_experts)
    np.testing.assert_allclose(
        half(*args), moe_reference(x, w_gate, w_experts), rtol=1e-5, atol=1e-6
    )

    found = collectives(compiled.as_text())
    assert set(found) == {"all-to-all"}
    assert len(found["all-to-all"]) == 2
    for tuple_type in found["all-to-all"]:
        assert re.findall(r"f32\[[\d,]+\]", tuple_type) == [f"f32[1,{CAPACITY},{D}]"] * N
