"""01 · lax.scan 详解 / lax.scan in detail."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxkoans import __  # noqa: F401  (the koans' blanks)


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
    assert eqn.params["unroll"] == 8  # True is recorded as the full length

    hlo_2 = jax.jit(partial(run, unroll=2)).lower(xs).as_text()
    hlo_full = jax.jit(partial(run, unroll=True)).lower(xs).as_text()
    assert hlo_2.count("stablehlo.while") == 1
    assert hlo_2.count("stablehlo.multiply") == 2  # two copies of step in the body
    assert hlo_full.count("stablehlo.while") == 0
    assert hlo_full.count("stablehlo.multiply") == 8


def test_scan_carry_can_be_any_pytree():
    """carry 可以是任意 pytree（dict、tuple…）：step 必须返回与输入结构、dtype、形状都相同的 carry。
    The carry can be any pytree (dict, tuple, ...): step must return a carry with the same
    structure, dtypes and shapes as the one it received.
    """

    def step(stats, x):
        n = stats["n"] + 1
        mean = stats["mean"] + (x - stats["mean"]) / n  # running mean, one sample at a time
        return {"n": n, "mean": mean}, mean  # same structure as stats

    xs = jnp.array([2.0, 4.0, 9.0, 1.0])
    init = {"n": jnp.int32(0), "mean": jnp.float32(0.0)}
    final, means = lax.scan(step, init, xs)
    assert jax.tree.structure(final) == jax.tree.structure(init)
    assert int(final["n"]) == 4
    np.testing.assert_allclose(means, np.cumsum(xs) / np.arange(1, 5), rtol=1e-6)


def test_scan_slices_several_xs_in_lockstep():
    """xs 可以是 pytree（如 tuple）：每个叶子都沿第 0 轴同步切片，第 t 步拿到每个叶子的第 t 行；
    ys 也可以是 tuple。
    xs can be a pytree (e.g. a tuple): every leaf is sliced along axis 0 in lockstep, step t gets
    row t of each leaf; ys can be a tuple too.
    """

    def step(total, x):
        w, v = x  # w: a scalar, v: a (2,) row, both from step t
        total = total + w * v
        return total, (w * v, total)

    ws = jnp.arange(1.0, 5.0)  # (4,)
    vs = jnp.arange(8.0).reshape(4, 2)  # (4, 2)
    total, (terms, running) = lax.scan(step, jnp.zeros(2), (ws, vs))
    assert terms.shape == (4, 2)
    expected = np.arange(1.0, 5.0)[:, None] * np.arange(8.0).reshape(4, 2)
    np.testing.assert_allclose(terms, expected)
    np.testing.assert_allclose(running, np.cumsum(expected, axis=0))
    np.testing.assert_allclose(total, expected.sum(axis=0))
    # Every leaf must have the same leading length.
    with pytest.raises(ValueError, match="different leading axis sizes"):
        lax.scan(step, jnp.zeros(2), (ws, vs[:3]))


def test_scan_carry_type_must_not_change():
    """⚠️ 陷阱 / trap: carry 的 dtype 和形状每一步都不能变。int32 计数器加上 float 会让 scan
    报错（消息点名 carry）；但 Python 标量（弱类型）的 init 会被悄悄提升成 float32。
    The carry's dtype and shape must stay the same at every step. An int32 counter plus a float
    makes scan raise (the message names the carry), but a Python scalar init (weakly typed) is
    silently promoted to float32.
    """

    def step(total, x):
        return total + x, None  # int32 + float32 -> float32

    xs = jnp.array([0.5, 1.5, 2.0])
    with pytest.raises(TypeError) as info:
        lax.scan(step, jnp.int32(0), xs)
    assert "carry" in str(info.value)
    assert "dtypes do not match" in str(info.value)

    total, _ = lax.scan(step, 0, xs)  # a weak Python 0: no error
    assert total.dtype == jnp.float32
    assert float(total) == 4.0
