"""07 · 标量预取：分组（MoE）矩阵乘 / scalar prefetch: a grouped (MoE) matmul.

MoE 层把 token 按专家排好序，每一块行要乘它自己那个专家的权重。BlockSpec 的 index map 只看
program_id 时，选不出“这一块属于哪个专家”。pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1)
让 pallas_call 的第一个参数（这里是每个行块的专家编号）在 grid 开始之前就放进 SMEM，并作为额外的
参数传给每个 index map 和内核：index map 读它，为每一步挑出要搬进 VMEM 的那个专家的权重块，
整个权重堆不动、也不在内核外先 gather 一份。

An MoE layer sorts its tokens by expert, and each block of rows must be multiplied by its own
expert's weights. An index map that sees only the program ids cannot pick "the expert this block
belongs to". pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1) puts the pallas_call's first
argument (here each row block's expert id) into SMEM before the grid starts and hands it, as an
extra argument, to every index map and to the kernel: an index map reads it to choose, step by
step, which expert's weight block is moved into VMEM, with no gather of the weights outside the
kernel and no copy of the whole stack.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import equations, pallas_call_structure, primitives

BM = 8  # rows per block: every block of rows belongs to one expert


def grouped_matmul(x, w, group_ids, *, interpret=True):
    """x [m, K]（m = BM · 块数，token 已按专家排序），w [E, K, N]（每个专家一个权重矩阵），
    group_ids [m // BM] int32（第 b 个行块的专家编号）；返回 out [m, N]，
    out[b·BM:(b+1)·BM] = x[b·BM:(b+1)·BM] @ w[group_ids[b]]（float32）。
    - grid_spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(m // BM,), ...)，
      调用时 group_ids 是第一个参数：pallas_call(...)(group_ids, x, w)；
    - 每个 index map 收到 (i, 预取的 Ref)：x 和输出按 (BM, K) / (BM, N) 的块随 i 移动；w 的块
      是 (None, K, N)（专家那一维挤掉），index map 从预取的 Ref 里读出第 i 块的专家编号；
    - 内核的参数依次是：预取的 Ref、x 块、w 块、输出块；一行 jnp.dot（float32）。
    不许在内核外 gather 或乘。大约 12 行。

    x [m, K] (m = BM · blocks, the tokens sorted by expert), w [E, K, N] (one weight matrix per
    expert), group_ids [m // BM] int32 (the expert of row block b); returns out [m, N] with
    out[b·BM:(b+1)·BM] = x[b·BM:(b+1)·BM] @ w[group_ids[b]] (float32).
    - grid_spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(m // BM,), ...),
      with group_ids the first argument of the call: pallas_call(...)(group_ids, x, w);
    - every index map receives (i, the prefetched Ref): x and the output move with i in (BM, K) /
      (BM, N) blocks; w's block is (None, K, N) (the expert axis squeezed), and its index map
      reads block i's expert from the prefetched Ref;
    - the kernel's parameters are: the prefetched Ref, the x block, the w block, the output
      block; one jnp.dot (float32).
    No gather and no product outside the kernel. About 12 lines.
    """
    todo("grouped_matmul: 标量预取选专家的权重块 / scalar prefetch picks the expert's weight block")


def _dense_reference(x, w, group_ids):
    """每一行乘它的专家的权重（逐行 gather 出权重再 einsum）。
    Each row times its expert's weights (the weights gathered per row, then an einsum)."""
    per_row = w[jnp.repeat(group_ids, BM)]
    return jnp.einsum("mk,mkn->mn", x, per_row)


@pytest.mark.parametrize("group_ids", [(0, 0, 1, 2), (1, 1, 1, 2), (0, 2, 2, 2)])
def test_scalar_prefetch_picks_each_row_blocks_expert(group_ids):
    """✍️ 实现 grouped_matmul。检查：TPU 解释器下（两个模拟的核、竞争检测）结果等于逐行 gather 权重的稠密参考（也有专家
    一块都没分到的情形）；结构：pallas_call 有一个预取的索引参数、grid 是 (行块数,)、块形状依次是
    x 的 (BM, K)、w 的 (K, N)（专家一维挤掉）、输出的 (BM, N)；w 的 index map 从 SMEM 里的预取
    Ref 读数，x 的不读；pallas_call 收到的是整个 [E, K, N] 权重堆，内核外没有 gather、没有乘；
    最后它为 TPU 降级成一个 tpu_custom_call。
    Write grouped_matmul. Checked: under the TPU interpreter (two simulated cores, race
    detection) the result equals the dense
    reference that gathers the weights per row (including an expert that gets no block); the
    structure: the pallas_call has one prefetched index operand, the grid is (row blocks,), the
    block shapes are x's (BM, K), w's (K, N) (the expert axis squeezed), the output's (BM, N);
    w's index map reads the prefetched Ref in SMEM and x's does not; the pallas_call receives the
    whole [E, K, N] weight stack, with no gather and no product outside the kernel. Finally it
    lowers for TPU to one tpu_custom_call.
    """
    experts, k, n = 3, 128, 128
    ids = jnp.array(group_ids, jnp.int32)
    x = jax.random.normal(jax.random.key(0), (BM * len(group_ids), k), jnp.float32)
    w = jax.random.normal(jax.random.key(1), (experts, k, n), jnp.float32)

    params = pltpu.InterpretParams(detect_races=True, num_cores_or_threads=2, random_seed=0)
    try:
        out = jax.jit(functools.partial(grouped_matmul, interpret=params))(x, w, ids)
    finally:
        pltpu.reset_tpu_interpret_mode_state()
    np.testing.assert_allclose(out, _dense_reference(x, w, ids), rtol=1e-5, atol=1e-4)
    fn = functools.partial(grouped_matmul, interpret=pltpu.InterpretParams())

    kernel = pallas_call_structure(fn, x, w, ids)
    (call,) = equations("pallas_call", fn, x, w, ids)
    mapping = call.params["grid_mapping"]
    assert mapping.num_index_operands == 1
    assert kernel["grid"] == (len(group_ids),)
    blocks = [
        tuple(getattr(d, "block_size", None) for d in b.block_shape) for b in mapping.block_mappings
    ]
    assert blocks == [(BM, k), (None, k, n), (BM, n)]
    x_map, w_map, _ = (b.index_map_jaxpr.jaxpr for b in mapping.block_mappings)
    assert "smem" in str(w_map.invars[-1].aval), (
        "预取的 Ref 在 SMEM / the prefetched Ref is in SMEM"
    )
    assert "get" in primitives(w_map), (
        "w 的块由预取的编号选出 / w's block is chosen by the prefetched id"
    )
    assert "get" not in primitives(x_map)
    assert [tuple(v.aval.shape) for v in call.invars] == [(len(group_ids),), x.shape, w.shape]
    assert not {"gather", "dot_general", "dynamic_slice"} & kernel["outside_ops"]
    assert "dot_general" in kernel["kernel_ops"]

    tpu = functools.partial(grouped_matmul, interpret=False)
    lowered = jax.jit(tpu).trace(x, w, ids).lower(lowering_platforms=("tpu",))
    assert lowered.as_text().count("tpu_custom_call") == 1
