"""01 · lax.scan 详解 / lax.scan in detail."""

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)


def test_scan_returns_final_carry_and_stacked_outputs():
    """scan 返回 (最终 carry, 每一步输出沿第 0 轴堆叠)：carry 只留最后一个，ys 留下全部。
    scan returns (final carry, per-step outputs stacked on axis 0): the carry keeps only the
    last value, ys keeps every step.
    """

    def step(total, x):
        total = total + x
        return total, total * 10

    carry, ys = lax.scan(step, 0, jnp.arange(1, 5))
    assert int(carry) == 10
    np.testing.assert_array_equal(ys, [10, 30, 60, 100])


def test_scan_with_length_and_no_xs_generates_a_sequence():
    """没有输入序列时传 xs=None 和 length=n：每一步收到的 x 是 None，序列完全由 carry 生成。
    With no input sequence pass xs=None and length=n: every step gets x=None and the sequence
    is generated from the carry alone.
    """

    def step(pair, x):
        assert x is None  # no xs: nothing to slice
        a, b = pair
        return (b, a + b), a

    final, fib = lax.scan(step, (0, 1), None, length=10)
    np.testing.assert_array_equal(fib, [0, 1, 1, 2, 3, 5, 8, 13, 21, 34])
    assert (int(final[0]), int(final[1])) == (55, 89)
    # Without xs scan cannot know how many steps to take.
    with pytest.raises(ValueError, match="length"):
        lax.scan(step, (0, 1), None)


def test_scan_reverse_walks_backwards_but_keeps_positions():
    """reverse=True 从最后一个元素往前处理；但 ys[i] 仍然是处理 xs[i] 那一步的输出（不会倒过来放）。
    reverse=True processes xs from the last element to the first, yet ys[i] is still the
    output of the step that consumed xs[i] (outputs are not stored backwards).
    """

    def step(digits, x):
        digits = digits * 10 + x  # the carry records the order of the visits
        return digits, digits

    xs = jnp.array([1, 2, 3, 4])
    carry, ys = lax.scan(step, 0, xs, reverse=True)
    assert int(carry) == 4321
    np.testing.assert_array_equal(ys, [4321, 432, 43, 4])
    # The same as scanning the flipped xs and flipping ys back.
    carry_flipped, ys_flipped = lax.scan(step, 0, xs[::-1])
    assert int(carry_flipped) == int(carry)
    np.testing.assert_array_equal(ys_flipped[::-1], ys)


def test_scan_unroll_changes_the_loop_not_the_result():
    """unroll=k 把 k 步复制进同一个循环体（循环次数变为 length/k）；unroll=True 完全展开、没有循环。
    结果相同，变的是 jaxpr 的 unroll 参数和 HLO 里的 while 循环。
    unroll=k copies k steps into one loop body (length/k trips); unroll=True unrolls fully and
    leaves no loop. Results are identical; what changes is the jaxpr's unroll parameter and the
    while loop in the HLO.
    """

    def step(c, x):
        c = c * 2.0 + x
        return c, c

    def run(xs, unroll):
        return lax.scan(step, 0.0, xs, unroll=unroll)

    xs = jnp.arange(8.0)
    base = run(xs, 1)
    for unroll in (2, True):
        jax.tree.map(np.testing.assert_array_equal, run(xs, unroll), base)

    eqn = jax.make_jaxpr(partial(run, unroll=True))(xs).eqns[0]
    assert eqn.primitive.name == "scan"
    assert eqn.params["unroll"] == 8

    hlo_2 = jax.jit(partial(run, unroll=2)).lower(xs).as_text()
    hlo_full = jax.jit(partial(run, unroll=True)).lower(xs).as_text()
    assert hlo_2.count("stablehlo.while") == 1
    assert hlo_2.count("stablehlo.multiply") == 2
    assert hlo_full.count("stablehlo.while") == 0
    assert hlo_full.count("stablehlo.multiply") == 8


