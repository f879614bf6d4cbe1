"""01 · 闭包与追踪：捕获的值变成常量 / closures under tracing: captured values become constants."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import Partial

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import primitives


def test_captured_array_becomes_a_constant_of_the_jaxpr():
    """闭包捕获的数组不是输入：它成为 staged 程序的常量
    （jaxpr.consts / constvars，打印在 `;` 之前），只有函数参数出现在 invars 里。
    A closed-over array is not an input: it becomes a constant of the staged program
    (jaxpr.consts / constvars, printed before the `;`); only the arguments are invars.
    """
    w = jnp.array([1.0, 2.0, 3.0])

    def f(x):
        return x * w  # w is captured, x is an argument

    jaxpr = jax.make_jaxpr(f)(jnp.ones(3))
    assert len(jaxpr.invars) == 1
    assert len(jaxpr.consts) == 1
    np.testing.assert_array_equal(jaxpr.consts[0], w)
    assert str(jaxpr).startswith("{ lambda a:f32[3]; b:f32[3].")  # constvar ; invar


def test_captured_python_scalar_is_inlined_and_captured_array_is_baked_into_hlo():
    """捕获的 Python 标量直接内联成 jaxpr 里的字面量，而不是常量数组；
    捕获的数组在 jit 降级后被烘焙进 StableHLO，成为一个 stablehlo.constant。
    A captured Python scalar is inlined as a literal, not kept as a constant array; a captured array is
    baked into the lowered StableHLO as a stablehlo.constant.
    """
    jaxpr = jax.make_jaxpr(lambda x: x * 2.5)(jnp.ones(3))
    assert jaxpr.consts == []
    assert "mul a 2.5:f32[]" in str(jaxpr)

    w = jnp.array([1.0, 2.0, 3.0])
    hlo = jax.jit(lambda x: x * w).lower(jnp.ones(3)).as_text()
    assert "stablehlo.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]>" in hlo
    signature = hlo.split("func.func public @main(")[1].split(")")[0]
    assert signature.count("%arg") == 1  # parameters of the compiled program


def test_jit_keeps_the_old_value_of_a_changed_global():
    """⚠️ 陷阱 / trap：jit 只在追踪时读取闭包里的 Python 值（全局变量同理），之后复用缓存的程序，
    所以值改了以后，同样形状的调用仍返回旧结果；换一个形状触发重新追踪，才读到新值——
    同一函数两种答案。
    jit reads a captured Python value (or a global) only while tracing; the cached program keeps
    the old value. After it changes, a call with the same shape still gives the old result,
    while a new shape retraces and sees the new value: one function, two answers.
    """
    config = {"scale": 2.0}

    @jax.jit
    def scaled(x):
        return x * config["scale"]

    assert float(scaled(1.0)) == 2.0
    config["scale"] = 5.0
    assert float(scaled(1.0)) == 2.0
    np.testing.assert_array_equal(scaled(jnp.ones(2)), [5.0, 5.0])


def test_pass_changing_values_as_arguments():
    """❌ 旧写法 / ✅ 推荐写法：会变的值别藏在闭包/全局里，作为参数传进去。
    作为普通（被追踪的）参数：值变了结果跟着变，且不重新追踪；
    作为静态参数：结果也对，但每个新值都重新追踪、重新编译。
    Pass values that change as arguments instead of closing over them. As a traced argument
    the result follows the value without a retrace; as a static argument it is also right, but
    every new value retraces. (A Python side effect runs only while tracing: it counts traces.)
    """
    traces = []

    @jax.jit
    def traced_scale(x, scale):
        traces.append("traced")
        return x * scale

    assert float(traced_scale(1.0, 2.0)) == 2.0
    assert float(traced_scale(1.0, 10.0)) == 10.0
    assert len(traces) == 1

    static_traces = []

    @functools.partial(jax.jit, static_argnames="scale")
    def static_scale(x, scale):
        static_traces.append("traced")
        return x * scale

    assert float(static_scale(1.0, scale=2.0)) == 2.0
    assert float(static_scale(1.0, scale=10.0)) == 10.0
    assert len(static_traces) == 2


def test_tree_util_partial_is_a_pytree_functools_partial_is_not():
    """functools.partial 绑定的参数藏在一个不透明对象里：jit 不知道怎么把它当作参数。
    jax.tree_util.Partial 是 pytree：绑定的数组/数值成为叶子（被追踪），函数本身在树结构里（静态），
    换一个绑定值不会重新追踪。
    A functools.partial is opaque to JAX: jit does not know how to take it as an argument.
    jax.tree_util.Partial is a pytree: the bound values are leaves (traced), the function is
    part of the tree structure (static), so a new bound value does not retrace.
    """

    def scale(x, k):
        return x * k

    traces = []

    @jax.jit
    def apply(fn, x):
        traces.append("traced")
        return fn(x)

    with raises_exactly(TypeError):
        apply(functools.partial(scale, k=2.0), jnp.ones(2))

    bound = Partial(scale, k=2.0)
    assert jax.tree_util.tree_leaves(bound) == [2.0]
    np.testing.assert_array_equal(apply(bound, jnp.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(apply(Partial(scale, k=10.0), jnp.ones(2)), [10.0, 10.0])
    assert len(traces) == 1


def random_features(x, seed=0, features=16):
    """随机傅里叶特征 sqrt(2 / features) · cos(x @ w + b)，x 是 [N, D]。投影在追踪时就抽好，成为程序
    的常量：w = jax.random.normal(k1, (D, features))，b = jax.random.uniform(k2, (features,)) · 2π，
    其中 k1, k2 = jax.random.split(jax.random.key(seed))。把抽样放进
    `with jax.ensure_compile_time_eval():`，jit 之后的程序里就不再有随机数生成。大约 5 行。

    Random Fourier features sqrt(2 / features) · cos(x @ w + b) for x of shape [N, D]. The
    projection is drawn at trace time and becomes a constant of the program:
    w = jax.random.normal(k1, (D, features)), b = jax.random.uniform(k2, (features,)) · 2π,
    with k1, k2 = jax.random.split(jax.random.key(seed)). Draw them inside
    `with jax.ensure_compile_time_eval():` and the jitted program generates no random numbers.
    About 5 lines.
    """
    with jax.ensure_compile_time_eval():
        k1, k2 = jax.random.split(jax.random.key(seed))
        w = jax.random.normal(k1, (x.shape[-1], features))
        b = jax.random.uniform(k2, (features,)) * 2 * jnp.pi
    return jnp.sqrt(2.0 / features) * jnp.cos(x @ w + b)


def test_ensure_compile_time_eval_turns_trace_time_work_into_constants():
    """✍️ 实现 random_features。jit 追踪时，连只依赖常量的 jax.random 调用也被暂存进程序，每次调用都要
    重新生成；NumPy 又看不到 tracer 里的值。jax.ensure_compile_time_eval() 里的运算在追踪时立即执行，
    只要输入都是具体值，结果就是具体的数组（依赖参数的运算仍是 tracer）。检验：数值与不用 jit 的参照
    一致，jaxpr 里没有任何随机数原语，投影是程序的常量。
    Write random_features. Under jit tracing, even a jax.random call that depends on constants
    only is staged into the program and generates its numbers again on every call; and NumPy
    cannot see inside a tracer. Inside jax.ensure_compile_time_eval() operations run at once
    while tracing: when all their inputs are concrete the result is a concrete array (an
    operation on an argument is still a tracer). Checked: the values equal a reference run
    without jit, the jaxpr holds no random-number primitive, and the projection is a constant of
    the program.
    """
    seen = {}

    def probe(x):
        with jax.ensure_compile_time_eval():
            seen["constant"] = jnp.arange(3.0) * 2
            seen["argument"] = x * 2
        return x

    jax.jit(probe)(jnp.ones(3))
    assert not isinstance(seen["constant"], jax.core.Tracer)
    assert isinstance(seen["argument"], jax.core.Tracer)

    def staged(x):  # the same draws without ensure_compile_time_eval
        w = jax.random.normal(jax.random.key(0), (x.shape[-1], 16))
        return jnp.cos(x @ w)

    x = jnp.asarray(np.random.default_rng(0).normal(size=(5, 3)), jnp.float32)
    randomness = {"random_bits", "random_seed", "random_wrap", "threefry2x32"}
    assert primitives(jax.make_jaxpr(staged)(x).jaxpr) & randomness

    k1, k2 = jax.random.split(jax.random.key(3))
    w = jax.random.normal(k1, (3, 8))
    b = jax.random.uniform(k2, (8,)) * 2 * np.pi
    want = np.sqrt(2.0 / 8) * np.cos(np.asarray(x) @ np.asarray(w) + np.asarray(b))
    np.testing.assert_allclose(
        jax.jit(lambda x: random_features(x, 3, 8))(x), want, rtol=1e-5, atol=1e-5
    )
    closed = jax.make_jaxpr(lambda x: random_features(x, 3, 8))(x)
    assert not primitives(closed.jaxpr) & randomness, primitives(closed.jaxpr)
    assert "cos" in primitives(closed.jaxpr)
    assert sorted(c.shape for c in closed.consts if hasattr(c, "shape")) == [(3, 8), (8,)]
