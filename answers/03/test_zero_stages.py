"""03 · ZeRO-1、2、3：量出每个设备存了什么 / ZeRO-1, 2 and 3: measuring what each device stores.

数据并行（DDP）时每个设备都存着整份参数、整份优化器状态，并在每一步得到整份（全归约后的）梯度。
ZeRO 按阶段把它们沿数据并行的设备切开：ZeRO-1 切优化器状态，ZeRO-2 再切梯度，ZeRO-3 再切参数。
本文件里的四个训练步骤都是 shard_map 里手写的同一步 Adam（不做偏差修正），模型是 2 层
(128, 128) 的 tanh 网络，批次沿 "d" 切给 8 个设备。量法：编译后的 `memory_analysis()`
（每个设备的字节数，XLA:CPU 上 8 个模拟设备）和 HLO 里归约梯度的集合通信。

In data parallelism (DDP) every device stores the whole parameters and the whole optimizer
state, and receives the whole (all-reduced) gradient every step. ZeRO splits them over the
data-parallel devices by stages: ZeRO-1 splits the optimizer state, ZeRO-2 the gradients as
well, ZeRO-3 the parameters too. The four training steps of this file are the same Adam step
(without bias correction) written by hand inside shard_map; the model is 2 tanh layers of
(128, 128), the batch split over 8 devices along "d". Measured with the compiled program's
`memory_analysis()` (bytes per device, XLA:CPU's 8 simulated devices) and with the
collectives that reduce the gradients in the HLO.
"""

import functools
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

N, LAYERS, D, BATCH = 8, 2, 128, 64
PARAM_BYTES = LAYERS * D * D * 4  # 整个模型的参数（float32）/ the whole model's parameters


def loss(ws, x, y):
    h = x
    for w in ws:
        h = jnp.tanh(h @ w)
    return ((h - y) ** 2).mean()


def adam(w, g, m, v):
    """一步 Adam，逐元素（所以对一块和对整个矩阵都一样）。/ One Adam step, elementwise."""
    m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
    return w - 1e-3 * m / (jnp.sqrt(v) + 1e-8), m, v


def own_rows(a):
    """本设备的那 1/N 行。/ This device's 1/N of the rows."""
    rows = a.shape[0] // N
    return lax.dynamic_slice_in_dim(a, lax.axis_index("d") * rows, rows, 0)


def ddp(ws, ms, vs, x, y):
    grads = [lax.pmean(g, "d") for g in jax.grad(loss)(ws, x, y)]
    return tuple(zip(*map(adam, ws, grads, ms, vs), strict=True))


def zero1(ws, ms, vs, x, y):
    grads = [own_rows(lax.pmean(g, "d")) for g in jax.grad(loss)(ws, x, y)]
    new_ws, ms, vs = zip(*map(adam, map(own_rows, ws), grads, ms, vs), strict=True)
    return tuple(lax.all_gather(w, "d", tiled=True) for w in new_ws), ms, vs


def zero2(ws, ms, vs, x, y):
    grads = [lax.psum_scatter(g, "d", tiled=True) / N for g in jax.grad(loss)(ws, x, y)]
    new_ws, ms, vs = zip(*map(adam, map(own_rows, ws), grads, ms, vs), strict=True)
    return tuple(lax.all_gather(w, "d", tiled=True) for w in new_ws), ms, vs


def zero3(ws, ms, vs, x, y):
    gather = lambda ws: [lax.all_gather(w, "d", tiled=True) for w in ws]  # noqa: E731
    grads = [g / N for g in jax.grad(lambda ws: loss(gather(ws), x, y))(ws)]
    return tuple(zip(*map(adam, ws, grads, ms, vs), strict=True))


# 每一步的 (参数, 优化器状态) 的切法；批次总是 P("d")。
# Each step's layout of (parameters, optimizer state); the batch is always P("d").
STAGES = {"ddp": (ddp, P(), P()), "zero1": (zero1, P(), P("d"))}
STAGES |= {"zero2": (zero2, P(), P("d")), "zero3": (zero3, P("d"), P("d"))}


@functools.cache
def compiled_step(name):
    """编译好的 jit(shard_map(步骤))（check_vma=False：all_gather 的结果在每个设备上都一样，
    但它的类型说沿 "d" varying），和它的参数类型。
    The compiled jit(shard_map(step)) (check_vma=False: all_gather's result is the same on
    every device, though its type says it varies along "d"), with its argument types."""
    step, param_spec, state_spec = STAGES[name]
    mesh = jax.make_mesh((N,), ("d",))
    specs = ((param_spec,) * LAYERS, (state_spec,) * LAYERS, (state_spec,) * LAYERS)
    sharded = jax.shard_map(
        step, mesh=mesh, in_specs=(*specs, P("d"), P("d")), out_specs=specs, check_vma=False
    )
    typed = lambda spec, shape: jax.ShapeDtypeStruct(  # noqa: E731
        shape, jnp.float32, sharding=NamedSharding(mesh, spec)
    )
    args = jax.tree.map(lambda s: typed(s, (D, D)), specs, is_leaf=lambda s: isinstance(s, P))
    args = (*args, typed(P("d"), (BATCH, D)), typed(P("d"), (BATCH, D)))
    return jax.jit(sharded).lower(*args).compile(), args


