"""03 · 不丢 token 的混合专家层 / a dropless mixture of experts.

专家并行那个文件给每个 (设备, 专家) 定了容量，超出的 token 被丢掉。不丢 token（dropless）的做法
从路由器算出真实的个数：每个专家分到几个 token（token counts），于是每个设备知道要给每个设备送几个
（send counts），一次 all_to_all 把这些个数交换过去，每个设备就知道要从每个设备收几个（recv
counts）。ragged_all_to_all 的六个参数里 send_sizes、recv_sizes 就是这两组个数，input_offsets 是
send counts 在本地的累加和；还有一个 output_offsets：每段送到对方后从哪一行写起，那是接收方按
自己的 recv counts 累加出来的，要再一次 all_to_all 才传回发送方。设备上有几个专家时，它们的 token 按专家排好，
lax.ragged_dot 一次乘完：group_sizes 说前几行属于专家 0、接下来几行属于专家 1……
XLA:CPU 不实现 ragged_all_to_all（专家并行那个文件），所以这里 token 的交换用定长的 all_to_all，
缓冲区按最坏情况（一个设备的全部 token）留位置：一个 token 也不丢。这里 8 个设备、16 个专家、
每个设备 2 个专家、各 16 个 token。

The expert-parallel file gave each (device, expert) pair a capacity and dropped the tokens
beyond it. A dropless layer computes the real numbers from the router: how many tokens each
expert gets (the token counts), hence how many each device sends each device (the send
counts); one all_to_all exchanges those numbers, and every device knows how many it receives
from each device (the recv counts). Of ragged_all_to_all's six arguments, send_sizes and
recv_sizes are those two sets of counts and input_offsets the send counts' local cumulative
sums; output_offsets, the row where each sent segment lands on its receiver, is the
receiver's cumulative sum of its recv counts and takes a second all_to_all back to the
senders. With
several experts on a device, their tokens sorted by expert go through lax.ragged_dot at once:
group_sizes says that the first rows belong to expert 0, the next ones to expert 1, ...
XLA:CPU does not implement ragged_all_to_all (the expert-parallel file), so here the tokens
travel by the fixed-shape all_to_all with room for the worst case (all of a device's
tokens): not a token is dropped. Here 8 devices, 16 experts, 2 experts per device, 16
tokens each.
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

N = 8  # 设备数（chapter.toml: devices = 8）/ devices
EXPERTS, LOCAL = 16, 2  # 专家总数、每个设备的专家数 / experts, experts per device
TOKENS, D = 16, 8  # 每个设备的 token 数和特征数 / tokens per device, features
SPECS = {"in_specs": (P("e"), P(), P("e")), "out_specs": P("e")}


def route(x, w_gate):
    """top-1 路由：每个 token 的专家（0 … EXPERTS-1）和门控权重。
    Top-1 routing: each token's expert (0 … EXPERTS-1) and its gate."""
    logits = x @ w_gate
    expert = jnp.argmax(logits, axis=-1)
    gate = jnp.max(jax.nn.softmax(logits, axis=-1), axis=-1)
    return expert, gate


def counts(expert):
    """一个设备的 token 数：每个专家几个 (EXPERTS,)，送给每个设备几个 (N,)（专家 e 在设备
    e // LOCAL 上）。/ One device's token counts: per expert (EXPERTS,), and sent to each device
    (N,) (expert e lives on device e // LOCAL)."""
    per_expert = jnp.bincount(expert, length=EXPERTS)
    return per_expert, per_expert.reshape(N, LOCAL).sum(axis=1)


def moe_reference(x, w_gate, w_experts):
    """不切分的参考：每个 token 乘自己专家的权重、tanh、乘 gate；没有容量，什么都不丢。
    The unsharded reference: each token through its own expert, tanh, times its gate; no
    capacity, nothing dropped."""
    expert, gate = route(x, w_gate)
    return gate[:, None] * jnp.tanh(jnp.einsum("td,tdf->tf", x, w_experts[expert]))


