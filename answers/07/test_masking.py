"""07 · 块除不尽的形状：掩码与填充 / shapes the block does not divide: masks and padding.

grid = pl.cdiv(n, block) 时最后一块越过数组末尾：越界的写入被丢弃，越界的读取却拿到填充值。
逐元素运算因此没事，归约必须自己加掩码（iota + program_id），或者事先填充成整块。

With grid = pl.cdiv(n, block) the last block runs past the end of the array: out-of-bounds
writes are dropped, but out-of-bounds reads return padding. Elementwise work is therefore fine;
a reduction needs its own mask (iota + program_id), or the input padded to whole blocks.
What the padding holds depends on the interpreter (and on hardware, on whatever the memory held):
never rely on it.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import pallas_call_structure

BLOCK = 4


def _block_sums(kernel, x, interpret=True, n=None):
    """每块一个和：grid = cdiv(len(x), BLOCK)，输出 [num_blocks]；n（默认 len(x)）是真实元素的个数。
    One sum per block; n (len(x) by default) is the number of real elements."""
    n = x.shape[0] if n is None else n
    num_blocks = pl.cdiv(x.shape[0], BLOCK)
    return pl.pallas_call(
        functools.partial(kernel, n=n),
        out_shape=jax.ShapeDtypeStruct((num_blocks,), x.dtype),
        grid=(num_blocks,),
        in_specs=[pl.BlockSpec((BLOCK,), lambda i: (i,))],
        out_specs=pl.BlockSpec((1,), lambda i: (i,)),
        interpret=interpret,
    )(x)


def _unmasked_sum(x_ref, o_ref, *, n):
    o_ref[...] = jnp.full((1,), jnp.sum(x_ref[...]))


def test_ragged_last_block_reads_padding():
    """⚠️ 陷阱 / trap：10 个元素、块大小 4 → 3 块，最后一块只有 2 个真实元素。逐元素加 1 的
    结果完全正确（越界写入被丢弃）。预测：不加掩码的块求和，哪几块的和是 NaN（解释模式默认
    把未初始化的内存填成 NaN）？
    10 elements in blocks of 4 -> 3 blocks, the last holding only 2 real elements. Adding 1
    elementwise is exactly right (out-of-bounds writes are dropped). Predict which sums of an
    unmasked block sum come out NaN (interpret mode fills uninitialized memory with NaN by
    default).
    """

    def plus_one(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    x = jnp.arange(10.0)
    inc = pl.pallas_call(
        plus_one,
        out_shape=jax.ShapeDtypeStruct((10,), jnp.float32),
        grid=(pl.cdiv(10, BLOCK),),
        in_specs=[pl.BlockSpec((BLOCK,), lambda i: (i,))],
        out_specs=pl.BlockSpec((BLOCK,), lambda i: (i,)),
        interpret=True,
    )
    np.testing.assert_array_equal(jax.jit(inc)(x), x + 1.0)

    sums = jax.jit(functools.partial(_block_sums, _unmasked_sum))(x)
    assert np.isnan(sums).tolist() == [False, False, True]


def test_zeroed_padding_hides_a_missing_mask():
    """⚠️ 陷阱 / trap：TPU 解释器（interpret=pltpu.InterpretParams(...)）可以选择未初始化内存
    填什么。填 0 时，不加掩码的块求和恰好算对了，bug 被藏起来；测试内核时选那个让越界读取
    一眼可见的填充值。
    The TPU interpreter (interpret=pltpu.InterpretParams(...)) lets you choose what uninitialized
    memory holds. With zeros, the unmasked block sum happens to be right and the bug hides; when
    testing a kernel, pick the fill that makes an out-of-bounds read stand out.
    """
    x = jnp.arange(1.0, 11.0)

    def run(params):
        return jax.jit(functools.partial(_block_sums, _unmasked_sum, interpret=params))(x)

    looks_right = run(pltpu.InterpretParams(uninitialized_memory="zero"))
    np.testing.assert_array_equal(looks_right, [1 + 2 + 3 + 4, 5 + 6 + 7 + 8, 9 + 10])
    exposed = run(pltpu.InterpretParams(uninitialized_memory="nan"))
    assert np.isnan(exposed).any()  # the out-of-bounds read now shows


def masked_sum_kernel(x_ref, o_ref, *, n):
    """只加真实元素：块 i 的第 t 个元素是全局第 i * BLOCK + t 个；下标 >= n 的当作 0。
    用 jax.lax.broadcasted_iota 和 pl.program_id，用 jnp.where 选，不要乘掩码：按 IEEE，NaN * 0 仍是 NaN，
    为硬件编译的内核正是这么算的（这台 CPU 上 XLA 恰好把“乘以布尔掩码”改写成了 select，所以测试检查的是
    内核里有没有 select）。
    把和写成形状 (1,) 的 o_ref。大约 4 行。

    Sum only the real elements: element t of block i is global element i * BLOCK + t; treat
    indices >= n as 0. Use jax.lax.broadcasted_iota and pl.program_id, and select with jnp.where
    and do not multiply by the mask: in IEEE arithmetic NaN * 0 is still NaN, which is what a kernel
    compiled for hardware computes (on this CPU, XLA happens to rewrite a multiply by a boolean mask
    into a select, so the test checks that the kernel selects). Write the sum into o_ref of shape (1,).
    About 4 lines.
    """
    idx = pl.program_id(0) * BLOCK + jax.lax.broadcasted_iota(jnp.int32, (BLOCK,), 0)
    valid = jnp.where(idx < n, x_ref[...], 0.0)
    o_ref[...] = jnp.full((1,), jnp.sum(valid))


@pytest.mark.parametrize("n", [8, 10, 13, 3])
def test_masked_block_sum_ignores_the_padding(n):
    """掩码块求和：每块的和等于 numpy 对同一段真实元素的求和，n 整除或不整除 BLOCK 都对；内核
    用 iota 和 program_id 算出全局下标、用 select 选出真实元素（都从内核的 jaxpr 里读出）；填充
    不是 NaN 而是别的值时（这里是一段被当作填充的真实内存，取值和数据一样分布）也照样对。
    A masked block sum: each block's sum equals numpy's sum over the same real elements,
    whether or not BLOCK divides n; the kernel builds the global index from iota and program_id
    and selects the real elements (all read from the kernel's jaxpr); and it is still right when
    the padding is not NaN but something else (here real memory past n, passed as padding,
    drawn like the data).
    """
    x = jnp.asarray(np.random.default_rng(n).normal(size=n), jnp.float32)  # no pattern to read
    sums = jax.jit(functools.partial(_block_sums, masked_sum_kernel))(x)
    expected = [np.sum(np.asarray(x)[i : i + BLOCK]) for i in range(0, n, BLOCK)]
    np.testing.assert_allclose(sums, expected, rtol=1e-5, atol=1e-6)
    kernel_ops = pallas_call_structure(functools.partial(_block_sums, masked_sum_kernel), x)
    assert {"iota", "program_id", "select_n"} <= kernel_ops["kernel_ops"]
    # Padding that is not NaN: whole blocks of memory, of which only the first n are real; it is
    # drawn like the data, so no value tells it apart, only its index.
    whole = -(-n // BLOCK) * BLOCK
    past = np.random.default_rng(n + 1).normal(size=whole - n)
    garbage = jnp.concatenate([x, jnp.asarray(past, x.dtype)])
    padded = jax.jit(functools.partial(_block_sums, masked_sum_kernel, n=n))(garbage)
    np.testing.assert_allclose(padded, expected, rtol=1e-5, atol=1e-6)


def test_pad_to_whole_blocks_with_the_neutral_value():
    """另一种办法：先把输入填充成整块，运行不带掩码的内核，再丢掉填充。这里内核按 8 列一块
    算 softmax 的分母 sum(exp(x))：每块一个部分和，最后在外面相加。填充值必须对运算“中性”：
    exp 之后为 0 的那个值。
    The other way: pad the input to whole blocks, run the unmasked kernel, drop the padding.
    Here the kernel computes softmax's denominator sum(exp(x)) in blocks of 8 columns, one
    partial sum per block, added up outside. The padding must be neutral for the operation:
    the value whose exp is 0.
    """
    cols = 8

    def partial_exp_sum(x_ref, o_ref):
        o_ref[...] = jnp.sum(jnp.exp(x_ref[...]), axis=1, keepdims=True)

    @jax.jit
    def softmax_denominator(x):
        rows, n = x.shape
        blocks = pl.cdiv(n, cols)
        xp = jnp.pad(x, ((0, 0), (0, blocks * cols - n)), constant_values=-jnp.inf)
        partial = pl.pallas_call(
            partial_exp_sum,
            out_shape=jax.ShapeDtypeStruct((rows, blocks), x.dtype),
            grid=(blocks,),
            in_specs=[pl.BlockSpec((rows, cols), lambda j: (0, j))],
            out_specs=pl.BlockSpec((rows, 1), lambda j: (0, j)),
            interpret=True,
        )(xp)
        return partial.sum(axis=1)

    x = jax.random.normal(jax.random.key(0), (3, 13))
    np.testing.assert_allclose(softmax_denominator(x), jnp.exp(x).sum(axis=1), rtol=1e-6)
