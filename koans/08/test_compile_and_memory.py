"""08 · 症状：训练变慢、内存不够 / symptom: training got slow, memory ran out.

工具：`jax.log_compiles(True)` 为每次编译写一条日志，`jax.explain_cache_misses(True)` 说明为什么
没命中缓存（都是上下文管理器；日志走 logging，用 pytest 的 caplog 就能收集）；
`compiled.memory_analysis()` 在运行之前就报出参数、输出和临时缓冲区的字节数；
`jax.live_arrays()` 列出此刻还活着的每一个设备数组——找泄漏就数它。

Tools: `jax.log_compiles(True)` logs every compilation and `jax.explain_cache_misses(True)` says
why the cache missed (both are context managers; they log through logging, so pytest's caplog
collects them); `compiled.memory_analysis()` reports the bytes of arguments, outputs and
temporary buffers before anything runs; `jax.live_arrays()` lists every device array alive
right now: count them to find a leak.
"""

import itertools
import logging
import re

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)


def messages(caplog, text):
    """caplog 收集到的、包含 text 的日志消息。The captured log messages that contain text."""
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def make_sgd_step():
    """每次返回一个新的 jit 函数（自己的编译缓存）：线性回归的一步 SGD。
    Returns a fresh jitted function (with its own compilation cache): one SGD step of linear
    regression.
    """

    def sgd_step(w, x, y, lr):
        grad = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        return w - lr * grad

    return jax.jit(sgd_step)


def batches(x, y, size, drop_remainder):
    """按顺序切成大小为 size 的批；drop_remainder 决定是否丢掉最后那个不满的批。
    Cuts the data into consecutive batches of size; drop_remainder decides whether the last,
    short batch is dropped.
    """
    stop = len(x) - len(x) % size if drop_remainder else len(x)
    for i in range(0, stop, size):
        yield x[i : i + size], y[i : i + size]


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 3)).astype(np.float32)
    return x, (x @ np.array([1.0, -2.0, 0.5], np.float32)).astype(np.float32)


def test_log_compiles_finds_a_ragged_last_batch(caplog):
    """10 个样本、每批 4 个：最后一批只有 2 个。新形状就是新程序，log_compiles 的日志把它
    暴露出来。训练 3 个 epoch 一共编译几次？丢掉不满的批（或者补齐并加掩码）就只编译一次。
    Ten examples in batches of four: the last batch holds two. A new shape is a new program,
    and log_compiles' records expose it. How many compilations do three epochs cost? Drop the
    short batch (or pad it and mask) and there is only one.
    """
    x, y = data()

    def train(drop_remainder):
        step, w = make_sgd_step(), jnp.zeros(3)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="jax"), jax.log_compiles(True):
            for _ in range(3):
                for xb, yb in batches(x, y, 4, drop_remainder):
                    w = step(w, xb, yb, 0.1)
        return messages(caplog, "Compiling jit(sgd_step)")

    ragged = train(drop_remainder=False)
    assert len(ragged) == __
    assert "float32[2,3]" in ragged[1]
    assert len(train(drop_remainder=__)) == 1
    assert not jax.config.jax_log_compiles  # restored on exit / 退出即恢复


def changed_arguments(miss):
    """一条 "TRACING CACHE MISS" 消息里，说明“哪里变了”的参数名（"* at NAME, now ..."）。
    The argument names a "TRACING CACHE MISS" message says have changed ("* at NAME, now ...").
    """
    return re.findall(r"\* at (.+?), now", miss)


