"""08 · 综合五：只能检查、不能读源码的程序 / capstone five: a program you can inspect but not read.

一个架构搜索按种子生成模型：8 层，每层从几种做法里随机挑一种（矩阵乘加 tanh、对数、开方、
反正弦、把非有限值换成 0 的“稳健”对数），常数也是随机的；每层包在 jax.named_scope("layerK")
里。你拿到的只有它的 jaxpr（jax.make_jaxpr 的 ClosedJaxpr）和一批数据：某个种子的模型在这批
数据上造出了 NaN，有的一路传到输出，有的被“稳健”的那一层悄悄换成 0，输出全是有限的。哪一层、
哪个原语、哪一行数据？生成器的代码就在下面，可读它说不出答案：答案取决于种子抽到的层和常数，
以及数据一路走下来的值。要用工具去找：读 jaxpr（program.pretty_print(name_stack=True) 在每个
方程旁边标出它所在的层），再像 JAX 自己的解释器那样逐个方程求值，看第一个造出 NaN 的方程。

An architecture search generates models from a seed: 8 layers, each drawn from a few kinds (a
matmul and tanh, a log, a square root, an arcsine, a "robust" log that turns values that are not
finite into 0), with random constants too; each layer sits inside jax.named_scope("layerK").
All you get is its jaxpr (the ClosedJaxpr of jax.make_jaxpr) and a batch: on this batch the
model of some seed makes a NaN, which either flows to the output or is quietly turned into 0 by
a "robust" layer, leaving every output finite. Which layer, which primitive, which row of data?
The generator's code is right below, yet reading it does not give the answer: that depends on
the layers and constants the seed draws and on the values the data takes on the way. Find it
with the tools: read the jaxpr (program.pretty_print(name_stack=True) marks each equation with
its layer), then evaluate it equation by equation as JAX's own interpreters do, and look for the
first equation that makes a NaN.
"""

import re

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import checkify

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------

B, D, LAYERS = 16, 6, 8
KINDS = ("mix", "mix", "log", "sqrt", "asin", "robust_log")


def make_layers(seed):
    """按种子抽出 LAYERS 层（第 0 层总是 mix）和一批数据 x (B, D)。返回 (层的列表, x)。
    Draw LAYERS layers from the seed (layer 0 is always a mix) and a batch x (B, D).
    Returns (the list of layers, x).
    """
    rng = np.random.default_rng(seed)
    layers = []
    for k in range(LAYERS):
        kind = KINDS[rng.integers(len(KINDS))] if k else "mix"
        w = (rng.normal(size=(D, D)) * 1.2 / np.sqrt(D)).astype(np.float32)
        c = np.float32(rng.uniform(0.8, 1.2))

        def layer(h, kind=kind, w=w, c=c):
            if kind == "mix":
                return jnp.tanh(h @ w)
            if kind == "log":
                return jnp.log(h + c)
            if kind == "sqrt":
                return jnp.sqrt(h + c)
            if kind == "asin":
                return jnp.arcsin(h * c)
            y = jnp.log(h + c)  # "robust": what is not finite counts as 0 / 非有限的记作 0
            return lax.select(lax.is_finite(y), y, jnp.zeros_like(y))

        layers.append(layer)
    return layers, rng.normal(size=(B, D)).astype(np.float32)


def make_model(seed):
    """种子生成的模型的 jaxpr 和数据：返回 (program, x)，program 是 jax.make_jaxpr(model)(x)。
    The jaxpr of the seed's model and its data: returns (program, x), program being
    jax.make_jaxpr(model)(x).
    """
    layers, x = make_layers(seed)

    def model(h):
        for k, layer in enumerate(layers):
            with jax.named_scope(f"layer{k}"):
                h = layer(h)
        return h

    return jax.make_jaxpr(model)(x), x


# ---- 你来实现 / your code ---------------------------------------------------------------


def first_nan(program, x):
    """program 是一个平坦的 ClosedJaxpr（没有子程序），x 是它的输入 (B, D)。按顺序对每个方程
    求值，找出第一个输出里有 NaN 的方程，返回 (层名, 原语名, 行号)，例如 ("layer3", "log", 5)：
    层名是这个方程的 name stack（str(eqn.source_info.name_stack)），行号是输出里第一个含 NaN
    的行（第 0 维）。没有 NaN 时返回 None。
    - 环境是一个 {变量: 值} 字典：program.jaxpr.constvars 对应 program.consts，invars 对应 x；
      一个 jax.extend.core.Literal 输入的值在 .val 里。
    - 一个方程的求值：eqn.primitive.bind(*输入的值, **eqn.params)；eqn.primitive.multiple_results
      为真时返回列表。大约 14 行。
    program is a flat ClosedJaxpr (no sub-programs) and x its input (B, D). Evaluate its
    equations in order, find the first whose output holds a NaN, and return (layer, primitive,
    row), e.g. ("layer3", "log", 5): the layer is that equation's name stack
    (str(eqn.source_info.name_stack)), the row the first row (axis 0) of its output that holds a
    NaN. None when no equation makes a NaN.
    - The environment is a {variable: value} dict: program.jaxpr.constvars take program.consts,
      the invars take x; a jax.extend.core.Literal input keeps its value in .val.
    - To evaluate an equation: eqn.primitive.bind(*input values, **eqn.params), which returns a
      list when eqn.primitive.multiple_results is true. About 14 lines.
    """
    todo("first_nan: evaluate the equations in order, find the first NaN / 逐个方程求值")


# ---- 检查 / checks ----------------------------------------------------------------------


def known_answer(seed):
    """由生成器自己的层得出的答案（你拿不到这些层）：逐层用 checkify 的浮点检查，放在按行的
    vmap 里面。/ The answer from the generator's own layers (which you do not get): checkify's
    float checks layer by layer, inside a vmap over the rows."""
    layers, x = make_layers(seed)
    h = jnp.asarray(x)
    for k, layer in enumerate(layers):
        err, h = jax.vmap(checkify.checkify(layer, errors=checkify.float_checks))(h)
        if err.get() is not None:
            found = re.search(r"mapped index (\d+): nan generated by primitive: (\w+)", err.get())
            return f"layer{k}", found[2], int(found[1])
    return None


@pytest.mark.parametrize(
    ("seed", "case"),
    [(3, "flows"), (5, "flows"), (13, "hidden"), (19, "hidden"), (14, "clean")],
)
def test_the_jaxpr_names_the_layer_primitive_and_row_of_the_first_nan(seed, case):
    """✍️ 写 first_nan。五个种子的模型：四个在这批数据上造出 NaN（其中两个被后面“稳健”的层换成
    了 0，输出全是有限的，单看输出什么也发现不了），一个干干净净。你的 first_nan 只拿到 jaxpr 和
    数据，要说出和生成器自己的层逐层检查得出的同一个答案。
    Write first_nan. Models of five seeds: four make a NaN on this batch (two of them have it
    turned into 0 by a later "robust" layer, so every output is finite and the output alone
    shows nothing), and one is clean. Your first_nan gets only the jaxpr and the data, and must
    give the same answer as checking the generator's own layers one by one.
    """
    program, x = make_model(seed)
    print(program.pretty_print(name_stack=True))
    expected = known_answer(seed)
    output = np.asarray(jax.extend.core.jaxpr_as_fun(program)(x)[0])
    assert (expected is None) == (case == "clean")
    assert np.isfinite(output).all() == (case != "flows")  # "hidden": a NaN inside, none out
    assert first_nan(program, x) == expected
