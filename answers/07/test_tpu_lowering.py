"""07 · 在 CPU 机器上为 TPU 降级 / lowering for TPU on a CPU machine.

不需要 TPU 也能检查内核能否在 TPU 上编译：`jax.jit(f).trace(x).lower(lowering_platforms=("tpu",))`
走一遍 Pallas 的 TPU 降级（Mosaic），块形状违反规则时在这里就报错。规则：块形状的最后两维
要分别能被 8 和 128 整除，或者等于整个数组对应的维度。

You can check that a kernel compiles for TPU without a TPU: `jax.jit(f).trace(x).lower(
lowering_platforms=("tpu",))` runs Pallas's TPU lowering (Mosaic), which rejects illegal block
shapes right there. The rule: the last two dims of a block must be divisible by 8 and 128
respectively, or equal the array's dims.
"""

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from jaxkoans import __  # noqa: F401  (the koans' blanks)


def _double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def _tiled_double(shape, block):
    """编译用（没有 interpret=True）的分块内核。/ A tiled kernel meant for compilation."""
    spec = pl.BlockSpec(block, lambda i, j: (i, j))
    return pl.pallas_call(
        _double_kernel,
        out_shape=jax.ShapeDtypeStruct(shape, jnp.float32),
        grid=(pl.cdiv(shape[0], block[0]), pl.cdiv(shape[1], block[1])),
        in_specs=[spec],
        out_specs=spec,
    )


def _lower_for_tpu(shape, block):
    x = jax.ShapeDtypeStruct(shape, jnp.float32)
    return jax.jit(_tiled_double(shape, block)).trace(x).lower(lowering_platforms=("tpu",))


def test_legal_block_lowers_to_a_tpu_custom_call():
    """合法的块 (8, 128) 在 CPU 机器上就能降级为 TPU 程序：内核成为一个 tpu_custom_call。
    A legal (8, 128) block lowers to a TPU program on this CPU machine: the kernel becomes a
    tpu_custom_call.
    """
    x = jax.ShapeDtypeStruct((256, 512), jnp.float32)
    lowered = jax.jit(_tiled_double((256, 512), (8, 128))).trace(x).lower(lowering_platforms=("tpu",))
    assert "tpu_custom_call" in lowered.as_text()


def test_illegal_block_fails_with_the_block_shape_rule():
    """块 (4, 128) 的倒数第二维 4 不能被 8 整除，也不等于数组的 256：TPU 降级报错并说明规则。
    A (4, 128) block: 4 is not divisible by 8 and not the array's 256, so the TPU lowering fails
    and states the rule.
    """
    with pytest.raises(ValueError) as info:
        _lower_for_tpu((256, 512), (4, 128))
    assert "divisible by 8 and 128" in str(info.value)


def test_which_block_shapes_lower_for_tpu():
    """对每个 (数组形状, 块形状) 预测 TPU 降级是否成功：整除 (8, 128) 或等于整个数组的维度都行。
    Predict for each (array shape, block shape) whether the TPU lowering succeeds: divisible by
    (8, 128), or equal to the array's dims, both qualify.
    """
    cases = [
        ((256, 512), (128, 256)),
        ((256, 512), (8, 100)),
        ((20, 300), (20, 300)),  # odd sizes, but the whole array
        ((24, 300), (8, 300)),  # rows divisible by 8, columns the whole width
        ((24, 300), (24, 128)),
        ((24, 256), (12, 256)),
    ]
    lowers = []
    for shape, block in cases:
        try:
            _lower_for_tpu(shape, block)
            lowers.append(True)
        except ValueError as err:
            assert "divisible by 8 and 128" in str(err)
            lowers.append(False)
    assert lowers == [True, False, True, True, True, False]
