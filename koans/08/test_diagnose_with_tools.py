"""08 · 用工具找病根，而不是猜 / find the cause with the tool, not by guessing.

前面的文件让你预测 `jax.explain_cache_misses` 和 `jax.live_arrays()` 会报出什么；这里由你写
用它们诊断的代码。两个函数都是通用的：交给它们任何一个程序，它们说出是哪个参数在让 jit 重新编译，
以及循环留下了哪些设备数组。测试用别的办法（逐个参数地数 jit 又追踪了几次、查看程序自己的
缓存）算出正确答案来核对。

The files before this one ask you to predict what `jax.explain_cache_misses` and
`jax.live_arrays()` report; here you write the code that diagnoses with them. Both functions
are generic: hand them any program and they say which argument makes jit recompile and which
device arrays a loop leaves behind. The tests check them against answers found another way
(counting how often jit traces again, one argument at a time; looking into the program's own
cache).
"""

import re
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import recording_jax_logs


def recompiling_arguments(fn, calls):
    """用 jax.explain_cache_misses 找出让 jit 重新编译的参数：把 jax.jit(fn) 依次用 calls 里的
    每个参数元组（按位置）调用，收集 "jax" 日志器写出的 "TRACING CACHE MISS" 消息（可以用
    jaxkoans.api.probes.recording_jax_logs），返回这些消息点名的参数名（每行 "* at 参数名, now …"），
    去重后排序。第一次调用的未命中（"never seen function"）不点名任何参数。fn 可能之前就跑过
    （追踪缓存跟着函数走，jax.jit 的每个包装共用它）：缓存里已有的调用不算未命中。大约 6 行。
    With jax.explain_cache_misses, find the arguments that make jit recompile: call jax.jit(fn)
    with each argument tuple of calls in turn (positionally), collect the "TRACING CACHE MISS"
    messages of the "jax" logger (jaxkoans.api.probes.recording_jax_logs does that) and return the
    argument names they blame (each line "* at NAME, now ..."), without repeats, sorted. The
    first call's miss ("never seen function") blames no argument. fn may have run before (the
    tracing cache goes with the function, shared by every jax.jit of it): a call the cache
    already holds is no miss. About 6 lines.
    """
    todo("recompiling_arguments: explain_cache_misses, then read the '* at NAME' lines")


def make_step():
    """一步被遮罩的梯度下降，每次调用都是一个新的函数对象：jit 的追踪缓存按函数对象保存（同一个
    函数的所有 jax.jit 包装共用它），所以每个测试都从空缓存开始。
    One masked gradient step, a new function object on every call: jit's tracing cache is kept
    per function object (shared by every jax.jit wrapper of that function), so each test starts
    from an empty one.
    """

    def step(w, x, lr, mask):
        grad = jax.grad(lambda w: jnp.mean((x @ w) ** 2 * mask))(w)
        return w - lr * grad

    return step


ARGUMENTS = ["w", "x", "lr", "mask"]


def calls_where(culprit):
    """(warm_up, calls)：lr 和 mask 在 JAX 看来各有两种类型（弱类型的 Python float 与
    np.float32，float32 与 bool）。calls 是五次调用：x 和 lr 的值每次都变，x 还在 NumPy 数组和
    jax.Array 之间来回换（Python 类型变了，形状和 dtype 没变），lr 和 mask 每隔一次一起换类型。
    warm_up 是之前跑过的两次调用（比如一遍预热）：culprit 之外的那个参数的两种类型都在里面，
    culprit 只有第一种。
    (warm_up, calls): lr and mask each come in two types as JAX sees them (a weakly typed
    Python float or np.float32, float32 or bool). calls are five calls: x and lr change value
    every time, x also switches between a NumPy array and a jax.Array (another Python type, the
    same shape and dtype), and lr and mask switch types together every other call. warm_up are
    two calls run before (a warm-up pass, say): they hold both types of the argument that is not
    culprit, and only the first type of culprit.
    """
    rng = np.random.default_rng(0)

    def call(i, kinds):
        x = rng.normal(size=(4, 3)).astype(np.float32)
        if i % 2:
            x = jnp.asarray(x)  # same shape and dtype / 形状和 dtype 相同
        lr = 0.1 / (1 + i)
        if kinds["lr"]:
            lr = np.float32(lr)  # same value and dtype, strongly typed / 值和 dtype 相同，强类型
        mask = np.array([1, 1, 0, 1], np.float32)
        if kinds["mask"]:
            mask = mask.astype(bool)  # same values, another dtype / 值相同，dtype 不同
        return (np.zeros(3, np.float32), x, lr, mask)

    other = {"lr": "mask", "mask": "lr"}[culprit]
    warm_up = [call(5 + i, {other: i, culprit: 0}) for i in range(2)]
    calls = [call(i, {other: i % 2, culprit: i % 2}) for i in range(5)]
    return warm_up, calls


def retraces_when_only(name, step, warm_up, calls):
    """一个新函数（调用 step）的 jit 先追踪 warm_up 和 calls[0]，然后只让 name 这一个参数按
    calls 变化、其余参数固定为第一次调用的值时，它又追踪（也就是又编译）几次。只追踪不编译：
    数函数体运行了几次。
    A jit of a new function (calling step) first traces warm_up and calls[0]; how many more
    times it traces (and so compiles) when only the argument name then varies along calls and
    the others keep their first values. It traces without compiling and counts how often the
    function's body runs.
    """
    traced = []

    def f(*args):
        traced.append(args)
        return step(*args)

    jitted = jax.jit(f)
    for args in [*warm_up, calls[0]]:
        jitted.trace(*args)
    traced.clear()
    for args in calls:
        jitted.trace(
            *(
                a if n == name else first
                for n, a, first in zip(ARGUMENTS, args, calls[0], strict=True)
            )
        )
    return len(traced)


