"""03 · 因果的环形注意力与 zig-zag 负载均衡 / causal ring attention, zig-zag balanced.

因果注意力里位置 p 的查询只看位置 ≤ p 的键。把序列按顺序切成 N 段交给 N 个设备，分数矩阵的下三角
就分得很不均匀：第一个设备的查询几乎什么都不看，最后一个设备的查询看整个序列。zig-zag 布局把序列
切成 2N 块，设备 i 拿第 i 块和第 2N-1-i 块：一块靠前、一块靠后，每个设备分到的有效分数一样多。
K、V 仍沿环传（和环形注意力那个文件一样），只是每个设备要知道手里每一行的全局位置，才能遮掉
未来的键。反向传播由 JAX 对 fori_loop 和 ppermute 求导得到：每一步把手里的 K、V 块留作残差，
所以“每个设备一次只拿一块”只对前向成立，反向时每个设备存着全部 N 块。

In causal attention the query at position p sees the keys at positions ≤ p only. Cut the
sequence into N consecutive segments for N devices and the scores' lower triangle is shared
very unevenly: the first device's queries see almost nothing, the last device's the whole
sequence. The zig-zag layout cuts the sequence into 2N chunks and gives device i chunks i and
2N-1-i: one early, one late, so every device gets as many live scores. K and V still travel
around the ring (as in the ring-attention file); each device only needs every row's global
position to mask out the future. The backward pass is JAX's derivative of the fori_loop and
the ppermutes: every step keeps its K and V blocks as residuals, so "one block at a time"
holds for the forward pass only, and each device holds all N blocks for the backward one.
"""

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
CHUNK = 2  # 每块的位置数；序列有 2N 块 / positions per chunk; the sequence has 2N chunks
SEQ, D = 2 * N * CHUNK, 8


def zigzag_positions(device, n=N, chunk=CHUNK):
    """设备 device 在 zig-zag 布局里拿着的全局位置（第 device 块，再第 2n-1-device 块）；device 可以是
    lax.axis_index 的结果。/ The global positions device `device` holds in the zig-zag layout
    (chunk device, then chunk 2n-1-device); device may come from lax.axis_index."""
    offsets = jnp.arange(chunk)
    return jnp.concatenate([device * chunk + offsets, (2 * n - 1 - device) * chunk + offsets])


def contiguous_positions(device, n=N, chunk=CHUNK):
    """按顺序切开时设备 device 拿着的位置。/ The positions device `device` holds when cut in order."""
    return device * 2 * chunk + jnp.arange(2 * chunk)


def live_scores(positions):
    """每个设备的有效分数个数：它的查询 p 与所有键 k ≤ p 的对数（因果遮挡留下的）。
    Each device's live scores: the pairs of its queries p and every key k ≤ p (what the causal
    mask keeps)."""
    keys = jnp.arange(SEQ)
    return [int(jnp.sum(positions(i)[:, None] >= keys[None, :])) for i in range(N)]


def causal_attention(q, k, v):
    """不切分的因果注意力（不除以 √d）。/ Unsharded causal attention (no 1/√d)."""
    mask = jnp.tril(jnp.ones((q.shape[0], k.shape[0]), bool))
    return jax.nn.softmax(jnp.where(mask, q @ k.T, -jnp.inf), axis=-1) @ v


def zigzag(a):
    """把按位置排的行重排成 zig-zag 布局：P("i") 切开后设备 i 正好拿着 zigzag_positions(i)。
    Reorder rows from position order to the zig-zag layout: split by P("i"), device i holds
    exactly zigzag_positions(i)."""
    return a[np.concatenate([np.asarray(zigzag_positions(i)) for i in range(N)])]


def unzigzag(a):
    """zigzag 的逆。/ zigzag's inverse."""
    order = np.concatenate([np.asarray(zigzag_positions(i)) for i in range(N)])
    return a[np.argsort(order)]