def model(seed=0):
    """所有设备的 token (N·TOKENS, D)、路由器 (D, EXPERTS)、专家权重 (EXPERTS, D, D)。
    Every device's tokens, the router, the experts' weights."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N * TOKENS, D), dtype=np.float32)
    w_gate = rng.standard_normal((D, EXPERTS), dtype=np.float32)
    w_experts = rng.standard_normal((EXPERTS, D, D), dtype=np.float32) / np.sqrt(D)
    return x, w_gate, w_experts


def placed(*arrays, specs=SPECS):
    """参数按 in_specs 放到网格 e (8,) 上。/ The arguments placed on the mesh e (8,) by in_specs."""
    mesh = jax.make_mesh((N,), ("e",))
    return tuple(jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(arrays, specs["in_specs"], strict=True))


def on_mesh(fn, *arrays, specs=SPECS):
    """jit(shard_map(fn)) 在网格 e (8,) 上编译好，和按 in_specs 放好的参数。
    jit(shard_map(fn)) compiled on the mesh e (8,), and the arguments placed by in_specs."""
    args = placed(*arrays, specs=specs)
    mesh = jax.make_mesh((N,), ("e",))
    return jax.jit(jax.shard_map(fn, mesh=mesh, **specs)).lower(*args).compile(), args


def exchanged_counts(x, w_gate):
    """每个设备：送给每个设备几个 token (1, N)，和从每个设备收到几个 (1, N)。
    Per device: how many tokens it sends each device (1, N), and receives from each (1, N)."""
    expert, _ = route(x, w_gate)
    _, send = counts(expert)
    recv = lax.all_to_all(send, "e", 0, 0, tiled=True)
    return send[None], recv[None]


# ---- 检查 / checks ----------------------------------------------------------------------


def test_the_router_gives_the_counts_an_all_to_all_needs():
    """send[d, j] 是设备 d 送给设备 j 的 token 数；把每个设备的 send 行用 all_to_all 交换一次，
    recv[j, d] 就是设备 j 从设备 d 收到几个。recv 和 send 是什么关系？所有设备一共送出多少个 token？
    定长的 all_to_all 要给每个 (发送方, 接收方) 留同样多的位置：最多的那一对决定它，专家并行那个
    文件的容量 3（每个专家）在这里会丢掉 token。
    send[d, j] counts the tokens device d sends device j; exchange each device's send row
    with one all_to_all and recv[j, d] is how many device j receives from device d. How do recv
    and send relate? How many tokens do all the devices send in total? A fixed-shape
    all_to_all leaves every (sender, receiver) pair the same room: the busiest pair decides it,
    and the expert-parallel file's capacity of 3 (per expert) would drop tokens here.
    """
    x, w_gate, _ = model()
    compiled, args = on_mesh(
        exchanged_counts, x, w_gate, specs={"in_specs": (P("e"), P()), "out_specs": (P("e"), P("e"))}
    )
    send, recv = (np.asarray(a) for a in compiled(*args))
    per_expert = np.stack([np.bincount(route(b, w_gate)[0], minlength=EXPERTS) for b in x.reshape(N, TOKENS, D)])
    np.testing.assert_array_equal(send, per_expert.reshape(N, N, LOCAL).sum(axis=2))
    np.testing.assert_array_equal(recv, __)
    assert int(send.sum()) == __
    assert int(per_expert.max()) > 3  # 容量 3 会丢 token / a capacity of 3 drops tokens
    (exchange,) = collectives(compiled.as_text())["all-to-all"]
    assert re.findall(r"s32\[\d+\]", exchange) == ["s32[1]"] * N  # 每段一个数 / one number a piece


# ---- 你来实现 / your code ---------------------------------------------------------------


def grouped_experts(tokens, local_expert, w_local):
    """一个设备上的几个专家一起算：tokens (R, D)，local_expert (R,) 是每行的本地专家号
    （0 … LOCAL-1；等于 LOCAL 的是空行，输出 0），w_local (LOCAL, D, D)。把行按专家号排好
    （jnp.argsort），用 jnp.bincount 数出每个专家几行（length=LOCAL：空行不算），
    lax.ragged_dot(排好的行, w_local, 个数) 一次乘完，再按原来的顺序放回去，最后 tanh。不许为每一行
    取出它的专家权重（w_local[local_expert] 是 (R, D, D)），也不许每个专家乘全部的行。大约 5 行。
    The experts of one device computed together: tokens (R, D), local_expert (R,) each row's
    local expert (0 … LOCAL-1; LOCAL marks an empty row, whose output is 0), w_local
    (LOCAL, D, D). Sort the rows by expert (jnp.argsort), count each expert's rows with
    jnp.bincount (length=LOCAL: empty rows not counted), multiply them at once with
    lax.ragged_dot(sorted rows, w_local, counts), put the rows back in their original order,
    then tanh. No per-row copy of its expert's weights (w_local[local_expert] is (R, D, D)), and
    no expert multiplying every row. About 5 lines.
    """
    todo("grouped_experts: 排序、计数、ragged_dot、放回 / sort, count, ragged_dot, put back")


def dropless_moe(x, w_gate, w_block):
    """不丢 token 的专家并行层（给定代码，它调用你的 grouped_experts）：按目标设备排好 token，放进
    (N, TOKENS, D) 的缓冲区（最坏情况：全部 token 去同一个设备也放得下），连同本地专家号一起
    all_to_all 过去，grouped_experts 算完，all_to_all 回来，乘 gate。
    The dropless expert-parallel layer (given; it calls your grouped_experts): tokens sorted
    by target device go into an (N, TOKENS, D) buffer (the worst case fits: every token bound for
    one device), travel with their local expert numbers by all_to_all, go through
    grouped_experts, come back by all_to_all and are scaled by their gate."""
    expert, gate = route(x, w_gate)
    device, local = expert // LOCAL, expert % LOCAL
    onehot = jax.nn.one_hot(device, N, dtype=jnp.int32)
    slot = jnp.sum((jnp.cumsum(onehot, axis=0) - 1) * onehot, axis=1)
    sent = jnp.zeros((N, TOKENS, x.shape[1]), x.dtype).at[device, slot].set(x)
    ids = jnp.full((N, TOKENS), LOCAL, jnp.int32).at[device, slot].set(local.astype(jnp.int32))
    arrived = lax.all_to_all(sent, "e", 0, 0, tiled=True)
    arrived_ids = lax.all_to_all(ids, "e", 0, 0, tiled=True)
    done = grouped_experts(arrived.reshape(-1, x.shape[1]), arrived_ids.reshape(-1), w_block)
    back = lax.all_to_all(done.reshape(arrived.shape), "e", 0, 0, tiled=True)
    return gate[:, None] * back[device, slot]


def test_a_dropless_layer_sorts_each_devices_tokens_by_expert_for_ragged_dot():
    """（先写好 grouped_experts。）整个不丢 token 的层等于不切分的参考（两组数据，没有容量），HLO 里
    的集合通信是三条 all-to-all（token、专家号、结果）。grouped_experts 单独也检查：每行乘自己的
    专家，空行输出 0，编译后的运算量不超过一次 ragged_dot（不是每个专家各乘一遍全部的行）。
    (Write grouped_experts first.) The whole dropless layer equals the unsharded reference (two
    data sets, no capacity), and the HLO's collectives are three all-to-alls (tokens, expert
    numbers, results). grouped_experts is checked on its own too: each row through its own
    expert, empty rows 0, and its compiled flops no more than one ragged_dot's (not every
    expert multiplying every row in turn).
    """
    compiled, _ = on_mesh(dropless_moe, *model())
    for seed in (0, 1):
        x, w_gate, w_experts = model(seed)
        out = compiled(*placed(x, w_gate, w_experts))
        np.testing.assert_allclose(out, moe_reference(x, w_gate, w_experts), rtol=1e-5, atol=1e-5)
    found = collectives(compiled.as_text())
    assert set(found) == {"all-to-all"} and len(found["all-to-all"]) == 3

    tokens, ids, w_local = grouped_inputs()
    ref = jnp.tanh(jnp.einsum("td,tdf->tf", tokens, w_local[ids]))
    empty = ids.at[::3].set(LOCAL)
    got, got_empty = jax.jit(lambda t, i, j, w: (grouped_experts(t, i, w), grouped_experts(t, j, w)))(
        tokens, ids, empty, w_local
    )
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    fewer = grouped_experts(tokens[:40], ids[:40], w_local)  # another row count, run eagerly
    np.testing.assert_allclose(fewer, ref[:40], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_empty[::3], 0.0)
    keep = np.asarray(empty) < LOCAL
    np.testing.assert_allclose(np.asarray(got_empty)[keep], np.asarray(ref)[keep], rtol=1e-5, atol=1e-5)
    # no more work than the one ragged_dot: every row through every expert, by any primitive, is more
    def flops(fn):
        return jax.jit(fn).lower(tokens, ids, w_local).compile().cost_analysis()["flops"]

    one = flops(lambda t, i, w: lax.ragged_dot(t, w, jnp.bincount(i, length=LOCAL)))
    assert flops(grouped_experts) < 1.25 * one, "one ragged_dot for all the experts"
    # 在 CPU 上 ragged_dot 和每个专家乘全部的行一样多运算：所以也数 jaxpr 里的 dot_general（一个也没有）
    # on a CPU ragged_dot costs what every expert on every row does: so no dot_general either
    text = str(jax.make_jaxpr(grouped_experts)(tokens, ids, w_local))
    assert re.findall(r"(?<!\w)dot_general\[", text) == [], "the products are the ragged_dot's"


def grouped_inputs():
    """所有设备的 token 当成一个设备收到的行 (R, D)、随机的本地专家号、前两个专家的权重。
    Every device's tokens as the rows one device received, random local experts, two experts."""
    x, _, w_experts = model()
    ids = np.random.default_rng(2).integers(0, LOCAL, x.shape[0])
    return jnp.asarray(x), jnp.asarray(ids, jnp.int32), jnp.asarray(w_experts[:LOCAL])