@pytest.mark.parametrize("culprit", ["lr", "mask"])
def test_explain_cache_misses_names_the_argument_that_recompiles(culprit):
    """写 recompiling_arguments：“训练越来越慢”的常见原因是每隔一步就重新编译一次。
    猜是哪个参数不如让 explain_cache_misses 点名：值每次都变的参数不会触发编译，变的是类型
    （弱类型的 Python float 与 np.float32，float32 与 bool）的参数才会——但只在缓存里还没有
    这种类型时。缓存跟着函数走：同一个函数先前（比如预热时）见过的类型不再编译，哪怕它和上一次
    调用的类型不同；从没跑过的函数则每种新类型都要编译。
    Write recompiling_arguments: "training keeps getting slower" often means a recompilation
    every other step. Rather than guess which argument, let explain_cache_misses name it: an
    argument whose value changes every call does not compile again; one whose type (a weakly
    typed Python float against np.float32, float32 against bool) changes does, but only when
    the cache does not hold that type yet. The cache goes with the function: a type the same
    function saw before (in a warm-up, say) compiles no more, even where it differs from the
    call before; a function never run compiles each new type.
    """
    step = make_step()
    warm_up, calls = calls_where(culprit)
    warm = jax.jit(step)  # the warm-up pass, another jit of the same function / 预热
    for args in warm_up:
        warm(*args)
    # The known answer, from the function's behaviour / 由函数的行为算出的正确答案
    expected = [n for n in sorted(ARGUMENTS) if retraces_when_only(n, step, warm_up, calls)]
    assert expected == [culprit]
    assert recompiling_arguments(step, calls) == expected

    def renamed(params, batch, rate, keep):  # never run: its cache is empty / 从没跑过
        return step(params, batch, rate, keep)

    names = {"w": "params", "x": "batch", "lr": "rate", "mask": "keep"}
    cold = [n for n in ARGUMENTS if retraces_when_only(n, renamed, [], calls)]
    assert sorted(cold) == ["lr", "mask"]
    assert recompiling_arguments(renamed, calls) == sorted(names[n] for n in cold)


def leaked_shapes(run):
    """用 jax.live_arrays() 找出 run() 留下的设备数组：记下调用前活着的数组，调用 run()（丢掉它的
    返回值：返回的东西不算泄漏），再看调用后哪些活着的数组是新的（按对象比较，不按形状），返回它们
    的形状，排好序的列表。调用前已经活着的数组（哪怕形状相同）不算。大约 4 行。
    With jax.live_arrays(), find the device arrays run() leaves behind: note the arrays alive
    before, call run() (dropping what it returns: a return value is no leak), then see which
    arrays alive afterwards are new (compare objects, not shapes) and return their shapes as a
    sorted list. Arrays already alive before the call (even of the same shape) do not count.
    About 4 lines.
    """
    todo("leaked_shapes: jax.live_arrays() before and after run()")


def make_training_loop(debug_every, width):
    """一个“带调试缓存”的训练循环：每 debug_every 步把隐藏层的一部分留在 cache 里（事后查看用）。
    返回 (run, cache)；run() 返回最后的参数。
    A training loop "with a debug cache": every debug_every steps it keeps part of the hidden
    layer in cache (to look at later). Returns (run, cache); run() returns the final parameters.
    """
    cache = {}

    @jax.jit
    def forward(w, x):
        return jnp.tanh(x @ w)

    def run():
        w = jnp.full((5, 9), 0.1)
        x = jnp.ones((11, 5))
        for i in range(6):
            h = forward(w, x)  # freed at the next step / 下一步就释放
            if i % debug_every == 0:
                cache[i] = h[: i + 2, :width]
            w = w * 0.9 + 0.01 * jnp.sum(h)
        return w

    return run, cache


@pytest.mark.parametrize(("debug_every", "width"), [(2, 3), (3, 4)])
def test_live_arrays_find_what_a_loop_leaks(debug_every, width):
    """写 leaked_shapes：内存一步步涨，却不知道是谁占着。jax.live_arrays() 列出此刻活着的每一个
    设备数组：比较循环前后，新出现的就是循环留下的。已经活着、形状相同的数组不能被算进去。
    再跑一次循环，它把形状相同的新数组放进缓存，旧的随之释放：留下的是这些新数组。
    Write leaked_shapes: memory grows step by step and nobody knows who holds it.
    jax.live_arrays() lists every device array alive right now: compare before and after the
    loop, and the new ones are what it left behind. Arrays already alive, even of the same
    shapes, must not be counted. Run the loop again and it puts new arrays of the same shapes
    in its cache, freeing the old ones: the new ones are what it leaves behind.
    """
    run, cache = make_training_loop(debug_every, width)
    already_alive = [jnp.zeros((i + 2, width)) for i in range(6)]  # same shapes, not leaked
    shapes = leaked_shapes(run)
    # The known answer, from the loop's own cache / 由循环自己的缓存算出的正确答案
    assert len(cache) > 1
    assert shapes == sorted(v.shape for v in cache.values())

    old = [weakref.ref(v) for v in cache.values()]  # not kept alive / 不让它们活着
    assert leaked_shapes(run) == sorted(v.shape for v in cache.values())
    assert all(r() is None for r in old)  # the old entries were freed / 旧的已经释放
    del already_alive  # kept alive until here / 一直活到这里
