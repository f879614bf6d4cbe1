"""08 · 综合五：只拿到程序的事后分析 / capstone five: a post-mortem with nothing but the program.

一个架构搜索按种子生成模型：8 层，每层从几种做法里随机挑一种（矩阵乘加 tanh、对数、开方、
反正弦、把非有限值换成 0 的“稳健”对数），常数也是随机的；每层是它自己的 jax.jit，包在
jax.named_scope("layerK") 里。生产环境里，某个种子的模型在一批数据上造出了 NaN：有的一路传到
输出，有的被“稳健”的层悄悄换成 0，输出全是有限的。你拿到的只有它的 jaxpr（jax.make_jaxpr 的
程序）和那批数据：事后分析时生成器和种子都不在手边，分析时调用生成器会被拒绝。哪一层、哪个
原语、哪一行数据？把最外层的每个中间值都变成输出、或者在 debug_nans 下逐个方程执行，都只看到
一层层的 jit：NaN 是在某一层的 jit 里面造出来的，也可能就在那里面被换掉。要用工具：读 jaxpr
（program.pretty_print(name_stack=True) 在每个方程旁边标出它所在的层），像 JAX 自己的解释器
那样逐个方程求值，遇到 jit 就进到它的子程序里去，看第一个造出 NaN 的方程。

An architecture search generates models from a seed: 8 layers, each drawn from a few kinds (a
matmul and tanh, a log, a square root, an arcsine, a "robust" log that turns values that are not
finite into 0), with random constants too; each layer is its own jax.jit, inside
jax.named_scope("layerK"). In production the model of some seed made a NaN on a batch, which
either flows to the output or is quietly turned into 0 by a "robust" layer, leaving every output
finite. All you get is its jaxpr (the program jax.make_jaxpr gives) and that batch: at a
post-mortem the generator and the seed are not at hand, and calling the generator while you
analyse is refused. Which layer, which primitive, which row of data? Making every intermediate of
the top level an output, or running the equations one by one under debug_nans, shows only one
jit per layer: the NaN is made inside some layer's jit, and may be turned into 0 right there.
Use the tools: read the jaxpr (program.pretty_print(name_stack=True) marks each equation with
its layer), evaluate it equation by equation as JAX's own interpreters do, stepping into a jit's
sub-program, and look for the first equation that makes a NaN.
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
    """按种子抽出 LAYERS 层（第 0 层总是 mix），返回层的列表。
    Draw LAYERS layers from the seed (layer 0 is always a mix); returns the list of layers.
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
    return layers


def make_batch():
    """生产环境的那批数据 x (B, D)（NumPy），与种子无关。
    Production's batch x (B, D) as NumPy, whatever the seed."""
    return np.random.default_rng(2026).normal(size=(B, D)).astype(np.float32)


def make_model(seed):
    """种子生成的模型的程序：jax.make_jaxpr(model)(make_batch())，每层是自己的 jit。
    The program of the seed's model: jax.make_jaxpr(model)(make_batch()), each layer its own
    jit."""
    layers = make_layers(seed)

    def model(h):
        for k, layer in enumerate(layers):
            with jax.named_scope(f"layer{k}"):
                h = jax.jit(layer)(h)
        return h

    return jax.make_jaxpr(model)(make_batch())


def refusing_the_generator(monkeypatch):
    """你的函数运行期间，生成器和它的答案一被调用就报错：事后分析时手边只有程序和数据。
    While your function runs, calling the generator or its answer fails: at a post-mortem you
    have the program and the data only."""

    def refuse(*args, **kwargs):
        raise AssertionError("the generator was called / 调用了生成器")

    for name in ("make_layers", "make_model", "known_answer"):
        monkeypatch.setitem(globals(), name, refuse)


# ---- 你来实现 / your code ---------------------------------------------------------------


