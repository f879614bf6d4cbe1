"""08 · 症状：想看 jit 里面的值 / symptom: I want to see values inside jit.

工具：`jax.debug.print` 和 `jax.debug.callback`。普通的 `print` 只在追踪时运行一次，打印的是
tracer（形状和 dtype，没有数值）；`jax.debug.*` 被编译进程序，每次执行都运行，拿到真实数值。
`jax.effects_barrier()` 等待所有已排队的回调执行完。

Tool: `jax.debug.print` and `jax.debug.callback`. A plain `print` runs once, at trace time, and
shows a tracer (shape and dtype, no value); `jax.debug.*` is compiled into the program and runs
at every execution with the real values. `jax.effects_barrier()` waits for every queued
callback to finish.
"""

import importlib
import io
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def printed(capsys):
    """等回调执行完，返回 {"print": [...], "debug": [...]}：按前缀分开的输出行。
    Waits for the callbacks, then returns the captured lines split by their prefix:
    {"print": [...], "debug": [...]}.
    """
    jax.effects_barrier()
    lines = capsys.readouterr().out.splitlines()
    return {p: [ln for ln in lines if ln.startswith(p + ":")] for p in ("print", "debug")}


def test_print_runs_at_trace_time_debug_print_at_run_time(capsys):
    """print 在追踪时执行，看到的是 tracer（没有数值）；jax.debug.print 被编译进程序，在每次
    执行时打印真实的值。jit 按输入的形状和 dtype 缓存追踪结果：下面四次调用里，print 打印了
    几行？debug.print 打印了什么？
    print runs while tracing and sees a tracer (no value); jax.debug.print is compiled into the
    program and prints the real value at every execution. jit caches one trace per input shape
    and dtype: over the four calls below, how many lines does print write, and what does
    debug.print write?
    """

    @jax.jit
    def scaled(x):
        print("print:", x)
        jax.debug.print("debug: {}", x)
        return x * 2

    for v in [1.0, 2.0, 3.0]:
        scaled(jnp.float32(v))
    scaled(jnp.ones(2))
    out = printed(capsys)
    assert len(out["print"]) == 2
    assert out["debug"] == ["debug: 1.0", "debug: 2.0", "debug: 3.0", "debug: [1. 1.]"]


def test_debug_print_under_vmap_prints_every_example(capsys):
    """调试逐样本的损失时，想看的是每个样本自己的值。在 vmap 下，函数被追踪几次，print 就打印
    几行；jax.debug.print 打印的是整批，还是每个样本各一行？它的第三行是什么？
    Debugging a per-example loss, you want each example's own value. Under vmap print writes
    one line per trace of the function; does jax.debug.print print the whole batch, or one line
    per example? What is its third line?
    """

    def per_example_loss(x):
        print("print:", x)
        jax.debug.print("debug: {}", x)
        return x**2

    losses = jax.vmap(per_example_loss)(jnp.arange(3.0))
    np.testing.assert_array_equal(losses, [0.0, 1.0, 4.0])
    out = printed(capsys)
    assert len(out["print"]) == 1
    assert len(out["debug"]) == 3
    assert out["debug"][2] == "debug: 2.0"


def test_debug_print_under_grad_shows_primal_values(capsys):
    """⚠️ 陷阱 / trap: 在 grad 里，jax.debug.print 打印的是什么：原值（primal）还是梯度？
    每次求导打印几次？普通的 print 在追踪时执行：不加 jit 的 grad 逐个原语执行，加了 jit 则先
    追踪整个程序，两种情况下 print 看得到 w 的数值 3.0 吗？要看梯度，就打印 grad 的结果。
    ⚠️ trap: inside grad, what does jax.debug.print print, the primal value or the gradient, and
    how often per call? A plain print runs while tracing: grad without jit executes primitive
    by primitive, under jit the whole program is traced first; does print see w's value 3.0 in
    either case? To see the gradient, print what grad returns.
    """

    def loss(w):
        print("print:", w)
        jax.debug.print("debug: {}", w)
        return w**2

    g1 = jax.grad(loss)(jnp.float32(3.0))
    g2 = jax.jit(jax.grad(loss))(jnp.float32(3.0))
    assert float(g1) == float(g2) == 6.0
    out = printed(capsys)
    assert ["3.0" in line for line in out["print"]] == [True, False]
    assert out["debug"] == ["debug: 3.0", "debug: 3.0"]


