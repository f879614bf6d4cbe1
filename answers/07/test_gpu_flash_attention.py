"""07 · GPU 上的分块注意力（Triton）/ flash attention for GPU (Triton).

test_flash_attention.py 的内核是为 TPU 写的：键块是 grid 的第二个轴（"arbitrary"，按顺序），
累加器在 VMEM scratch 里跨 grid 步保留。GPU 上的程序实例同时运行，没有“按顺序的轴”：每个
程序实例独占一个输出块，在内核里用循环（jax.lax.fori_loop）走完所有键块，m、l、acc 是循环的
carry（留在寄存器里），没有 scratch。这台 CPU 上能做两件事：interpret=True 运行它，用一个
H100 的 AbstractMesh 为 CUDA 降级（Triton 后端，test_hardware.py），然后读降级后的 Triton IR。

test_flash_attention.py's kernel is written for TPU: the key blocks are the grid's second axis
("arbitrary", in order), and the accumulators persist across grid steps in VMEM scratch. GPU
program instances run at the same time, with no "in order" axis: each program instance owns one
output block and walks all the key blocks in a loop inside the kernel (jax.lax.fori_loop), m, l
and acc being the loop's carry (kept in registers), with no scratch. On this CPU two things can
be done: run it with interpret=True, and lower it for CUDA with an H100 AbstractMesh (the Triton
backend, test_hardware.py), then read the lowered Triton IR.
"""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton
from jax.extend.core import jaxprs_in_params
from jax.extend.mlir import ir
from jax.sharding import AbstractDevice, AbstractMesh

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import equations, pallas_call_structure


def reference_attention(q, k, v):
    """softmax(q kᵀ / √d) v，在 float32 里算。/ softmax(q kᵀ / √d) v, computed in float32."""
    q, k, v = (a.astype(jnp.float32) for a in (q, k, v))
    scores = q @ k.T / jnp.sqrt(jnp.float32(q.shape[-1]))
    return jax.nn.softmax(scores, axis=-1) @ v


def _data(shape, seed, scale=1.0):
    return scale * jax.random.normal(jax.random.key(seed), shape, jnp.float32)


def gpu_flash_attention_forward(q, k, v, *, bq, bk, interpret=True):
    """q [Lq, D]、k 和 v [Lk, D] 的注意力，为 GPU 分块：
    - grid = (Lq // bq,)：每个程序实例算 bq 个查询的输出块 (bq, D)；
    - q 和输出的块是 (bq, D)，随程序号移动；k 和 v 的块是整个 (Lk, D)（index map 总是 (0, 0)），
      内核里每一步只读其中 bk 行：k_ref[pl.ds(j * bk, bk), :]；
    - jax.lax.fori_loop(0, Lk // bk, ...) 走过键块，carry 是 (m, l, acc)：每行的最大分数
      (bq, 1)、exp 之和 (bq, 1)、加权的 v 之和 (bq, D)，都是 float32；在线 softmax 和
      test_flash_attention.py 一样（新的最大值出现时旧的 l、acc 乘 exp(m_旧 - m_新)）；
    - 两个 jnp.dot 都写 preferred_element_type=jnp.float32（输入可能是 bfloat16）；p 乘 v 之前
      转回 v 的 dtype；循环结束后 (acc / l).astype(o_ref.dtype) 写进输出；
    - 没有 scratch_shapes，也没有 dimension_semantics；
      compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=2)；interpret=interpret。
    大约 25 行。

    Attention of q [Lq, D] over k and v [Lk, D], blocked for GPU:
    - grid = (Lq // bq,): each program instance computes the output block (bq, D) of bq queries;
    - q's and the output's blocks are (bq, D), moving with the program id; k's and v's are the
      whole (Lk, D) (the index map always (0, 0)), of which each step reads bk rows inside the
      kernel: k_ref[pl.ds(j * bk, bk), :];
    - jax.lax.fori_loop(0, Lk // bk, ...) walks the key blocks with the carry (m, l, acc): each
      row's max score (bq, 1), its sum of exps (bq, 1) and the weighted sum of values (bq, D),
      all float32; the online softmax as in test_flash_attention.py (when a new max appears the
      old l and acc are multiplied by exp(m_old - m_new));
    - both jnp.dot calls take preferred_element_type=jnp.float32 (the inputs may be bfloat16);
      cast p back to v's dtype before multiplying it by v; after the loop write
      (acc / l).astype(o_ref.dtype) to the output;
    - no scratch_shapes and no dimension_semantics;
      compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=2); interpret=interpret.
    About 25 lines.
    """
    lq, d = q.shape
    lk = k.shape[0]

    def kernel(q_ref, k_ref, v_ref, o_ref):
        q_block = q_ref[...]

        def step(j, carry):
            m_prev, l_prev, acc = carry
            k_block = k_ref[pl.ds(j * bk, bk), :]
            v_block = v_ref[pl.ds(j * bk, bk), :]
            s = jnp.dot(q_block, k_block.T, preferred_element_type=jnp.float32) / jnp.sqrt(
                jnp.float32(d)
            )
            m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1, keepdims=True))
            p = jnp.exp(s - m_new)
            alpha = jnp.exp(m_prev - m_new)
            l_new = alpha * l_prev + jnp.sum(p, axis=-1, keepdims=True)
            acc = alpha * acc + jnp.dot(
                p.astype(v_block.dtype), v_block, preferred_element_type=jnp.float32
            )
            return m_new, l_new, acc

        init = (
            jnp.full((bq, 1), -jnp.inf, jnp.float32),
            jnp.zeros((bq, 1), jnp.float32),
            jnp.zeros((bq, d), jnp.float32),
        )
        _, l_final, acc = jax.lax.fori_loop(0, lk // bk, step, init)
        o_ref[...] = (acc / l_final).astype(o_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq,),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i: (i, 0)),
            pl.BlockSpec((lk, d), lambda i: (0, 0)),
            pl.BlockSpec((lk, d), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i: (i, 0)),
        compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=2),
        interpret=interpret,
    )(q, k, v)


