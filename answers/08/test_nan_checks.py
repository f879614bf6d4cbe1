"""08 · 症状：损失变成 NaN、下标越界却没报错 / symptom: a NaN loss, an out-of-bounds index that raised nothing.

工具：`jax.debug_nans(True)` / `jax.debug_infs(True)`（上下文管理器，退出时恢复设置）让 JAX 在
产生 NaN / inf 的地方抛出异常；`jax.experimental.checkify` 把 NaN、越界下标和你
自己的断言（`checkify.check`）变成函数返回的一个错误值，在 jit 和 vmap 下都能用。

Tools: `jax.debug_nans(True)` / `jax.debug_infs(True)` (context managers that restore the setting
on exit) make JAX raise an exception where a NaN / inf appears;
`jax.experimental.checkify` turns NaNs, out-of-bounds indices and your own assertions
(`checkify.check`) into an error value the function returns, under jit and vmap alike.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def first_bad_primitive(check, f, *args):
    """在 check（jax.debug_nans 或 jax.debug_infs）打开时运行 f(*args)：返回报错消息末尾的
    原语名；没有报错时返回 None。
    Runs f(*args) with check (jax.debug_nans or jax.debug_infs) on: returns the primitive named
    at the end of the error message, or None when nothing was raised.
    """
    try:
        with check(True):
            jax.block_until_ready(f(*args))
    except ArithmeticError as error:  # the flag's exception is one of these / 标志抛出的是其中之一
        return str(error).split()[-1]


def test_debug_nans_names_the_primitive_that_made_the_nan():
    """jit 里的 NaN 默认不报错，只会一路传到损失。打开 jax.debug_nans 后，jit 的输出一旦含 NaN，
    JAX 就逐个原语重放这个函数（“去优化”版本），在第一个产生 NaN 的原语处抛出一个 Python 内置的
    异常，消息末尾就是那个原语的名字。
    By default a NaN inside jit raises nothing and just flows into the loss. With
    jax.debug_nans on, as soon as a jit output contains a NaN, JAX replays the function one
    primitive at a time (the "de-optimised" version) and raises a built-in exception at the
    first primitive that produced a NaN; the message ends with its name.
    """

    def loss(w, x):
        h = jnp.log(x @ w)  # x @ w < 0 for the second row
        return jnp.mean(jnp.tanh(h) ** 2)

    w = jnp.array([1.0, -1.0])
    x = jnp.array([[2.0, 1.0], [1.0, 2.0]])
    assert np.isnan(jax.jit(loss)(w, x))  # silent / 悄无声息
    with raises_exactly(FloatingPointError) as info, jax.debug_nans(True):
        jax.jit(loss)(w, x)
    assert str(info.value).split()[-1] == "log"
    assert not jax.config.jax_debug_nans  # restored on exit / 退出即恢复


def test_debug_infs_sees_only_what_leaves_a_jit():
    """⚠️ 陷阱 / trap: debug_nans / debug_infs 检查的是每个编译好的计算的输出，出了问题才逐个
    原语重放。朴素 softmax 在 exp(100) 处溢出成 inf，然后 inf / inf 变成 NaN。在 jit 下和不加 jit
    时，两个开关各自报告什么？报告的是症状还是病根？
    debug_nans / debug_infs check the outputs of each compiled computation and replay it one
    primitive at a time only when something is wrong. A naive softmax overflows exp(100) to
    inf, then inf / inf becomes NaN. What does each switch report under jit, and without jit?
    The symptom or the cause?
    """

    def naive_softmax(z):
        e = jnp.exp(z)
        return e / e.sum()

    z = jnp.array([10.0, 100.0])
    jitted = jax.jit(naive_softmax)
    assert first_bad_primitive(jax.debug_nans, jitted, z) == "div"
    assert first_bad_primitive(jax.debug_infs, jitted, z) is None
    assert first_bad_primitive(jax.debug_infs, naive_softmax, z) == "exp"
    # The fix: subtract the max first (what jax.nn.softmax does).
    np.testing.assert_allclose(jax.nn.softmax(z), [np.exp(-90.0), 1.0], atol=1e-30)


def test_checkify_returns_float_errors_as_values():
    """checkify.checkify(f, errors=...) 返回一个新函数，输出 (err, out)：err.get() 是错误消息
    （没有错误时为 None），err.throw() 把它抛出来。它可以放进 jit 和 vmap 里；在 vmap 下消息
    还会指出出错的是批里的第几个。这里的检查要抓住两种浮点错误：除以零，以及 NaN（inf / inf）；
    只要这两种：normalize 里还有一个训练时用的 checkify.check（输入不能有负数），这里的数据有正有负，
    它不该报错。错误集合只打开它列出的检查，集合之外的 check 被丢掉。
    checkify.checkify(f, errors=...) returns a function that outputs (err, out): err.get() is the
    error message (None when nothing went wrong) and err.throw() raises it. It works inside jit
    and vmap; under vmap the message even names the index in the batch that failed. Here the
    checks must catch both kinds of floating-point fault: a division by zero and a NaN (inf /
    inf), and those only: normalize also holds a checkify.check its training relies on (no
    negative inputs), and the signed data here must not trip it. An error set turns on the
    checks it names; a check outside it is dropped.
    """

    def normalize(x):
        checkify.check(jnp.all(x >= 0), "negative input")  # for training / 训练时用
        return x / jnp.linalg.norm(x)

    checked = jax.jit(checkify.checkify(normalize, errors=checkify.float_checks))
    err, out = checked(jnp.array([3.0, 4.0]))
    assert err.get() is None
    np.testing.assert_allclose(out, [0.6, 0.8])

    batch = jnp.array([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]])
    err, out = jax.vmap(checked)(batch)
    assert err.get() == "at mapped index 1: division by zero"
    with raises_exactly(checkify.JaxRuntimeError):
        err.throw()
    err, _ = checked(jnp.array([jnp.inf, 1.0]))  # inf / inf: a NaN, no division by zero
    assert err.get() is not None
    err, out = checked(jnp.array([-3.0, 4.0]))  # signed data / 有正有负的数据
    assert err.get() is None
    np.testing.assert_allclose(out, [-0.6, 0.8])


def test_out_of_bounds_indices_are_clamped_silently():
    """⚠️ 陷阱 / trap: jit 里越界的下标不报错：读取时被夹到合法范围（负数先按 Python 规则加上
    长度）。checkify 能把它变成一个错误；只要下标检查：inverse 在表项为 0 时得到 inf，这正是
    调用方想要的，不该报错。
    An out-of-bounds index raises nothing under jit: a read is clamped into range (a negative
    index first gets the length added, as in Python). checkify can turn it into an error; ask
    for the index checks alone: inverse gives inf at a zero entry, which is what its caller
    wants, and must not raise.
    """

    def lookup(table, i):
        return table[i]

    table = jnp.array([10.0, 20.0, 30.0, 40.0, 50.0])
    read = jax.jit(lookup)
    reads = tuple(float(read(table, i)) for i in (7, -1, -7))
    assert reads == (50.0, 50.0, 10.0)

    def inverse(table, i):
        return 1.0 / lookup(table, i)  # inf at a zero entry, on purpose / 0 处得到 inf，有意为之

    checked = jax.jit(checkify.checkify(inverse, errors=checkify.index_checks))
    err, _ = checked(table, 7)
    assert "index 7 is out of bounds for axis 0 with size 5" in str(err.get())
    err, out = checked(table.at[4].set(0.0), -1)
    assert err.get() is None and float(out) == float("inf")


def test_checkify_check_needs_to_be_functionalized():
    """checkify.check(pred, msg, *args) 是可以放进 jit 的断言（Python 的 assert 碰到 tracer 会
    失败）。但它必须经过 checkify.checkify 变成返回值，否则 jit 在把追踪到的程序降级去编译时就
    报错（追踪本身不报错）。检查失败并不会让程序停下：被检查的函数照样返回输出。输出里是什么？
    checkify.check(pred, msg, *args) is an assertion that works under jit (a Python assert fails
    on a tracer). But it has to be functionalized by checkify.checkify, into a returned value;
    otherwise jit raises when it lowers the traced program for compilation (tracing itself
    goes through). A failed check does not stop the program: the checked function still
    returns its output. What does that output hold?
    """

    def safe_sqrt(x):
        checkify.check(jnp.all(x >= 0), "negative input: {}", jnp.min(x))
        return jnp.sqrt(x)

    x = jnp.array([4.0, -1.0])
    assert "check" in str(jax.make_jaxpr(safe_sqrt)(x))  # tracing goes through / 追踪本身没问题
    with raises_exactly(ValueError) as info:
        jax.jit(safe_sqrt)(x)
    assert "functionaliz" in str(info.value)

    checked = jax.jit(checkify.checkify(safe_sqrt))
    err, out = checked(x)
    assert err.get().startswith("negative input: -1.0")
    assert np.isnan(np.asarray(out)).tolist() == [False, True]
    err, out = checked(jnp.array([4.0, 9.0]))
    assert err.get() is None
    np.testing.assert_array_equal(out, [2.0, 3.0])
