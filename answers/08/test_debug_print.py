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
    """print 在追踪时执行：同一签名只追踪一次，所以只打印一次，而且看到的是 JitTracer；
    jax.debug.print 每次调用都打印真实的值。换一个形状会重新追踪，print 才再出现一次。
    print runs while tracing: one signature is traced once, so it prints once, and it sees a
    JitTracer. jax.debug.print prints the real value at every call. A new shape retraces, and
    only then does print appear again.
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
    assert out["print"] == ["print: JitTracer(float32[])", "print: JitTracer(float32[2])"]
    assert out["debug"] == ["debug: 1.0", "debug: 2.0", "debug: 3.0", "debug: [1. 1.]"]


def test_debug_print_under_vmap_prints_every_example(capsys):
    """在 vmap 下，print 看到一个 VmapTracer（单个样本的形状 + 批的形状）；jax.debug.print
    对批里的每个样本各打印一行，看到的是单个样本的值——正是调试逐样本损失时想要的。
    Under vmap, print sees one VmapTracer (the per-example shape plus the batched shape);
    jax.debug.print prints one line per example of the batch, with that example's value:
    exactly what you want when debugging a per-example loss.
    """

    def per_example_loss(x):
        print("print:", x)
        jax.debug.print("debug: {}", x)
        return x**2

    losses = jax.vmap(per_example_loss)(jnp.arange(3.0))
    np.testing.assert_array_equal(losses, [0.0, 1.0, 4.0])
    out = printed(capsys)
    assert out["print"] == ["print: VmapTracer(aval=float32[], batched=float32[3])"]
    assert len(out["debug"]) == 3
    assert out["debug"][2] == "debug: 2.0"


def test_debug_print_under_grad_shows_primal_values(capsys):
    """⚠️ 陷阱 / trap: 在 grad 里，jax.debug.print 打印的是原值（primal），不是梯度，而且每次
    求导只在前向打印一次。不加 jit 时，print 看到的 GradTracer 里带着原值；加了 jit，GradTracer
    里的原值本身又是一个 JitTracer。要看梯度，就打印 grad 的结果。
    Inside grad, jax.debug.print prints the primal value, not the gradient, once per call, from
    the forward pass. Without jit, print sees a GradTracer that carries the primal value; under
    jit that primal is itself a JitTracer. To see the gradient, print what grad returns.
    """

    def loss(w):
        print("print:", w)
        jax.debug.print("debug: {}", w)
        return w**2

    g1 = jax.grad(loss)(jnp.float32(3.0))
    g2 = jax.jit(jax.grad(loss))(jnp.float32(3.0))
    assert float(g1) == float(g2) == 6.0
    out = printed(capsys)
    assert out["print"] == ["print: GradTracer(primal=3.0, typeof(tangent)=f32[])", "print: GradTracer(primal=JitTracer(float32[]), typeof(tangent)=f32[])"]  # fmt: skip
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