def test_what_ragged_dot_lowers_to_on_cpu():
    """lax.ragged_dot 在 jaxpr 里是一个原语 ragged_dot_general；JAX 为 CPU 降级时把它写成什么？交给
    XLA 的 StableHLO 里还有 ragged 的指令吗？dot_general 的左操作数是什么形状？把 cost_analysis()
    的浮点运算数和每个专家都乘全部的行比一比：在 CPU 上 ragged_dot 省下运算了吗？
    lax.ragged_dot is one primitive in the jaxpr, ragged_dot_general; what does JAX write for
    it when lowering for the CPU? Does the StableHLO handed to XLA still hold a ragged
    instruction? What shape is the dot_general's left operand? Compare cost_analysis()'s flops
    with every expert multiplying every row: does ragged_dot save work on the CPU?
    """
    tokens, ids, w_local = grouped_inputs()
    ragged = jax.jit(lambda t, i, w: lax.ragged_dot(t, w, jnp.bincount(i, length=LOCAL)))
    every_expert = jax.jit(lambda t, i, w: jnp.einsum("td,edf->tef", t, w))
    assert "ragged_dot_general" in str(jax.make_jaxpr(ragged)(tokens, ids, w_local))
    lowered = ragged.lower(tokens, ids, w_local)
    text = lowered.as_text()
    assert ("ragged" in text) is __
    (lhs,) = re.findall(r"stablehlo\.dot_general .*: \(tensor<([\dx]+)xf32>", text)
    assert lhs == __
    flops = lowered.compile().cost_analysis()["flops"]
    dense = every_expert.lower(tokens, ids, w_local).compile().cost_analysis()["flops"]
    assert dense == 2 * tokens.shape[0] * D * D * LOCAL
    assert flops >= dense