def qkv(seed):
    """Q、K、V，按位置排，形状 (SEQ, D)。/ Q, K, V in position order, shaped (SEQ, D)."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((SEQ, D), dtype=np.float32) for _ in range(3))


def on_mesh(fn):
    """jit(shard_map(fn))：Q、K、V（已是 zig-zag 布局）和输出都按 P("i") 切开。
    jit(shard_map(fn)): Q, K, V (already zig-zag) and the output split by P("i")."""
    mesh = jax.make_mesh((N,), ("i",))
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=P("i"), out_specs=P("i"))), mesh


# ---- 检查 / checks ----------------------------------------------------------------------


def test_zigzag_gives_every_device_the_same_causal_work():
    """按遮挡数每个设备的有效分数：按顺序切开时第一个和最后一个设备各有多少？zig-zag 布局下呢？
    Count each device's live scores from the mask: cut in order, how many do the first and the
    last device have? And in the zig-zag layout?
    """
    in_order = live_scores(contiguous_positions)
    balanced = live_scores(zigzag_positions)
    assert in_order[0] == __
    assert in_order[-1] == __
    assert set(balanced) == {__}


# ---- 你来实现 / your code ---------------------------------------------------------------


def zigzag_ring_attention(q, k, v):
    """因果的环形注意力，在 shard_map 里每个设备跑一份：q、k、v (2·CHUNK, d) 是本设备在 zig-zag 布局
    里的行。和环形注意力那个文件的 ring_attention 一样：lax.fori_loop 走 N 步，carry 是
    (m, l, o, k, v)，在线 softmax，每步之后 k、v 沿环（设备 j 发给 j+1）传下去。不同的是遮挡：第 s
    步手里的 k、v 来自设备 (me - s) % N，它们的位置是 zigzag_positions(那个设备)；查询的位置是
    zigzag_positions(me)。位置在查询之后的分数换成 -inf（jnp.where）。第 0 步手里是自己的块，每个
    查询至少看得见它自己，所以最大值从第 0 步起就有限。返回 o / l。不许收集 K、V（all_gather）。
    大约 16 行。
    Causal ring attention, run once per device in shard_map: q, k, v (2·CHUNK, d) are this
    device's rows in the zig-zag layout. As ring_attention in the ring-attention file: N steps
    of lax.fori_loop, the carry (m, l, o, k, v), an online softmax, and after each step k and v
    passed on around the ring (device j sends to j+1). What differs is the mask: at step s the
    k and v at hand come from device (me - s) % N, at positions zigzag_positions(that device);
    the queries sit at zigzag_positions(me). Scores whose key comes after the query become
    -inf (jnp.where). At step 0 the block at hand is this device's own, and every query sees at
    least itself, so the maximum is finite from step 0 on. Return o / l. No gathering of K or
    V (all_gather). About 16 lines.
    """
    todo("zigzag_ring_attention: 环形注意力加因果遮挡 / ring attention with a causal mask")


def test_zigzag_ring_attention_and_its_gradient_equal_causal_attention():
    """（先写好 zigzag_ring_attention。）按位置排回来后，它等于不切分的因果注意力（两组数据）；
    对 Q、K、V 的梯度（jax.grad 穿过 shard_map、fori_loop 和 ppermute）等于因果注意力的梯度。编译后
    的前向只有两条 collective-permute（K、V 各一条，每条一块 (2·CHUNK, d)），没有 all-gather。
    (Write zigzag_ring_attention first.) Put back in position order it equals unsharded causal
    attention (two data sets); its gradients with respect to Q, K and V (jax.grad through
    shard_map, the fori_loop and the ppermutes) equal causal attention's. The compiled forward
    pass holds two collective-permutes only (one each for K and V, one (2·CHUNK, d) block each),
    no all-gather.
    """
    ring, mesh = on_mesh(zigzag_ring_attention)
    ring_grads = jax.jit(jax.grad(lambda q, k, v, ct: jnp.sum(ring(q, k, v) * ct), argnums=(0, 1, 2)))
    causal_grads = jax.jit(jax.grad(lambda q, k, v, ct: jnp.sum(causal_attention(q, k, v) * ct), argnums=(0, 1, 2)))
    for seed in (0, 1):
        q, k, v = qkv(seed)
        ct = np.random.default_rng(seed + 10).standard_normal((SEQ, D), dtype=np.float32)
        args = tuple(jax.device_put(zigzag(a), NamedSharding(mesh, P("i"))) for a in (q, k, v))
        np.testing.assert_allclose(unzigzag(np.asarray(ring(*args))), causal_attention(q, k, v), rtol=1e-5, atol=1e-5)

        grads = ring_grads(*args, jax.device_put(zigzag(ct), NamedSharding(mesh, P("i"))))
        expected = causal_grads(q, k, v, ct)
        for got, want in zip(grads, expected, strict=True):
            np.testing.assert_allclose(unzigzag(np.asarray(got)), want, rtol=1e-4, atol=1e-5)

    found = collectives(ring.lower(*args).compile().as_text())
    assert found == {"collective-permute": [f"f32[{2 * CHUNK},{D}]"] * 2}
