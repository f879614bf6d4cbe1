"""08 · 综合四：种子生成的模型在哪一层悄悄复制 / capstone four: where a model drawn from a seed quietly replicates.

一个架构搜索按种子生成序列编码器：输入是按时间排的序列 x (T, B, D)（时间在前，批次在中间），
批次 B 沿 8 个 CPU 设备的 "data" 轴切开；LAYERS 层，第 0 层总是矩阵乘加 tanh，其余每层从几种
做法里随机挑一种，权重也是随机的。结果全对，可某些种子的模型让 XLA 从某一层起把整批收齐、
每个设备都做整批的计算；哪一层，取决于种子抽到的层。你拿到的只有模型本身
（model(h, after=None)：每算完第 k 层就调用 after(k, h)）和数据，读源码说不出答案，闭包也不许
读。要用工具：`jax.debug.inspect_array_sharding` 写在 jit 里面，编译时告诉你 XLA 给每个中间值
定的分片；编译后 HLO 里的 all-gather 说出收齐了几次。

An architecture search generates sequence encoders from a seed: the input is time-major
sequences x (T, B, D) (time first, the batch in the middle), the batch B split along the "data"
axis of 8 CPU devices; LAYERS layers, layer 0 always a matmul and tanh, every other layer drawn
from a few kinds, with random weights too. The results are right, yet the model of some seeds
makes XLA gather the whole batch from some layer on, every device doing the whole batch's work;
which layer depends on the layers the seed draws. All you get is the model
(model(h, after=None): after(k, h) is called once layer k is computed) and the data; reading the
source does not give the answer, and reading the closure is refused. Use the tools:
`jax.debug.inspect_array_sharding` written inside jit tells you, at compile time, the sharding
XLA gives each intermediate; the all-gathers in the compiled HLO say how often it gathered.
"""

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


def make_model(seed):
    """按种子抽出 LAYERS 层和一批数据 x (T, B, D)（NumPy）。返回 (model, x)。
    Draw LAYERS layers and a batch x (T, B, D) (NumPy) from the seed. Returns (model, x).
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

    return model, rng.normal(size=(T, B, D)).astype(np.float32)


def batch_split(x):
    """x 的批次维沿 "data" 切开放到 8 个设备上。Place x with its batch axis split along "data"."""
    mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
    return jax.device_put(x, NamedSharding(mesh, P(None, "data")))


# ---- 你来实现 / your code ---------------------------------------------------------------


def first_replicated_layer(model, x):
    """x 已经沿批次切开。返回编译后的 jax.jit(model) 里第一个输出被完全复制
    （sharding.is_fully_replicated）的层的下标 k；没有这样的层时返回 None。
    - 在 jit 里的 after(k, h) 中调用 jax.debug.inspect_array_sharding(h, callback=...)：
      编译时（jax.jit(...).lower(x).compile()）callback 拿到 XLA 给这个中间值定的分片。
    - 大约 8 行。
    x is split along the batch already. Return the index k of the first layer whose output the
    compiled jax.jit(model) fully replicates (sharding.is_fully_replicated); None when no layer
    does.
    - Call jax.debug.inspect_array_sharding(h, callback=...) inside after(k, h), under jit: at
      compile time (jax.jit(...).lower(x).compile()) callback receives the sharding XLA gives
      that intermediate.
    - About 8 lines.
    """
    seen = {}

    def after(k, h):
        jax.debug.inspect_array_sharding(h, callback=lambda s: seen.__setitem__(k, s))

    jax.jit(lambda h: model(h, after=after)).lower(x).compile()
    return next((k for k in sorted(seen) if seen[k].is_fully_replicated), None)


# ---- 检查 / checks ----------------------------------------------------------------------


def known_answer(seed):
    """另一个工具得出的答案：把每一层的输出都作为 jit 的输出返回，读它们的 .sharding。
    The answer by another tool: return every layer's output from the jit and read their
    .sharding."""
    model, x = make_model(seed)

    def every_layer(h):
        outputs = []
        model(h, after=lambda k, v: outputs.append(v))
        return outputs

    outputs = jax.jit(every_layer)(batch_split(x))
    return next((k for k, o in enumerate(outputs) if o.sharding.is_fully_replicated), None)


@pytest.mark.parametrize("seed", [1, 12, 0, 3])
def test_inspect_array_sharding_names_the_layer_that_replicates(seed):
    """✍️ 写 first_replicated_layer。四个种子的模型：三个从某一层起悄悄复制（那一层在哪，各不
    相同），一个一直切着。结果的值与在一个设备上算的一样，看值什么也发现不了；你的函数只拿到
    模型和数据，要说出和另一个工具（每层的输出都返回出来，读它们的分片）一样的答案。
    Write first_replicated_layer. Models of four seeds: three quietly replicate from some layer
    on (a different layer for each), one stays split. The values equal those computed on one
    device, so they show nothing; your function gets only the model and the data, and must give
    the answer another tool gives (every layer's output returned, its sharding read).
    """
    model, x = make_model(seed)
    assert first_replicated_layer(model, batch_split(x)) == known_answer(seed)


def test_the_compiled_model_gathers_once():
    """种子 4 的模型有三层会逼 XLA 收齐整批（第 2、3、5 层是同一种做法）。编译后的程序里有几条
    all-gather？先预测，再自己读 jax.jit(model).lower(x).compile().as_text()。
    The model of seed 4 has three layers that force XLA to gather the whole batch (layers 2, 3
    and 5 are of the same kind). How many all-gathers does the compiled program hold? Predict,
    then read jax.jit(model).lower(x).compile().as_text() yourself.
    """
    model, x = make_model(4)
    placed = batch_split(x)
    found = collectives(jax.jit(model).lower(placed).compile().as_text())
    assert len(found.get("all-gather", [])) == 1