# ---- ragged_all_to_all 的参数 / ragged_all_to_all's arguments ---------------------------


def ragged_all_to_all_args(send):
    """本设备调用 lax.ragged_all_to_all 的四个整数参数，从 send（(N,)：给每个设备送几个 token）
    算出来；本设备的 token 已按目标设备排好，每个接收方把收到的段按发送方的顺序从第 0 行起挨着放。
    返回 (input_offsets, send_sizes, output_offsets, recv_sizes)，都是 (N,) int32：input_offsets
    是送给每个设备的那段在本地从哪一行起；recv_sizes 是从每个设备收几个（一次 all_to_all）；
    output_offsets[j] 是送给设备 j 的那段在 j 那里从哪一行写起，这要接收方 j 按自己的 recv
    算出来，再一次 all_to_all 送回给发送方。不许收集所有设备的 send（all_gather）。大约 5 行。
    This device's four integer arguments to lax.ragged_all_to_all, computed from send ((N,):
    how many tokens it sends each device); this device's tokens are already sorted by target
    device, and each receiver places the segments it receives one after another from row 0,
    in the senders' order. Return (input_offsets, send_sizes, output_offsets, recv_sizes), all
    (N,) int32: input_offsets, the local row where the segment for each device starts;
    recv_sizes, how many come from each device (one all_to_all); output_offsets[j], the row
    where the segment sent to device j is written on j, which receiver j works out from its
    own recv and which a second all_to_all carries back to the senders. No gathering every
    device's send (all_gather). About 5 lines.
    """
    todo("ragged_all_to_all_args: 个数、累加和、两次 all_to_all / counts, cumulative sums, two all_to_alls")


