"""07 · 综合：分块注意力（flash attention）/ capstone: blocked attention (flash attention).

softmax(q kᵀ / √d) v 不必一次算出整个 [Lq, Lk] 的分数矩阵：每个程序处理 bq 个查询，沿 grid 的
第二个轴一次读 bk 个键 / 值，用“在线 softmax”维护三个累加器：每行到目前为止的最大分数 m、
exp 之和 l、加权的 v 之和 acc。新块带来更大的最大值时，旧的 l 和 acc 乘以 exp(m_旧 - m_新)
重新缩放。累加器放在 scratch_shapes 里（在 TPU 上是 VMEM），键的轴必须是 "arbitrary"。

softmax(q kᵀ / √d) v need not build the whole [Lq, Lk] score matrix: each program takes bq
queries and reads bk keys / values per step along the grid's second axis, keeping three
accumulators with an "online softmax": each row's running max score m, the sum of exps l and
the weighted sum of values acc. When a new block brings a larger max, the old l and acc are
rescaled by exp(m_old - m_new). The accumulators live in scratch_shapes (VMEM on TPU), and the
key axis must be "arbitrary".
"""

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.extend.core import jaxprs_in_params
from jax.sharding import AbstractDevice, AbstractMesh

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api import program as program_reader
from jaxkoans.api.probes import pallas_call_structure, primitives


def reference_attention(q, k, v):
    """纯 jnp 的参考实现。/ The plain jnp reference."""
    scores = q @ k.T / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    return jax.nn.softmax(scores, axis=-1) @ v


def _data(shape, seed, scale=1.0):
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32) * scale


