"""03 · 环形注意力（序列并行）/ ring attention (sequence parallelism).

序列太长时，注意力的 (S, S) 分数矩阵放不下一个设备：把序列切开，设备 k 拿着第 k 段的 Q、K、V。
每个查询要看见所有的键，所以 K、V 的块沿环一站一站传（ppermute），每个设备一次只拿着一块：先用
手里这一块算分数，把它并进在线 softmax（online softmax：到目前为止的最大值 m、分母 l、加权和 o，
遇到更大的分数时按 exp(m_旧 - m_新) 缩放旧的部分），再把块交给下一个设备。N 步之后 o / l 就是
完整的注意力，前向传播里没有哪个设备存过整个 K、V 或一整行 (S_块, S) 的分数。只是前向：对它求导
（jax.grad 穿过 fori_loop）时，循环的每一步都把手里的块留作残差，反向传播时每个设备存着 N 块
叠成的 (N, S/N, d)。最后一个 koan 让反向也只拿一块：用 custom_vjp，它的规则让 K、V（以及
dK、dV）在反向时再沿环传一遍。

When the sequence is long, attention's (S, S) score matrix does not fit on one device: split the
sequence, device k holding segment k of Q, K and V. Every query must see every key, so the K and
V blocks travel around the ring (ppermute), each device holding one block at a time: score the
block at hand, fold it into an online softmax (the running maximum m, denominator l and weighted
sum o, rescaling the old part by exp(m_old - m_new) when a larger score arrives), then hand the
block on. After N steps o / l is the full attention, and in the forward pass no device has
stored all of K and V or a whole (S_block, S) row of scores. The forward pass only:
differentiated (jax.grad through the fori_loop), every step keeps its blocks as residuals,
and each device holds N of them stacked, (N, S/N, d), for the backward pass. The last koan
keeps the backward pass to one block too, with a custom_vjp whose rule sends K and V (and
dK, dV) around the ring again.
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

N = 8  # 序列段数 = 设备数（chapter.toml: devices = 8）/ sequence segments = devices


def attention(q, k, v):
    """不切分的参考：softmax(q kᵀ) v（不除以 √d，也不遮挡）。
    The unsharded reference: softmax(q kᵀ) v (no 1/√d, no mask)."""
    return jax.nn.softmax(q @ k.T, axis=-1) @ v


def qkv(seq, d, scale, seed):
    """Q、K、V，形状 (seq, d)；scale 放大 Q，让分数变大。/ Q, K, V; scale enlarges the scores."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((seq, d), dtype=np.float32) for _ in range(3))
    return q * scale, k, v


def compiled_ring(q, k, v):
    """编译好的 shard_map(ring_attention)：Q、K、V 都沿序列轴按 P("i") 切开。
    The compiled shard_map(ring_attention): Q, K and V all split along the sequence by P("i")."""
    mesh = jax.make_mesh((N,), ("i",))
    args = tuple(jax.device_put(a, NamedSharding(mesh, P("i"))) for a in (q, k, v))
    step = jax.jit(jax.shard_map(ring_attention, mesh=mesh, in_specs=P("i"), out_specs=P("i")))
    return step.lower(*args).compile(), args


# ---- 你来实现 / your code ---------------------------------------------------------------


def ring_attention(q, k, v):
    """本设备那一段查询 q 对整个序列的注意力，每个设备一次只拿着一块 k、v（形状都是 (S/N, d)）。
    用 lax.fori_loop 走 N 步（N 是 lax.axis_size("i")），carry 是 (m, l, o, k, v)：m 是每行到目前
    为止的最大分数（起点 -inf，形状 (S/N, 1)），l 是分母（起点 0，同形），o 是加权和（起点 0，形状
    同 q）。每一步：s = q @ kᵀ；m_新 = max(m, s 每行的最大值)；旧的 l、o 乘 exp(m - m_新)，再加上
    这一块的 exp(s - m_新) 的行和、exp(s - m_新) @ v；然后 k、v 沿环（设备 j 发给 j+1）传给下一个
    设备（最后一步传出的块正好回到原主人，不再用）。返回 o / l。carry 的初值要和循环体返回的一样沿
    "i" varying（集合通信那个文件里 scan 的 carry 的 koan）。不许收集 K、V（all_gather），也不许
    拼出整行分数。大约 14 行。
    This device's queries q attending to the whole sequence, each device holding one block of k
    and v at a time (all shaped (S/N, d)). Take N steps with lax.fori_loop (N is
    lax.axis_size("i")), the carry (m, l, o, k, v): m each row's largest score so far (from
    -inf, shaped (S/N, 1)), l the denominator (from 0, the same shape), o the weighted sum (from
    0, shaped like q). Each step: s = q @ kᵀ; m_new = max(m, each row's max of s); multiply the
    old l and o by exp(m - m_new), then add this block's row sums of exp(s - m_new) and
    exp(s - m_new) @ v; then pass k and v to the next device on the ring (device j sends to
    j+1; the blocks sent at the last step come home and go unused). Return o / l. The carry's
    initial values must vary along "i" as what the body returns does (the scan-carry koan of
    the collectives file). No gathering of K or V (all_gather), and no whole row of scores.
    About 14 lines.
    """
    todo("ring_attention: K、V 沿环传，在线 softmax / K and V around the ring, an online softmax")