def ragged_plan(x, w_gate):
    """每个设备：按目标设备排好的 token 顺序 (1, TOKENS)、它的四个参数 (1, 4, N)，和文档要求与
    send_sizes 相等的 all_to_all(recv_sizes) (1, N)（给定代码）。
    Per device: its tokens' order sorted by target device, its four arguments, and
    all_to_all(recv_sizes), which the documentation requires to equal send_sizes (given)."""
    expert, _ = route(x, w_gate)
    _, send = counts(expert)
    args = ragged_all_to_all_args(send.astype(jnp.int32))
    back = lax.all_to_all(args[3], "e", 0, 0, tiled=True)
    return jnp.argsort(expert // LOCAL, stable=True)[None], jnp.stack(args)[None], back[None]


def ragged_exchange(x, w_gate):
    """用 lax.ragged_all_to_all 把排好的 token 送到它们的专家所在的设备（给定代码）。
    Sends the sorted tokens to their experts' devices with lax.ragged_all_to_all (given)."""
    expert, _ = route(x, w_gate)
    _, send = counts(expert)
    args = ragged_all_to_all_args(send.astype(jnp.int32))
    order = jnp.argsort(expert // LOCAL, stable=True)
    return lax.ragged_all_to_all(x[order], jnp.zeros((N * TOKENS, D), x.dtype), *args, axis_name="e")


def simulate(operands, args):
    """按 lax.ragged_all_to_all 文档里的伪代码，在 NumPy 里替 N 个设备执行一次：发送方 i 把
    operand 从 input_offsets[j] 起的 send_sizes[j] 行写到接收方 j 的 output_offsets[j] 行起
    （每个设备的 output 是 N·TOKENS 行的 -1）。
    One ragged_all_to_all for N devices in NumPy, as the pseudocode of its documentation says:
    sender i writes send_sizes[j] rows of its operand from input_offsets[j] on, into receiver
    j's output from row output_offsets[j] (each device's output N·TOKENS rows of -1)."""
    input_offsets, send_sizes, output_offsets, _ = (args[:, k] for k in range(4))
    results = np.full((N, N * TOKENS), -1)
    for i in range(N):
        for j in range(N):
            rows = operands[i, input_offsets[i, j] : input_offsets[i, j] + send_sizes[i, j]]
            results[j, output_offsets[i, j] : output_offsets[i, j] + len(rows)] = rows
    return results


def test_ragged_all_to_all_arguments_come_from_the_router():
    """（先写好 ragged_all_to_all_args。）recv_sizes 经 all_to_all 换回来等于 send_sizes（文档的
    要求）。在 NumPy 里按文档的伪代码替 8 个设备执行 ragged_all_to_all（XLA:CPU 跑不了它）：
    两组数据下，每个设备收到的正好是所有去它的专家的 token，按发送方的顺序从第 0 行起挨着放，后面的行没有被写。再把真正的 lax.ragged_all_to_all
    降级（lower）：StableHLO 里有一条 ragged_all_to_all 和两条 (N,) 整数的 all_to_all，
    ragged_all_to_all 的最后两个参数（output_offsets、recv_sizes）就是这两条的结果。
    (Write ragged_all_to_all_args first.) recv_sizes exchanged back by all_to_all equal
    send_sizes (as the documentation requires). ragged_all_to_all run for the 8 devices in
    NumPy as the pseudocode of its documentation says (XLA:CPU cannot run it): on two data sets
    every device receives exactly the tokens bound for its experts, one sender after another
    from row 0, and the rows after them are not written. Then the real lax.ragged_all_to_all lowered:
    the StableHLO holds one ragged_all_to_all and two all_to_alls of (N,) integers, whose
    results are ragged_all_to_all's last two arguments (output_offsets, recv_sizes).
    """
    specs = {"in_specs": (P("e"), P()), "out_specs": (P("e"),) * 3}
    compiled, _ = on_mesh(ragged_plan, *model()[:2], specs=specs)
    for seed in (0, 1):
        x, w_gate, _ = model(seed)
        order, args, back = (np.asarray(a) for a in compiled(*placed(x, w_gate, specs=specs)))
        np.testing.assert_array_equal(back, args[:, 1])  # 文档要求的一致性 / as documented
        token_ids = order + TOKENS * np.arange(N)[:, None]  # 全局的 token 号 / global token ids
        results = simulate(token_ids, args)
        target = np.asarray(route(x, w_gate)[0]) // LOCAL
        for j in range(N):
            mine = np.flatnonzero(target == j)  # 按全局号，也就是按发送方排 / by sender
            np.testing.assert_array_equal(results[j, : len(mine)], mine)
            assert (results[j, len(mine) :] == -1).all()

    mesh = jax.make_mesh((N,), ("e",))
    ragged = jax.shard_map(ragged_exchange, mesh=mesh, in_specs=(P("e"), P()), out_specs=P("e"))
    text = jax.jit(ragged).lower(*placed(x, w_gate, specs=specs)).as_text()
    assert text.count("ragged_all_to_all") == 1
    exchanges = re.findall(r"stablehlo\.all_to_all.*?\((tensor<\w+>)\)", text)
    assert exchanges == [f"tensor<{N}xi32>"] * 2
    results = re.findall(r"(%\w+) = \"stablehlo\.all_to_all\"", text)
    operands = re.search(r"@ragged_all_to_all\(([^)]*)\)", text).group(1).split(", ")
    assert set(operands[4:]) == set(results)  # output_offsets、recv_sizes