def _h100_mesh():
    device = AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None, platform="cuda")
    return AbstractMesh((1,), ("x",), abstract_device=device)


def _lowered_for_cuda(shapes, dtype, *, bq, bk):
    """gpu_flash_attention_forward(interpret=False) 为一块 H100 降级：(custom_call 的配置,
    它带的 Triton IR 的文本)。/ gpu_flash_attention_forward(interpret=False) lowered for an
    H100: (the custom_call's config, the text of the Triton IR it carries)."""
    f = jax.jit(functools.partial(gpu_flash_attention_forward, bq=bq, bk=bk, interpret=False))
    args = [jax.ShapeDtypeStruct(shape, dtype) for shape in shapes]
    with (
        jax.sharding.use_abstract_mesh(_h100_mesh()),
        pytest.warns(DeprecationWarning, match="Triton backend is deprecated"),
    ):
        module = f.trace(*args).lower(lowering_platforms=("cuda",)).compiler_ir("stablehlo")
    found = []

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name == "stablehlo.custom_call":
                        found.append(inner)
                    walk(inner.operation)

    walk(module.operation)
    [call] = found
    assert ir.StringAttr(call.attributes["call_target_name"]).value == "__gpu$xla.gpu.triton"
    config = ir.DictAttr(call.attributes["mhlo.backend_config"])
    with module.context as context:
        context.allow_unregistered_dialects = True  # tt.* ops
        text = str(ir.Module.parse(ir.StringAttr(config["ir"]).value_bytes))
    return config, text


def _matmul_dtypes(fn, *args):
    """内核里（循环体里也算）每个矩阵乘的结果 dtype。/ The result dtype of every matmul inside
    the kernel (loop bodies included)."""
    (call,) = equations("pallas_call", fn, *args)
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "dot_general":
                found.append(eqn.outvars[0].aval.dtype)
            for sub in jaxprs_in_params(eqn.params):
                walk(sub)

    walk(call.params["jaxpr"])
    return found


SHAPES = [
    # (Lq, Lk, D, bq, bk): 都是 2 的幂（Triton 的规则）/ all powers of two (Triton's rule)
    (32, 128, 16, 16, 32),
    (16, 64, 32, 16, 16),
]