def test_ring_attention_equals_full_attention_passing_only_blocks():
    """（先写好 ring_attention。）它和完整的注意力值相同：一组普通的分数，一组大到 exp 会溢出
    float32 的分数（最大值超过 88，在线 softmax 减去最大值才不溢出）。编译后的 HLO 里是一个 while
    循环，集合通信只有循环体里的两条 collective-permute（K 一条、V 一条，每条正好是一块
    (S/N, d)，每步执行一次），没有 all-gather、all-reduce。每个 dot 的结果都只有一块大：分数
    (S/N, S/N)、加权和 (S/N, d)；整个程序里最大的数组就是一块，从来没有 (S/N, S) 的一行分数或
    整个 K、V。
    (Write ring_attention first.) It equals full attention: on ordinary scores, and on scores
    large enough for exp to overflow float32 (above 88; the online softmax subtracts the maximum
    and stays finite). The compiled HLO is one while loop, and its only collectives are the two
    collective-permutes in the loop's body (one for K, one for V, each exactly one (S/N, d)
    block, run once a step), no all-gather nor all-reduce. Every dot's result is one block
    large: scores (S/N, S/N), weighted sums (S/N, d); the largest array in the whole program is
    one block, never an (S/N, S) row of scores nor all of K or V.
    """
    seq, d = 64, 16
    for scale, seed in [(1.0, 0), (12.0, 1)]:
        q, k, v = qkv(seq, d, scale, seed)
        compiled, args = compiled_ring(q, k, v)
        out = compiled(*args)
        assert bool(jnp.all(jnp.isfinite(out)))
        np.testing.assert_allclose(out, attention(q, k, v), rtol=1e-4, atol=1e-5)
    assert float(jnp.max(q @ k.T)) > 88.0  # exp(88) ≈ float32 的上限 / float32's largest

    hlo = compiled.as_text()
    found = collectives(hlo)
    assert set(found) == {"collective-permute"}
    assert found["collective-permute"] == [f"f32[{seq // N},{d}]"] * 2  # K 和 V / K and V
    assert " while(" in hlo  # 一个循环，不是 N 份展开的步骤 / one loop, not N unrolled steps
    dots = re.findall(r"= (f32\[[\d,]+\])\S* dot\(", hlo)
    assert set(dots) == {f"f32[{seq // N},{seq // N}]", f"f32[{seq // N},{d}]"}
    sizes = [
        np.prod([int(n) for n in dims.split(",") if n])
        for dims in re.findall(r"f32\[([\d,]*)\]", hlo)
    ]
    assert max(sizes) == (seq // N) * d  # 最大的数组就是一块 / the largest array is one block


# ---- 反向也只拿一块 / the backward pass holding one block too ---------------------------


def ring_attention_bwd(res, g):
    """ring_attention 的反向规则（custom_vjp），每个设备一次只拿着一块 k、v。res 是前向存下的
    (q, k, v, out)，都是本设备的块；g 是 out 的余切。不存行的 log-sum-exp，而是再沿环走一圈把它
    算回来：和前向一样的最大值 m 与分母 l（只传 k），lse = m + log(l)。然后第二圈，carry 里带着
    dq 和沿环传的 (k, v, dk, dv)：每一步 p = exp(q @ kᵀ - lse)，dv += pᵀ @ g，
    ds = p * (g @ vᵀ - rowsum(g * out))，dq += ds @ k，dk += dsᵀ @ q，然后 (k, v, dk, dv) 一起传给
    下一个设备。N 步之后每块 k、v 连同它的 dk、dv 都回到了原主人手里。返回 (dq, dk, dv)。
    不许收集 K、V，也不许对前向求导（jax.vjp）：那会存下全部 N 块。大约 22 行。
    The backward rule (custom_vjp) of ring_attention, each device holding one block of k and
    v at a time. res is what the forward pass saved, (q, k, v, out), all this device's blocks;
    g is out's cotangent. Rather than saving each row's log-sum-exp, go around the ring once
    more to get it back: the running maximum m and denominator l as in the forward pass
    (passing k only), lse = m + log(l). Then a second round whose carry holds dq and the
    travelling (k, v, dk, dv): each step p = exp(q @ kᵀ - lse), dv += pᵀ @ g,
    ds = p * (g @ vᵀ - rowsum(g * out)), dq += ds @ k, dk += dsᵀ @ q, then (k, v, dk, dv) pass
    together to the next device. After N steps every k and v block comes home with its dk and
    dv. Return (dq, dk, dv). No gathering of K or V, and no differentiating the forward pass
    (jax.vjp): that stores all N blocks. About 22 lines.
    """
    todo("ring_attention_bwd: 再沿环走，dK、dV 跟着走 / around the ring again, dK and dV along")


@jax.custom_vjp
def ring_attention_one_block(q, k, v):
    """ring_attention，反向用 ring_attention_bwd。/ ring_attention, its backward ring_attention_bwd."""
    return ring_attention(q, k, v)


def _ring_fwd(q, k, v):
    out = ring_attention(q, k, v)
    return out, (q, k, v, out)


ring_attention_one_block.defvjp(_ring_fwd, ring_attention_bwd)


WEIGHT_SEED = 7  # 损失里那个固定权重的种子 / the seed of the loss's fixed weight


def ring_grad(attend, seq, d):
    """jax.jit(jax.grad(...))：shard_map(attend) 的输出与一个权重逐元素相乘再求和，对 Q、K、V 求导；
    和它一起返回它的参数类型（都按 P("i") 切开，第四个是权重）。
    jax.jit(jax.grad(...)) of shard_map(attend)'s output times a weight, summed, in Q, K and V;
    returned with its arguments' types (all split by P("i"), the fourth the weight)."""
    mesh = jax.make_mesh((N,), ("i",))
    sharded = jax.shard_map(attend, mesh=mesh, in_specs=P("i"), out_specs=P("i"))
    grad = jax.jit(jax.grad(lambda q, k, v, w: (sharded(q, k, v) * w).sum(), argnums=(0, 1, 2)))
    spec = jax.ShapeDtypeStruct((seq, d), jnp.float32, sharding=NamedSharding(mesh, P("i")))
    return grad, (spec,) * 4


def weight(seq, d):
    """损失里那个固定的权重。/ The loss's fixed weight."""
    return np.random.default_rng(7).standard_normal((seq, d), dtype=np.float32)


@jax.jit
def full_attention_grads(q, k, v, w):
    """完整注意力的同一个损失对 Q、K、V 的梯度。/ The same loss's gradients through full attention."""
    return jax.grad(lambda q, k, v: (attention(q, k, v) * w).sum(), argnums=(0, 1, 2))(q, k, v)


def assert_grads_close(got, want):
    """逐个比较，误差相对于最大的梯度（大分数时 float32 的舍入随梯度一起变大）。
    Compared one by one, the error relative to the largest gradient (float32's rounding grows
    with the gradients when the scores are large)."""
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * float(np.abs(b).max()))


