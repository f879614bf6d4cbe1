"""03 · 集合通信，逐个设备预测 / collectives, predicted device by device.

shard_map 里的函数每个设备跑一份，看到的是自己的那一块；设备之间只能通过集合通信交换数据。
这里的输入都很小，每个设备的块都能心算：先想清楚“设备 k 手里有什么”，再写出它收到什么。
本文件的输入 x = arange(16) 按 P("i") 切到 8 个设备上：设备 k 的块是 [2k, 2k+1]。

Inside shard_map the function runs once per device on that device's block; devices exchange
data only through collectives. The inputs here are tiny so that every block can be worked out
by hand: first say what device k holds, then what it receives. x = arange(16) split by P("i")
over 8 devices gives device k the block [2k, 2k+1].
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8  # 本章的网格用 8 个设备（chapter.toml: devices = 8）/ this chapter's meshes use 8 devices
SPLIT = P("i")  # 第 0 轴沿网格轴 "i" 切开 / axis 0 split along mesh axis "i"


def run(f, x, in_specs=SPLIT, out_specs=SPLIT):
    """在一维网格 ("i": N) 上用 shard_map 跑 f：x 先按 in_specs 放好（Explicit 网格要求输入的
    分片与 in_specs 一致），整个调用 jit 一次。
    Run f with shard_map on the 1-D mesh ("i": N): x is first placed as in_specs says (an
    Explicit mesh wants the input's sharding to match in_specs); the call is jitted.
    """
    mesh = jax.make_mesh((N,), ("i",))
    x = jax.device_put(x, NamedSharding(mesh, in_specs))
    return jax.jit(jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs))(x)


def per_device(out, n=N):
    """out_specs=P("i") 的结果按设备拆开：第 k 行是设备 k 返回的块。
    Split a result of out_specs=P("i") by device: row k is the block device k returned."""
    return np.asarray(out).reshape(n, -1).tolist()


def x16():
    return np.arange(16.0, dtype=np.float32)


# ---- 检查 / checks ----------------------------------------------------------------------


def test_psum_adds_the_blocks_elementwise():
    """psum 把所有设备的块逐元素相加，每个设备都拿到同一个和。块 [2k, 2k+1] 相加，得到
    [所有偶数之和, 所有奇数之和]。
    psum adds the blocks of all devices element by element, and every device gets the same
    sum. Adding the blocks [2k, 2k+1] gives [sum of the evens, sum of the odds].
    """
    out = run(lambda v: lax.psum(v, "i"), x16())
    assert per_device(out)[0] == [56.0, 64.0]
    assert per_device(out) == [per_device(out)[0]] * N


def test_psum_makes_a_value_invariant_so_out_specs_may_be_empty():
    """⚠️ 陷阱 / trap：shard_map 的类型记录每个值沿哪些网格轴“不同”（varying，jax.typeof 显示为
    {V:i}）。psum 的结果在每个设备上都一样，类型里就没有 V 了，所以能用 out_specs=P() 返回一份；
    没有归约过的值用 P() 返回会被拒绝。all_gather 的结果虽然数值相同，类型仍是 varying。
    shard_map's types record along which mesh axes a value varies (jax.typeof shows {V:i}).
    psum's result is equal on every device, so its type loses the V and out_specs=P() can
    return a single copy; an unreduced value returned with P() is rejected.
    all_gather's result has equal values but is still typed varying.
    """
    types = {}

    def spy(v):
        types["block"] = str(jax.typeof(v))
        types["psum"] = str(jax.typeof(lax.psum(v, "i")))
        types["all_gather"] = str(jax.typeof(lax.all_gather(v, "i")))
        return lax.psum(v, "i")

    out = run(spy, x16(), out_specs=P())
    assert types["block"] == "float32[2]{V:i}"
    assert types["psum"] == "float32[2]"
    assert types["all_gather"] == "float32[8,2]{V:i}"
    assert out.shape == (2,)
    with raises_exactly(ValueError):
        run(lambda v: v * 2, x16(), out_specs=P())


def test_a_scan_carry_in_shard_map_must_vary_like_what_the_body_adds():
    """⚠️ 陷阱 / trap：scan 要求进出循环的 carry 类型完全相同，而在 shard_map 里类型包括 vma
    （沿哪些网格轴不同）。常数 0.0 在每个设备上都一样，是“不变的”；循环体把本设备块里的元素
    加上去，结果沿 "i" 不同，carry 的类型就变了，scan 拒绝它（哪个异常类？）。改法是让初值一开始
    就是 varying：不改变它的值，只改变它的类型。写出这个初值。
    scan wants the carry to have exactly the same type going in and coming out, and inside
    shard_map a type includes its vma (the mesh axes along which it varies). The constant 0.0
    is equal on every device, an invariant; the body adds elements of this device's block,
    which vary along "i", so the carry's type changes and scan rejects it (which exception
    class?). The fix makes the initial value varying from the start: its type changes, its
    value does not. Write that initial value.
    """

    def block_total(start):
        def body(v):
            def step(total, element):
                return total + element, None

            total, _ = lax.scan(step, start(), v)
            return total[None]  # 每个设备一个数 / one number per device

        return body

    with raises_exactly(TypeError):
        run(block_total(lambda: jnp.float32(0.0)), x16())

    def varying_zero():
        return lax.pcast(jnp.float32(0.0), "i", to="varying")

    out = run(block_total(varying_zero), x16())
    np.testing.assert_array_equal(out, x16().reshape(N, 2).sum(axis=1))


def test_pmean_and_psum_over_n_compile_to_the_same_program():
    """⚠️ 陷阱 / trap：pmean 不是一种单独的通信：它就是 psum 再除以轴的大小。两种写法降级出
    一模一样的 StableHLO——同一条 all_reduce，后面跟一个除法。
    pmean is not a communication of its own: it is psum divided by the axis size. Both spellings
    lower to exactly the same StableHLO: the same all_reduce followed by a division.
    """
    mesh = jax.make_mesh((N,), ("i",))
    x = jax.device_put(x16(), NamedSharding(mesh, P("i")))

    def lowered(f):
        return jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P("i"), out_specs=P())).lower(x)

    by_pmean = lowered(lambda v: lax.pmean(v, "i")).as_text()
    by_psum = lowered(lambda v: lax.psum(v, "i") / lax.axis_size("i")).as_text()
    assert by_pmean == by_psum
    assert by_pmean.count("stablehlo.all_reduce") == 1
    assert by_pmean.count("stablehlo.divide") == 1  # 除以常数 N / a division by the constant N


def test_axis_index_tells_each_device_where_it_is():
    """axis_index("i") 是设备在网格轴上的位置 k（0 … N-1），每个设备不同。用它把块内的下标换成
    全局下标：块的第 j 个元素在全局数组里的位置是 k·块长 + j。
    axis_index("i") is the device's position k (0 … N-1) along the mesh axis, different on
    every device. Use it to turn a position inside the block into a global index: element j of
    the block sits at k·(block length) + j in the global array.
    """

    def global_index(v):
        offset = lax.axis_index("i") * v.shape[0]
        return offset + jnp.arange(v.shape[0])

    np.testing.assert_array_equal(run(global_index, x16()), np.arange(16))
    np.testing.assert_array_equal(run(global_index, np.zeros(32, np.float32)), np.arange(32))


def test_all_gather_stacks_and_tiled_all_gather_concatenates():
    """all_gather 让每个设备都拿到所有块：默认沿新的第 0 轴堆叠（N 个块叠成 [N, 块长]），
    tiled=True 则沿已有的轴首尾相接（[N·块长]）。预测两种形状。
    all_gather gives every device all the blocks: by default stacked along a new axis 0
    (N blocks become [N, block]); tiled=True concatenates along the existing axis
    ([N·block]). Predict both shapes.
    """
    shapes = {}

    def spy(v):
        stacked, tiled = lax.all_gather(v, "i"), lax.all_gather(v, "i", tiled=True)
        shapes["stacked"], shapes["tiled"] = stacked.shape, tiled.shape
        return tiled

    out = run(spy, x16())
    assert shapes["stacked"] == (8, 2)
    assert shapes["tiled"] == (16,)
    assert per_device(out) == [list(range(16))] * N  # 每个设备都有整个数组 / all of it, everywhere


def test_psum_scatter_is_a_psum_where_each_device_keeps_one_piece():
    """psum_scatter（reduce-scatter）= psum 之后每个设备只留和的一段：设备 k 留第 k 段。
    x = arange(64) 分 8 块、每块 8 个；tiled=True 时设备 k 得到长度 1 的一段：
    第 k 个位置上 8 个块之和。
    psum_scatter (reduce-scatter) = a psum after which each device keeps one piece of the sum:
    device k keeps piece k. With x = arange(64) in 8 blocks of 8 and tiled=True, device k gets a
    piece of length 1: the sum over the 8 blocks at position k.
    """
    x = np.arange(64.0, dtype=np.float32)
    out = run(lambda v: lax.psum_scatter(v, "i", tiled=True), x)
    assert per_device(out) == [[224.0], [232.0], [240.0], [248.0], [256.0], [264.0], [272.0], [280.0]]

    def same_by_hand(v):
        total = lax.psum(v, "i")
        return lax.dynamic_slice_in_dim(total, lax.axis_index("i"), 1)

    np.testing.assert_array_equal(run(same_by_hand, x), out)


def test_ppermute_sends_blocks_and_zero_fills_the_rest():
    """⚠️ 陷阱 / trap：ppermute 按 (源, 目的) 对发送块，每个设备的结果只来自发给它的那一块。
    环形移位 [(k, k+1 mod N)] 时设备 k 收到谁的块？不闭合的移位里没人发给设备 0：它得到什么——
    还是原来的值吗？
    ppermute sends blocks along (source, destination) pairs, and each device's result comes
    only from the block sent to it. In the ring shift [(k, k+1 mod N)], whose block does
    device k receive? In a shift that does not wrap nobody sends to device 0: what does it get,
    its old value?
    """
    ring = [(k, (k + 1) % N) for k in range(N)]
    line = [(k, k + 1) for k in range(N - 1)]
    x = np.arange(8.0, dtype=np.float32)  # 设备 k 的块是 [k] / device k holds [k]
    around = per_device(run(lambda v: lax.ppermute(v, "i", ring), x))
    along = per_device(run(lambda v: lax.ppermute(v, "i", line), x + 10))
    assert around == [[7.0], [0.0], [1.0], [2.0], [3.0], [4.0], [5.0], [6.0]]
    assert along == [[0.0], [10.0], [11.0], [12.0], [13.0], [14.0], [15.0], [16.0]]


def test_all_to_all_moves_the_split_to_another_axis():
    """all_to_all 把每个设备的块沿 split_axis 切成 N 份，第 j 份发给设备 j，收到的沿 concat_axis
    拼起来。一个按行切开的矩阵做 all_to_all(split_axis=1, concat_axis=0) 后，每个设备拿到的是
    一整列：数组没变，变的是沿哪根轴切分。用对 out_specs，结果就是原矩阵。
    all_to_all cuts each device's block into N pieces along split_axis, sends piece j to device
    j and concatenates what arrives along concat_axis. A row-sharded matrix after
    all_to_all(split_axis=1, concat_axis=0) leaves each device with one whole column: the array
    is unchanged, only the axis it is split along moved. With the right out_specs the result is
    the original matrix.
    """
    m = np.arange(64.0, dtype=np.float32).reshape(8, 8)
    shapes = {}

    def rows_to_columns(block):
        out = lax.all_to_all(block, "i", split_axis=1, concat_axis=0, tiled=True)
        shapes["in"], shapes["out"] = block.shape, out.shape
        return out

    out = run(rows_to_columns, m, in_specs=P("i", None), out_specs=P(None, "i"))
    assert (shapes["in"], shapes["out"]) == ((1, 8), (8, 1))
    np.testing.assert_array_equal(out, m)


# ---- 你来实现 / your code ---------------------------------------------------------------


def ring_all_reduce(v):
    """只用 lax.ppermute（不许用 psum 或别的集合通信）实现沿轴 "i" 的全归约，用带宽最优的环形
    算法：把块沿第 0 轴切成 N 段（v.shape[0] 是 N 的倍数），先做 reduce-scatter：N-1 步，每一步
    每个设备把一段的部分和发给环上的下一个设备，下一个设备把它加到自己的同一段上，做完后每个
    设备恰好有一段是全体之和；再做 all-gather：又 N-1 步，把加好的段沿环传下去，直到每个设备
    都有全部 N 段。每一步只传 1/N 个块。N 是轴 "i" 的大小，在 shard_map 里是一个 Python 整数
    （上面的 pmean koan 问过怎么向 lax 要它），步数用 Python 循环写，这样每一步都是 HLO 里自己的
    一条 collective-permute；设备 k 在每一步发哪一段由它在轴上的位置 k 决定（axis_index 那个
    koan）。大约 12 行。

    An all-reduce along axis "i" with lax.ppermute only (no psum nor any other collective), by
    the bandwidth-optimal ring algorithm: cut the block into N chunks along axis 0 (v.shape[0]
    is a multiple of N) and first reduce-scatter: N-1 steps, in each of which every device
    sends one chunk's partial sum to the next device on the ring, which adds it to its own copy
    of that chunk; afterwards every device holds one chunk summed over all devices. Then
    all-gather: N-1 more steps that pass the summed chunks along the ring until every device
    has all N of them. Each step moves 1/N of a block. N is the size of axis "i", a Python int
    inside shard_map (the pmean koan above asked how lax gives it): write the steps as Python
    loops, so that each step is a collective-permute of its own in the HLO; which chunk device
    k sends at each step follows from its position k along the axis (the axis_index koan).
    About 12 lines.
    """
    n, k = lax.axis_size("i"), lax.axis_index("i")
    ring = [(j, (j + 1) % n) for j in range(n)]
    chunks = v.reshape(n, v.shape[0] // n, *v.shape[1:])
    for step in range(n - 1):  # reduce-scatter: 设备 k 最后拿着第 (k+1) % n 段的和
        arrived = lax.ppermute(chunks[(k - step) % n], "i", ring)
        chunks = chunks.at[(k - step - 1) % n].add(arrived)
    for step in range(n - 1):  # all-gather: 把加好的段沿环传下去 / pass the summed chunks on
        arrived = lax.ppermute(chunks[(k + 1 - step) % n], "i", ring)
        chunks = chunks.at[(k - step) % n].set(arrived)
    return chunks.reshape(v.shape)


def hlo_bytes(hlo_type):
    """一个 HLO 数组类型的字节数，例如 "f32[2,3]" → 24。/ The bytes of an HLO array type."""
    dtype, dims = re.fullmatch(r"([a-z]+\d+)\[([\d,]*)\]", hlo_type).groups()
    itemsize = {"f32": 4, "s32": 4, "f16": 2, "bf16": 2, "f64": 8}[dtype]
    return itemsize * int(np.prod([int(d) for d in dims.split(",") if d]))


def test_ring_all_reduce_is_a_reduce_scatter_then_an_all_gather():
    """你的环形全归约与 psum 结果相同（几种形状），编译后的 HLO 里除了 collective-permute 没有
    别的集合通信；从 HLO 里读出每条 collective-permute 传的字节数：2(N-1) 条，每条 1/N 个块，
    每个设备一共发出 2(N-1)/N 个块。朴素的环（整块传 N-1 次）要发 N-1 个块，多 N/2 倍；psum
    则是一条 all-reduce，不是 ppermute 写的。
    Your ring all-reduce equals psum (several shapes), and the compiled HLO holds no
    collective but collective-permutes; read the bytes each one carries from the HLO: 2(N-1)
    of them, 1/N of a block each, so each device sends 2(N-1)/N blocks in all. The naive ring
    (the whole block N-1 times) sends N-1 blocks, N/2 times more; psum is one all-reduce, not
    written with ppermute.
    """
    rng = np.random.default_rng(0)
    mesh = jax.make_mesh((N,), ("i",))
    ring = jax.jit(jax.shard_map(ring_all_reduce, mesh=mesh, in_specs=P("i"), out_specs=P("i")))
    for shape in [(64,), (128, 3)]:
        x = rng.integers(-9, 9, size=shape).astype(np.float32)  # 整数：求和顺序不影响结果
        placed = jax.device_put(x, NamedSharding(mesh, P("i")))
        compiled = ring.lower(placed).compile()
        np.testing.assert_array_equal(compiled(placed), run(lambda v: lax.psum(v, "i"), x))

    found = collectives(compiled.as_text())  # 最后那个 (128, 3) 的程序 / the (128, 3) program
    assert set(found) == {"collective-permute"}
    sent = [hlo_bytes(t) for t in found["collective-permute"]]
    block = x.nbytes // N  # 每个设备的块：16×3 个 float32 / each device's block
    assert len(sent) == 2 * (N - 1)
    assert set(sent) == {block // N}
    assert sum(sent) == 2 * (N - 1) * block // N  # 14 × 24 B = 336 B；朴素的环 7 × 192 B = 1344 B


def collective_matmul(x_block, w_block):
    """x 按行切开（每个设备 x_block 是 x 的 1/N 行），w 按列切开（w_block 是 w 的 1/N 列）；
    返回本设备的那几列 x @ w_block，要所有的行。直接的写法先 all_gather 整个 x 再乘：乘法要等
    整个 x 到齐。这里不许用 all_gather：把 x 的块沿环（和 ring_all_reduce 同一个环）传下去，
    每一步先用手里这一块乘 w_block，算出结果里属于这一块原主人的那几行，再把块传给下一个设备。
    N 步乘法，N-1 次 ppermute（最后一块乘完不必再传）。设备 k 在第 s 步手里是谁的块，由
    它的位置 k 和 s 决定；写进结果的第几行用 lax.dynamic_update_slice_in_dim。
    大约 9 行。
    x is split by rows (x_block is 1/N of x's rows on each device), w by columns (w_block is
    1/N of its columns); return this device's columns x @ w_block, all rows of them. The
    direct way all_gathers the whole of x and multiplies: the matmul waits until all of x has
    arrived. No all_gather here: pass the blocks of x along the ring (the same ring as
    ring_all_reduce), and at each step first multiply the block at hand by w_block, giving the
    rows of the result that belong to that block's owner, then pass the block on to the next
    device. N matmuls, N-1 ppermutes (the last block need not travel on). Whose block device
    k holds at step s follows from its position k and s; write the rows into the result
    with lax.dynamic_update_slice_in_dim. About 9 lines.
    """
    n, k = lax.axis_size("i"), lax.axis_index("i")
    ring = [(j, (j + 1) % n) for j in range(n)]
    rows = x_block.shape[0]
    out = jnp.zeros((n * rows, w_block.shape[1]), x_block.dtype)
    for step in range(n):
        owner = (k - step) % n  # 第 step 步手里是设备 k - step 的块 / whose block is at hand
        out = lax.dynamic_update_slice_in_dim(out, x_block @ w_block, owner * rows, 0)
        if step < n - 1:
            x_block = lax.ppermute(x_block, "i", ring)
    return out


def test_collective_matmul_multiplies_each_block_as_it_arrives():
    """（先写好 collective_matmul。）它和 x @ w 的值相同（两种形状），结果按列切开，每个设备有
    全部的行。编译后的 HLO 里没有 all-gather，只有 N-1 条 collective-permute，每条正好是 x 的
    一块；合起来传的字节和 all_gather 收齐 x 一样多（别的设备的 N-1 块）。HLO 里有 N 个 dot：
    每个只用已经到手的那一块，不必等整个 x。在 GPU、TPU 上 XLA 就是靠这一点让下一块的传输和
    当前的乘法同时进行（集合矩阵乘 collective matmul）；CPU 上这里只数得出结构，量不出重叠。
    (Write collective_matmul first.) It equals x @ w (two shapes), the result split by
    columns with all rows on each device. The compiled HLO has no all-gather, only N-1
    collective-permutes, each exactly one block of x; together they carry the bytes an
    all_gather of x does (the other devices' N-1 blocks). The HLO has N dots, each using only
    the block already at hand, none waiting for the whole of x. On GPU and TPU this is what
    lets XLA overlap the next block's transfer with the current matmul (collective matmul);
    on the CPU this koan can count the structure only, not measure an overlap.
    """
    rng = np.random.default_rng(1)
    mesh = jax.make_mesh((N,), ("i",))
    specs = {"in_specs": (P("i", None), P(None, "i")), "out_specs": P(None, "i")}
    matmul = jax.jit(jax.shard_map(collective_matmul, mesh=mesh, **specs))
    for m, d, f in [(16, 8, 8), (32, 16, 24)]:
        x = rng.integers(-4, 4, size=(m, d)).astype(np.float32)  # 整数：乘加顺序不影响结果
        w = rng.integers(-4, 4, size=(d, f)).astype(np.float32)
        x_split = jax.device_put(x, NamedSharding(mesh, P("i", None)))
        w_split = jax.device_put(w, NamedSharding(mesh, P(None, "i")))
        compiled = matmul.lower(x_split, w_split).compile()
        out = compiled(x_split, w_split)
        np.testing.assert_array_equal(out, x @ w)
        assert out.sharding.shard_shape(out.shape) == (m, f // N)

    hlo = compiled.as_text()  # 最后那个 (32, 16) @ (16, 24) 的程序 / the last program
    found = collectives(hlo)
    assert set(found) == {"collective-permute"}
    assert found["collective-permute"] == ["f32[4,16]"] * (N - 1)  # x 的一块 / one block of x
    sent = sum(hlo_bytes(t) for t in found["collective-permute"])
    assert sent == (N - 1) * x.nbytes // N  # 7 × 256 B = 1792 B，all_gather 也是 / as all_gather
    assert len(re.findall(r" dot\(", hlo)) == N


def matmul_reduce_scatter(x_block, w_block):
    """另一半：x 按列切开（x_block 是 x 的 1/N 列），w 按行切开（w_block 是 w 的 1/N 行）；每个设备
    的 x_block @ w_block 是整个 x @ w 的一个部分和。返回结果的第 k 段行（N 段中的一段）在所有设备上
    的和——这是 psum_scatter 的活，但这里不许用它：让一个部分和沿环（同一个环）走一圈，每到一个
    设备就加上这个设备对那段行的贡献（x_block 那几行 @ w_block），再传给下一个设备；最后一站正好
    是那段行的主人，它加上自己的一份就留下。N 次乘法，每次只乘一段行；N-1 次 ppermute，传的是
    部分和，不是 x 的块。设备 k 在第 s 步做哪一段，由“第 N-1 步做的是自己那段”倒推；取 x_block 的
    几行用 lax.dynamic_slice_in_dim。大约 8 行。
    The other half: x split by columns (x_block is 1/N of x's columns), w by rows (w_block is
    1/N of its rows); each device's x_block @ w_block is a partial sum of the whole x @ w.
    Return row segment k of the result (one of N segments) summed over all devices: psum_scatter's
    job, which is not allowed here. Send a partial sum once around the ring (the same ring):
    at each device it adds that device's share of those rows (those rows of x_block @ w_block)
    and travels on; its last stop is the owner of the rows, which adds its own share and keeps
    it. N matmuls, each of one segment of rows; N-1 ppermutes, carrying partial sums, not blocks
    of x. Which segment device k works on at step s follows backwards from "at step N-1 it is
    its own"; take rows of x_block with lax.dynamic_slice_in_dim. About 8 lines.
    """
    n, k = lax.axis_size("i"), lax.axis_index("i")
    ring = [(j, (j + 1) % n) for j in range(n)]
    rows = x_block.shape[0] // n
    acc = None
    for step in range(n):
        segment = (k - step - 1) % n  # 第 n-1 步是 k 自己的那段 / its own at step n-1
        share = lax.dynamic_slice_in_dim(x_block, segment * rows, rows, 0) @ w_block
        acc = share if acc is None else lax.ppermute(acc, "i", ring) + share
    return acc


def test_matmul_then_reduce_scatter_adds_each_piece_as_it_passes():
    """（先写好 matmul_reduce_scatter。）它和 x @ w 的值相同（两种形状），结果按行切开。编译后的
    HLO 里没有 reduce-scatter、all-reduce，只有 N-1 条 collective-permute，每条是结果的一段行
    (m/N, f)：传的是部分和。HLO 里有 N 个 dot，每个只算一段行：每一步的乘法只等上一站的部分和。
    这就是集合矩阵乘的另一半：前一个 koan 把 all-gather 拆进乘法（Megatron 的第一层），这一个把
    reduce-scatter 拆进乘法（第二层、序列并行的输出）。
    (Write matmul_reduce_scatter first.) It equals x @ w (two shapes), the result split by rows.
    The compiled HLO has no reduce-scatter nor all-reduce, only N-1 collective-permutes, each one
    row segment (m/N, f) of the result: they carry partial sums. The HLO has N dots, each for one
    segment of rows: each step's matmul waits only for the previous stop's partial sum. This is
    the other half of collective matmul: the previous koan folded an all-gather into the
    matmuls (Megatron's first layer), this one folds a reduce-scatter into them (the second
    layer, the output of sequence parallelism).
    """
    rng = np.random.default_rng(2)
    mesh = jax.make_mesh((N,), ("i",))
    specs = {"in_specs": (P(None, "i"), P("i", None)), "out_specs": P("i", None)}
    matmul = jax.jit(jax.shard_map(matmul_reduce_scatter, mesh=mesh, **specs))
    for m, d, f in [(16, 8, 8), (32, 16, 24)]:
        x = rng.integers(-4, 4, size=(m, d)).astype(np.float32)  # 整数：乘加顺序不影响结果
        w = rng.integers(-4, 4, size=(d, f)).astype(np.float32)
        x_split = jax.device_put(x, NamedSharding(mesh, P(None, "i")))
        w_split = jax.device_put(w, NamedSharding(mesh, P("i", None)))
        compiled = matmul.lower(x_split, w_split).compile()
        out = compiled(x_split, w_split)
        np.testing.assert_array_equal(out, x @ w)
        assert out.sharding.shard_shape(out.shape) == (m // N, f)

    hlo = compiled.as_text()  # 最后那个 (32, 16) @ (16, 24) 的程序 / the last program
    found = collectives(hlo)
    assert set(found) == {"collective-permute"}
    assert found["collective-permute"] == [f"f32[{m // N},{f}]"] * (N - 1)  # 部分和 / partial sums
    dots = re.findall(r"= (f32\[[\d,]+\])\S* dot\(", hlo)
    assert dots == [f"f32[{m // N},{f}]"] * N
