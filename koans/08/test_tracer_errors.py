"""08 · 症状：追踪时报错 / symptom: an error while tracing.

这里的五个错误有四个说的是同一件事：代码在追踪时需要一个具体的值（一个 Python int、一个
NumPy 数组、一个依赖数据的形状），而 tracer 只知道形状和 dtype。第五个（UnexpectedTracerError）
是另一回事：一个 tracer 逃出了它的追踪，在追踪结束后又被用到。它们都在 `jax.errors` 里；
认出是哪一个，就知道该用哪种修法：static_argnums、jnp 替代 np、size=、where=、把值作为输出返回。

Four of the five errors here say the same thing: while tracing, the code needed a concrete
value (a Python int, a NumPy array, a data-dependent shape) and a tracer only knows a shape and
a dtype. The fifth (UnexpectedTracerError) is different: a tracer escaped its trace and was
used after tracing ended. They all live in `jax.errors`; recognise which one you got and you
know the fix: static_argnums, jnp instead of np, size=, where=, returning the value as an output.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def test_data_dependent_shape_needs_a_static_size():
    """jnp.nonzero 的输出长度取决于数据，jit 里无法追踪：追踪器需要一个具体的数却只有抽象值。
    先认出这个错误，再给出 size=（一个静态的上限）和 fill_value：输出形状就固定了，多余的位置
    用 fill_value 补齐。
    jnp.nonzero's output length depends on the data, which jit cannot trace: the tracer would
    need a concrete number and has only an abstract value. Name the error, then give size= (a
    static upper bound) and a fill_value: the output shape is fixed, the extra slots hold
    fill_value.
    """

    def positive_indices(x):
        return jnp.nonzero(x > 0)[0]

    x = jnp.array([3.0, -1.0, 0.5, -2.0, 4.0])
    with raises_exactly(__):
        jax.jit(positive_indices)(x)

    @jax.jit
    def positive_indices_fixed(x):
        return jnp.nonzero(x > 0, size=__, fill_value=-1)[0]

    for v in (x, -x, jnp.ones(5)):
        found = np.flatnonzero(np.asarray(v) > 0)
        expected = np.concatenate([found, np.full(5 - len(found), -1)])
        np.testing.assert_array_equal(positive_indices_fixed(v), expected)


def test_numpy_functions_cannot_take_a_tracer():
    """NumPy 函数要把参数转成 np.ndarray，而 tracer 没有具体的值可以转换。认出这个错误；
    修法是把代码写成“数组模块作为参数”（xp），jit 里传入能处理 tracer 的模块。
    A NumPy function converts its argument to an np.ndarray, and a tracer has no concrete value
    to convert. Name the error; the fix is code written against an array module passed in (xp),
    handed a module that understands tracers under jit.
    """

    def unit(x, xp=np):
        return x / xp.linalg.norm(x)

    x = jnp.array([3.0, 4.0])
    np.testing.assert_allclose(unit(np.asarray(x)), [0.6, 0.8])  # fine outside jit
    with raises_exactly(__):
        jax.jit(unit)(x)

    fixed = jax.jit(lambda x: unit(x, xp=__))
    np.testing.assert_allclose(fixed(x), [0.6, 0.8], rtol=1e-6)


def test_a_python_loop_count_must_be_static():
    """range(n) 需要一个 Python int；n 被追踪时，range 调用的是 tracer 的 __index__，于是报错。
    认出这个错误，再把 n 声明为静态参数（每个新值编译一次）；另一种修法是 lax.fori_loop。
    range(n) needs a Python int; when n is traced, range calls the tracer's __index__ and
    fails. Name the error, then declare n static (one compilation per new value); lax.fori_loop
    is the other fix.
    """

    def repeat_sin(x, n):
        for _ in range(n):
            x = jnp.sin(x)
        return x

    x = jnp.array([0.5, 1.0])
    with raises_exactly(__):
        jax.jit(repeat_sin)(x, 3)

    fixed = jax.jit(repeat_sin, static_argnums=__)
    np.testing.assert_allclose(fixed(x, 3), np.sin(np.sin(np.sin(np.asarray(x)))), rtol=1e-6)


def test_a_tracer_that_escapes_is_unexpected():
    """⚠️ 陷阱 / trap: 在 jit 里把中间值存进外部对象（全局字典、self.cache）是副作用：存下来的
    是 tracer，追踪结束后它就失效了，之后再用它就会报错。想要中间值，就把它作为输出返回。
    Storing an intermediate value in an outside object (a global dict, self.cache) inside jit
    is a side effect: what gets stored is a tracer, dead once tracing ends, and using it later
    raises. To get an intermediate value out, return it as an output.
    """
    stash = {}

    @jax.jit
    def forward(w, x):
        h = jnp.tanh(x @ w)
        stash["h"] = h  # side effect: keeps a tracer / 副作用：留下了一个 tracer
        return jnp.sum(h**2)

    w = jnp.array([[0.5], [-0.25]])
    x = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    forward(w, x)
    with raises_exactly(__):
        stash["h"] + 1

    @jax.jit
    def forward_fixed(w, x):
        h = jnp.tanh(x @ w)
        return jnp.sum(h**2), __

    loss, h = forward_fixed(w, x)
    np.testing.assert_allclose(h, np.tanh(np.asarray(x) @ np.asarray(w)), rtol=1e-6)
    np.testing.assert_allclose(loss, np.sum(np.asarray(h) ** 2), rtol=1e-6)


def test_boolean_mask_indexing_needs_a_concrete_mask():
    """x[x > 0] 的形状取决于数据，jit 里无法追踪（这次的错误是一个 IndexError，不是 TypeError）。
    不要把元素挑出来，而是保持形状、用 where= 告诉归约哪些元素参与。
    The shape of x[x > 0] depends on the data, which jit cannot trace (this time the error is
    an IndexError, not a TypeError). Do not pick the elements out: keep the shape and tell the
    reduction which elements count with where=.
    """

    def mean_of_positives(x):
        return x[x > 0].mean()

    x = jnp.array([2.0, -1.0, 4.0, -3.0])
    assert float(mean_of_positives(x)) == 3.0  # eager: fine / 不加 jit 没问题
    with raises_exactly(__) as info:
        jax.jit(mean_of_positives)(x)
    assert isinstance(info.value, IndexError)

    @jax.jit
    def mean_of_positives_fixed(x):
        return __

    assert float(mean_of_positives_fixed(x)) == 3.0
    assert float(mean_of_positives_fixed(jnp.array([1.0, 5.0, -7.0]))) == 3.0
    assert float(mean_of_positives_fixed(jnp.array([0.0, -0.5, 6.0]))) == 6.0  # 0 is not positive
