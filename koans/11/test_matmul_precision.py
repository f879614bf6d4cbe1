"""11 · float32 科学计算的矩阵乘法精度 / matmul precision for float32 science.

本章其余部分都在 float64 下运行；大模型和 GPU 上的科学计算却常用 float32。float32 的矩阵乘法
有一个精度设置：每个调用的 precision=（lax.Precision 的 DEFAULT、HIGH、HIGHEST，或一个
lax.DotAlgorithmPreset），以及整段代码的 jax.default_matmul_precision(…)。lax.Precision 的
文档说它在 TPU 和 GPU 上决定乘积用几遍 bfloat16 或是否用 tensorfloat32。在 CPU 上呢？本文件
在 CPU 上量一量：结果的每一位、程序里记下了什么、输入的 dtype 带来多大的误差。

The rest of this chapter runs in float64; science with large models and on GPUs often runs in
float32. A float32 matmul has a precision setting: precision= per call (lax.Precision's
DEFAULT, HIGH, HIGHEST, or a lax.DotAlgorithmPreset) and jax.default_matmul_precision(…) for a
block of code. lax.Precision's documentation says that on TPU and GPU it decides how many
bfloat16 passes a product takes or whether tensorfloat32 is used. And on a CPU? This file
measures it there: every bit of the result, what the program records, and how large an error
the inputs' dtype brings.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------


def operands():
    """两个 float32 矩阵（NumPy），64×256 和 256×64。/ Two float32 matrices (NumPy)."""
    rng = np.random.default_rng(0)
    return rng.normal(size=(64, 256)).astype(np.float32), rng.normal(size=(256, 64)).astype(np.float32)


def relative_error(c, a, b):
    """与 float64 乘积相比的相对误差（Frobenius 范数）。/ Relative error against the float64
    product (Frobenius norm)."""
    exact = a.astype(np.float64) @ b.astype(np.float64)
    return np.linalg.norm(np.asarray(c, np.float64) - exact) / np.linalg.norm(exact)


def matmul(a, b, precision=None):
    return np.asarray(jax.jit(lambda a, b: jnp.matmul(a, b, precision=precision))(a, b))


def recorded_precision(a, b):
    """降级（lower）后的 StableHLO 里 dot_general 记下的精度名。/ The precision name the
    lowered StableHLO's dot_general records."""
    text = jax.jit(jnp.matmul).lower(a, b).as_text()
    return re.search(r"dot_general.*precision = \[(\w+), \w+\]", text).group(1)


# ---- 检查 / checks ----------------------------------------------------------------------


def test_what_the_precision_setting_changes_on_cpu():
    """DEFAULT 和 HIGHEST 的结果逐位比较；一个要求 bfloat16 乘积的算法预设
    （BF16_BF16_F32）呢？再要求 tensorfloat32（TF32_TF32_F32），CPU 又怎么回答？
    Compare DEFAULT and HIGHEST bit for bit; and an algorithm preset asking for bfloat16
    products (BF16_BF16_F32)? Then ask for tensorfloat32 (TF32_TF32_F32): what does the CPU
    answer?
    """
    a, b = operands()
    default = matmul(a, b, lax.Precision.DEFAULT)
    assert np.array_equal(default, matmul(a, b, lax.Precision.HIGHEST)) is __
    assert np.array_equal(default, matmul(a, b, lax.DotAlgorithmPreset.BF16_BF16_F32)) is __
    assert relative_error(default, a, b) < 1e-6
    with raises_exactly(__):
        matmul(a, b, lax.DotAlgorithmPreset.TF32_TF32_F32)


def test_on_cpu_the_dtype_sets_the_precision():
    """在 CPU 上要让乘积真的用 bfloat16，得把输入转成 bfloat16（preferred_element_type 让
    累加仍是 float32）。相对误差大约是 10 的几次方？
    On a CPU, to really multiply in bfloat16, cast the inputs to bfloat16
    (preferred_element_type keeps the accumulation in float32). The relative error is about ten
    to which power?
    """
    a, b = operands()
    c = jnp.matmul(
        jnp.asarray(a, jnp.bfloat16), jnp.asarray(b, jnp.bfloat16), preferred_element_type=jnp.float32
    )
    assert c.dtype == jnp.float32
    error = relative_error(c, a, b)
    print(f"bfloat16 inputs: relative error {error:.2e}")
    assert round(np.log10(error)) == __


def test_the_lowered_program_records_what_was_asked():
    """jax.default_matmul_precision 接受几个名字；每个在降级后的 dot_general 里记成
    DEFAULT、HIGH、HIGHEST 中的哪一个？在 CPU 上编译之后，HLO 的 dot 仍然带着
    operand_precision：程序记下了要求；CPU 的内核是否照办，是第一个 koan 的问题。按
    lax.Precision 的文档，在 GPU 或 TPU 上正是这个记下的名字决定乘积怎么算。
    jax.default_matmul_precision takes several names; which of DEFAULT, HIGH, HIGHEST does
    each become in the lowered dot_general? After compiling for the CPU the HLO dot still carries
    operand_precision: the program records the request; whether the CPU's kernel honours it is
    the first koan's question. On a GPU or TPU, lax.Precision's documentation says, this recorded
    name decides how the products are done.
    """
    a, b = (jnp.asarray(m) for m in operands())
    assert recorded_precision(a, b) == __
    with jax.default_matmul_precision("float32"):
        assert recorded_precision(a, b) == __
        compiled = jax.jit(jnp.matmul).lower(a, b).compile().as_text()
        asked = recorded_precision(a, b).lower()
    assert f"operand_precision={{{asked},{asked}}}" in compiled
    with jax.default_matmul_precision("tensorfloat32"):
        assert recorded_precision(a, b) == __
    with jax.default_matmul_precision("bfloat16"):
        assert recorded_precision(a, b) == __