def test_explain_cache_misses_blames_a_weakly_typed_learning_rate(caplog):
    """⚠️ 陷阱 / trap: 学习率在热身阶段是 Python float（弱类型），之后来自 NumPy 计划
    （np.float32，强类型）：值和 dtype 都一样，缓存键却不同，于是多编译一次。
    explain_cache_misses 直接点名是哪个参数、哪里不同（weak_type）。
    The learning rate is a Python float (weakly typed) during warm-up and then comes from a
    NumPy schedule (np.float32, strongly typed): same value and dtype, different cache key, one
    more compilation. explain_cache_misses names the argument and the difference (weak_type).
    """
    x, y = data()
    cosine = np.float32(0.1) * np.cos(np.linspace(0, 1.5, 3, dtype=np.float32))
    schedule = [0.05, 0.1, *cosine]  # Python floats, then np.float32 values

    def train(convert):
        step, w = make_sgd_step(), jnp.zeros(3)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="jax"), jax.explain_cache_misses(True):
            for lr in schedule:
                w = step(w, x, y, convert(lr))
        return messages(caplog, "TRACING CACHE MISS"), w

    misses, w_mixed = train(lambda lr: lr)
    assert len(misses) == 2  # the first is "never seen function"
    assert changed_arguments(misses[1]) == __
    assert "weak_type=True" in misses[1]
    misses, w_fixed = train(lambda lr: __)
    assert len(misses) == 1
    np.testing.assert_allclose(w_fixed, w_mixed, rtol=1e-6)  # the same schedule / 同一个学习率计划


def test_memory_analysis_finds_the_big_temporary():
    """“模型不大，却内存不够”：compiled.memory_analysis() 在运行前就报出临时缓冲区的字节数。
    低秩乘积 (u @ v) @ x 先造出一个 N×N 的中间矩阵；换个括号 u @ (v @ x)，结果相同，
    中间矩阵只有 k×k。
    "The model is small, yet memory runs out": compiled.memory_analysis() reports the bytes of
    temporary buffers before anything runs. The low-rank product (u @ v) @ x first builds an N×N
    intermediate; bracket it as u @ (v @ x) and the result is the same while the intermediate
    is k×k.
    """
    n, k = 1024, 8
    spec = {
        "u": jax.ShapeDtypeStruct((n, k), jnp.float32),
        "v": jax.ShapeDtypeStruct((k, n), jnp.float32),
        "x": jax.ShapeDtypeStruct((n, k), jnp.float32),
    }

    def naive(u, v, x):
        return (u @ v) @ x

    def fixed(u, v, x):
        return u @ (v @ x)

    def temp_bytes(f):
        return jax.jit(f).lower(**spec).compile().memory_analysis().temp_size_in_bytes

    assert temp_bytes(naive) == np.prod(__) * 4
    assert temp_bytes(fixed) * 100 < temp_bytes(naive)

    rng = np.random.default_rng(0)
    u, v, x = (rng.normal(size=s.shape).astype(np.float32) for s in spec.values())
    np.testing.assert_allclose(jax.jit(fixed)(u, v, x), naive(u, v, x), rtol=1e-3, atol=1e-3)


def unused_shape(columns):
    """此刻没有任何活着的数组用到的形状 (rows, columns)。按形状数数只有在这个形状只属于本 koan
    时才准：同一进程里先跑的代码可能还留着数组（失败的 koan 的栈帧连同局部变量留在 pytest
    的引用环里，要等垃圾回收器哪一次运行才释放）。
    A shape (rows, columns) that no array alive right now has. Counting by shape is exact only
    when the shape belongs to this koan alone: code that ran earlier in the process may still
    hold arrays (a failed koan's frames and their local variables stay in a reference cycle of
    pytest's until Python's garbage collector happens to run).
    """
    taken = {a.shape for a in jax.live_arrays()}
    return next((rows, columns) for rows in itertools.count(123) if (rows, columns) not in taken)


