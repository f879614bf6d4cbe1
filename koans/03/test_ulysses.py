"""03 · 序列并行：Ulysses / sequence parallelism: Ulysses.

环形注意力让 K、V 的块沿环走 N 步。另一种序列并行（DeepSpeed-Ulysses）只换两趟，不随设备数变：输入按序列切开，
设备 k 拿着第 k 段位置的所有头；一次 all_to_all 把它换成“所有位置、第 k 组头”，每个设备对自己的
几个头做完整的注意力（头与头互不相干），再一次 all_to_all 换回按序列切开。Q、K、V 各换一次，
输出换回一次：进去一趟三条 all_to_all，回来一趟一条。头数必须能被设备数整除。

Ring attention walks the K and V blocks around the ring in N steps. Another kind of sequence
parallelism (DeepSpeed-Ulysses) exchanges data in two rounds, however many devices: the input is split along the
sequence, device k holding every head of segment k; one all_to_all turns that into "every
position, head group k", each device runs full attention on its own heads (heads do not
interact), and another all_to_all turns it back into sequence blocks. Q, K and V are
exchanged once each, the output once back: three all_to_alls in, one back. The number of
heads must divide by the devices.
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
SEQ, HEADS, D = 32, 16, 4  # 序列长度、头数、每头的特征数 / sequence, heads, features per head


def attention(q, k, v):
    """不切分的多头注意力：q、k、v 形状 (S, H, d)，每个头 softmax(q kᵀ) v（不除以 √d，不遮挡）。
    Unsharded multi-head attention: q, k, v shaped (S, H, d), each head softmax(q kᵀ) v (no
    1/√d, no mask)."""
    scores = jnp.einsum("qhd,khd->hqk", q, k)
    return jnp.einsum("hqk,khd->qhd", jax.nn.softmax(scores, axis=-1), v)


def qkv(seed):
    """Q、K、V，形状 (SEQ, HEADS, D)。/ Q, K, V shaped (SEQ, HEADS, D)."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((SEQ, HEADS, D), dtype=np.float32) for _ in range(3))


def compiled_ulysses(q, k, v):
    """编译好的 shard_map(ulysses_attention)：Q、K、V 和输出都沿序列按 P("i") 切开。
    The compiled shard_map(ulysses_attention): Q, K, V and the output split along the
    sequence by P("i")."""
    mesh = jax.make_mesh((N,), ("i",))
    args = tuple(jax.device_put(a, NamedSharding(mesh, P("i"))) for a in (q, k, v))
    step = jax.jit(jax.shard_map(ulysses_attention, mesh=mesh, in_specs=P("i"), out_specs=P("i")))
    return step.lower(*args).compile(), args


# ---- 你来实现 / your code ---------------------------------------------------------------


def ulysses_attention(q, k, v):
    """Ulysses 注意力，在 shard_map 里每个设备跑一份：q、k、v 是本设备那一段位置的所有头
    (S/N, H, d)。用 lax.all_to_all（tiled=True，轴名 "i"）把每个都换成 (S, H/N, d)：切开头的那根轴、
    沿序列轴拼起来；对这几个头做完整的注意力（上面的 attention）；再用一次 all_to_all 把结果换回
    (S/N, H, d)。不许 all_gather，也不许沿环传（ppermute）。大约 4 行。
    Ulysses attention, run once per device in shard_map: q, k, v are every head of this
    device's segment of positions (S/N, H, d). Use lax.all_to_all (tiled=True, axis name "i")
    to turn each into (S, H/N, d): split the heads axis, concatenate along the sequence axis;
    run full attention on those heads (attention above); turn the result back into
    (S/N, H, d) with one more all_to_all. No all_gather, no passing around a ring (ppermute).
    About 4 lines.
    """
    todo("ulysses_attention: 换成头、注意力、换回序列 / to heads, attend, back to the sequence")


def test_ulysses_swaps_sequence_blocks_for_head_groups_and_back():
    """（先写好 ulysses_attention。）它和不切分的多头注意力值相同（两组数据）。编译后的 HLO 里集合
    通信只有 all-to-all：进去三条（Q、K、V，每条 N 段 f32[S/N, H/N, d]）、回来一条，没有
    all-gather、collective-permute；分数的 dot 是 (H/N, S, S)：每个设备对整个序列算它那几个头。
    (Write ulysses_attention first.) It equals unsharded multi-head attention (two data sets).
    The compiled HLO's only collectives are all-to-alls: three in (Q, K, V, each N pieces of
    f32[S/N, H/N, d]) and one back, no all-gather nor collective-permute; the scores' dot is
    (H/N, S, S): each device covers the whole sequence for its own heads.
    """
    compiled, args = compiled_ulysses(*qkv(0))
    for seed in (0, 1):
        q, k, v = qkv(seed)
        out = compiled(*(jax.device_put(a, s.sharding) for a, s in zip((q, k, v), args, strict=True)))
        assert out.sharding.shard_shape(out.shape) == (SEQ // N, HEADS, D)
        np.testing.assert_allclose(out, attention(q, k, v), rtol=1e-5, atol=1e-5)

    hlo = compiled.as_text()
    found = collectives(hlo)
    assert set(found) == {"all-to-all"}
    piece = f"f32[{SEQ // N},{HEADS // N},{D}]"
    assert len(found["all-to-all"]) == 4
    for tuple_type in found["all-to-all"]:
        assert re.findall(r"f32\[[\d,]+\]", tuple_type) == [piece] * N
    dots = re.findall(r"= (f32\[[\d,]+\])\S* dot\(", hlo)
    assert f"f32[{HEADS // N},{SEQ},{SEQ}]" in dots