def test_scan_slices_several_xs_in_lockstep():
    """xs 可以是 pytree（如 tuple）：每个叶子都沿第 0 轴同步切片，第 t 步拿到每个叶子的第 t 行；
    ys 也可以是 tuple。
    xs can be a pytree (e.g. a tuple): every leaf is sliced along axis 0 in lockstep, step t gets
    row t of each leaf; ys can be a tuple too.
    """

    def step(total, x):
        w, v = x  # w: a scalar, v: a (2,) row, both from step t
        assert (jnp.shape(w), jnp.shape(v)) == ((), (2,)), "step t gets a scalar w and a (2,) row v"
        total = total + w * v
        return total, (w * v, total)

    ws = jnp.arange(1.0, 5.0)
    vs = jnp.arange(8.0).reshape(4, 2)
    total, (terms, running) = lax.scan(step, jnp.zeros(2), (ws, vs))
    assert terms.shape == (4, 2)
    expected = np.arange(1.0, 5.0)[:, None] * np.arange(8.0).reshape(4, 2)
    np.testing.assert_allclose(terms, expected)
    np.testing.assert_allclose(running, np.cumsum(expected, axis=0))
    np.testing.assert_allclose(total, expected.sum(axis=0))
    # Every leaf must have the same leading length.
    with pytest.raises(ValueError, match="different leading axis sizes"):
        lax.scan(step, jnp.zeros(2), (ws, vs[:3]))


def stack_layers(layers):
    """把一串结构相同的 pytree（每层一个 dict）叠成一个 pytree：每个叶子多出一根长度为层数的第 0 轴。
    - 输入 [{"w": [D, D], "b": [D]}, ...]（L 层），输出 {"w": [L, D, D], "b": [L, D]}。
    - 对任意结构都要成立（用 jax.tree 的函数，不要写死键名）；1 行。
    Stack a list of pytrees with one structure (one dict per layer) into one pytree whose
    leaves get a new leading axis of length L.
    - [{"w": [D, D], "b": [D]}, ...] (L layers) -> {"w": [L, D, D], "b": [L, D]}.
    - Work for any structure (use jax.tree's functions, no hard-coded keys); 1 line.
    """
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *layers)


def apply_stack(stacked, x):
    """用 lax.scan 依次应用 L 层 x ↦ tanh(x @ w + b)；stacked 是 stack_layers 的输出。
    - 不许用 Python 循环逐层调用（jaxpr 里只能有一份层的计算）；大约 4 行。
    Apply the L layers x ↦ tanh(x @ w + b) in turn with lax.scan; stacked is what stack_layers
    returns.
    - No Python loop over the layers (the jaxpr must hold one copy of a layer); about 4 lines.
    """

    def layer(x, params):
        return jnp.tanh(x @ params["w"] + params["b"]), None

    return lax.scan(layer, x, stacked)[0]


def test_scan_over_stacked_layers_traces_one_layer():
    """✍️ 大模型的常用写法“scan over layers”：把 L 层参数叠成一个 pytree，当作 scan 的 xs，
    于是 jaxpr 和编译的程序里只有一层的计算，追踪和编译时间不随层数增长，求导也照常进行。
    Write the "scan over layers" idiom of large models: stack the L layers' parameters into
    one pytree and scan over it as xs. The jaxpr and the compiled program then hold one layer,
    so tracing and compile time do not grow with depth, and differentiation works as usual.
    stack_layers 对任意结构的层都成立（元组、嵌套的 dict）。
    stack_layers works for layers of any structure (tuples, nested dicts).
    """
    rng = np.random.default_rng(0)
    n_layers, d = 6, 4
    layers = [
        {
            "w": jnp.asarray(rng.normal(size=(d, d)) / 2, jnp.float32),
            "b": jnp.asarray(rng.normal(size=d), jnp.float32),
        }
        for _ in range(n_layers)
    ]
    x = jnp.asarray(rng.normal(size=(3, d)), jnp.float32)

    def python_loop(layers, x):
        for layer in layers:
            x = jnp.tanh(x @ layer["w"] + layer["b"])
        return x

    stacked = stack_layers(layers)
    assert jax.tree.map(jnp.shape, stacked) == {"w": (n_layers, d, d), "b": (n_layers, d)}
    np.testing.assert_array_equal(stacked["w"][2], layers[2]["w"])
    nested = stack_layers([(layer["b"], {"inner": {"w": layer["w"]}}) for layer in layers])
    assert jax.tree.map(jnp.shape, nested) == ((n_layers, d), {"inner": {"w": (n_layers, d, d)}})
    np.testing.assert_array_equal(nested[1]["inner"]["w"][2], layers[2]["w"])
    np.testing.assert_allclose(jax.jit(apply_stack)(stacked, x), python_loop(layers, x), rtol=1e-5)

    jaxpr = jax.make_jaxpr(apply_stack)(stacked, x)
    (scan,) = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
    assert scan.params["length"] == n_layers
    assert not [e for e in jaxpr.eqns if e.primitive.name == "dot_general"]  # none outside the loop
    body = [e.primitive.name for e in scan.params["jaxpr"].eqns]
    assert body.count("dot_general") == 1  # one layer, whatever the depth

    def loss(params, x):
        return (apply_stack(params, x) ** 2).sum()

    grads = jax.jit(jax.grad(loss))(stacked, x)
    loop_grads = jax.grad(lambda layers: (python_loop(layers, x) ** 2).sum())(layers)
    jax.tree.map(
        partial(np.testing.assert_allclose, rtol=1e-4, atol=1e-6), grads, stack_layers(loop_grads)
    )


