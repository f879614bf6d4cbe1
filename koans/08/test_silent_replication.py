"""08 · 综合四：只在编译后的程序里复制的层 / capstone four: layers replicated only inside the compiled program.

一个架构搜索按种子生成序列编码器：输入是按时间排的序列 x (T, B, D)（时间在前，批次在中间），
批次 B 沿 8 个 CPU 设备的 "data" 轴切开；LAYERS 层，第 0 层总是矩阵乘加 tanh，其余每层从几种
做法里随机挑一种，权重也是随机的。生产环境的 serve 用 jax.jit 编译整个模型，输出按批次切开
（out_shardings）：值全对，输出的分片也对。可编译后的程序里，有些层的输出在每个设备上都是整批，
每个设备都做整批的计算。是哪几层？你拿到的只有 serve（serve(h, after=None)：在 serve 自己的
jit 里面，每算完第 k 层就调用 after(k, h)）和一批数据，拿不到种子；这些中间值从来不是输出，
jit 是 serve 的，你没法把它们返回出来。读源码说不出答案：分片是 XLA 的分区器对整个程序一起
定的，既不是每一层单独执行（关掉 jit）时的样子，也不是输出显示的样子。要用工具：
`jax.debug.inspect_array_sharding` 写在 jit 里面，编译时告诉你分区器给每个中间值定的分片；
编译后 HLO 里的 all-gather 说出收齐了几次。

An architecture search generates sequence encoders from a seed: the input is time-major
sequences x (T, B, D) (time first, the batch in the middle), the batch B split along the "data"
axis of 8 CPU devices; LAYERS layers, layer 0 always a matmul and tanh, every other layer drawn
from a few kinds, with random weights too. Production's serve compiles the whole model with
jax.jit, its output split along the batch (out_shardings): the values are right, and so is the
output's sharding. Yet inside the compiled program some layers' outputs hold the whole batch on
every device, every device doing the whole batch's work. Which layers? All you get is serve
(serve(h, after=None): inside serve's own jit, after(k, h) is called once layer k is computed)
and a batch, not the seed; those intermediates are never outputs, and the jit is serve's, so
you cannot return them. Reading the source does not give the answer: XLA's partitioner decides
the shardings for the whole program at once, which is neither what each layer does on its own
(jit switched off) nor what the output shows. Use the tools: `jax.debug.inspect_array_sharding`
written inside jit tells you, at compile time, the sharding the partitioner gives each
intermediate; the all-gathers in the compiled HLO say how often it gathered.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives

# ---- 给定代码 / given code -------------------------------------------------------------

T, B, D, LAYERS = 4, 16, 8, 6
KINDS = ("mix", "norm", "center", "time", "flip", "tokens")


def batch_sharding():
    """批次维沿 8 个设备的 "data" 轴切开。The batch axis split along the "data" axis of 8 devices."""
    mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
    return NamedSharding(mesh, P(None, "data"))


def batch_split(x):
    """x 的批次维沿 "data" 切开放到 8 个设备上。Place x with its batch axis split along "data"."""
    return jax.device_put(x, batch_sharding())


def make_batch():
    """生产环境的一批数据 x (T, B, D)（NumPy），与种子无关。
    A batch of production data x (T, B, D) as NumPy, whatever the seed."""
    return np.random.default_rng(2026).normal(size=(T, B, D)).astype(np.float32)


def make_serve(seed):
    """按种子抽出 LAYERS 层，返回生产环境的 serve(h, after=None)：jax.jit 编译整个模型，输出按
    批次切开；after(k, h) 在这个 jit 里面、第 k 层算完时被调用。
    Draw LAYERS layers from the seed and return production's serve(h, after=None): the whole
    model compiled by jax.jit, its output split along the batch; after(k, h) is called inside
    that jit once layer k is computed.
    """
    rng = np.random.default_rng(seed)
    kinds = ["mix"] + [KINDS[i] for i in rng.integers(len(KINDS), size=LAYERS - 1)]
    weights = (rng.normal(size=(LAYERS, D, D)) / np.sqrt(D)).astype(np.float32)

    def layer(kind, w, h):
        if kind == "mix":
            return jnp.tanh(h @ w)
        if kind == "norm":
            return h - h.mean(-1, keepdims=True)
        if kind == "center":
            return h - h.mean(1, keepdims=True)
        if kind == "time":
            return jnp.cumsum(h, axis=0) / T
        if kind == "flip":
            return h[:, ::-1]
        t, b, d = h.shape  # "tokens": one row per token / 每个 token 一行
        return jnp.tanh(h.reshape(t * b, d) @ w).reshape(t, b, d)

    def model(h, after=None):
        for k in range(LAYERS):
            h = layer(kinds[k], weights[k], h)
            if after is not None:
                after(k, h)
        return h

    def serve(h, after=None):
        jitted = jax.jit(functools.partial(model, after=after), out_shardings=batch_sharding())
        return jitted(h)

    return serve


def refusing_the_generator(monkeypatch):
    """你的函数运行期间，make_serve 一被调用就报错：生产环境里没有种子，也没有生成器。
    While your function runs, calling make_serve fails: production has no seed and no
    generator."""

    def refuse(*args, **kwargs):
        raise AssertionError("the generator was called / 调用了生成器")

    monkeypatch.setitem(globals(), "make_serve", refuse)


# ---- 你来实现 / your code ---------------------------------------------------------------


def replicated_layers(serve, x):
    """x 已经沿批次切开。返回一个元组：编译后的 serve 里，输出被完全复制
    （sharding.is_fully_replicated）的那些层的下标 k，从小到大；没有这样的层时返回 ()。
    - 在 after(k, h) 里调用 jax.debug.inspect_array_sharding(h, callback=...)：serve 编译它的
      jit 时，callback 拿到分区器给这个中间值定的分片。
    - 大约 7 行。
    x is split along the batch already. Return a tuple of the indices k, in increasing order,
    of the layers whose output the compiled serve fully replicates (sharding.is_fully_replicated);
    () when no layer's is.
    - Call jax.debug.inspect_array_sharding(h, callback=...) inside after(k, h): when serve
      compiles its jit, callback receives the sharding the partitioner gives that intermediate.
    - About 7 lines.
    """
    todo("replicated_layers: inspect_array_sharding inside serve's jit / 在 serve 的 jit 里看分片")


# ---- 检查 / checks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seed", "expected"),
    [(7, (1, 2, 3)), (12, (3,)), (4, (2, 3, 4)), (0, ()), (3, ())],
)
def test_inspect_array_sharding_names_the_replicated_layers(seed, expected, monkeypatch):
    """✍️ 写 replicated_layers。五个种子的模型：三个在程序中间复制了几层（哪几层，各不相同），
    两个一层也没有复制，其中一个的某一层单独执行时会复制。每个模型的值都与在一个设备上算的一样，
    输出也都按批次切开，看值和输出什么也发现不了；你的函数只拿到 serve 和数据，要说出编译后的
    程序里被完全复制的那几层（期望值是固定 JAX 版本上分区器的选择）。
    Write replicated_layers. Models of five seeds: three replicate a few layers in the middle of
    the program (different layers for each), two replicate none, one of those having a layer
    that replicates when run on its own. Every model's values equal those computed on one
    device and every output is split along the batch, so values and outputs show nothing; your
    function gets only serve and the data, and must name the layers the compiled program fully
    replicates (the expected values are the partitioner's choice on the pinned JAX).
    """
    serve, x = make_serve(seed), batch_split(make_batch())
    refusing_the_generator(monkeypatch)
    found = replicated_layers(serve, x)
    monkeypatch.undo()
    assert found == expected


def test_a_split_layer_may_gather_inside():
    """种子 0 的模型：第 1 层单独执行时会把整批收齐，可编译后的程序里，上一个测试说每一层的输出
    都是切开的。编译后的程序里有几条 all-gather？先预测，再自己读
    jax.jit(serve).lower(x).compile().as_text()。
    The model of seed 0: its layer 1 gathers the whole batch when run on its own, yet the
    previous test says every layer's output in the compiled program is split. How many
    all-gathers does the compiled program hold? Predict, then read
    jax.jit(serve).lower(x).compile().as_text() yourself.
    """
    serve = make_serve(0)
    found = collectives(jax.jit(serve).lower(batch_split(make_batch())).compile().as_text())
    assert len(found.get("all-gather", [])) == __