def test_host_callback_is_gone_use_debug_callback():
    """❌ 旧写法 / ✅ 推荐写法: jax.experimental.host_callback.id_tap 已被删除。想把编译好的
    循环里每一步的损失送回 Python（画曲线、写日志），用 jax.debug.callback(fn, *args)：fn 在
    主机上执行，收到的是具体的数组；ordered=True 保证按程序顺序调用。
    jax.experimental.host_callback.id_tap is gone. To send every step's loss of a compiled loop
    back to Python (to plot it, to log it), use jax.debug.callback(fn, *args): fn runs on the
    host with concrete arrays; ordered=True keeps the calls in program order.
    """
    with raises_exactly(ModuleNotFoundError):
        importlib.import_module("jax.experimental.host_callback")

    history = []

    def record(step, loss):  # runs on the host / 在主机上执行
        history.append((int(step), float(loss)))

    @jax.jit
    def fit(w):
        def body(i, w):
            loss = (w - 3.0) ** 2
            jax.debug.callback(record, i, loss, ordered=True)
            return w - 0.25 * 2 * (w - 3.0)  # one gradient step, learning rate 0.25

        return lax.fori_loop(0, 4, body, w)

    w = fit(jnp.float32(0.0))
    jax.effects_barrier()

    expected, w_ref = [], 0.0
    for _ in range(4):
        expected.append((w_ref - 3.0) ** 2)
        w_ref -= 0.25 * 2 * (w_ref - 3.0)
    assert [step for step, _ in history] == [0, 1, 2, 3]
    np.testing.assert_allclose([loss for _, loss in history], expected, rtol=1e-6)
    np.testing.assert_allclose(w, w_ref, rtol=1e-6)


def test_a_scripted_debugger_stops_inside_a_jitted_loop(monkeypatch, capsys):
    """jax.debug.breakpoint() 被编译进程序：执行到它时程序停下，打开 jdb，一个小号的 pdb（p 打印、
    u / d 在帧之间上下移动、c 继续），看的是正在执行的这一步的真实数值。放进 lax.cond 的分支里，
    它只在条件成立的那几步停下。jdb 的命令可以预先写好，从 stdin 一行一行喂给它：这就是一次
    可以写进测试的调试会话。断点在 cond 分支的函数里，i 和 new 是 scan 那一步的名字，在上一帧。
    先补上让 jdb 走到那一帧的命令；这个会话进了几次 jdb，打印出了什么？
    jax.debug.breakpoint() is compiled into the program: when execution reaches it the program
    stops and opens jdb, a small pdb (p prints, u / d move up / down the frames, c continues),
    over the real values of the step that is running. Inside a branch of lax.cond it stops only
    at the steps where the condition holds. jdb's commands can be written in advance and fed
    to it on stdin, one a line: a debugging session a test can hold. The breakpoint sits in the
    cond branch's function; i and new are names of the scan's step, one frame up. Supply the
    command that takes jdb to that frame; how often does the session enter jdb, and what does
    it print?
    """

    def run(x0):
        def step(x, i):
            new = x - 1.5
            root = jnp.sqrt(new)
            first_nan = jnp.isnan(root) & ~jnp.isnan(jnp.sqrt(x))
            lax.cond(first_nan, lambda: jax.debug.breakpoint(backend="cli"), lambda: None)
            return new, root

        return lax.scan(step, x0, jnp.arange(6))

    monkeypatch.setattr(sys, "stdin", io.StringIO("u\n" + "p i\np new\nc\n"))
    jax.block_until_ready(jax.jit(run)(jnp.float32(4.0)))
    session = capsys.readouterr().out
    shown = [part.strip() for part in session.split("(jdb) ") if part.startswith("Array(")]
    assert session.count("Entering jdb") == 1
    assert shown == ["Array(2, dtype=int32)", "Array(-0.5, dtype=float32)"]