def test_live_arrays_find_a_leak():
    """⚠️ 陷阱 / trap: 把每一步的参数留在 Python 列表里（“记录历史”），每个都占着设备内存。
    jax.live_arrays() 列出所有活着的数组，按形状数一数就找到泄漏。只记录需要的标量。
    Keeping every step's parameters in a Python list ("to record the history") keeps each one
    alive in device memory. jax.live_arrays() lists every live array; count them by shape and
    the leak shows. Record only the scalars you need.
    """
    shape = unused_shape(columns=7)

    def live(shape):
        return sum(a.shape == shape for a in jax.live_arrays())

    @jax.jit
    def step(w):
        return w * 0.5, jnp.sum(w**2)

    def run(record):
        w, history = jnp.ones(shape), []
        for _ in range(5):
            w, loss = step(w)
            history.append(record(w, loss))
        return history, live(shape)

    history, alive = run(lambda w, loss: (w, loss))
    assert alive == __
    del history
    assert live(shape) == 0

    history, alive = run(lambda w, loss: __)
    assert alive == 1  # only the current w / 只剩当前的 w
    assert not any(isinstance(h, jax.Array) for h in history)  # host numbers / 主机上的数
    np.testing.assert_allclose(history, np.prod(shape) * 0.25 ** np.arange(5), rtol=1e-6)


def compiled_bytes(fn, *specs):
    """不运行 fn，只编译：返回 jax.jit(fn) 对这些输入规格（jax.ShapeDtypeStruct）编译后需要的
    字节数——参数、输出和临时缓冲区之和，都来自编译结果的 memory_analysis()。大约 3 行。
    Without running fn, only compiling: return how many bytes jax.jit(fn) needs for these input
    specs (jax.ShapeDtypeStruct) once compiled, the sum of arguments, outputs and temporaries,
    all from the compiled program's memory_analysis(). About 3 lines.
    """
    todo("compiled_bytes: lower, compile, memory_analysis")


def test_memory_analysis_answers_before_anything_runs():
    """写 compiled_bytes：一个大任务跑到一半才内存不够最浪费。只用形状和 dtype 编译，
    memory_analysis() 就能事先说出要多少内存：这里 (u @ v) @ x 要一个 GiB 的临时矩阵，
    换个结合顺序就只比输入和输出多几十个字节；一串逐元素运算的中间结果被 XLA 融合掉，不占内存。
    程序一次都没有运行：下面每个函数运行时都会回调主机，计数一直是零。
    Write compiled_bytes: running out of memory halfway through a big job is the most wasteful
    way to find out. Compiling from shapes and dtypes alone, memory_analysis() tells the memory
    in advance: here (u @ v) @ x needs a GiB temporary, the other association a few dozen bytes
    beyond its inputs and output, and a chain of elementwise operations is fused by XLA and
    keeps no intermediate. The program never runs: each function below calls back to the host
    when it runs, and the count stays at zero.
    """
    n, k = 2**14, 8
    specs = (
        jax.ShapeDtypeStruct((n, k), jnp.float32),
        jax.ShapeDtypeStruct((k, n), jnp.float32),
        jax.ShapeDtypeStruct((n,), jnp.float32),
    )
    inputs_and_output = (2 * n * k + 2 * n) * 4
    runs = []  # one entry per run, written by the host callback / 每运行一次，主机回调记一笔

    def naive(u, v, x):
        jax.debug.callback(lambda: runs.append("naive"))
        return (u @ v) @ x

    def reassociated(u, v, x):
        jax.debug.callback(lambda: runs.append("reassociated"))
        return u @ (v @ x)

    def elementwise(u, v, x):  # its jaxpr names (n, k) intermediates; XLA fuses them away
        jax.debug.callback(lambda: runs.append("elementwise"))
        return jnp.sum(jnp.exp(u) * 2.0, axis=1) + jnp.sum(jnp.tanh(v), axis=0) + x

    big, small = compiled_bytes(naive, *specs), compiled_bytes(reassociated, *specs)
    print(f"compiled bytes: naive {big}, reassociated {small}")
    assert big >= inputs_and_output + n * n * 4  # the n×n temporary / n×n 的临时矩阵
    assert inputs_and_output <= small < inputs_and_output + 1024
    assert inputs_and_output <= compiled_bytes(elementwise, *specs) < inputs_and_output + 1024
    assert runs == []  # compiled, never run / 编译了，从没运行
    jax.jit(reassociated)(*(jnp.zeros(s.shape, s.dtype) for s in specs)).block_until_ready()
    assert runs == ["reassociated"]  # a run does call back / 真的运行时会回调