def test_checkpointed_scan_body_keeps_only_the_carry_for_backward():
    """反向模式要为每一步存下中间值（残差）：scan 的 vjp 把它们堆成 [T, ...] 的数组。
    给 step 套上 jax 的重计算变换后，每一步只存输入的 carry，其余在反向时重算——
    用计算换内存，是长序列和深网络训练的标准手段。残差就是 jax.vjp 返回的函数的 pytree 叶子。
    Reverse mode stores intermediates (residuals) for every step: scan's vjp stacks them into
    [T, ...] arrays. Wrapping step in JAX's rematerialisation transform stores only the carry
    that enters each step and recomputes the rest in the backward pass: compute traded for
    memory, the standard tool for long sequences and deep networks. The residuals are the
    pytree leaves of the function jax.vjp returns.
    """
    n_steps, d = 10, 16
    ws = jnp.asarray(np.random.default_rng(1).normal(size=(n_steps, d, d)) / 4, jnp.float32)
    h0 = jnp.ones(d)

    def step(h, w):
        z = jnp.tanh(h @ w)
        return jnp.sin(z) * z, None

    def per_step_residuals(body):
        """[T, d] arrays the backward pass keeps (the [T, d, d] weights are kept either way)."""
        _, backward = jax.vjp(lambda h: lax.scan(body, h, ws)[0].sum(), h0)
        return [r for r in jax.tree.leaves(backward) if r.shape == (n_steps, d)]

    assert len(per_step_residuals(step)) == 4
    assert len(per_step_residuals(jax.jit(step))) == 4  # jit alone changes nothing here
    remat_step = jax.checkpoint(step)
    (carries,) = per_step_residuals(remat_step)
    np.testing.assert_allclose(carries[0], h0)  # what entered step 0, then step 1, ...

    def grad_of(body):
        return jax.grad(lambda h: lax.scan(body, h, ws)[0].sum())(h0)

    np.testing.assert_allclose(grad_of(remat_step), grad_of(step), rtol=1e-5)


def test_a_registered_dataclass_is_a_scan_carry():
    """一个普通的 dataclass 不是 pytree：拿它当 scan 的 carry，JAX 不认识这个参数类型。
    jax.tree_util.register_dataclass 把它注册成 pytree：数组字段是叶子，标了
    field(metadata=dict(static=True)) 的字段是树结构里的静态元数据。所以 body 不许改静态字段（carry
    的结构要前后一致），而 jit 对每个新的静态值重新追踪一次。数一数叶子和追踪次数。
    A plain dataclass is no pytree: as a scan carry, JAX does not recognise the argument's type.
    jax.tree_util.register_dataclass registers it as a pytree: the array fields are leaves, and a
    field marked field(metadata=dict(static=True)) is static metadata in the tree structure. So
    the body may not change a static field (the carry keeps one structure), and jit traces once
    for every new static value. Count the leaves and the traces.
    """

    @dataclasses.dataclass
    class Plain:
        mean: jax.Array
        count: jax.Array

    def step(s, x):  # a running mean / 滑动平均
        count = s.count + 1
        return dataclasses.replace(s, mean=s.mean + (x - s.mean) / count, count=count), None

    xs = jnp.array([1.0, 2.0, 6.0])
    with raises_exactly(TypeError):
        lax.scan(step, Plain(jnp.float32(0), jnp.float32(0)), xs)

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class Stats:
        mean: jax.Array
        count: jax.Array
        label: str = dataclasses.field(metadata=dict(static=True))

    start = Stats(jnp.float32(0), jnp.float32(0), "loss")
    assert len(jax.tree.leaves(start)) == 2
    final, _ = lax.scan(step, start, xs)
    assert (float(final.mean), float(final.count), final.label) == (3.0, 3.0, "loss")

    def renaming(s, x):
        s, _ = step(s, x)
        return dataclasses.replace(s, label=s.label + "!"), None

    with pytest.raises(TypeError, match="same pytree structure"):
        lax.scan(renaming, start, xs)

    traces = []

    @jax.jit
    def doubled(s):
        traces.append(s.label)
        return s.mean * 2

    for mean, label in ((0.0, "loss"), (5.0, "loss"), (5.0, "accuracy"), (1.0, "loss")):
        doubled(Stats(jnp.float32(mean), jnp.float32(1), label))
    assert len(traces) == 2
