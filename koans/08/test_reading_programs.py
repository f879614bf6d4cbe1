"""08 · 症状：结果“不可能”是这样 / symptom: the result cannot be right.

工具：读程序本身。`jax.make_jaxpr(f)(*args)` 给出 JAX 追踪到的程序（原语、dtype、常量），
`jax.jit(f).lower(*args).compile().as_text()` 给出 XLA 优化后真正执行的 HLO。数值说不清的事，
程序文本里一目了然：追踪时算好的常量、被悄悄插入的类型转换、被编译器折叠掉的计算。

Tool: read the program itself. `jax.make_jaxpr(f)(*args)` shows what JAX traced (primitives,
dtypes, constants); `jax.jit(f).lower(*args).compile().as_text()` shows the HLO that XLA
optimised and actually runs. What the numbers cannot explain, the program text shows plainly:
constants computed at trace time, conversions inserted behind your back, computations the
compiler folded away.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def test_numpy_randomness_is_frozen_at_trace_time():
    """⚠️ 陷阱 / trap: 一个 jit 过的函数用 NumPy 给输入加噪声。两次调用的噪声一样吗？读 jaxpr：
    add 的第二个操作数是输入，还是别的什么？NumPy 的代码只在追踪时执行。然后让噪声每次调用都
    不同，而且给定同样的输入可以复现。
    ⚠️ trap: a jitted function adds NumPy noise to its input. Do two calls add the same noise?
    Read the jaxpr: is the add's second operand an input, or something else? NumPy code runs
    only while tracing. Then make the noise differ from call to call, reproducibly for the same
    inputs.
    """
    rng = np.random.default_rng(0)

    def add_noise(x):
        return x + rng.normal()  # NumPy draws a Python float here / NumPy 在这里取一个数

    x = jnp.zeros(3)
    noisy = jax.jit(add_noise)
    assert bool(jnp.array_equal(noisy(x), noisy(x))) == __  # noqa: E712

    jaxpr = jax.make_jaxpr(add_noise)(x)
    (eqn,) = jaxpr.eqns
    assert eqn.primitive.name == "add"
    assert type(eqn.invars[1]).__name__ == __
    assert len(jaxpr.jaxpr.invars) == 1  # only x: the noise is not an input

    def add_noise_fixed(x, key):
        return x + jax.random.normal(__, ())

    fixed = jax.jit(add_noise_fixed)
    k1, k2 = jax.random.split(jax.random.key(0))
    assert not jnp.array_equal(fixed(x, k1), fixed(x, k2))
    np.testing.assert_array_equal(fixed(x, k1), fixed(x, k1))  # reproducible per key


def test_a_strong_scalar_changes_a_bfloat16_layers_dtype():
    """⚠️ 陷阱 / trap: 一个 bfloat16 的层乘上 np.float32(0.5)（强类型标量），输出占的内存比预期的
    大。一个标量就能改变整个激活的类型：读 jaxpr，输出是什么 dtype、有哪些方程？然后在不改变
    dtype 的前提下做同样的缩放。jax.numpy_dtype_promotion("strict") 让强类型之间的隐式提升
    当场报错，修好的层在它之下照样能跑。
    ⚠️ trap: a bfloat16 layer scaled by np.float32(0.5) (a strongly typed scalar) returns an
    output that takes more memory than expected. One scalar can change the type of a whole
    activation: read the jaxpr, what is the output's dtype and which equations are there? Then
    scale the same way without changing the dtype. jax.numpy_dtype_promotion("strict") makes an
    implicit promotion between strong types an error on the spot; the repaired layer runs under
    it.
    """

    def layer(x, w):
        return (x @ w) * np.float32(0.5)

    x = jnp.ones((2, 4), jnp.bfloat16)
    w = jnp.ones((4, 3), jnp.bfloat16)
    jaxpr = jax.make_jaxpr(layer)(x, w)
    assert jaxpr.out_avals[0].dtype == __
    assert [e.primitive.name for e in jaxpr.eqns] == __

    def layer_fixed(x, w):
        return __

    fixed = jax.make_jaxpr(layer_fixed)(x, w)
    assert fixed.out_avals[0].dtype == jnp.bfloat16
    assert "convert_element_type" not in [e.primitive.name for e in fixed.eqns]
    np.testing.assert_array_equal(layer_fixed(x, w).astype(jnp.float32), layer(x, w))
    with jax.numpy_dtype_promotion("strict"), raises_exactly(__):
        layer(x, w)
    with jax.numpy_dtype_promotion("strict"):
        assert layer_fixed(x, w).dtype == jnp.bfloat16


def test_a_captured_array_is_folded_into_a_constant():
    """⚠️ 陷阱 / trap: 一个 jit 过的函数读它在闭包里捕获的 NumPy 数组，另一个把数组当参数。被捕获
    的数组在追踪时变成常量，而 XLA 会在编译时算完只依赖常量的计算（常量折叠）。数一数两个
    程序优化后的 HLO 里各有几个 sine；再原地修改数组、重新调用两者。为什么第一个的基准测试
    快得不可思议？
    ⚠️ trap: one jitted function reads a NumPy array it captured in a closure, the other takes
    the array as an argument. A captured array becomes a constant while tracing, and XLA
    computes at compile time whatever depends only on constants (constant folding). Count the
    sines in each program's optimised HLO; then edit the array in place and call both again. Why
    does a benchmark of the first look impossibly fast?
    """
    table = np.linspace(0.0, 1.0, 1000, dtype=np.float32)

    @jax.jit
    def energy_closed():
        return jnp.sum(jnp.sin(table))

    @jax.jit
    def energy(t):
        return jnp.sum(jnp.sin(t))

    closed = energy_closed.lower().compile().as_text()  # optimised HLO / 优化后的 HLO
    passed = energy.lower(table).compile().as_text()
    assert (closed.count("sine("), passed.count("sine(")) == __

    before = energy_closed()
    table[:] = 0.0  # edit the array in place / 原地修改数组
    assert float(energy_closed()) == __
    assert float(energy(table)) == 0.0


def test_rank_promotion_raise_catches_a_silent_broadcast():
    """⚠️ 陷阱 / trap: 模型输出一列预测 (B, 1)，目标是 (B,)。按 NumPy 的规则，减法先提升秩再
    广播：均方误差照样算得出、是有限的，却不对。读 jaxpr：sub 的输出是什么形状？
    jax.numpy_rank_promotion("raise") 把这种悄悄的秩提升变成一个错误，指着做这件事的那一行。
    然后改掉它，让两边的形状一致。
    ⚠️ trap: a model outputs a column of predictions (B, 1) and the targets are (B,). By NumPy's
    rules the subtraction promotes the ranks, then broadcasts: the mean squared error still
    comes out, finite, and wrong. Read the jaxpr: what shape does the sub produce?
    jax.numpy_rank_promotion("raise") turns such a silent rank promotion into an error at the
    line that does it. Then repair it so that both sides have one shape.
    """
    grid = np.linspace(0.0, 1.0, 8, dtype=np.float32)
    pred, y = jnp.asarray(grid)[:, None], jnp.asarray(grid + 0.1)  # each target 0.1 above

    def mse(pred, y):
        return jnp.mean((pred - y) ** 2)

    jaxpr = jax.make_jaxpr(mse)(pred, y)
    assert [e.outvars[0].aval.shape for e in jaxpr.eqns if e.primitive.name == "sub"] == __
    assert float(mse(pred, y)) > 0.05  # finite, and far from the 0.01 it should be / 有限，却不对
    with jax.numpy_rank_promotion("raise"), raises_exactly(__):
        mse(pred, y)

    def mse_fixed(pred, y):
        return jnp.mean((__ - y) ** 2)

    with jax.numpy_rank_promotion("raise"):
        np.testing.assert_allclose(float(mse_fixed(pred, y)), 0.01, rtol=1e-5)