def starting_point():
    """参数、零初始的 m 和 v、一批数据（NumPy 生成）。/ Parameters, zero m and v, a batch."""
    rng = np.random.default_rng(0)
    ws = tuple(rng.standard_normal((D, D), dtype=np.float32) / np.sqrt(D) for _ in range(LAYERS))
    zeros = tuple(np.zeros((D, D), np.float32) for _ in range(LAYERS))
    x, y = (rng.standard_normal((BATCH, D), dtype=np.float32) for _ in range(2))
    return ws, zeros, zeros, x, y


@jax.jit
def unsharded_step(ws, ms, vs, x, y):
    """不切分的同一步。/ The same step, unsharded."""
    return tuple(zip(*map(adam, ws, jax.grad(loss)(ws, x, y), ms, vs), strict=True))


def bytes_of(hlo_type):
    """HLO 类型（如 f32[16,128]）的字节数。/ The bytes of an HLO type such as f32[16,128]."""
    dims = re.fullmatch(r"f32\[([\d,]*)\]", hlo_type).group(1)
    return 4 * int(np.prod([int(n) for n in dims.split(",") if n]))


# ---- koans ------------------------------------------------------------------------------


def test_what_each_device_stores_between_steps():
    """四个步骤算出的新参数、新的 m 和 v 都和不切分的同一步 Adam 一样：ZeRO 只改谁存什么，
    不改算出什么。每个设备在两步之间存着参数和优化器状态（m、v 各一份与参数同形）：它们是
    编译后程序的参数，`memory_analysis().argument_size_in_bytes`（每个设备）减去本设备那块
    批次，就是它们的字节数。用整个模型的参数字节数 PARAM_BYTES 和设备数 N 写出每个阶段的量。
    The four steps compute the same new parameters, m and v as the unsharded Adam step: ZeRO
    changes who stores what, not what is computed. Between steps each device stores the
    parameters and the optimizer state (m and v, each shaped like the parameters): they are the
    compiled program's arguments, and
    `memory_analysis().argument_size_in_bytes` (per device) less this device's block of the
    batch is their bytes. Write each stage's figure with the whole model's parameter bytes
    PARAM_BYTES and the device count N.
    """
    start = starting_point()
    expected = unsharded_step(*start)
    batch_bytes = 2 * (BATCH // N) * D * 4  # x 和 y 在本设备的块 / this device's x and y
    stored = {}
    for name in STAGES:
        compiled, args = compiled_step(name)
        placed = jax.tree.map(lambda a, t: jax.device_put(a, t.sharding), start, args)
        for got, want in zip(
            jax.tree.leaves(compiled(*placed)), jax.tree.leaves(expected), strict=True
        ):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        stored[name] = compiled.memory_analysis().argument_size_in_bytes - batch_bytes
    assert stored["ddp"] == 3 * PARAM_BYTES
    assert stored["zero1"] == PARAM_BYTES + 2 * PARAM_BYTES // N
    assert stored["zero2"] == PARAM_BYTES + 2 * PARAM_BYTES // N
    assert stored["zero3"] == 3 * PARAM_BYTES // N


def test_what_gradient_each_device_receives():
    """梯度在每一步里算出来、归约、用掉：HLO 里归约它的集合通信（all-reduce 或
    reduce-scatter）的结果加起来有多少字节，就是每个设备收到的梯度（用 PARAM_BYTES 和 N
    写出）。再看 `memory_analysis()` 的临时内存：ZeRO-1 的临时内存不少于它收到的梯度，ZeRO-2
    的比它收到的那块梯度还少。
    The gradient is computed, reduced and used up within each step: the bytes of the results of
    the HLO collectives that reduce it (all-reduce or reduce-scatter), added up, are the
    gradient each device receives (write them with PARAM_BYTES and N). Then
    `memory_analysis()`'s temporary bytes: ZeRO-1's are at least the gradient it receives,
    ZeRO-2's fewer than even the block of the gradient it receives.
    """
    received, temp = {}, {}
    for name in STAGES:
        compiled, _ = compiled_step(name)
        found = collectives(compiled.as_text())
        reductions = found.get("all-reduce", []) + found.get("reduce-scatter", [])
        parts = re.findall(r"f32\[[\d,]*\]", " ".join(reductions))
        received[name] = sum(map(bytes_of, parts))
        temp[name] = compiled.memory_analysis().temp_size_in_bytes
    assert received["ddp"] == PARAM_BYTES
    assert received["zero1"] == PARAM_BYTES
    assert received["zero2"] == PARAM_BYTES // N
    assert received["zero3"] == PARAM_BYTES // N
    assert temp["zero1"] >= received["zero1"]
    assert temp["zero2"] < received["zero2"]
