"""01 · 结构化控制流 / structured control flow: cond, switch, fori_loop, while_loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxkoans import __  # noqa: F401  (the koans' blanks)


def _prims(closed_jaxpr):
    """顶层方程的原语名 / primitive names of the top-level equations."""
    return [eqn.primitive.name for eqn in closed_jaxpr.eqns]


def test_python_if_on_tracer_fails_use_lax_cond():
    """❌ 旧写法 / ✅ 推荐写法：jit 里对被追踪的值写 Python `if` 会报错；
    用 lax.cond 把两个分支都放进计算图。
    ❌ old way / ✅ recommended: a Python `if` on a traced value under jit raises; lax.cond puts
    both branches into the computation and picks one at run time.
    """

    @jax.jit
    def relu_old(x):
        if x > 0:  # bool(tracer): the value is unknown while tracing
            return x
        return jnp.zeros_like(x)

    with pytest.raises(__, match="boolean conversion of traced"):
        relu_old(2.0)

    @jax.jit
    def relu_new(x):
        return lax.cond(x > 0, __, __, x)

    xs = [-1.5, 0.0, 2.0]
    np.testing.assert_allclose([relu_new(x) for x in xs], np.maximum(xs, 0.0))


def test_cond_traces_both_branches_false_first():
    """lax.cond 总是追踪两个分支（即使谓词是具体的 True）；
    jaxpr 的 branches 按索引排列，0 号是 false 分支。
    lax.cond always traces both branches (even with a concrete True predicate); the jaxpr's
    `branches` are ordered by index, and index 0 is the false branch.
    """
    traced = []

    def on_true(x):
        traced.append("true")
        return jnp.sin(x)

    def on_false(x):
        traced.append("false")
        return jnp.cos(x)

    out = lax.cond(True, on_true, on_false, 1.0)
    np.testing.assert_allclose(out, np.sin(1.0), rtol=1e-6)
    assert traced == __

    jaxpr = jax.make_jaxpr(lambda x: lax.cond(x > 0, on_true, on_false, x))(1.0)
    (cond_eqn,) = [e for e in jaxpr.eqns if e.primitive.name == "cond"]
    branches = cond_eqn.params["branches"]
    assert [_prims(b) for b in branches] == __


def test_cond_branches_must_return_same_types():
    """两个分支必须返回相同的形状和 dtype：Python 字面量 0 是 int32，与 float32 不符；写 0.0 才行。
    Both branches must return the same shapes and dtypes: the Python literal 0 is an int32, which
    does not match float32; 0.0 does.
    """

    def clipped(x):
        return lax.cond(x > 0, lambda x: x * 2, lambda x: 0, x)

    with pytest.raises(__, match="so the dtypes do not match"):
        clipped(1.0)

    def fixed(x):
        return lax.cond(x > 0, lambda x: x * 2, lambda x: __, x)

    assert jnp.result_type(fixed(1.0)) == jnp.float32
    assert float(fixed(-1.0)) == 0.0


def test_switch_clamps_out_of_range_index():
    """lax.switch 不会因越界索引报错：索引先被 clamp 到 [0, len(branches)-1]。
    lax.switch does not fail on an out-of-range index: the index is first clamped into
    [0, len(branches) - 1].
    """
    branches = [lambda x: x + 0.0, lambda x: x + 10.0, lambda x: x + 20.0]
    pick = jax.jit(lambda i: lax.switch(i, branches, 1.0))

    out = [float(pick(i)) for i in (-5, 1, 100)]
    np.testing.assert_array_equal(out, __)
    assert "clamp" in _prims(jax.make_jaxpr(lambda i: lax.switch(i, branches, 1.0))(1))


def test_while_loop_rejects_reverse_mode():
    """⚠️ 陷阱 / trap：jax.grad 穿不过 lax.while_loop（反向模式要存下未知步数的中间值），
    前向模式 jvp 可以。
    ⚠️ trap: jax.grad cannot go through lax.while_loop (reverse mode would need to store an
    unknown number of steps); forward mode (jvp) works.
    """

    def cube(x):
        # c = x**3 by three multiplications in a while_loop
        def body(carry):
            i, c = carry
            return i + 1, c * x

        return lax.while_loop(lambda carry: carry[0] < 3, body, (0, 1.0))[1]

    with pytest.raises(__, match="Reverse-mode differentiation does not work"):
        jax.grad(cube)(2.0)

    value, tangent = jax.jvp(cube, (2.0,), (1.0,))
    assert float(value) == 8.0
    assert float(tangent) == __


def test_fori_loop_with_static_bounds_is_a_scan():
    """fori_loop 的界是 Python int 时降级为 scan（可反向求导）；界被追踪时降级为 while。
    fori_loop with Python-int bounds lowers to a scan (reverse-mode differentiable); with traced
    bounds it lowers to a while.
    """

    def power(x, n):
        return lax.fori_loop(0, n, lambda i, c: c * x, 1.0)

    static = jax.make_jaxpr(lambda x: power(x, 3))(2.0)
    dynamic = jax.make_jaxpr(power)(2.0, 3)
    assert _prims(static) == __
    assert _prims(dynamic) == __

    x = 1.5
    np.testing.assert_allclose(jax.grad(lambda x: power(x, 3))(x), 3 * x**2, rtol=1e-6)


def test_while_loop_carry_keeps_its_type():
    """while_loop 的 carry 类型固定：弱类型的 Python 0 可被提升为 float32，
    jnp.int32(0) 则报 TypeError。
    A while_loop carry keeps its type: a weakly typed Python 0 may be promoted to float32, but
    jnp.int32(0) raises a TypeError.
    """

    def halves(init):
        return lax.while_loop(lambda c: c < 2, lambda c: c + 0.5, init)

    assert halves(0).dtype == __
    assert float(halves(0)) == 2.0

    with pytest.raises(__, match="carry input and carry output must have equal types"):
        halves(jnp.int32(0))


def test_vmap_of_cond_with_batched_predicate_becomes_select():
    """vmap 下谓词被批处理的 cond 变成 select_n：两个分支都会对整个批次执行；
    谓词不被批处理时仍是 cond。
    Under vmap a cond with a batched predicate becomes select_n: both branches run on the whole
    batch. With an unbatched predicate it stays a cond.
    """

    def f(p, x):
        return lax.cond(p, jnp.sin, jnp.cos, x)

    xs = jnp.arange(3.0)
    batched = _prims(jax.make_jaxpr(jax.vmap(f))(xs > 0, xs))
    unbatched = _prims(jax.make_jaxpr(jax.vmap(f, in_axes=(None, 0)))(True, xs))

    assert ("cond" in batched, "select_n" in batched) == __
    assert ("sin" in batched, "cos" in batched) == __
    assert ("cond" in unbatched, "select_n" in unbatched) == __
    np.testing.assert_allclose(jax.vmap(f)(xs > 0, xs), np.where(xs > 0, np.sin(xs), np.cos(xs)))