def test_ring_backward_keeps_one_block_where_autodiff_keeps_them_all():
    """（先写好 ring_attention 和 ring_attention_bwd。）用你的反向规则求导，Q、K、V 的梯度等于完整
    注意力的梯度：普通的分数和 exp 会溢出 float32 的大分数都一样。编译后的梯度程序里集合通信只有
    collective-permute，每条传的都正好是一块 (S/N, d)；最大的数组是一块，`memory_analysis()`
    量出的临时内存比整个 K 和 V（2·S·d 个 float32）还少。对照：让 jax.grad 直接穿过
    ring_attention 的 fori_loop，降级（lower）出的程序里有 N 块叠成的 (N, S/N, d) 残差，用你的
    反向规则的没有。
    (Write ring_attention and ring_attention_bwd first.) Differentiated through your backward
    rule, the gradients in Q, K and V equal full attention's, on ordinary scores and on scores
    large enough for exp to overflow float32. The compiled gradient's only collectives are
    collective-permutes, each passing exactly one (S/N, d) block; the largest array is one
    block, and the temporary memory `memory_analysis()` measures is less than all of K and V
    (2·S·d float32). The contrast: jax.grad straight through ring_attention's fori_loop lowers
    to a program holding N blocks stacked as an (N, S/N, d) residual; through your backward
    rule it does not.
    """
    seq, d = 64, 16
    all_kv = 2 * seq * d * 4  # 整个 K 和 V 的字节数 / the bytes of all of K and V
    grad, specs = ring_grad(ring_attention_one_block, seq, d)
    compiled = grad.lower(*specs).compile()
    for scale, seed in [(1.0, 0), (12.0, 1)]:
        args = (*qkv(seq, d, scale, seed), weight(seq, d))
        placed = [jax.device_put(a, s.sharding) for a, s in zip(args, specs, strict=True)]
        assert_grads_close(compiled(*placed), full_attention_grads(*args))
    q, k, _, _ = args
    assert float(jnp.max(q @ k.T)) > 88.0  # exp(88) ≈ float32 的上限 / float32's largest

    hlo = compiled.as_text()
    found = collectives(hlo)
    assert set(found) == {"collective-permute"}
    assert set(found["collective-permute"]) == {f"f32[{seq // N},{d}]"}
    sizes = [
        np.prod([int(n) for n in dims.split(",") if n])
        for dims in re.findall(r"f32\[([\d,]*)\]", hlo)
    ]
    assert max(sizes) == (seq // N) * d  # 最大的数组就是一块 / the largest array is one block
    assert compiled.memory_analysis().temp_size_in_bytes < all_kv

    autodiff, specs = ring_grad(ring_attention, seq, d)
    stacked = f"tensor<{N}x{seq // N}x{d}xf32>"  # N 块 K 叠在一起 / N blocks of K stacked
    assert stacked in autodiff.lower(*specs).as_text()
    assert stacked not in grad.lower(*specs).as_text()
