"""02 · 找到并消除重复编译 / recompilation, detected and removed.

jit 按“缓存键”复用编译好的程序：函数对象本身、每个参数的形状 / dtype / 弱类型、pytree 结构、
静态参数的值。键一变就重新追踪、重新编译——在 CPU 上几十毫秒，在大模型上可能是几分钟。
三种看见它的办法：`jax.monitoring` 的编译事件（可以计数）、`jax.log_compiles(True)`（每次编译
一条日志）、`jax.explain_cache_misses(True)`（说明键的哪一部分变了）。两个都是上下文管理器，
退出时恢复原来的设置。

jit reuses a compiled program by a cache key: the function object, every argument's shape,
dtype and weak type, the pytree structure, and the values of static arguments. When the key
changes, it traces and compiles again: tens of milliseconds on CPU, minutes for a large model.
Three ways to see it: `jax.monitoring`'s compile events (you can count them),
`jax.log_compiles(True)` (a log line per compilation) and `jax.explain_cache_misses(True)`
(which part of the key changed). The last two are context managers that restore the previous
setting on exit.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import counting_compiles, recording_jax_logs


def compiles_per_call(f, calls):
    """依次执行 calls 里的每个无参函数，返回每一次调用触发的编译次数（只数 f 的）。
    Run each zero-argument function of calls in turn; return how many compilations of f
    each one caused.
    """
    counts = []
    for call in calls:
        with counting_compiles() as names:
            jax.block_until_ready(call())
        counts.append(names.count(f"jit({f.__name__})"))
    return counts


def reason(miss):
    """一条 "TRACING CACHE MISS" 日志给出的原因（它的第一行说明）。
    The reason a "TRACING CACHE MISS" message gives (the first line of its explanation).
    """
    lines = [line.strip() for line in miss.splitlines()]
    if "never seen function:" in lines:
        return "never seen function:"
    return next(lines[i + 1] for i, line in enumerate(lines) if line.endswith("previous key:"))


def test_count_compilations_with_jax_monitoring():
    """每次 XLA 编译都会发出 "/jax/core/compile/backend_compile_duration" 事件：数它就知道
    编译了几次。同样的形状和 dtype 复用程序（数值无关）；新形状、新 dtype 各编译一次。
    Every XLA compilation emits "/jax/core/compile/backend_compile_duration": count the events
    to count compilations. The same shape and dtype reuse the program (values do not matter);
    a new shape or a new dtype compiles once more.
    """

    def normalize(x):
        return x / jnp.linalg.norm(x)

    f = jax.jit(normalize)
    calls = [
        lambda: f(np.ones(3, np.float32)),
        lambda: f(np.arange(3, dtype=np.float32)),
        lambda: f(np.ones(5, np.float32)),
        lambda: f(np.ones(3, np.int32)),
        lambda: f(np.ones(5, np.float32)),
    ]
    assert compiles_per_call(normalize, calls) == __


def test_log_compiles_prints_every_compilation_with_its_shapes():
    """jax.log_compiles(True) 为每次编译写一条 WARNING 日志 "Compiling jit(f) with global shapes
    and types ..."，列出触发这次编译的形状——在真实程序里一眼就能看出是哪个形状在重复编译。
    jax.log_compiles(True) logs a WARNING "Compiling jit(f) with global shapes and types ..."
    for every compilation, listing the shapes that caused it: in a real program this shows at
    a glance which shape keeps recompiling.
    """

    @jax.jit
    def total(x):
        return jnp.sum(x**2)

    with recording_jax_logs() as messages, jax.log_compiles(True):
        for n in [4, 4, 7, 4, 7, 9]:
            total(np.ones(n, np.float32))
    compiling = [m for m in messages if "Compiling jit(total)" in m]
    assert len(compiling) == __
    assert "float32[7]" in compiling[__]
    assert not jax.config.jax_log_compiles  # restored on exit / 退出即恢复


def test_explain_cache_misses_says_which_part_of_the_key_changed():
    """jax.explain_cache_misses(True) 在每次追踪缓存未命中时写一条 "TRACING CACHE MISS" 日志，
    说明与最接近的旧键相比哪里不同：输入类型（形状、dtype）、pytree 结构……
    jax.explain_cache_misses(True) logs "TRACING CACHE MISS" at every tracing-cache miss and
    says how the key differs from the closest previous one: the input types (shape, dtype),
    the pytree structure, ...
    """

    def scale(x, factor):
        return x * factor

    f = jax.jit(scale)
    x = np.ones(3, np.float32)
    with recording_jax_logs() as messages, jax.explain_cache_misses(True):
        f(x, 2.0)
        f(x, 3.0)  # a hit: nothing logged
        f(np.ones(4, np.float32), 2.0)
        f(x, 2)
        f(x, factor=2.0)
    misses = [m for m in messages if "TRACING CACHE MISS" in m]
    reasons = [reason(m) for m in misses]
    assert reasons == __
    assert "at factor, now i32[] and before f32[]" in misses[2]


def test_weak_types_and_keyword_arguments_are_part_of_the_key():
    """⚠️ 陷阱 / trap：Python 的 1.0 是“弱类型”的 float32，np.float32(1.0) 是强类型的 float32——
    形状和 dtype 相同，缓存键却不同。同一个参数按位置传和按关键字传，pytree 结构也不同。
    A Python 1.0 is a weakly typed float32 and np.float32(1.0) a strongly typed one: same
    shape, same dtype, different cache key. Passing the same argument by position or by
    keyword gives different pytree structures too.
    """

    def halve(x):
        return x / 2

    f = jax.jit(halve)
    calls = [
        lambda: f(1.0),
        lambda: f(2.0),
        lambda: f(np.float32(1.0)),
        lambda: f(jnp.float32(3.0)),
        lambda: f(x=np.float32(1.0)),
    ]
    assert compiles_per_call(halve, calls) == __


def test_static_arguments_compile_once_per_value():
    """决定形状的参数必须是静态的（static_argnums / static_argnames）：追踪时要知道它的值。
    每个新值编译一次，见过的值复用；静态参数必须可哈希。
    An argument that decides a shape must be static (static_argnums / static_argnames): its
    value is needed while tracing. Each new value compiles once, a value seen before is
    reused; static arguments must be hashable.
    """

    def ones_then_scale(x, n):
        return jnp.ones(n) * x

    with raises_exactly(__):
        jax.jit(ones_then_scale)(2.0, 3)

    f = jax.jit(ones_then_scale, static_argnums=__)
    np.testing.assert_array_equal(f(2.0, 3), [2.0, 2.0, 2.0])
    calls = [lambda n=n: f(2.0, n) for n in [3, 4, 3, 4, 3]]
    assert compiles_per_call(ones_then_scale, calls) == __
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        f(2.0, [3])


def test_jit_inside_a_loop_recompiles_unless_the_function_is_the_same():
    """⚠️ 陷阱 / trap：jax.jit(f) 的缓存挂在 f 这个函数对象上。对同一个具名函数反复 jax.jit
    只编译一次；但每次新建的 lambda 或 functools.partial 都是新对象，每次都重新编译。
    jax.jit(f)'s cache hangs on the function object f. Jitting the same named function again
    and again compiles once; a fresh lambda or functools.partial is a new object every time,
    and compiles every time.
    """

    def affine(x, a, b):
        return a * x + b

    def double(x):
        return affine(x, 2.0, 0.0)

    x = np.ones(4, np.float32)
    counts = {}
    for name, make in {
        "lambda": lambda: jax.jit(lambda x: affine(x, 2.0, 0.0)),
        "partial": lambda: jax.jit(functools.partial(affine, a=2.0, b=0.0)),
        "named": lambda: jax.jit(double),
    }.items():
        with counting_compiles() as names:
            for _ in range(3):
                np.testing.assert_array_equal(make()(x), 2 * x)
        counts[name] = len(names)
    assert counts == __


def test_ahead_of_time_lower_and_compile():
    """提前编译（AOT）：jit(f).lower(形状).compile() 在调用之前就编译好，可以只给
    jax.ShapeDtypeStruct 而不给数据。编译好的对象只接受这个签名：换个形状不会重新编译，而是报错。
    Ahead-of-time: jit(f).lower(shapes).compile() compiles before any call, from
    jax.ShapeDtypeStruct alone, without data. The compiled object accepts that signature only:
    another shape does not recompile, it raises.
    """

    def affine(x, w):
        return x @ w + 1.0

    spec_x = jax.ShapeDtypeStruct((8, 3), jnp.float32)
    spec_w = jax.ShapeDtypeStruct((3, 2), jnp.float32)
    with counting_compiles() as names:
        lowered = jax.jit(affine).lower(spec_x, spec_w)
        after_lowering = len(names)
        compiled = lowered.compile()
        after_compiling = len(names)
        out = compiled(np.ones((8, 3), np.float32), np.ones((3, 2), np.float32))
        after_calling = len(names)
    assert (after_lowering, after_compiling, after_calling) == __
    np.testing.assert_array_equal(out, np.full((8, 2), 4.0))
    assert compiled.in_avals[0][0].shape == (8, 3)

    with raises_exactly(__) as info:
        compiled(np.ones((9, 3), np.float32), np.ones((3, 2), np.float32))
    assert "compiled with float32[8,3] and called with float32[9,3]" in str(info.value)
