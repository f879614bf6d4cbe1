"""07 · 自己写内核 / kernels you write.

每个内核都和一个纯 jnp 参考实现在几种形状上比较；再从 jaxpr 读出 pallas_call 的 grid 和每个
BlockSpec 的块形状，并检查计算真的发生在内核体里（内核外面不许有同样的 jnp 运算）。

Every kernel is compared with a plain jnp reference on several shapes; then the jaxpr gives the
pallas_call's grid and every BlockSpec's block shape, and the work is checked to happen in the
kernel body (the same jnp operation may not appear outside the kernel). The last koan runs the
four kernels in the TPU interpreter (two simulated cores, race detection) and lowers them for
TPU, in float32 and bfloat16.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.extend.core import jaxprs_in_params
from jax.sharding import AbstractDevice, AbstractMesh

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import equations, pallas_call_structure


def _data(shape, seed):
    return jax.random.normal(jax.random.key(seed), shape, jnp.float32)


# ---- 你来实现 / your code ---------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("bm", "bn", "interpret"))
def add_relu(x, y, *, bm, bn, interpret=True):
    """逐元素 relu(x + y)，x、y 形状 [M, N]，按 (bm, bn) 的块切分：grid = (M // bm, N // bn)，
    输入和输出用同一个 BlockSpec，输出的 dtype 是 x 的。pl.pallas_call(..., interpret=interpret)
    （这四个内核都把 interpret 原样交给 pallas_call：最后一个 koan 用 TPU 解释器运行它们，再为 TPU
    降级）。大约 8 行。

    Elementwise relu(x + y) for x, y of shape [M, N], tiled in (bm, bn) blocks: grid =
    (M // bm, N // bn), one BlockSpec for inputs and output, the output in x's dtype.
    pl.pallas_call(..., interpret=interpret) (all four kernels hand interpret on to pallas_call
    as it is: the last koan runs them in the TPU interpreter, then lowers them for TPU). About 8
    lines.
    """

    todo("add_relu: 一个 2 维 grid 的 pallas_call / one pallas_call over a 2-D grid")


@functools.partial(jax.jit, static_argnames=("bm", "bn", "bk", "interpret"))
def matmul(x, y, *, bm, bn, bk, interpret=True):
    """分块矩阵乘 [M, K] @ [K, N]：grid = (M // bm, N // bn, K // bk)，第三个轴沿 K 累加。
    输出块 (i, j) 在 k 的每一步都是同一块：k == 0 时先清零（pl.when），然后每步加上
    x 块 @ y 块。输入可能是 bfloat16：输出总是 float32，矩阵乘写
    preferred_element_type=jnp.float32，在 float32 里累加。interpret=interpret。大约 14 行。

    Tiled matmul [M, K] @ [K, N]: grid = (M // bm, N // bn, K // bk), the third axis
    accumulates over K. Output block (i, j) stays the same block for every k: zero it when
    k == 0 (pl.when), then add x_block @ y_block at each step. The inputs may be bfloat16: the
    output is always float32, and the matmul takes preferred_element_type=jnp.float32, so it
    accumulates in float32. interpret=interpret. About 14 lines.
    """

    todo("matmul: 沿 K 轴累加的分块矩阵乘 / a tiled matmul accumulating over K")


@functools.partial(jax.jit, static_argnames=("bm", "interpret"))
def row_softmax(x, *, bm, interpret=True):
    """沿最后一维的 softmax，x 形状 [M, N]；每个程序处理 bm 整行（块 (bm, N)），grid = (M // bm,)。
    数值稳定：先减去每行的最大值。不要调用 jax.nn.softmax。x 可能是 bfloat16：在内核里先
    astype(jnp.float32) 再算（求和在 float32 里），写出时转回 x 的 dtype。interpret=interpret。
    大约 10 行。

    Softmax over the last axis of x [M, N]; each program takes bm whole rows (block (bm, N)),
    grid = (M // bm,). Stay stable: subtract each row's max first. No jax.nn.softmax. x may be
    bfloat16: inside the kernel astype(jnp.float32) first (the sum in float32), and cast back to
    x's dtype when writing. interpret=interpret. About 10 lines.
    """

    todo("row_softmax: 每个程序处理 bm 整行 / bm whole rows per program")


@functools.partial(jax.jit, static_argnames=("bm", "eps", "interpret"))
def layer_norm(x, gamma, beta, *, bm, eps=1e-5, interpret=True):
    """LayerNorm 沿最后一维：(x - mean) / sqrt(var + eps) * gamma + beta，x [M, N]，gamma 和
    beta [N]。每个程序处理 bm 行；gamma、beta 的块是整个向量（index map 恒为 (0,)）。输入可能是
    bfloat16：在内核里先 astype(jnp.float32) 再求均值和方差，写出时转回 x 的 dtype。
    interpret=interpret。大约 14 行。

    LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta, x [M, N], gamma
    and beta [N]. Each program takes bm rows; gamma and beta come whole (their index map is
    always (0,)). The inputs may be bfloat16: inside the kernel astype(jnp.float32) before the
    mean and variance, and cast back to x's dtype when writing. interpret=interpret. About 14
    lines.
    """

    todo("layer_norm: 每个程序处理 bm 行 / bm rows per program")


# ---- 检查 / checks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "block"), [((8, 16), (4, 8)), ((16, 32), (8, 32)), ((6, 10), (3, 5))]
)
def test_tiled_elementwise_add_relu(shape, block):
    """分块逐元素内核：每个形状都等于 jnp 参考；grid 每块一个程序，三个 Ref 的块都是 (bm, bn)，
    relu 在内核里算。
    A tiled elementwise kernel: equal to the jnp reference on every shape; one program per
    block, (bm, bn) blocks for all three Refs, and the relu computed inside the kernel.
    """
    x, y = _data(shape, 0), _data(shape, 1)
    bm, bn = block
    out = add_relu(x, y, bm=bm, bn=bn)
    np.testing.assert_allclose(out, jax.nn.relu(x + y), rtol=1e-6)
    kernel = pallas_call_structure(functools.partial(add_relu, bm=bm, bn=bn), x, y)
    assert kernel["grid"] == (shape[0] // bm, shape[1] // bn)
    assert kernel["blocks"] == [(bm, bn)] * 3  # x, y, out
    assert set(kernel["outside_ops"]) <= {"jit", "pjit"}  # the relu too is the kernel's work


@pytest.mark.parametrize(
    ("m", "k", "n", "bm", "bk", "bn"),
    [(8, 16, 8, 4, 4, 4), (16, 32, 8, 8, 8, 8), (4, 15, 6, 2, 3, 3)],
)
def test_tiled_matmul_accumulates_over_k(m, k, n, bm, bk, bn):
    """分块矩阵乘：K 轴在 grid 里，x 和 y 的块只覆盖 bk 列 / 行，所以每个输出块必须在 K 的各步
    之间累加（每个例子 K 至少分 3 块，块数各不相同）；结果等于 x @ y，矩阵乘在内核里做。
    A tiled matmul: K is a grid axis and the x and y blocks cover only bk columns / rows, so
    each output block must accumulate across the K steps (every case splits K at least 3 ways,
    not always as many);
    the result equals x @ y, and the product is computed inside the kernel.
    """
    x, y = _data((m, k), 2), _data((k, n), 3)
    out = matmul(x, y, bm=bm, bn=bn, bk=bk)
    np.testing.assert_allclose(out, x @ y, rtol=1e-5, atol=1e-5)
    kernel = pallas_call_structure(functools.partial(matmul, bm=bm, bn=bn, bk=bk), x, y)
    assert kernel["grid"] == (m // bm, n // bn, k // bk)
    assert kernel["blocks"] == [(bm, bk), (bk, bn), (bm, bn)]  # x, y, out
    assert "dot_general" in kernel["kernel_ops"] and "dot_general" not in kernel["outside_ops"]


@pytest.mark.parametrize(("shape", "bm"), [((8, 16), 2), ((6, 128), 3), ((4, 7), 4)])
def test_row_softmax_is_stable(shape, bm):
    """逐行 softmax：等于 jax.nn.softmax；输入加上 1000、或把分数拉开 40 倍也不溢出（因为先减去
    了行最大值）。
    Row softmax: equals jax.nn.softmax, and adding 1000 to the input or spreading the scores 40
    times wider does not overflow (the row max is subtracted first).
    """
    x = _data(shape, 4) * 5
    np.testing.assert_allclose(
        row_softmax(x, bm=bm), jax.nn.softmax(x, axis=-1), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        row_softmax(x + 1000.0, bm=bm), jax.nn.softmax(x, axis=-1), rtol=1e-4, atol=1e-6
    )
    np.testing.assert_allclose(
        row_softmax(x * 40, bm=bm), jax.nn.softmax(x * 40, axis=-1), rtol=1e-4, atol=1e-6
    )
    kernel = pallas_call_structure(functools.partial(row_softmax, bm=bm), x)
    assert kernel["grid"] == (shape[0] // bm,)
    assert kernel["blocks"] == [(bm, shape[1])] * 2  # x, out
    assert set(kernel["outside_ops"]) <= {"jit", "pjit"}  # the max, exp and sum are the kernel's


@pytest.mark.parametrize(
    ("shape", "bm", "eps"), [((8, 32), 4, None), ((6, 10), 2, 4.0), ((3, 128), 3, None)]
)
def test_layer_norm_matches_reference(shape, bm, eps):
    """LayerNorm 内核：等于 jnp 写的参考实现（包括 gamma 和 beta），默认的 eps 和给定的 eps 都对。
    A LayerNorm kernel: equal to a jnp reference, gamma and beta included, with the default eps
    and with an eps passed in.
    """
    x = _data(shape, 5) * 3 + 2
    gamma, beta = _data(shape[-1:], 6), _data(shape[-1:], 7)
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    given = {} if eps is None else {"eps": eps}  # None: the default, 1e-5 / None 即默认的 1e-5
    expected = (x - mean) / jnp.sqrt(var + given.get("eps", 1e-5)) * gamma + beta
    out = layer_norm(x, gamma, beta, bm=bm, **given)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    kernel = pallas_call_structure(functools.partial(layer_norm, bm=bm), x, gamma, beta)
    assert kernel["grid"] == (shape[0] // bm,)
    assert kernel["blocks"] == [
        (bm, shape[1]),
        shape[-1:],
        shape[-1:],
        (bm, shape[1]),
    ]  # x, gamma, beta, out
    assert set(kernel["outside_ops"]) <= {"jit", "pjit"}  # the statistics are the kernel's


# ---- 在 TPU 上 / on a TPU ------------------------------------------------------------------


def _accumulations(fn, *args):
    """内核里（包括 pl.when 的分支里）每个求和、矩阵乘、exp 和 rsqrt 的结果 dtype。/ The result
    dtype of every sum, matmul, exp and rsqrt inside the kernel (pl.when branches included)."""
    (call,) = equations("pallas_call", fn, *args)
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in ("reduce_sum", "dot_general", "exp", "rsqrt"):
                found.append((eqn.primitive.name, eqn.outvars[0].aval.dtype))
            for sub in jaxprs_in_params(eqn.params):
                walk(sub)

    walk(call.params["jaxpr"])
    return found


def _layer_norm_reference(x, gamma, beta):
    x, gamma, beta = (a.astype(jnp.float32) for a in (x, gamma, beta))
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5) * gamma + beta


TPU_CASES = {
    # 内核: (函数, 输入形状, 参考实现, 输出是否保持输入的 dtype)；块都是 TPU 接受的形状
    # kernel: (function, input shapes, reference, whether the output keeps the input dtype);
    # every block a shape a TPU accepts
    "add_relu": (
        functools.partial(add_relu, bm=8, bn=128),
        [(16, 256), (16, 256)],
        lambda x, y: jax.nn.relu(x.astype(jnp.float32) + y.astype(jnp.float32)),
        True,
    ),
    "matmul": (
        functools.partial(matmul, bm=8, bn=128, bk=128),
        [(8, 512), (512, 128)],
        lambda x, y: x.astype(jnp.float32) @ y.astype(jnp.float32),
        False,
    ),
    "row_softmax": (
        functools.partial(row_softmax, bm=8),
        [(16, 128)],
        lambda x: jax.nn.softmax(x.astype(jnp.float32), axis=-1),
        True,
    ),
    "layer_norm": (
        functools.partial(layer_norm, bm=8),
        [(16, 128), (128,), (128,)],
        _layer_norm_reference,
        True,
    ),
}


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("name", list(TPU_CASES))
def test_the_kernels_run_in_the_tpu_interpreter_and_lower_for_tpu(name, dtype):
    """（先写好四个内核。）在 TPU 合法的块形状上：TPU 解释器（两个模拟的核、竞争检测）运行每个内核，
    结果等于参考实现，没有竞争；输出的 dtype 对（matmul 总是 float32，其余和输入一样）；内核里每个
    求和、矩阵乘、exp 和 rsqrt 都在 float32 里算（bfloat16 输入也一样）；它为 TPU v5 lite 降级成一个
    tpu_custom_call。
    (Write the four kernels first.) At block shapes a TPU accepts: the TPU interpreter (two
    simulated cores, race detection) runs each kernel to the reference's values with no race;
    the output dtype is right (always float32 for matmul, the input's for the others); every
    sum, matmul, exp and rsqrt inside the kernel is computed in float32 (bfloat16 inputs too);
    and it lowers for a TPU v5 lite to one tpu_custom_call.
    """
    fn, shapes, reference, keeps_dtype = TPU_CASES[name]
    args = [(_data(shape, seed) * 5).astype(dtype) for seed, shape in enumerate(shapes)]
    params = pltpu.InterpretParams(detect_races=True, num_cores_or_threads=2, random_seed=0)
    try:
        out = fn(*args, interpret=params)
    finally:
        pltpu.reset_tpu_interpret_mode_state()
    assert out.dtype == (dtype if keeps_dtype else jnp.float32)
    rtol, atol = (1e-5, 1e-3) if dtype == jnp.float32 else (3e-2, 3e-2)
    np.testing.assert_allclose(out.astype(jnp.float32), reference(*args), rtol=rtol, atol=atol)

    accumulations = _accumulations(fn, *args)
    if name != "add_relu":
        assert accumulations, "内核里没有求和或矩阵乘 / no sum or matmul inside the kernel"
    assert all(acc_dtype == jnp.float32 for _, acc_dtype in accumulations), accumulations

    device = AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=device)):
        lowered = (
            jax.jit(functools.partial(fn, interpret=False))
            .trace(*specs)
            .lower(lowering_platforms=("tpu",))
        )
    assert lowered.as_text().count("tpu_custom_call") == 1