@pytest.mark.parametrize(("lq", "lk", "d", "bq", "bk"), SHAPES)
def test_gpu_flash_attention_loops_over_the_keys_inside_the_kernel(lq, lk, d, bq, bk):
    """✍️ 实现 gpu_flash_attention_forward。检查：interpret=True 下等于参考实现（分数放大 30 倍；
    第一个键块的分数很小、最后一个很大，只用一个固定的最大值平移 softmax 就溢出），
    bfloat16 输入时输出是 bfloat16、与参考相差不到 0.03；结构：grid (Lq // bq,)、块 (bq, D)、
    (Lk, D)、(Lk, D)、(bq, D)，没有 scratch，内核里有循环，bfloat16 输入时两个矩阵乘的结果是
    float32；为 H100 降级（bfloat16）后是一个 Triton custom_call，grid_x = Lq // bq，Triton IR 里
    一个 scf.for 的 carry 是 (bq, 1)、(bq, 1)、(bq, D) 的 float32，两个 tt.dot 都在循环里，输入
    bfloat16、累加 float32。
    Write gpu_flash_attention_forward. Checked: with interpret=True it equals the reference (the
    scores scaled 30 times; the first key block's scores small and the last's large, where a
    softmax shifted by one fixed max overflows), and with bfloat16 inputs the output is bfloat16 and within 0.03 of
    the reference; the structure: the grid (Lq // bq,), blocks (bq, D), (Lk, D), (Lk, D), (bq, D),
    no scratch, a loop in the kernel whose two matmuls give float32 on bfloat16 inputs; lowered
    for an H100 (bfloat16) it is one Triton custom_call with grid_x = Lq // bq, whose Triton IR
    has one scf.for carrying float32 (bq, 1), (bq, 1) and (bq, D), with both tt.dot inside the
    loop, bfloat16 in and float32 accumulated.
    """
    run = jax.jit(functools.partial(gpu_flash_attention_forward, bq=bq, bk=bk))
    q, k, v = _data((lq, d), 0, 30.0), _data((lk, d), 1), _data((lk, d), 2)
    np.testing.assert_allclose(run(q, k, v), reference_attention(q, k, v), rtol=2e-5, atol=2e-5)
    # 第一个键块的分数小、最后一个大：固定的平移会溢出 / the first key block's scores small, the
    # last's large: a softmax shifted by one fixed max overflows
    plain, rising = _data((lq, d), 0), k.at[:bk].multiply(0.1).at[-bk:].multiply(100.0)
    expected = reference_attention(plain, rising, v)
    np.testing.assert_allclose(run(plain, rising, v), expected, rtol=2e-5, atol=2e-5)
    half = [a.astype(jnp.bfloat16) for a in (q, k, v)]
    out = run(*half)
    assert out.dtype == jnp.bfloat16
    assert float(jnp.max(jnp.abs(out.astype(jnp.float32) - reference_attention(*half)))) < 0.03

    kernel = pallas_call_structure(
        functools.partial(gpu_flash_attention_forward, bq=bq, bk=bk), q, k, v
    )
    assert kernel["grid"] == (lq // bq,)
    assert kernel["blocks"] == [(bq, d), (lk, d), (lk, d), (bq, d)]
    assert kernel["scratch"] == []
    assert kernel["kernel_ops"] & {"scan", "while"}, "内核里的循环 / a loop inside the kernel"
    forward = functools.partial(gpu_flash_attention_forward, bq=bq, bk=bk)
    assert _matmul_dtypes(forward, *half) == [jnp.float32, jnp.float32]

    config, text = _lowered_for_cuda([(lq, d), (lk, d), (lk, d)], jnp.bfloat16, bq=bq, bk=bk)
    assert ir.IntegerAttr(config["grid_x"]).value == lq // bq
    loops = re.findall(r"scf\.for .*? -> \((.*?)\)", text)
    assert loops == [f"tensor<{bq}x1xf32>, tensor<{bq}x1xf32>, tensor<{bq}x{d}xf32>"]
    body = text[text.index("scf.for") : text.index("scf.yield")]
    dots = re.findall(r'"tt\.dot"\(.*?: \((.*?)\) -> (tensor<\S+>)', body)
    assert dots == [
        (
            f"tensor<{bq}x{d}xbf16>, tensor<{d}x{bk}xbf16>, tensor<{bq}x{bk}xf32>",
            f"tensor<{bq}x{bk}xf32>",
        ),
        (
            f"tensor<{bq}x{bk}xbf16>, tensor<{bk}x{d}xbf16>, tensor<{bq}x{d}xf32>",
            f"tensor<{bq}x{d}xf32>",
        ),
    ]
    assert text.count('"tt.dot"') == 2
