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

from jaxkoans import __  # noqa: F401  (the koans' blanks)


def test_numpy_randomness_is_frozen_at_trace_time():
    """⚠️ 陷阱 / trap: 在被 jit 的函数里用 NumPy 取随机数，只在追踪时取一次：这个数作为字面量
    写进 jaxpr，之后每次调用都一样。jaxpr 一眼就能看出来。随机性要来自参数（一个 PRNG key）。
    NumPy randomness inside a jitted function is drawn once, while tracing: the number is
    written into the jaxpr as a literal and every later call reuses it. The jaxpr shows it at a
    glance. Randomness has to come from an argument (a PRNG key).
    """
    rng = np.random.default_rng(0)

    def add_noise(x):
        return x + rng.normal()  # NumPy draws a Python float here / NumPy 在这里取一个数

    x = jnp.zeros(3)
    noisy = jax.jit(add_noise)
    assert bool(jnp.array_equal(noisy(x), noisy(x))) == True  # noqa: E712

    jaxpr = jax.make_jaxpr(add_noise)(x)
    (eqn,) = jaxpr.eqns
    assert eqn.primitive.name == "add"
    assert type(eqn.invars[1]).__name__ == "Literal"
    assert len(jaxpr.jaxpr.invars) == 1  # only x: the noise is not an input

    def add_noise_fixed(x, key):
        return x + jax.random.normal(key, ())

    fixed = jax.jit(add_noise_fixed)
    k1, k2 = jax.random.split(jax.random.key(0))
    assert not jnp.array_equal(fixed(x, k1), fixed(x, k2))
    np.testing.assert_array_equal(fixed(x, k1), fixed(x, k1))  # reproducible per key


def test_a_strong_scalar_promotes_bfloat16_to_float32():
    """⚠️ 陷阱 / trap: bfloat16 的激活乘上 np.float32(0.5)（强类型标量）会被提升成 float32：
    jaxpr 里多出一个 convert_element_type，输出内存翻倍。Python 的 0.5 是弱类型，不会提升。
    A bfloat16 activation times np.float32(0.5) (a strongly typed scalar) is promoted to
    float32: the jaxpr gains a convert_element_type and the output doubles in size. A Python
    0.5 is weakly typed and does not promote.
    """

    def layer(x, w):
        return (x @ w) * np.float32(0.5)

    x = jnp.ones((2, 4), jnp.bfloat16)
    w = jnp.ones((4, 3), jnp.bfloat16)
    jaxpr = jax.make_jaxpr(layer)(x, w)
    assert jaxpr.out_avals[0].dtype == jnp.float32
    assert [e.primitive.name for e in jaxpr.eqns] == ["dot_general", "convert_element_type", "mul"]

    def layer_fixed(x, w):
        return (x @ w) * 0.5

    fixed = jax.make_jaxpr(layer_fixed)(x, w)
    assert fixed.out_avals[0].dtype == jnp.bfloat16
    assert "convert_element_type" not in [e.primitive.name for e in fixed.eqns]
    np.testing.assert_array_equal(layer_fixed(x, w).astype(jnp.float32), layer(x, w))


def test_a_captured_array_is_folded_into_a_constant():
    """⚠️ 陷阱 / trap: 被闭包捕获的 NumPy 数组在追踪时被复制成常量；XLA 再把只依赖常量的计算
    在编译时算完（常量折叠），优化后的 HLO 里只剩一个数。“快得不可思议”的基准测试、改了数组
    结果却不变，都是这个原因。把数组作为参数传入，计算才真正留在程序里。
    A NumPy array captured by a closure is copied into a constant at trace time; XLA then
    computes whatever depends only on constants at compile time (constant folding), and the
    optimised HLO holds a single number. An "impossibly fast" benchmark, or a result that
    ignores your edits to the array, both come from this. Pass the array as an argument and the
    computation stays in the program.
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
    assert (closed.count("sine("), passed.count("sine(")) == (0, 1)

    before = energy_closed()
    table[:] = 0.0  # edit the array in place / 原地修改数组
    assert float(energy_closed()) == float(before)
    assert float(energy(table)) == 0.0
