"""02 · 异步派发与诚实的计时 / asynchronous dispatch and honest timing.

调用一个 jit 函数只是把工作“派发”出去：Python 拿回一个还没算完的 jax.Array，马上继续往下跑；
XLA 在自己的线程里按数据依赖的顺序执行。`x.is_ready()` 问它算完没有，jax 里有一个函数
等它算完。转成 NumPy、`float(x)`、`print(x)` 也会悄悄等待。计时时忘了等，量到的只是派发。
这里的检查不比较耗时（会随机器变化），只检查就绪状态、顺序和编译次数。

Calling a jitted function only dispatches the work: Python gets back a jax.Array that may
not be computed yet and carries on; XLA runs the work on its own threads in the order of the
data dependencies. `x.is_ready()` asks whether it is done, and a function of jax waits
for it. Converting to NumPy, `float(x)` and `print(x)` wait silently too. A timer that does
not wait measures the dispatch only. These checks never compare durations (they vary by
machine): they check readiness, order and compile counts.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import Deferred, counting_compiles

# ---- 给定代码 / given code -------------------------------------------------------------

N = 768  # one step is a 768×768 matmul: far more work than it takes to dispatch it


@jax.jit
def step(a):
    return jnp.tanh(a @ a) * 2.0


def start():
    """一个编译好的 step 和它的输入。/ A compiled step and its input."""
    a = jnp.eye(N) * 0.5
    step(a).block_until_ready()  # compile now, outside the koans' measurements
    return a


def chain(a, n):
    """派发 n 个首尾相接的 step，返回 [a, step(a), step(step(a)), ...]。
    Dispatch n chained steps; return [a, step(a), step(step(a)), ...].
    """
    ys = [a]
    for _ in range(n):
        ys.append(step(ys[-1]))
    return ys


# ---- 你来实现 / your code ---------------------------------------------------------------


def honest_time(f, *args, clock=time.perf_counter):
    """测量 f(*args) 稳态下的一次调用：先调用一次并等它算完（编译和预热不计入），然后读
    clock()，再调用一次、等结果算完（结果可以是 pytree：等它的每个叶子），再读 clock()。
    返回 (秒数, 结果)。大约 5 行。

    Measure one steady-state call of f(*args): call it once first and wait for it
    (compilation and warm-up stay outside the measurement), then read clock(), call again,
    wait for the result (it may be a pytree: every leaf of it), and read clock() again.
    Return (seconds, result). About 5 lines.
    """
    todo("honest_time: 预热、读表、调用并等待、再读表 / warm up, read the clock, call and wait, read it again")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_a_jitted_call_returns_before_its_result_is_ready():
    """派发 12 个首尾相接的 step 比算完它们快得多：最后一个结果拿到手时还没算出来。
    block_until_ready 等到它算完；因为它依赖前面所有的结果，它们也都算完了。
    Dispatching 12 chained steps is much faster than computing them: the last result is
    handed back before it is computed. block_until_ready waits for it, and since it depends on
    every earlier result, those are done too.
    """
    ys = chain(start(), 12)
    assert ys[-1].is_ready() is __
    __(ys[-1])
    assert all(y.is_ready() for y in ys)


def test_converting_to_numpy_waits_for_the_value_and_its_inputs():
    """np.asarray(y) 要把数值拷到主机上，所以会等 y 算完——y 又要等它的所有输入。训练循环里每步
    `float(loss)` 就是这样让 Python 和设备同步的，异步派发的好处随之消失。
    np.asarray(y) copies the value to the host, so it waits until y is computed, and y waits
    for all of its inputs. A `float(loss)` at every step of a training loop synchronises
    Python with the device like this, and the benefit of asynchronous dispatch is gone.
    """
    ys = chain(start(), 12)
    host = np.asarray(ys[6])
    assert isinstance(host, np.ndarray)
    assert sum(y.is_ready() for y in ys[:7]) == __
    ys[-1].block_until_ready()  # leave nothing running / 不留下还在跑的工作


def test_honest_time_waits_for_the_work_and_excludes_compilation():
    """用一个假时钟检查你的 honest_time：每读一次时钟，记下此刻已经编译了几次、f 的结果算完没有。
    开始计时前必须已经编译过（编译只发生一次）；停表时这次调用的结果必须已经算完。
    A fake clock checks your honest_time: at every reading it records how many compilations
    have happened and whether f's results are ready. The compilation must be over before the
    clock starts (there is just one), and the timed call's result must be ready when it stops.
    然后换一个没见过的 f（另一个形状）：它的结果是一个 pytree，叶子里有 Deferred，要有人等它才开工，
    固定时长的等待（sleep、盯着时钟空转）或只等一个叶子都等不来整个结果。
    Then a new f (another shape): its result is a pytree whose leaves include Deferred values,
    whose work starts only when someone waits for them, so no wait of a fixed length (a sleep,
    a loop watching the clock) and no wait on one leaf sees the whole result done.
    """
    fresh_step = jax.jit(lambda a: jnp.tanh(a @ a) * 2.0)  # a new function: not compiled yet
    x = jnp.eye(N) * 0.25
    outputs, readings, ticks = [], [], iter([10.0, 12.5])

    def three_steps(x):
        out = fresh_step(fresh_step(fresh_step(x)))
        outputs.append(out)
        return out

    with counting_compiles() as compiles:

        def clock():
            readings.append((len(compiles), [o.is_ready() for o in outputs]))
            return next(ticks)

        seconds, out = honest_time(three_steps, x, clock=clock)

    assert seconds == 2.5  # the difference of the two readings
    assert len(readings) == 2 and len(outputs) == 2, "read the clock twice, call f twice"
    (compiles_at_start, _), (compiles_at_stop, ready_at_stop) = readings
    assert compiles_at_start == compiles_at_stop == 1, "compile before the clock starts"
    assert ready_at_stop[-1], "wait for the result before reading the clock again"
    np.testing.assert_allclose(out, three_steps(x), rtol=1e-5)

    later = jax.jit(lambda a: jnp.sin(a) @ a.T)  # fresh: it compiles at the first wait
    y = jnp.linspace(-1.0, 1.0, 15).reshape(5, 3)
    results, done = [], []

    def deferred_step(y):  # a pytree: a count and two Deferred values, no leaf ready alone
        results.append(
            {"rows": y.shape[0], "gram": Deferred(later, y), "dual": Deferred(later, y.T)}
        )
        return results[-1]

    def deferred_clock():
        done.append([r[k].done for r in results for k in ("gram", "dual")])
        return 4.0 * len(done)

    seconds, out = honest_time(deferred_step, y, clock=deferred_clock)
    assert done == [[True] * 2, [True] * 4], "wait for each call's whole result, every leaf"
    assert seconds == 4.0
    np.testing.assert_allclose(out["gram"], np.sin(y) @ np.asarray(y).T, rtol=1e-5)
    np.testing.assert_allclose(out["dual"], np.sin(y.T) @ np.asarray(y), rtol=1e-5)


def test_copy_to_host_async_starts_the_copy_without_waiting():
    """`x.copy_to_host_async()` 和 `jax.copy_to_host_async(树)` 请求把值拷回主机，用意是让拷贝和之后的计算
    重叠，读值时不必再等一次传输。它要等值算完吗？它返回什么？在 CPU 上，np.asarray 给出的主机数组又在哪块
    内存里、有没有拷贝可言？先预测。重叠本身在 CPU 上量不出来，所以这里不计时，只断言能观察到的事。
    `x.copy_to_host_async()` and `jax.copy_to_host_async(tree)` ask for values to be copied back
    to the host, so that the copy overlaps later computation and reading the value need not wait
    for a transfer. Does the call wait for the value? What does it return? On a CPU, which memory
    does np.asarray's host array live in, and is there a copy at all? Predict first. The overlap
    itself cannot be measured on a CPU, so nothing is timed: the asserts check only what can be
    observed.
    """
    ys = chain(start(), 12)
    assert ys[-1].copy_to_host_async() is __
    pending = {"last": ys[-1], "middle": ys[6]}
    assert jax.copy_to_host_async(pending) is pending  # the tree form hands its argument back
    assert ys[-1].is_ready() is __
    host = np.asarray(ys[-1])  # this one waits
    assert all(y.is_ready() for y in ys)
    assert (host.ctypes.data == ys[-1].unsafe_buffer_pointer()) is __
    assert host.flags.writeable is __
    np.testing.assert_array_equal(host, np.asarray(step(ys[-2])))


# ---- 一次调用走很多步 / many training steps per call ----------------------------------

STEPS, LR = 12, 0.1


def sgd_step(w, x, y):
    """One least-squares SGD step (given)."""
    g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - LR * g


jitted_step = jax.jit(sgd_step)


def python_loop(w, xs, ys):
    """STEPS 次 jitted_step 调用，每步派发一次（给定）。/ STEPS calls of jitted_step, one dispatch each (given)."""
    for x, y in zip(xs, ys, strict=True):
        w = jitted_step(w, x, y)
    return w


def make_train_steps():
    """返回一个 jit 编译的函数 train(w, xs, ys)：用 lax.scan 沿 xs、ys 的第 0 轴把 sgd_step 走完
    所有步（xs 有几行就走几步，不管是多少），一次调用、一次派发；w 的缓冲区捐给输出（调用之后旧的 w
    不能再用）。返回最后的 w。约 4 行。
    Return a jitted function train(w, xs, ys) that runs sgd_step over every step with lax.scan
    along axis 0 of xs and ys (as many steps as xs has rows, whatever that number), in one call
    and one dispatch, with w's buffer donated to the output (the old w is unusable after the
    call). It returns the final w. About 4 lines.
    """

    todo("make_train_steps: lax.scan 走完所有步、捐出 w / lax.scan over the steps, w donated")


def test_many_training_steps_in_one_call():
    """训练循环里每一步一次 jit 调用，就是每一步派发一个程序。把很多步放进一个 lax.scan、编译成
    一个程序，一次调用就走完；捐出参数的缓冲区，输出复用它的内存（memory_analysis 的 alias）。
    jaxpr 数出两者各派发几个程序，数值必须一样。
    A training loop that makes one jit call per step dispatches one program per step. Put many
    steps in one lax.scan, compiled as one program, and one call runs them all; donate the
    parameters' buffer and the output reuses its memory (memory_analysis's alias). The jaxprs
    count how many programs each dispatches, and the values must agree.
    """
    rng = np.random.default_rng(0)
    xs = jnp.asarray(rng.normal(size=(STEPS, 32, 16)), jnp.float32)
    ys = jnp.asarray(rng.normal(size=(STEPS, 32, 4)), jnp.float32)
    w0 = jnp.asarray(0.1 * rng.normal(size=(16, 4)), jnp.float32)
    expected = python_loop(w0, xs, ys)
    loop = jax.make_jaxpr(python_loop)(w0, xs, ys).jaxpr
    assert [e.primitive.name for e in loop.eqns].count("jit") == STEPS
    train = make_train_steps()
    w = w0 + 0.0  # a buffer of our own to donate
    (call,) = jax.make_jaxpr(train)(w, xs, ys).jaxpr.eqns  # one program per call
    assert call.primitive.name == "jit"
    (scan,) = [e for e in call.params["jaxpr"].jaxpr.eqns if e.primitive.name == "scan"]
    assert scan.params["length"] == STEPS
    assert str(scan.params["jaxpr"]).count("dot_general") == str(
        jax.make_jaxpr(sgd_step)(w0, xs[0], ys[0])
    ).count("dot_general")  # the body is one step, not the unrolled loop
    with counting_compiles() as compiles:
        out = train(w, xs, ys)
        again = train(out + 0.0, xs, ys)
    assert len(compiles) == 1
    assert w.is_deleted()  # donated: its buffer now holds the output
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(again, python_loop(expected, xs, ys), rtol=1e-5, atol=1e-6)
    fewer = train(out + 0.0, xs[:5], ys[:5])  # another run length: as many steps as xs has
    np.testing.assert_allclose(fewer, python_loop(out, xs[:5], ys[:5]), rtol=1e-5, atol=1e-6)
    w2, xs2, ys2 = out[:, :2], xs[:, :8], ys[:, :8, :2]  # other batches: 8 rows, 2 targets
    narrow = train(w2 + 0.0, xs2, ys2)
    np.testing.assert_allclose(narrow, python_loop(w2, xs2, ys2), rtol=1e-5, atol=1e-6)
    more_xs, more_ys = (jnp.concatenate([a, a[:7]]) for a in (xs, ys))  # and more than STEPS
    more = train(out + 0.0, more_xs, more_ys)
    np.testing.assert_allclose(more, python_loop(out, more_xs, more_ys), rtol=1e-5, atol=1e-6)
    for n in (5, STEPS + 7):  # one scan of one step at every length, not only at STEPS
        (call,) = jax.make_jaxpr(train)(w0, more_xs[:n], more_ys[:n]).jaxpr.eqns
        (scan,) = [e for e in call.params["jaxpr"].jaxpr.eqns if e.primitive.name == "scan"]
        assert scan.params["length"] == n
    memory = train.lower(w0, xs, ys).compile().memory_analysis()
    assert memory.alias_size_in_bytes == w0.nbytes
