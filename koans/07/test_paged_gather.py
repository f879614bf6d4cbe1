"""07 · 分页 KV：页表在 SMEM，pl.run_scoped 里的缓冲区与 DMA / paged KV: a page table in SMEM, buffers and DMAs in pl.run_scoped.

分页注意力（paged attention）把每个序列的键存成一页页散落在一大块 HBM 里的页，页表记下序列 s 的
第 j 页在哪。内核按页表自己搬页：页表作为标量预取（PrefetchScalarGridSpec）放进 SMEM，内核从里面
读出页号；页堆留在 HBM（pl.BlockSpec(memory_space=pl.ANY)）；pl.run_scoped(body, 类型...) 只在
body 运行期间分配 VMEM 缓冲区和 DMA 信号量，作为参数交给 body。先把这个序列的所有页的拷贝都发起，
再一页页等待、计算：几次 DMA 同时在路上。

Paged attention keeps each sequence's keys as pages scattered over one large HBM pool, and a
page table says where page j of sequence s lives. The kernel moves the pages itself: the page
table is scalar-prefetched into SMEM (PrefetchScalarGridSpec) and the kernel reads page ids from
it; the page pool stays in HBM (pl.BlockSpec(memory_space=pl.ANY)); pl.run_scoped(body,
types...) allocates VMEM buffers and DMA semaphores only while body runs, handing them to body as
arguments. Start the copies of all of the sequence's pages first, then wait for and compute with
one page after the other: several DMAs are in flight at once.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import equations, pallas_call_structure, primitives

PAGE = 8  # keys per page


def paged_scores(q, pages, page_table, *, interpret=True):
    """q [S, H, C]（每个序列 H 个查询行），pages [P, PAGE, C]（页堆，留在 HBM），
    page_table [S, NP] int32（序列 s 的第 j 页是 pages[page_table[s, j]]）；返回 float32 的
    scores [S, H, NP·PAGE]：scores[s, :, j·PAGE:(j+1)·PAGE] = q[s] @ pages[page_table[s, j]].T。
    - grid_spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(S,), ...)，调用时
      page_table 在前：pallas_call(...)(page_table, q, pages)；
    - q 和输出的块是 (None, H, C) / (None, H, NP·PAGE)，随 s 移动（index map 收到 (s, 页表 Ref)）；
      pages 用 pl.BlockSpec(memory_space=pl.ANY)，内核拿到整个页堆；
    - 内核里用 pl.run_scoped 分配一个 (NP, PAGE, C) 的 pltpu.VMEM 缓冲区和
      pltpu.SemaphoreType.DMA((NP,))，不用 scratch_shapes；在 body 里先为每一页 j 发起
      pltpu.make_async_copy(pages_hbm.at[页号], buf.at[j], sems.at[j])，全部发起之后再依次
      wait、用 jax.lax.dot_general 算 q 块和这一页的转置（float32），写进输出块的第 j 段。
    内核外不许 gather、不许乘。大约 20 行。

    q [S, H, C] (H query rows per sequence), pages [P, PAGE, C] (the page pool, left in HBM),
    page_table [S, NP] int32 (page j of sequence s is pages[page_table[s, j]]); returns float32
    scores [S, H, NP·PAGE] with scores[s, :, j·PAGE:(j+1)·PAGE] = q[s] @ pages[page_table[s, j]].T.
    - grid_spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(S,), ...), with the
      page table first in the call: pallas_call(...)(page_table, q, pages);
    - q's and the output's blocks are (None, H, C) / (None, H, NP·PAGE), moving with s (an index
      map receives (s, the page-table Ref)); pages use pl.BlockSpec(memory_space=pl.ANY), so the
      kernel gets the whole pool;
    - in the kernel pl.run_scoped allocates a (NP, PAGE, C) pltpu.VMEM buffer and
      pltpu.SemaphoreType.DMA((NP,)), not scratch_shapes; in body first start, for every page j,
      pltpu.make_async_copy(pages_hbm.at[page id], buf.at[j], sems.at[j]); only once all are
      started, wait for each in turn and compute the q block times that page transposed with
      jax.lax.dot_general (float32), written into segment j of the output block.
    No gather and no product outside the kernel. About 20 lines.
    """
    todo("paged_scores: 页表驱动内核自己的 DMA / a page table drives the kernel's own DMAs")


def _reference(q, pages, page_table):
    """页表 gather 出每个序列的键，再 einsum / the keys gathered by the page table, then an einsum."""
    keys = pages[page_table]  # [S, NP, PAGE, C]
    return jnp.einsum("shc,sjpc->shjp", q, keys).reshape(q.shape[0], q.shape[1], -1)


def _holds(eqn, name):
    """这个方程（连同它的子 jaxpr）里有没有 name 原语 / whether eqn (or a jaxpr inside it) holds name."""
    params = [*eqn.params.values(), *eqn.params.get("branches", ())]
    inner = [getattr(v, "jaxpr", v) for v in params if hasattr(v, "eqns") or hasattr(v, "jaxpr")]
    return eqn.primitive.name == name or any(name in primitives(j) for j in inner)


def test_a_page_table_drives_the_kernels_own_dmas():
    """✍️ 实现 paged_scores。检查：TPU 解释器下（两个模拟的核、竞争检测；DMA 在 wait 时执行，
    或一发起就执行）结果等于用页表 gather 的参考（页表里有重复的页、各序列不同）；结构：一个预取的索引参数（在 SMEM）、
    grid 是 (S,)、页堆整个交给内核（留在 HBM）、没有 scratch_shapes；内核里有 run_scoped，它分配的是
    (NP, PAGE, C) 的 VMEM 缓冲区和 NP 个 DMA 信号量；它的方程里每一个含 dma_start 的都排在第一个含
    dma_wait 的之前（所有页同时在路上）；内核外没有 gather、没有乘。最后在一个声明为 TPU v5 lite
    的抽象网格里，它为 TPU 降级成一个 tpu_custom_call（run_scoped 降级要知道 TPU 的型号）。
    Write paged_scores. Checked: under the TPU interpreter (two simulated cores, race
    detection; DMAs run at their wait, or as soon as they start) the result equals the reference gathered through the page table (the table
    repeats a page and differs per sequence); the structure: one prefetched index operand (in
    SMEM), the grid (S,), the whole page pool handed to the kernel (left in HBM), no
    scratch_shapes; a run_scoped in the kernel, allocating a (NP, PAGE, C) VMEM buffer and NP DMA
    semaphores; among its equations every one holding a dma_start comes before the first holding a
    dma_wait (all the pages in flight at once); no gather and no product outside the kernel.
    Finally, inside an abstract mesh declared TPU v5 lite, it lowers for TPU to one
    tpu_custom_call (lowering run_scoped needs to know the TPU's generation).
    """
    seqs, heads, c, pool = 3, 8, 128, 10
    table = jnp.array([[3, 7, 0, 9], [1, 1, 5, 2], [8, 6, 4, 3]], jnp.int32)
    q = jax.random.normal(jax.random.key(0), (seqs, heads, c), jnp.float32)
    pages = jax.random.normal(jax.random.key(1), (pool, PAGE, c), jnp.float32)
    expected = _reference(q, pages, table)
    try:
        for mode in ("on_wait", "eager"):
            params = pltpu.InterpretParams(
                dma_execution_mode=mode, detect_races=True, num_cores_or_threads=2, random_seed=0
            )
            out = jax.jit(functools.partial(paged_scores, interpret=params))(q, pages, table)
            np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)
    finally:
        pltpu.reset_tpu_interpret_mode_state()

    fn = functools.partial(paged_scores, interpret=pltpu.InterpretParams())
    kernel = pallas_call_structure(fn, q, pages, table)
    (call,) = equations("pallas_call", fn, q, pages, table)
    assert call.params["grid_mapping"].num_index_operands == 1
    assert kernel["grid"] == (seqs,)
    assert kernel["scratch"] == [], "用 run_scoped 分配 / allocate with run_scoped"
    assert [tuple(v.aval.shape) for v in call.invars] == [table.shape, q.shape, pages.shape]
    table_ref, _, pages_ref, _ = call.params["jaxpr"].invars
    assert "smem" in str(table_ref.aval)
    assert kernel["blocks"][1] == pages.shape and "any" in str(pages_ref.aval)
    assert not {"gather", "dot_general", "dynamic_slice"} & kernel["outside_ops"]

    (scoped,) = [e for e in call.params["jaxpr"].eqns if e.primitive.name == "run_scoped"]
    body = scoped.params["jaxpr"]
    allocated = [str(v.aval) for v in body.invars[len(body.invars) - 2 :]]
    npages = table.shape[1]
    assert allocated[0].startswith("Ref<vmem>") and f"[{npages},{PAGE},{c}]" in allocated[0]
    assert f"dma_sem[{npages}]" in allocated[1]
    starts = [i for i, e in enumerate(body.eqns) if _holds(e, "dma_start")]
    waits = [i for i, e in enumerate(body.eqns) if _holds(e, "dma_wait")]
    assert starts and waits and max(starts) < min(waits), "先全部发起，再等 / start all, then wait"

    device = jax.sharding.AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
    mesh = jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)
    tpu = functools.partial(paged_scores, interpret=False)
    with jax.sharding.use_abstract_mesh(mesh):
        lowered = jax.jit(tpu).trace(q, pages, table).lower(lowering_platforms=("tpu",))
    assert lowered.as_text().count("tpu_custom_call") == 1