# ---- 你来实现 / your code ---------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("bq", "bk", "interpret"))
def flash_attention_forward(q, k, v, *, bq, bk, interpret=True):
    """分块注意力的前向内核。q [Lq, D]，k 和 v [Lk, D]，输出 [Lq, D]，dtype 和 q 一样。

    - grid = (Lq // bq, Lk // bk)；q 和输出的块 (bq, D) 只随查询块 i 变，k 和 v 的块 (bk, D)
      随键块 j 变；
    - scratch_shapes 放三个 float32 累加器：m 和 l 形状 (bq, 1)，acc 形状 (bq, D)
      （pltpu.VMEM(shape, dtype)）；
    - compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"))；
    - j == 0 时初始化（m 为 -inf，l 和 acc 为 0）；每步：s = q kᵀ / √D，m_新 = max(m, 行最大值)，
      p = exp(s - m_新)，α = exp(m - m_新)，l = α·l + p 的行和，acc = α·acc + p @ v；
      最后一步（j == num_programs(1) - 1）写出 acc / l。不要构造整个 [Lq, Lk] 的分数矩阵。
    - 输入可能是 bfloat16：两个矩阵乘都写 preferred_element_type=jnp.float32，在 float32 里累加；
    - interpret 原样交给 pallas_call（测试用解释器；interpret=False 时为 TPU 降级）。
    大约 30 行。

    The blocked attention forward kernel. q [Lq, D], k and v [Lk, D], output [Lq, D] of q's
    dtype.

    - grid = (Lq // bq, Lk // bk); the (bq, D) blocks of q and of the output move with the query
      block i only, the (bk, D) blocks of k and v with the key block j;
    - scratch_shapes holds three float32 accumulators: m and l of shape (bq, 1), acc of shape
      (bq, D) (pltpu.VMEM(shape, dtype));
    - compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"));
    - initialise when j == 0 (m to -inf, l and acc to 0); at every step: s = q kᵀ / √D,
      m_new = max(m, row max), p = exp(s - m_new), α = exp(m - m_new), l = α·l + row sums of p,
      acc = α·acc + p @ v; on the last step (j == num_programs(1) - 1) write acc / l. Never
      build the whole [Lq, Lk] score matrix.
    - the inputs may be bfloat16: give both matmuls preferred_element_type=jnp.float32, so that
      they accumulate in float32;
    - hand interpret on to pallas_call as it is (the tests interpret; interpret=False lowers
      for TPU). About 30 lines.
    """
    todo(
        "flash_attention_forward: 在线 softmax 的分块内核 / a blocked kernel with an online softmax"
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def flash_attention(q, k, v, bq, bk):
    return flash_attention_forward(q, k, v, bq=bq, bk=bk)


def flash_attention_fwd(q, k, v, bq, bk):
    """前向：用内核算输出，残差保存 (q, k, v)。一行。
    Forward: the output from the kernel; save (q, k, v) as residuals. One line.
    """
    todo("flash_attention_fwd: 输出和残差 / output and residuals")


def flash_attention_bwd(bq, bk, residuals, g):
    """反向：这里不写反向内核，而是对 reference_attention 求 VJP（jax.vjp），用它把 g 拉回到
    (q, k, v)。这会重新构造 [Lq, Lk] 的分数矩阵：正确，但不省内存（真正的 flash attention
    反向也是分块内核）。两行。

    Backward: no backward kernel here; take the VJP of reference_attention (jax.vjp) and pull g
    back to (q, k, v). That rebuilds the [Lq, Lk] score matrix: correct, but it saves no memory
    (a real flash-attention backward is a blocked kernel too). Two lines.
    """
    todo("flash_attention_bwd: 参考实现的 VJP / the VJP of the reference")


flash_attention.defvjp(flash_attention_fwd, flash_attention_bwd)


# ---- 检查 / checks ----------------------------------------------------------------------

# 内核里的 exp：jnp.exp，或 jnp.exp2（分数先乘 log2 e，FlashAttention-2 的写法），同样的工作
# the kernel's exp: jnp.exp, or jnp.exp2 (the scores first multiplied by log2 e, as
# FlashAttention-2 writes it), the same work
EXP = {"exp", "exp2"}

SHAPES = [
    # (Lq, Lk, D, bq, bk)
    (16, 32, 8, 8, 8),
    (8, 64, 16, 4, 16),
    (24, 24, 4, 8, 6),
]


@pytest.mark.parametrize(("lq", "lk", "d", "bq", "bk"), SHAPES)
def test_flash_attention_matches_the_reference(lq, lk, d, bq, bk):
    """在几种形状上等于 jnp 参考实现；分数放大 30 倍后也一样；第一个键块的分数很小、最后一个键块
    的分数很大时也一样（后面的分数比第一块的最大值大出 float32 的 exp 能表示的范围：只用一个固定的
    最大值平移 softmax、不随新的最大值重新缩放的内核在这里溢出）。
    Equal to the jnp reference on several shapes, still with the scores scaled up 30 times, and
    still when the first key block's scores are small and the last block's large (the later
    scores exceed the first block's max by more than float32's exp can hold: a kernel that
    shifts the softmax by one fixed max, never rescaling for a new one, overflows here).
    """
    queries, keys, v = _data((lq, d), 0), _data((lk, d), 1), _data((lk, d), 2)
    rising = keys.at[:bk].multiply(0.1).at[-bk:].multiply(100.0)  # small first, large last
    for q, k in ((queries, keys), (queries * 30.0, keys), (queries, rising)):
        out = flash_attention_forward(q, k, v, bq=bq, bk=bk)
        np.testing.assert_allclose(out, reference_attention(q, k, v), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize(("lq", "lk", "d", "bq", "bk"), SHAPES)
def test_flash_attention_is_blocked_with_scratch_accumulators(lq, lk, d, bq, bk):
    """结构：grid 是 (查询块数, 键块数)；q、k、v、输出的块形状；m、l、acc 三个 float32
    累加器在 scratch 里；键轴是 "arbitrary"；两个矩阵乘和 exp 都在内核里，内核外没有。
    The structure: the grid is (query blocks, key blocks); the block shapes of q, k, v and the
    output; the three float32 accumulators m, l, acc in scratch; the key axis "arbitrary"; both
    matmuls and the exp inside the kernel, none outside it.
    """
    q, k, v = _data((lq, d), 0), _data((lk, d), 1), _data((lk, d), 2)
    kernel = pallas_call_structure(
        functools.partial(flash_attention_forward, bq=bq, bk=bk), q, k, v
    )
    assert kernel["grid"] == (lq // bq, lk // bk)
    assert kernel["blocks"] == [(bq, d), (bk, d), (bk, d), (bq, d)]  # q, k, v, out
    assert sorted(kernel["scratch"], key=str) == sorted(
        [((bq, 1), jnp.float32), ((bq, 1), jnp.float32), ((bq, d), jnp.float32)], key=str
    )
    assert kernel["semantics"] == ("parallel", "arbitrary")
    assert {"dot_general", "reduce_max"} <= kernel["kernel_ops"] and EXP & kernel["kernel_ops"]
    assert not {"dot_general", "reduce_max", *EXP} & kernel["outside_ops"]


@pytest.mark.parametrize(("lq", "lk", "d", "bq", "bk"), SHAPES[:2])
def test_flash_attention_gradient_through_custom_vjp(lq, lk, d, bq, bk):
    """custom_vjp 的梯度：对 q、k、v 的梯度都等于参考实现的梯度；前向仍然是那个内核（grad 的
    jaxpr 里有一个 pallas_call），而且 flash_attention_fwd 交出的前向输出也等于参考实现（损失对
    输出是线性的，只比梯度就看不出前向错了）。
    The custom_vjp gradient: the gradients with respect to q, k and v all equal the reference's;
    the forward pass is still the kernel (grad's jaxpr holds one pallas_call), and the output
    flash_attention_fwd hands over equals the reference's too (the loss is linear in it, so
    gradients alone would not notice a wrong forward).
    """
    q, k, v = _data((lq, d), 3), _data((lk, d), 4), _data((lk, d), 5)
    w = _data((lq, d), 6)

    def loss(attention):
        return lambda q, k, v: jnp.sum(attention(q, k, v) * w)

    ours = jax.jit(
        jax.grad(loss(lambda q, k, v: flash_attention(q, k, v, bq, bk)), argnums=(0, 1, 2))
    )
    expected = jax.grad(loss(reference_attention), argnums=(0, 1, 2))(q, k, v)
    for got, want in zip(ours(q, k, v), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # The forward value that jax.vjp returns is the one flash_attention_fwd computed.
    out, _ = jax.vjp(lambda q, k, v: flash_attention(q, k, v, bq, bk), q, k, v)
    np.testing.assert_allclose(out, reference_attention(q, k, v), rtol=2e-5, atol=2e-5)
    jaxpr = jax.make_jaxpr(jax.grad(loss(lambda q, k, v: flash_attention(q, k, v, bq, bk))))(
        q, k, v
    )
    assert "pallas_call" in primitives(jaxpr.jaxpr)


# ---- 因果注意力 / causal attention ------------------------------------------------------


def causal_reference_attention(q, k, v):
    """纯 jnp 的因果参考实现：查询 r 只看键 c <= r。/ The plain jnp causal reference: query r
    sees only the keys c <= r."""
    scores = q @ k.T / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    visible = jnp.arange(k.shape[0])[None, :] <= jnp.arange(q.shape[0])[:, None]
    return jax.nn.softmax(jnp.where(visible, scores, -jnp.inf), axis=-1) @ v


@functools.partial(jax.jit, static_argnames=("bq", "bk", "interpret"))
def causal_flash_attention_forward(q, k, v, *, bq, bk, interpret=True):
    """因果的分块注意力：查询 r 只看键 c <= r（r、c 是整个数组里的下标）。grid、块、scratch、
    dimension_semantics 都和 flash_attention_forward 一样，另外：
    - 在内核里用 pl.program_id 和 jax.lax.broadcasted_iota 算出这一块分数的全局行号和列号，
      c > r 的分数换成 -inf（jnp.where）；
    - 完全在对角线之上的键块（它的第一个键 j·bk 大于这个查询块的最后一个查询 i·bq + bq - 1）
      一点也不算：把每步的计算放进一个 pl.when。这些块的计算纯属浪费，而且这些块里放的是什么
      （这里的测试放了 NaN）与结果无关。
    - 不算的块也不该拷进来：流水线只在块的下标和上一步不同时才拷贝一块（Pallas 的
      emit_pipeline 里的 will_change_fetch 就是这么判断的）。让 k 和 v 的 index map 对跳过的块
      夹紧到这一行最后一个可见的键块（jnp.minimum），下标不变，什么也不拷。JAX 自己的 flash
      内核（jax/experimental/pallas/ops/tpu/flash_attention.py 的 kv_index_map）用另一种写法：
      lax.select(below_or_on_diag(...), kv_seq_index, 0) 把跳过的块指向块 0，也就是下一行查询
      最先要的那一块，于是它在跳过的那几步里就被预取，而不是等到换行时才拷。
    bfloat16、preferred_element_type 和 interpret 都和 flash_attention_forward 一样。
    初始化和最后一步的写出照旧。大约 35 行。

    Causal blocked attention: query r sees only the keys c <= r (r, c indices into the whole
    arrays). The grid, blocks, scratch and dimension_semantics are those of
    flash_attention_forward, and also:
    - inside the kernel, work out the global row and column of each score in the block with
      pl.program_id and jax.lax.broadcasted_iota, and replace the scores with c > r by -inf
      (jnp.where);
    - key blocks wholly above the diagonal (their first key j·bk is past the query block's last
      query i·bq + bq - 1) are not computed at all: put each step's work inside a pl.when. That
      work would be wasted, and what those blocks hold (the test puts NaN there) does not
      matter.
    - nor should a skipped block be copied in: the pipeline copies a block only when its index
      differs from the step before (Pallas's emit_pipeline decides so in will_change_fetch).
      Clamp the k and v index maps so that a skipped block asks for the row's last visible key
      block (jnp.minimum): the index does not change and nothing is copied. JAX's own flash
      kernel (kv_index_map in jax/experimental/pallas/ops/tpu/flash_attention.py) writes it
      another way: lax.select(below_or_on_diag(...), kv_seq_index, 0) points a skipped block at
      block 0, the first block the next query row needs, which is then fetched during the
      skipped steps instead of at the change of row.
    bfloat16, preferred_element_type and interpret as in flash_attention_forward. The
    initialisation and the write-out on the last step stay as they were. About 35 lines.
    """
    todo(
        "causal_flash_attention_forward: 掩码加跳过对角线之上的块 / a mask, and skip the blocks above the diagonal"
    )


CAUSAL_SHAPES = [
    # (L, D, bq, bk): bq > bk, bq < bk and bq == bk; with (4, 3) a key block can start at
    # the very last query of a query block
    (16, 8, 8, 8),
    (24, 4, 8, 4),
    (32, 8, 4, 16),
    (24, 8, 12, 8),
    (12, 4, 4, 3),
]


@pytest.mark.parametrize(("length", "d", "bq", "bk"), CAUSAL_SHAPES)
def test_causal_flash_attention_matches_the_reference(length, d, bq, bk):
    """因果版本在几种块形状上（bq 大于、小于、等于 bk）等于 jnp 因果参考实现，分数放大 30 倍也一样；
    结构：grid、块形状、三个 float32 scratch 累加器、("parallel", "arbitrary")，掩码的 iota 在
    内核里（内核外没有，也没有多一个掩码输入）。
    The causal version equals the jnp causal reference for several block shapes (bq above,
    below and equal to bk), and still with the scores scaled 30 times; the structure: the grid,
    the block shapes, the three float32 scratch accumulators, ("parallel", "arbitrary"), and the
    mask's iota inside the kernel (none outside, and no extra mask input).
    """
    for scale in (1.0, 30.0):
        q, k, v = _data((length, d), 0, scale), _data((length, d), 1), _data((length, d), 2)
        out = causal_flash_attention_forward(q, k, v, bq=bq, bk=bk)
        np.testing.assert_allclose(out, causal_reference_attention(q, k, v), rtol=2e-5, atol=2e-5)
    kernel = pallas_call_structure(
        functools.partial(causal_flash_attention_forward, bq=bq, bk=bk), q, k, v
    )
    assert kernel["grid"] == (length // bq, length // bk)
    assert kernel["blocks"] == [(bq, d), (bk, d), (bk, d), (bq, d)]  # q, k, v, out
    assert sorted(kernel["scratch"], key=str) == sorted(
        [((bq, 1), jnp.float32), ((bq, 1), jnp.float32), ((bq, d), jnp.float32)], key=str
    )
    assert kernel["semantics"] == ("parallel", "arbitrary")
    assert {"iota", "dot_general"} <= kernel["kernel_ops"] and EXP & kernel["kernel_ops"]
    assert not {"iota", "dot_general", *EXP} & kernel["outside_ops"]


def _kernel_matmul_flops(fn, *args):
    """内核里的矩阵乘法浮点运算，按程序读取器（jaxkoans.api.program）的数法：每个方程乘以它运行
    的次数，内核体乘以 grid；由 program_id 决定的 pl.when 只在选中它的 grid 点上算，由数据决定
    的每个分支都算。
    The kernel's matmul flops as the program reader (jaxkoans.api.program) counts them: each
    equation times how often it runs, a kernel body times its grid; a pl.when that program_id
    decides counts only at the grid points that take it, one the data decides every branch."""
    read = program_reader.of(fn, *args)
    return sum(
        e.flops * e.times
        for e in read.equations
        if e.live and e.place == "kernel" and e.primitive == "dot_general"
    )


@pytest.mark.parametrize(("length", "d", "bq", "bk"), [(16, 8, 8, 8), (16, 4, 4, 8)])
def test_causal_kernel_skips_the_blocks_above_the_diagonal(length, d, bq, bk):
    """⚠️ 陷阱 / trap：只加掩码不够。这里键 / 值的缓冲区比序列长一倍，序列之后的槽位还没写过
    （测试放了 NaN，就像未初始化的内存）。没有哪个查询能看见它们，但只加掩码的内核照样去算：
    被掩掉的概率是 0，可 0 × NaN 还是 NaN。完全在对角线之上的块一点也不算的内核，结果等于只在
    序列上算的参考实现。
    A mask alone is not enough. Here the key / value buffer is twice as long as the sequence, and
    the slots past the sequence were never written (the test puts NaN there, like uninitialized
    memory). No query can see them, but a kernel that only masks computes them anyway: the
    masked probabilities are 0, yet 0 × NaN is NaN. A kernel that does not compute the blocks
    wholly above the diagonal at all equals the reference computed on the sequence alone.
    计算量也要省下来：程序读取器数出的内核矩阵乘法（由 program_id 决定的 pl.when 只在选中它的
    grid 点上算）最多是对角线上和对角线下那些块所需的 1.5 倍；每一块都算、再用掩码或夹紧的下标
    把结果挡掉的内核，要多算一倍以上。
    The work is saved too: the kernel's matmul flops as the program reader counts them (a
    pl.when that program_id decides counts only at the grid points that take it) are at most 1.5
    times what the blocks on and below the diagonal need; a kernel that computes every block and
    hides the result behind the mask or a clamped index runs twice that and more.
    """
    q = _data((length, d), 0)
    k, v = _data((2 * length, d), 1), _data((2 * length, d), 2)
    k, v = k.at[length:].set(jnp.nan), v.at[length:].set(jnp.nan)
    out = causal_flash_attention_forward(q, k, v, bq=bq, bk=bk)
    np.testing.assert_allclose(
        out, causal_reference_attention(q, k[:length], v[:length]), rtol=2e-5, atol=2e-5
    )
    blocks = itertools.product(range(length // bq), range(2 * length // bk))
    visible = sum(j * bk <= i * bq + bq - 1 for i, j in blocks)
    needed = visible * 2 * (2 * bq * bk * d)  # q·kᵀ and p·v for each visible block
    run = _kernel_matmul_flops(
        functools.partial(causal_flash_attention_forward, bq=bq, bk=bk), q, k, v
    )
    assert run <= 1.5 * needed, f"内核算了 {run} 次浮点运算 / the kernel ran {run} flops: {needed=}"


# ---- 在硬件上会怎样 / what the hardware would say --------------------------------------
# interpret=True 接受 TPU 拒绝的东西：在这台 CPU 上能检查的，是为 TPU 降级（Mosaic）。
# interpret=True accepts what a TPU refuses: what this CPU can check is the TPU lowering (Mosaic).


def pallas_calls(jaxpr):
    """jaxpr 里（包括嵌套的子程序里）每个 pallas_call 方程。/ Every pallas_call equation of
    jaxpr, nested programs included."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            yield eqn
        for sub in jaxprs_in_params(eqn.params):
            yield from pallas_calls(sub)


def lowered_for_tpu(forward, shapes, dtype, *, bq, bk):
    """forward(interpret=False) 为 TPU v5 lite 降级后的 StableHLO 文本（内核在
    tpu_custom_call 里）；shapes 是 q、k、v 的形状。/ The StableHLO text of forward
    (interpret=False) lowered for a TPU v5 lite (the kernel inside a tpu_custom_call); shapes
    are those of q, k and v."""
    device = AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
    args = [jax.ShapeDtypeStruct(shape, dtype) for shape in shapes]
    f = jax.jit(functools.partial(forward, bq=bq, bk=bk, interpret=False))
    [call] = pallas_calls(jax.make_jaxpr(f)(*args).jaxpr)
    assert not call.params["interpret"], "interpret=False 没有交给 pallas_call / did not reach pallas_call"
    with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=device)):
        return f.trace(*args).lower(lowering_platforms=("tpu",)).as_text()


def test_interpret_mode_runs_block_shapes_a_tpu_refuses():
    """⚠️ 陷阱 / trap：SHAPES 里的三种形状在解释器里都算对了（第一个 koan）。为 TPU 降级时，块的最后
    两维要能被 8 和 128 整除，或者等于整个数组的那一维（test_tpu_lowering.py）。哪几种能降级？
    ⚠️ trap: all three SHAPES compute correctly in the interpreter (the first koan). Lowered for
    TPU, a block's last two dims must be divisible by 8 and 128, or equal the array's dims
    (test_tpu_lowering.py). Which of them lower?
    """
    lowers = []
    for lq, lk, d, bq, bk in SHAPES:
        shapes = [(lq, d), (lk, d), (lk, d)]
        try:
            text = lowered_for_tpu(flash_attention_forward, shapes, jnp.float32, bq=bq, bk=bk)
            lowers.append("tpu_custom_call" in text)
        except ValueError as error:
            assert "divisible by 8 and 128" in str(error)
            lowers.append(False)
    assert lowers == __


TPU_SHAPES = [
    # (Lq, Lk, D, bq, bk): TPU 上合法的块（最后一维是整个 D，倒数第二维是 8 的倍数）
    # blocks a TPU accepts (the last dim the whole D, the one before it a multiple of 8)
    (32, 64, 16, 8, 16),
    (64, 32, 16, 16, 32),
]


@pytest.mark.parametrize(("lq", "lk", "d", "bq", "bk"), TPU_SHAPES)
def test_both_kernels_lower_for_tpu_in_bfloat16(lq, lk, d, bq, bk):
    """两个内核在合法的块形状上为 TPU 降级，float32 和 bfloat16 输入都行。bfloat16 的矩阵乘不写
    preferred_element_type=jnp.float32 时，TPU 降级拒绝它：Mosaic 的 tpu.matmul 要一个 32 位的
    累加器（“Expected matmul acc to be 32-bit”，解释器里却照样运行）。
    Both kernels lower for TPU at legal block shapes, with float32 and bfloat16 inputs. A
    bfloat16 matmul without preferred_element_type=jnp.float32 is refused by the TPU lowering:
    Mosaic's tpu.matmul wants a 32-bit accumulator ("Expected matmul acc to be 32-bit"), while
    the interpreter runs it anyway.
    """
    for forward in (flash_attention_forward, causal_flash_attention_forward):
        for dtype in (jnp.float32, jnp.bfloat16):
            shapes = [(lq, d), (lk, d), (lk, d)]
            assert "tpu_custom_call" in lowered_for_tpu(forward, shapes, dtype, bq=bq, bk=bk)


def test_both_kernels_run_in_the_tpu_interpreter_without_races():
    """TPU 解释器（interpret=pltpu.InterpretParams(...)）像 TPU 一样为每种内存建模，把 "parallel"
    的轴分给两个模拟的核，开着竞争检测：两个内核都算对，也没有竞争（键轴是 "arbitrary"，
    同一个查询块的累加留在一个核上按顺序做）。
    The TPU interpreter (interpret=pltpu.InterpretParams(...)) models each memory as a TPU
    does, spreads the "parallel" axes over two simulated cores and detects races: both kernels
    compute the right values with no race (the key axis is "arbitrary", so one query block's
    accumulation stays on one core, in order).
    """
    params = pltpu.InterpretParams(detect_races=True, num_cores_or_threads=2, random_seed=0)
    q, k, v = _data((16, 8), 0, 30.0), _data((16, 8), 1), _data((16, 8), 2)
    try:
        plain = flash_attention_forward(q, k, v, bq=8, bk=8, interpret=params)
        causal = causal_flash_attention_forward(q, k, v, bq=8, bk=8, interpret=params)
    finally:
        pltpu.reset_tpu_interpret_mode_state()
    np.testing.assert_allclose(plain, reference_attention(q, k, v), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(causal, causal_reference_attention(q, k, v), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_bfloat16_inputs_accumulate_in_float32(causal):
    """bfloat16 的 q、k、v（分数放大 30 倍）：输出是 bfloat16，和用 float32 对同样的 bfloat16 数值
    算的参考实现相差不到 0.03。分数的矩阵乘若在 bfloat16 里累加，误差有几十倍大。
    bfloat16 q, k and v (the scores scaled 30 times): the output is bfloat16 and within 0.03 of
    the reference computed in float32 on the same bfloat16 values. Scores accumulated in
    bfloat16 would be off by tens of times more.
    """
    length, d, bq, bk = 32, 32, 8, 16
    q, k, v = (
        a.astype(jnp.bfloat16)
        for a in (_data((length, d), 0, 30.0), _data((length, d), 1), _data((length, d), 2))
    )
    forward = causal_flash_attention_forward if causal else flash_attention_forward
    reference = causal_reference_attention if causal else reference_attention
    out = forward(q, k, v, bq=bq, bk=bk)
    assert out.dtype == jnp.bfloat16
    want = reference(*(a.astype(jnp.float32) for a in (q, k, v)))
    assert float(jnp.max(jnp.abs(out.astype(jnp.float32) - want))) < 0.03


def block_copies(forward, length, d, bq, bk):
    """沿 grid 的顺序（最后一维最快）算出 k 和 v 的 index map 给的块下标，数出和上一步不同的次数
    （加上第一步）：流水线为每个输入拷进来的块数。/ Evaluates the k and v index maps in grid order
    (last axis fastest) and counts the steps whose block index differs from the step before (plus
    the first): the blocks the pipeline copies in for each input."""
    q = _data((length, d), 0)
    [call] = pallas_calls(jax.make_jaxpr(functools.partial(forward, bq=bq, bk=bk))(q, q, q).jaxpr)
    mapping = call.params["grid_mapping"]
    steps = [(i, j) for i in range(mapping.grid[0]) for j in range(mapping.grid[1])]
    copies = []
    for block in mapping.block_mappings[1:3]:  # k, v
        index_map = block.index_map_jaxpr
        run = functools.partial(jax.core.eval_jaxpr, index_map.jaxpr, index_map.consts)
        indices = [tuple(int(n) for n in run(*map(jnp.int32, step))) for step in steps]
        copies.append(1 + sum(a != b for a, b in itertools.pairwise(indices)))
    return copies


@pytest.mark.parametrize(("length", "d", "bq", "bk"), CAUSAL_SHAPES)
def test_causal_kernel_copies_no_block_above_the_diagonal(length, d, bq, bk):
    """（先写好 causal_flash_attention_forward。）跳过的块也不拷进来：k 和 v 各自拷进来的块数不超过
    对角线上和对角线下的 (查询块, 键块) 对的个数；不夹紧的 index map 每一步都拷一块。
    (Write causal_flash_attention_forward first.) Skipped blocks are not copied in either: k
    and v each copy in no more blocks than there are (query block, key block) pairs on or below
    the diagonal; an index map that does not clamp copies one block at every step.
    """
    visible = sum(
        min(length // bk, (i * bq + bq - 1) // bk + 1) for i in range(length // bq)
    )
    assert visible < (length // bq) * (length // bk)
    for copies in block_copies(causal_flash_attention_forward, length, d, bq, bk):
        assert copies <= visible
