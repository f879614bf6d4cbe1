"""07 · 综合：分块注意力的反向内核 / capstone: the blocked attention backward kernels.

test_flash_attention.py 的反向对 jnp 参考实现求 VJP，又造出了整个 [Lq, Lk] 的概率矩阵。真正的
flash attention 反向也是分块内核：前向除了输出 o，还保存每行的 log-sum-exp（lse，形状 [Lq, 1]），
反向一块一块地重新算概率 P = exp(s - lse)，不需要再求最大值和分母。设 dO 是输出的余切，
Δ = 每行 sum(dO ∘ o)，则 dV = Pᵀ dO，dP = dO Vᵀ，dS = P ∘ (dP - Δ)，dQ = dS K / √D，
dK = dSᵀ Q / √D。dQ 沿键块累加，dK、dV 沿查询块累加：两个内核，各自的累加轴是 "arbitrary"。

test_flash_attention.py's backward takes the VJP of the jnp reference and builds the whole
[Lq, Lk] probability matrix again. A real flash-attention backward is blocked kernels too: the
forward saves, besides the output o, each row's log-sum-exp (lse, shape [Lq, 1]), and the
backward recomputes the probabilities block by block, P = exp(s - lse), with no max and no
denominator to find again. With dO the output's cotangent and Δ = each row's sum(dO ∘ o):
dV = Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP - Δ), dQ = dS K / √D, dK = dSᵀ Q / √D. dQ accumulates
over key blocks, dK and dV over query blocks: two kernels, each with its accumulating axis
"arbitrary".
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.sharding import AbstractDevice, AbstractMesh

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import pallas_call_structure


def reference_attention(q, k, v):
    """纯 jnp 的参考实现。/ The plain jnp reference."""
    scores = q @ k.T / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    return jax.nn.softmax(scores, axis=-1) @ v


def _data(shape, seed, scale=1.0):
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32) * scale


def _saved_statistics(q, k, v, do):
    """测试用：jnp 算出的 lse [Lq, 1] 和 Δ [Lq, 1]。/ For the checks: lse [Lq, 1] and Δ [Lq, 1]
    computed with jnp."""
    scores = q @ k.T / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    lse = jax.nn.logsumexp(scores, axis=-1, keepdims=True)
    delta = jnp.sum(do * reference_attention(q, k, v), axis=-1, keepdims=True)
    return lse, delta


@functools.partial(jax.jit, static_argnames=("bq", "bk"))
def flash_attention_forward_with_lse(q, k, v, *, bq, bk):
    """（已写好）test_flash_attention.py 的前向内核，最后一步多写出每行的 lse = m + log(l)。
    (Given) test_flash_attention.py's forward kernel; on its last step it also writes each
    row's lse = m + log(l). Returns (o [Lq, D], lse [Lq, 1])."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, o_ref, lse_ref, m_ref, l_ref, acc_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
            l_ref[...] = jnp.zeros_like(l_ref)
            acc_ref[...] = jnp.zeros_like(acc_ref)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        m_prev = m_ref[...]
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m_prev - m_new)
        l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=-1, keepdims=True)
        acc_ref[...] = alpha * acc_ref[...] + jnp.dot(
            p, v_ref[...], preferred_element_type=jnp.float32
        )
        m_ref[...] = m_new

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)
            lse_ref[...] = m_ref[...] + jnp.log(l_ref[...])

    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((lq, d), q.dtype),
            jax.ShapeDtypeStruct((lq, 1), jnp.float32),
        ),
        grid=(lq // bq, lk // bk),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
        ],
        out_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
        ],
        scratch_shapes=[
            pltpu.VMEM((bq, 1), jnp.float32),
            pltpu.VMEM((bq, 1), jnp.float32),
            pltpu.VMEM((bq, d), jnp.float32),
        ],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v)