def first_nan(program, x):
    """program 是一个 ClosedJaxpr，x 是它的输入 (B, D)。按顺序对每个方程求值，遇到 jit 方程
    （eqn.params["jaxpr"] 是它的子程序，也是 ClosedJaxpr）就进去逐个求值；找出第一个输出里有
    NaN 的方程，返回 (层名, 原语名, 行号)，例如 ("layer3", "log", 5)：层名是最外层那个方程的
    name stack（str(eqn.source_info.name_stack)），行号是输出里第一个含 NaN 的行（第 0 维）。
    没有 NaN 时返回 None。
    - 环境是一个 {变量: 值} 字典：jaxpr.constvars 对应 consts，invars 对应输入；一个
      jax.extend.core.Literal 输入的值在 .val 里。
    - 一个方程的求值：eqn.primitive.bind(*输入的值, **eqn.params)；eqn.primitive.multiple_results
      为真时返回列表。大约 22 行。
    program is a ClosedJaxpr and x its input (B, D). Evaluate its equations in order, stepping
    into a jit equation (eqn.params["jaxpr"] is its sub-program, a ClosedJaxpr too) to evaluate
    its equations one by one; find the first equation whose output holds a NaN, and return
    (layer, primitive, row), e.g. ("layer3", "log", 5): the layer is the name stack of the
    top-level equation (str(eqn.source_info.name_stack)), the row the first row (axis 0) of its
    output that holds a NaN. None when no equation makes a NaN.
    - The environment is a {variable: value} dict: jaxpr.constvars take the consts, the invars
      the inputs; a jax.extend.core.Literal input keeps its value in .val.
    - To evaluate an equation: eqn.primitive.bind(*input values, **eqn.params), which returns a
      list when eqn.primitive.multiple_results is true. About 22 lines.
    """

    def run(closed, args, layer):
        """(outputs, None), or (None, the first NaN) / 输出，或者第一个 NaN"""
        env = dict(zip(closed.jaxpr.constvars, closed.consts, strict=True))
        env.update(zip(closed.jaxpr.invars, args, strict=True))

        def read(var):
            return var.val if isinstance(var, jax.extend.core.Literal) else env[var]

        for eqn in closed.jaxpr.eqns:
            where, values = layer or str(eqn.source_info.name_stack), list(map(read, eqn.invars))
            if eqn.primitive.name == "jit":
                outs, found = run(eqn.params["jaxpr"], values, where)
                if found is not None:
                    return None, found
            else:
                outs = eqn.primitive.bind(*values, **eqn.params)
                outs = outs if eqn.primitive.multiple_results else [outs]
                for out in outs:
                    bad = np.isnan(np.asarray(out))
                    if bad.any():
                        row = int(np.argmax(bad.reshape(len(x), -1).any(axis=1)))
                        return None, (where, eqn.primitive.name, row)
            env.update(zip(eqn.outvars, outs, strict=True))
        return list(map(read, closed.jaxpr.outvars)), None

    return run(program, [x], "")[1]


# ---- 检查 / checks ----------------------------------------------------------------------


def known_answer(seed):
    """由生成器自己的层得出的答案和模型的输出（事后分析时你拿不到这些层）：逐层用 checkify 的
    浮点检查，放在按行的 vmap 里面。返回 (答案, 输出)。
    The answer and the model's output from the generator's own layers (which a post-mortem does
    not have): checkify's float checks layer by layer, inside a vmap over the rows. Returns
    (answer, output)."""
    h, answer = jnp.asarray(make_batch()), None
    for k, layer in enumerate(make_layers(seed)):
        err, h = jax.vmap(checkify.checkify(layer, errors=checkify.float_checks))(h)
        if err.get() is not None and answer is None:
            found = re.search(r"mapped index (\d+): nan generated by primitive: (\w+)", err.get())
            answer = f"layer{k}", found[2], int(found[1])
    return answer, np.asarray(h)


@pytest.mark.parametrize(
    ("seed", "case"),
    [(5, "flows"), (0, "flows"), (13, "hidden"), (26, "hidden"), (14, "clean")],
)
def test_the_jaxpr_names_the_layer_primitive_and_row_of_the_first_nan(seed, case, monkeypatch):
    """✍️ 写 first_nan。五个种子的模型：四个在这批数据上造出 NaN（其中两个被“稳健”的层换成了 0，
    输出全是有限的，单看输出什么也发现不了；有一个的第一个 NaN 在某一层里就被换掉了，流到输出的
    是后面一层造的），一个干干净净。你的 first_nan 只拿到程序和数据，要说出和生成器自己的层逐层
    检查得出的同一个答案。
    Write first_nan. Models of five seeds: four make a NaN on this batch (two of them have it
    turned into 0 by a "robust" layer, so every output is finite and the output alone shows
    nothing; one has its first NaN turned into 0 inside a layer, and the NaN that reaches the
    output is made by a later layer), and one is clean. Your first_nan gets only the program and
    the data, and must give the same answer as checking the generator's own layers one by one.
    """
    program, x = make_model(seed), make_batch()
    print(program.pretty_print(name_stack=True))
    expected, output = known_answer(seed)
    assert (expected is None) == (case == "clean")
    assert np.isfinite(output).all() == (case != "flows")  # "hidden": a NaN inside, none out
    refusing_the_generator(monkeypatch)
    found = first_nan(program, x)
    monkeypatch.undo()
    assert found == expected