# ---- 你来实现 / your code ---------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("bq", "bk", "interpret"))
def flash_attention_dq(q, k, v, do, lse, delta, *, bq, bk, interpret=True):
    """dQ 的分块内核。q、do [Lq, D]，k、v [Lk, D]，lse、delta [Lq, 1]，返回 dq [Lq, D]。

    - grid = (Lq // bq, Lk // bk)；q、do 的块 (bq, D) 和 lse、delta 的块 (bq, 1) 只随查询块 i
      变，k、v 的块 (bk, D) 随键块 j 变；输出 dq 的块 (bq, D) 随 i 变；
    - scratch_shapes：一个 float32 累加器 pltpu.VMEM((bq, D), jnp.float32)；
    - compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"))；
    - j == 0 时清零累加器；每步：s = q kᵀ / √D，p = exp(s - lse)，dp = do vᵀ，
      ds = p ∘ (dp - delta)，累加器加上 ds k / √D；最后一步写出，dtype 和 q 一样；
    - 每个矩阵乘都写 preferred_element_type=jnp.float32（输入可能是 bfloat16）；interpret 原样交给
      pallas_call（interpret=False 时为 TPU 降级）。大约 25 行。

    The dQ kernel, blocked. q, do [Lq, D], k, v [Lk, D], lse, delta [Lq, 1]; returns dq [Lq, D].

    - grid = (Lq // bq, Lk // bk); the (bq, D) blocks of q and do and the (bq, 1) blocks of lse
      and delta move with the query block i only, the (bk, D) blocks of k and v with the key
      block j; the output dq's (bq, D) block moves with i;
    - scratch_shapes: one float32 accumulator, pltpu.VMEM((bq, D), jnp.float32);
    - compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"));
    - zero the accumulator when j == 0; every step: s = q kᵀ / √D, p = exp(s - lse),
      dp = do vᵀ, ds = p ∘ (dp - delta), add ds k / √D to the accumulator; write it on the last
      step, in q's dtype;
    - give every matmul preferred_element_type=jnp.float32 (the inputs may be bfloat16); hand
      interpret on to pallas_call as it is (interpret=False lowers for TPU). About 25 lines.
    """
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, acc_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s - lse_ref[...])
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        acc_ref[...] += jnp.dot(ds, k_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dq_ref[...] = acc_ref[...].astype(dq_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq, lk // bk),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=interpret,
    )(q, k, v, do, lse, delta)


@functools.partial(jax.jit, static_argnames=("bq", "bk", "interpret"))
def flash_attention_dkdv(q, k, v, do, lse, delta, *, bq, bk, interpret=True):
    """dK 和 dV 的分块内核，参数同 flash_attention_dq，返回 (dk, dv)，都是 [Lk, D]。

    - grid = (Lk // bk, Lq // bq)：外层是键块 i，内层沿查询块 j 累加；k、v 的块 (bk, D) 随 i
      变，q、do 的块 (bq, D) 和 lse、delta 的块 (bq, 1) 随 j 变；两个输出的块 (bk, D) 随 i 变；
    - scratch_shapes：两个 float32 累加器，都是 (bk, D)（先 dk 后 dv）；
    - dimension_semantics=("parallel", "arbitrary")；
    - j == 0 时清零；每步：s = q kᵀ / √D，p = exp(s - lse)，dv 加上 pᵀ do，dp = do vᵀ，
      ds = p ∘ (dp - delta)，dk 加上 dsᵀ q / √D；最后一步写出两个输出（dtype 和 k、v 一样）；
    - preferred_element_type 和 interpret 同 flash_attention_dq。大约 30 行。

    The dK and dV kernel, blocked; the same arguments as flash_attention_dq; returns (dk, dv),
    both [Lk, D].

    - grid = (Lk // bk, Lq // bq): key blocks i outside, accumulating over the query blocks j
      inside; the (bk, D) blocks of k and v move with i, the (bq, D) blocks of q and do and the
      (bq, 1) blocks of lse and delta with j; both outputs' (bk, D) blocks move with i;
    - scratch_shapes: two float32 accumulators, both (bk, D) (dk first, then dv);
    - dimension_semantics=("parallel", "arbitrary");
    - zero them when j == 0; every step: s = q kᵀ / √D, p = exp(s - lse), add pᵀ do to dv,
      dp = do vᵀ, ds = p ∘ (dp - delta), add dsᵀ q / √D to dk; write both outputs on the last
      step (in k's and v's dtypes);
    - preferred_element_type and interpret as in flash_attention_dq. About 30 lines.
    """
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_acc, dv_acc):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            dk_acc[...] = jnp.zeros_like(dk_acc)
            dv_acc[...] = jnp.zeros_like(dv_acc)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s - lse_ref[...])
        dv_acc[...] += jnp.dot(p.T, do_ref[...], preferred_element_type=jnp.float32)
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        dk_acc[...] += jnp.dot(ds.T, q_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dk_ref[...] = dk_acc[...].astype(dk_ref.dtype)
            dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((lk, d), k.dtype),
            jax.ShapeDtypeStruct((lk, d), v.dtype),
        ),
        grid=(lk // bk, lq // bq),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
        ],
        out_specs=[
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
        ],
        scratch_shapes=[pltpu.VMEM((bk, d), jnp.float32), pltpu.VMEM((bk, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=interpret,
    )(q, k, v, do, lse, delta)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def flash_attention(q, k, v, bq, bk):
    return flash_attention_forward_with_lse(q, k, v, bq=bq, bk=bk)[0]


def flash_attention_fwd(q, k, v, bq, bk):
    """（已写好）前向：内核的输出 o，残差 (q, k, v, o, lse)。
    (Given) Forward: the kernel's output o; residuals (q, k, v, o, lse)."""
    o, lse = flash_attention_forward_with_lse(q, k, v, bq=bq, bk=bk)
    return o, (q, k, v, o, lse)


def flash_attention_bwd(bq, bk, residuals, g):
    """反向：从残差 (q, k, v, o, lse) 和余切 g（即 dO）出发，用 jnp 算 Δ = sum(g ∘ o, 最后一轴,
    keepdims=True)（[Lq, 1]，不是 [Lq, Lk]），再调用两个内核，返回 (dq, dk, dv)。不要对参考实现
    求 VJP。大约 4 行。

    Backward: from the residuals (q, k, v, o, lse) and the cotangent g (that is dO), compute
    Δ = sum(g ∘ o, last axis, keepdims=True) with jnp ([Lq, 1], not [Lq, Lk]), then call both
    kernels and return (dq, dk, dv). Do not take the VJP of the reference. About 4 lines.
    """
    q, k, v, o, lse = residuals
    delta = jnp.sum(g * o, axis=-1, keepdims=True)
    dq = flash_attention_dq(q, k, v, g, lse, delta, bq=bq, bk=bk)
    dk, dv = flash_attention_dkdv(q, k, v, g, lse, delta, bq=bq, bk=bk)
    return dq, dk, dv


flash_attention.defvjp(flash_attention_fwd, flash_attention_bwd)


# ---- 检查 / checks ----------------------------------------------------------------------

# 内核里的 exp：jnp.exp，或 jnp.exp2（分数先乘 log2 e，FlashAttention-2 的写法），同样的工作
# the kernel's exp: jnp.exp, or jnp.exp2 (the scores first multiplied by log2 e, as
# FlashAttention-2 writes it), the same work
EXP = {"exp", "exp2"}

SHAPES = [
    # (Lq, Lk, D, bq, bk)
    (64, 64, 16, 16, 16),
    (32, 64, 8, 8, 16),
]


def _reference_gradients(q, k, v, do):
    _, pullback = jax.vjp(reference_attention, q, k, v)
    return pullback(do)


def _kernels_and_outside(jaxpr):
    """jaxpr 里（包括嵌套的 jit）每个 pallas_call 方程，内核外的原语，和内核外每个方程的输出形状。
    Every pallas_call equation in a jaxpr (nested jits included), the primitives outside the
    kernels, and the output shapes of every equation outside them."""
    kernels, ops, shapes = [], set(), set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                kernels.append(eqn)
                continue
            ops.add(eqn.primitive.name)
            shapes.update(tuple(getattr(var.aval, "shape", ())) for var in eqn.outvars)
            for value in eqn.params.values():
                for item in value if isinstance(value, tuple | list) else (value,):
                    inner = getattr(item, "jaxpr", item)
                    if hasattr(inner, "eqns"):
                        walk(inner)

    walk(jaxpr)
    return kernels, ops, shapes


@pytest.mark.parametrize(("lq", "lk", "d", "bq", "bk"), SHAPES)
def test_dq_kernel_recomputes_the_probabilities_block_by_block(lq, lk, d, bq, bk):
    """dQ 内核等于参考实现的 dQ（分数放大 3 倍后也一样）；结构：grid 是 (查询块数, 键块数)，
    沿序列不止一块；q、k、v、do、lse、delta、dq 的块形状；一个 float32 scratch 累加器；键轴
    "arbitrary"；exp 和矩阵乘都在内核里。
    The dQ kernel equals the reference's dQ (also with the scores scaled 3 times); the
    structure: the grid is (query blocks, key blocks), more than one block along the sequence;
    the block shapes of q, k, v, do, lse, delta and dq; one float32 scratch accumulator; the key
    axis "arbitrary"; the exp and the matmuls inside the kernel.
    """
    for scale in (1.0, 3.0):
        q, k, v = _data((lq, d), 0, scale), _data((lk, d), 1), _data((lk, d), 2)
        do = _data((lq, d), 3)
        lse, delta = _saved_statistics(q, k, v, do)
        dq = flash_attention_dq(q, k, v, do, lse, delta, bq=bq, bk=bk)
        np.testing.assert_allclose(dq, _reference_gradients(q, k, v, do)[0], rtol=1e-4, atol=1e-5)
    kernel = pallas_call_structure(
        functools.partial(flash_attention_dq, bq=bq, bk=bk), q, k, v, do, lse, delta
    )
    assert kernel["grid"] == (lq // bq, lk // bk)
    assert kernel["blocks"] == [(bq, d), (bk, d), (bk, d), (bq, d), (bq, 1), (bq, 1), (bq, d)]
    assert kernel["scratch"] == [((bq, d), jnp.float32)]
    assert kernel["semantics"] == ("parallel", "arbitrary")
    assert "dot_general" in kernel["kernel_ops"] and EXP & kernel["kernel_ops"]
    assert not {"dot_general", *EXP} & kernel["outside_ops"]


@pytest.mark.parametrize(("lq", "lk", "d", "bq", "bk"), SHAPES)
def test_dkdv_kernel_accumulates_over_the_query_blocks(lq, lk, d, bq, bk):
    """dK、dV 内核等于参考实现的 dK、dV（分数放大 3 倍后也一样）；结构：grid 是 (键块数,
    查询块数)；块形状；两个 (bk, D) 的 float32 累加器；查询轴 "arbitrary"；exp 和矩阵乘都在内核里。
    The dK, dV kernel equals the reference's dK and dV (also with the scores scaled 3 times);
    the structure: the grid is (key blocks, query blocks); the block shapes; two (bk, D) float32
    accumulators; the query axis "arbitrary"; the exp and the matmuls inside the kernel.
    """
    for scale in (1.0, 3.0):
        q, k, v = _data((lq, d), 0, scale), _data((lk, d), 1), _data((lk, d), 2)
        do = _data((lq, d), 3)
        lse, delta = _saved_statistics(q, k, v, do)
        dk, dv = flash_attention_dkdv(q, k, v, do, lse, delta, bq=bq, bk=bk)
        _, want_dk, want_dv = _reference_gradients(q, k, v, do)
        np.testing.assert_allclose(dk, want_dk, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(dv, want_dv, rtol=1e-4, atol=1e-5)
    kernel = pallas_call_structure(
        functools.partial(flash_attention_dkdv, bq=bq, bk=bk), q, k, v, do, lse, delta
    )
    assert kernel["grid"] == (lk // bk, lq // bq)
    assert kernel["blocks"] == [
        (bq, d), (bk, d), (bk, d), (bq, d), (bq, 1), (bq, 1), (bk, d), (bk, d),
    ]  # fmt: skip
    assert kernel["scratch"] == [((bk, d), jnp.float32), ((bk, d), jnp.float32)]
    assert kernel["semantics"] == ("parallel", "arbitrary")
    assert "dot_general" in kernel["kernel_ops"] and EXP & kernel["kernel_ops"]
    assert not {"dot_general", *EXP} & kernel["outside_ops"]


@pytest.mark.parametrize(("lq", "lk", "d", "bq", "bk"), SHAPES)
def test_the_whole_gradient_runs_in_blocked_kernels(lq, lk, d, bq, bk):
    """jax.grad 穿过 custom_vjp：对 q、k、v 的梯度都等于参考实现的梯度；grad 的 jaxpr 里有三个
    pallas_call（前向、dQ、dK/dV），每个沿序列都不止一块；内核外没有哪个值的形状是 [Lq, Lk]，
    也没有 exp：概率只在内核里一块一块地算。
    jax.grad through the custom_vjp: the gradients with respect to q, k and v all equal the
    reference's; grad's jaxpr holds three pallas_calls (forward, dQ, dK/dV), each with more than
    one block along the sequence; no value outside the kernels has the shape [Lq, Lk], and there
    is no exp there: the probabilities are computed only inside the kernels, block by block.
    """
    q, k, v = _data((lq, d), 4, 2.0), _data((lk, d), 5), _data((lk, d), 6)
    w = _data((lq, d), 7)

    def loss(attention):
        return lambda q, k, v: jnp.sum(attention(q, k, v) * w)

    ours = jax.grad(loss(lambda q, k, v: flash_attention(q, k, v, bq, bk)), argnums=(0, 1, 2))
    expected = jax.grad(loss(reference_attention), argnums=(0, 1, 2))(q, k, v)
    for got, want in zip(jax.jit(ours)(q, k, v), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    kernels, outside_ops, shapes = _kernels_and_outside(jax.make_jaxpr(ours)(q, k, v).jaxpr)
    grids = sorted(tuple(eqn.params["grid_mapping"].grid) for eqn in kernels)
    assert grids == sorted([(lq // bq, lk // bk), (lq // bq, lk // bk), (lk // bk, lq // bq)])
    assert max(math.prod(shape) for shape in shapes) < lq * lk  # nothing as large as [Lq, Lk]
    assert not EXP & outside_ops


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_the_backward_kernels_lower_for_tpu(dtype):
    """（先写好 flash_attention_dq 和 flash_attention_dkdv。）两个反向内核在 TPU 上合法的块形状
    （Lq = Lk = 32、D = 16、bq = 8、bk = 16：块的最后一维等于数组的，倒数第二维是 8 的倍数）
    上为 TPU v5 lite 降级，q、k、v、do 是 float32 或 bfloat16（lse、delta 总是 float32）。bfloat16
    的矩阵乘没有 preferred_element_type=jnp.float32 时 Mosaic 拒绝它。
    (Write flash_attention_dq and flash_attention_dkdv first.) Both backward kernels lower for a
    TPU v5 lite at block shapes a TPU accepts (Lq = Lk = 32, D = 16, bq = 8, bk = 16: every
    block's last dim equals the array's, the one before it is a multiple of 8), with q, k, v and do in
    float32 or bfloat16 (lse and delta always float32). Mosaic refuses a bfloat16 matmul without
    preferred_element_type=jnp.float32.
    """
    lq, lk, d = 32, 32, 16
    device = AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
    args = [
        jax.ShapeDtypeStruct((lq, d), dtype),
        jax.ShapeDtypeStruct((lk, d), dtype),
        jax.ShapeDtypeStruct((lk, d), dtype),
        jax.ShapeDtypeStruct((lq, d), dtype),
        jax.ShapeDtypeStruct((lq, 1), jnp.float32),
        jax.ShapeDtypeStruct((lq, 1), jnp.float32),
    ]
    for kernel in (flash_attention_dq, flash_attention_dkdv):
        f = jax.jit(functools.partial(kernel, bq=8, bk=16, interpret=False))
        kernels, _, _ = _kernels_and_outside(jax.make_jaxpr(f)(*args).jaxpr)
        assert [eqn.params["interpret"] for eqn in kernels] == [False]
        with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=device)):
            text = f.trace(*args).lower(lowering_platforms=("tpu",)).as_text()
        assert "tpu_custom_call" in text


def test_the_backward_kernels_run_in_the_tpu_interpreter_without_races():
    """（先写好 flash_attention_dq 和 flash_attention_dkdv。）TPU 解释器把 "parallel" 的轴分给两个
    模拟的核、开着竞争检测：两个反向内核都没有竞争（累加的轴是 "arbitrary"，每个输出块只在一个核上
    按顺序累加），结果和 interpret=True 的一样。
    (Write flash_attention_dq and flash_attention_dkdv first.) The TPU interpreter spreads the
    "parallel" axes over two simulated cores and detects races: neither backward kernel races
    (the accumulating axis is "arbitrary", so each output block accumulates in order on one
    core), and both give interpret=True's values.
    """
    lq, lk, d = 32, 32, 16
    q, k, v, do = (_data((n, d), seed) for seed, n in enumerate((lq, lk, lk, lq)))
    values = [q, k, v, do, *_saved_statistics(q, k, v, do)]
    params = pltpu.InterpretParams(detect_races=True, num_cores_or_threads=2, random_seed=0)
    for kernel in (flash_attention_dq, flash_attention_dkdv):
        plain = kernel(*values, bq=16, bk=16)
        try:
            cores = kernel(*values, bq=16, bk=16, interpret=params)
        finally:
            pltpu.reset_tpu_interpret_mode_state()
        for got, want in zip(jax.tree.leaves(cores), jax.tree.leaves(plain), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
