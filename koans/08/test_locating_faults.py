"""08 · 症状：出错了，但不知道在哪 / symptom: something is wrong, but where?

前面的文件教每个工具说什么；这里用它们去“找”：在 jit 的程序里逐段检查（`jax.disable_jit`
让 Python 的 `if` 和 `print` 看到真实数值），让泄漏的 tracer 在产生它的那次追踪里就报错，找到只在反向传播里出现的 NaN（`debug_nans` / `debug_infs`），
以及在 `cond` / `scan` 里用 `jax.debug.print` 看每一步。

The files before teach what each tool says; here they are used to search: check a jitted
program stage by stage (`jax.disable_jit` lets Python's `if` and `print` see real values),
make a leaked tracer fail during the trace that made it, find a NaN
that appears only in the backward pass (`debug_nans` / `debug_infs`), and watch every step
inside `cond` / `scan` with `jax.debug.print`.
"""

import random
import re  # noqa: F401  (where_jax_raised may parse with it)
import traceback
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import checkify

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import run_python

# ---- 给定代码 / given code -------------------------------------------------------------


def jitted_pipeline(stages):
    """把 (名字, 函数) 依次串起来并 jit；check(name, x) 在每一段之后被调用（它是静态参数）。
    Chains the (name, function) stages under jit; check(name, x) is called after each stage
    (a static argument).
    """

    @partial(jax.jit, static_argnames="check")
    def run(x, check=None):
        for name, stage in stages:
            x = stage(x)
            if check is not None:
                check(name, x)
        return x

    return run


def printed_lines(capsys):
    """等所有回调执行完，返回捕获到的输出行。/ Waits for the callbacks, returns the lines."""
    jax.effects_barrier()
    return capsys.readouterr().out.splitlines()


def sgd_scan(w, xs, lr, hook, log):
    """jit 里用 lax.scan 对每个批 x 做一步梯度下降（损失 Σ(x @ w - 1)²）；每一步的梯度先交给
    hook(grad, log)，用它的返回值更新。返回最后的 w。
    Gradient descent in a jitted lax.scan, one step per batch x (loss Σ(x @ w - 1)²); each
    step's gradient goes through hook(grad, log) and the update uses what it returns. Returns
    the last w.
    """

    @jax.jit
    def run(w, xs):
        def step(w, x):
            grad = jax.grad(lambda w: jnp.sum((x @ w - 1.0) ** 2))(w)
            return w - lr * hook(grad, log), None

        return lax.scan(step, w, xs)[0]

    return run(w, xs)


# ---- 你来实现 / your code ---------------------------------------------------------------


def first_bad_stage(program, x):
    """program 是 jitted_pipeline 的结果。返回第一个输出里有非有限值（NaN / inf）的那一段的
    名字；全都有限时返回 None。规则：你只拿到 program，不知道它有哪些段。在 jit 里 check 拿到
    的是 tracer，Python 的 `if` 会报错：在 jax.disable_jit() 里调用 program，check 就拿到真实
    数组。退出时 jit 要恢复。大约 8 行。

    program is the result of jitted_pipeline. Return the name of the first stage whose output
    holds a non-finite value (NaN / inf), or None when all are finite. Rules: you get only
    program, not its stages. Under jit check receives tracers and a Python `if` raises: call
    program inside jax.disable_jit() and check receives real arrays. jit must be back on
    afterwards. About 8 lines.
    """
    todo("first_bad_stage: disable_jit + a check / disable_jit 加一个检查")


def leaking_stages(stages, x):
    """stages 是 (名字, jit 过的函数) 的列表，每个都已经用 x 跑过（已经编译好了）。按顺序返回
    那些在追踪时泄漏了 tracer 的段名（把 tracer 存到了追踪结束后还活着的地方）。在
    jax.checking_leaks() 里，泄漏的追踪会抛出一个消息以 "Leaked trace" 开头的 Exception；别的
    异常照常抛出。但它只检查在块里发生的追踪，而编译好的函数不会再追踪：先想办法让每一段重新
    追踪。退出后检查要关掉。大约 10 行。

    stages is a list of (name, jitted function), each of which has already run on x (it is
    compiled). Return, in order, the names of the stages whose trace leaks a tracer (stores it
    somewhere that outlives the trace). Inside jax.checking_leaks() a trace that leaks raises an
    Exception whose message starts with "Leaked trace"; let any other exception through. But it
    checks only the traces made inside the block, and a compiled function does not trace
    again: first make every stage trace again. The check must be off afterwards. About 10 lines.
    """
    todo("leaking_stages: retrace each stage inside jax.checking_leaks() / 重新追踪")


def root_sum(x):
    """Σ √xᵢ 只对 xᵢ > 0 的元素求和（其余算 0），值和梯度都必须有限，包括 xᵢ = 0 处（那里
    的梯度取 0）。提示：只在外面套一个 where 不够，因为反向传播两个分支都会算。大约 3 行。

    Σ √xᵢ over the entries with xᵢ > 0 (the others count 0); the value and the gradient must
    be finite, at xᵢ = 0 too (where the gradient is taken as 0). A single outer where is not
    enough, because the backward pass goes through both branches. About 3 lines.
    """
    todo("root_sum: the double where / 两次 where")


def nan_origin(loss, x):
    """找出 loss 在 x 处的 NaN 从哪里来，返回 (阶段, nan 原语, inf 原语)。阶段看结果：loss(x)
    本身是 NaN 就是 "forward"，否则 jax.grad(loss)(x) 里有 NaN 就是 "backward"，都没有就返回
    (None, None, None)。然后不加 jit 地再算一遍那个阶段的结果（loss 或 jax.grad(loss)）：在
    jax.debug_nans 下，FloatingPointError 消息的最后一个词是产生 NaN 的原语；在 jax.debug_infs
    下是第一个产生 inf 的原语（没有 inf 时为 None）。大约 14 行。

    Find where loss's NaN at x comes from; return (stage, nan primitive, inf primitive). The
    stage is read from the results: "forward" when loss(x) itself is NaN, otherwise "backward"
    when jax.grad(loss)(x) holds a NaN, and (None, None, None) when neither does. Then compute
    that stage's result again (loss or jax.grad(loss)), without jit: under jax.debug_nans the
    last word of the FloatingPointError message is the primitive that made the NaN; under
    jax.debug_infs it is the first primitive that made an inf (None when there is no inf).
    About 14 lines.
    """
    todo("nan_origin: the results, then jax.debug_nans / jax.debug_infs")


def newton_sqrt(a, steps):
    """用 lax.scan 做 steps 步牛顿迭代求 √a（x ← (x + a/x) / 2，从 x = a 开始），返回最后的 x。
    每一步在更新之前用 jax.debug.print 打印一行 "step {i}: x = {x}"（i 从 0 开始）。会在 jit
    里被调用。大约 6 行。

    steps Newton iterations for √a in a lax.scan (x ← (x + a/x) / 2, from x = a); return the
    last x. At every step, before the update, print one line "step {i}: x = {x}" with
    jax.debug.print (i counts from 0). It is called under jit. About 6 lines.
    """
    todo("newton_sqrt: lax.scan + jax.debug.print")


def checked(fn):
    """返回一个 jit 过的 fn：用 checkify 检查越界下标和浮点错误（NaN、除以零），有错误就在
    主机上抛出，没有就返回 fn 的结果。checkify.checkify 把检查变成额外的返回值 err，
    err.throw() 在有错误时抛出。大约 5 行。

    Return fn jitted and checked by checkify for out-of-bounds indices and floating-point
    errors (NaN, division by zero): raise on the host when there is an error, else return fn's
    result. checkify.checkify turns the checks into an extra returned value err, and
    err.throw() raises when there is an error. About 5 lines.
    """
    todo("checked: checkify.checkify + err.throw()")


def log_gradient_norm(grad, log):
    """在 jit 里把 grad 的范数送到主机上的 Python 函数 log（调用方式 log(value)），按步的顺序；
    原样返回 grad。用 jax.debug.callback（ordered=True）。1～2 行。
    Send grad's norm to the host Python function log (called as log(value)) from inside jit, in
    step order, and return grad unchanged. Use jax.debug.callback (ordered=True). 1-2 lines.
    """
    todo("log_gradient_norm: jax.debug.callback")


def where_jax_raised(script):
    """在一个新的 Python 进程里运行 script（一个 Path：它捕获异常，把回溯打印到标准输出），
    用 run_python（它有超时，不继承本进程的 JAX_* 设置；env= 给子进程加环境变量），并关掉
    JAX 的回溯过滤：默认回溯最后的说明写着怎么关。回溯里每一帧打印成
    `  File "路径", line 行号, in 函数名`，最内层的在最后。返回 (jax_frame, user_frame)：
    jax_frame = (路径里 "jax/_src/" 之后的部分, 函数名)，取路径含 "jax/_src/" 的最内层一帧；
    user_frame = (行号（int）, 函数名)，取路径就是 script 的最内层一帧。大约 10 行。

    Run script (a Path: it catches its exception and prints the traceback to stdout) in a
    fresh Python process with run_python (it has a timeout and none of this process's JAX_*
    settings; env= adds environment variables for the child), with JAX's traceback filtering
    off: the note at the end of a default traceback says how. A traceback prints each frame as
    `  File "path", line number, in function`, innermost last. Return (jax_frame, user_frame):
    jax_frame = (the part of the path after "jax/_src/", function) of the innermost frame whose
    path holds "jax/_src/"; user_frame = (line number (an int), function) of the innermost frame
    whose path is script. About 10 lines.
    """
    todo("where_jax_raised: run_python with the filtering off, then parse / 关掉过滤再解析")


# ---- 检查 / checks ----------------------------------------------------------------------

STAGES = (
    ("center", lambda x: x - jnp.mean(x)),
    ("scale", lambda x: x / jnp.std(x)),
    ("shift", lambda x: x + 1.5),
    ("log", jnp.log),
    ("squash", jnp.tanh),
)


def test_disable_jit_lets_python_look_at_every_stage():
    """写 first_bad_stage：jit 过的流水线最后只吐出一个 NaN，看不出是哪一段产生的。
    disable_jit 让同一个程序逐个原语在 Python 里执行，于是可以在每一段之后检查。
    Write first_bad_stage: the jitted pipeline only hands out a NaN at the end, not where it
    came from. disable_jit runs the same program primitive by primitive in Python, so every
    stage can be checked.
    """
    program = jitted_pipeline(STAGES)
    constant = jnp.full(4, 3.0)  # std 0
    skewed = jnp.array([10.0, 10.0, 10.0, 0.0])  # after scaling, one entry below -1.5
    fine = jnp.array([1.0, 2.0, 3.0, 4.0])
    assert not bool(jnp.all(jnp.isfinite(program(constant))))
    with pytest.raises(jax.errors.TracerBoolConversionError):  # why the tool is needed
        program(fine, check=lambda name, y: bool(jnp.all(jnp.isfinite(y))) or None)

    assert first_bad_stage(program, constant) == "scale"
    assert first_bad_stage(program, skewed) == "log"
    assert first_bad_stage(program, fine) is None
    reordered = jitted_pipeline(STAGES[::-1])  # any program: squash first, then log
    assert first_bad_stage(reordered, jnp.array([-1.0, 2.0, 3.0, 4.0])) == "log"
    other = jitted_pipeline((("root", jnp.sqrt), ("invert", lambda x: 1.0 / x), ("grow", jnp.exp)))
    assert first_bad_stage(other, jnp.array([4.0, 0.0, 1.0])) == "invert"  # 1 / 0
    assert not jax.config.jax_disable_jit  # jit is back on


def test_checking_leaks_reports_the_leak_where_it_happens():
    """⚠️ 陷阱 / trap：把中间值存到 self 上会漏出一个 tracer，但错误要等到很久以后有人用它时才
    出现（UnexpectedTracerError），那时已看不出是谁存的。jax 有一个检查泄漏的上下文管理器，让那次
    追踪一结束就报错，消息里写着 tracer 的类型和“被谁引用”（这里是 Encoder 的一个属性）。
    ⚠️ trap: storing an intermediate on self leaks a tracer, but the error waits until someone
    uses it much later (UnexpectedTracerError), when nothing says who stored it. jax has a
    leak-checking context manager that fails the very trace that leaked, and the message names
    the tracer's type and what refers to it (here an attribute of the Encoder).
    """

    class Encoder:
        def __init__(self, w):
            self.w = w

        def __call__(self, x):
            h = jnp.tanh(x @ self.w)
            self.last_hidden = h
            return jnp.sum(h**2)

    x = jnp.ones((3, 2))
    encoder = Encoder(jnp.ones((2, 1)))
    jax.jit(lambda x: encoder(x))(x)  # no error here / 这里不报错
    with raises_exactly(jax.errors.UnexpectedTracerError):
        encoder.last_hidden + 1  # ... but much later / 很久以后才报错

    message = ""
    with jax.checking_leaks():
        try:
            jax.jit(lambda x: encoder(x))(x)
        except Exception as error:  # checking_leaks raises a bare Exception / 一个裸的 Exception
            message = str(error)
    assert message.startswith("Leaked trace")
    assert ".last_hidden" in message
    assert "JitTracer(" + __ + ")" in message
    assert not jax.config.jax_check_tracer_leaks  # only inside the block / 只在块内


def test_checking_leaks_finds_the_stages_that_leak():
    """写 leaking_stages：一条已经上线（已经编译过）的流水线里，有的段把中间值存到了别处，
    可是程序照常运行，什么也不报。打开泄漏检查再跑一遍也不报：编译好的函数不会再追踪。让每段
    重新追踪，泄漏检查才能逐段找出是谁泄漏的，不管它存到了哪里。
    Write leaking_stages: in a pipeline that is already live (compiled), some stages store an
    intermediate somewhere else, yet the program runs and nothing complains. Running it again
    with the leak check on does not complain either: a compiled function does not trace again.
    Make every stage trace again, and the leak check finds, stage by stage, which ones leak,
    wherever they store it.
    """
    stash, shapes, norms = {}, [], []

    class Monitor:
        pass

    monitor = Monitor()

    def scale(x):
        stash["std"] = jnp.std(x)
        return x / stash["std"]

    def record(x):
        shapes.append(x.shape)
        return x

    def report(x):
        jax.debug.callback(norms.append, jnp.linalg.norm(x))
        return x

    def squash(x):
        monitor.hidden = jnp.tanh(x)
        return 2 * monitor.hidden

    stages = [
        ("center", jax.jit(lambda x: x - jnp.mean(x))),
        ("scale", jax.jit(scale)),
        ("record", jax.jit(record)),
        ("report", jax.jit(report)),
        ("squash", jax.jit(squash)),
    ]
    x = jnp.arange(1.0, 5.0)
    for _, stage in stages:
        stage(x)  # the pipeline is live: every stage compiled / 流水线已上线，每段都编译过
    with jax.checking_leaks():
        for _, stage in stages:
            stage(x)  # served from the cache: nothing is checked / 走缓存，什么也没查

    assert leaking_stages(stages, x) == ["scale", "squash"]
    assert leaking_stages(stages[::-1], x) == ["squash", "scale"]
    assert leaking_stages([stages[0], stages[3]], x) == []
    rng = random.Random()  # any names, any order / 任意的名字、任意的顺序
    shuffled = [(f"stage_{rng.randrange(16**4):04x}_{i}", fn) for i, (_, fn) in enumerate(stages)]
    rng.shuffle(shuffled)
    leaky = (stages[1][1], stages[4][1])
    assert leaking_stages(shuffled, x) == [name for name, fn in shuffled if fn in leaky]
    assert not jax.config.jax_check_tracer_leaks


def test_a_nan_that_appears_only_in_the_backward_pass():
    """⚠️ 陷阱 / trap：where(x > 0, √x, 0) 的值处处有限；它的梯度呢？反向传播对 where 的两个
    分支都求导，未选的分支也算。哪些位置的梯度是 NaN？debug_nans 在反向传播里指出产生 NaN 的
    原语，debug_infs 指出更早那个产生 inf 的原语：各是哪一个？然后写 root_sum。
    ⚠️ trap: where(x > 0, √x, 0) is finite everywhere; is its gradient? The backward pass
    differentiates both branches of a where, the unselected one too. Where is the gradient NaN?
    debug_nans names the primitive that made the NaN in the backward pass, debug_infs the
    earlier one that made an inf: which are they? Then write root_sum.
    """

    def naive(x):
        return jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))

    x = jnp.array([0.0, 4.0, 1.0])
    assert np.isfinite(float(naive(x)))
    assert np.isnan(np.asarray(jax.grad(naive)(x))).tolist() == __

    def blamed(flag):
        with raises_exactly(FloatingPointError) as info, flag(True):
            jax.grad(naive)(x)
        return str(info.value).split()[-1]

    assert blamed(jax.debug_nans) == __
    assert blamed(jax.debug_infs) == __

    np.testing.assert_allclose(root_sum(x), 3.0)
    assert float(root_sum(-x)) == 0.0  # the others count exactly 0 / 其余的恰好算 0
    np.testing.assert_allclose(jax.grad(root_sum)(x), [0.0, 0.25, 0.5])
    tiny = float(jnp.finfo(jnp.float32).tiny)  # 最小的正规 float32 / the smallest normal float32
    small = jnp.array([tiny, 1e-8, 0.0])  # positive, however small, counts / 再小的正数也算
    np.testing.assert_allclose(root_sum(small), tiny**0.5 + 1e-4, rtol=1e-5)
    np.testing.assert_allclose(jax.grad(root_sum)(small), [0.5 / tiny**0.5, 5e3, 0.0], rtol=1e-5)
    with jax.debug_nans(True), jax.debug_infs(True):
        jax.jit(jax.grad(root_sum))(jnp.array([0.0, 0.0, 9.0]))  # no error / 不报错


def test_debug_nans_and_debug_infs_trace_a_nan_to_its_source():
    """写 nan_origin：训练里的 NaN 可能出在前向，也可能只出在反向；debug_nans 指出最后产生
    NaN 的那一步，debug_infs 往往指向更早的真正源头（先溢出成 inf，再变成 NaN）。先看结果判断
    阶段，再用两个开关找原语：逐个原语执行时，debug_nans 连 where 最后丢掉的 NaN 也会停下。
    Write nan_origin: a NaN in training may come from the forward pass or only from the
    backward pass; debug_nans names the step that finally made the NaN, and debug_infs often
    points to the real source before it (an overflow to inf, which later turns into NaN). Read
    the stage from the results first, then find the primitives with the two flags: executing
    primitive by primitive, debug_nans stops even at a NaN that a where later discards.
    """

    def entropy(p):
        return -jnp.sum(jnp.where(p > 0, p * jnp.log(p), 0.0))

    def log_likelihood(x):
        return jnp.sum(jnp.log(x))

    def top_probability(z):
        return jnp.max(jnp.exp(z) / jnp.sum(jnp.exp(z)))

    def log_prior(x):
        return jnp.sum(jnp.where(x > 0, jnp.log(x), 0.0))

    def smooth(x):
        return jnp.sum(jnp.tanh(x) ** 2)

    p = jnp.array([0.0, 0.5, 0.5])
    assert np.isfinite(float(entropy(p)))
    with raises_exactly(FloatingPointError), jax.debug_nans(True):
        entropy(p)  # stops at the discarded 0 * log 0 / 停在被丢掉的 0 * log 0

    # Each loss behind an anonymous wrapper, at inputs drawn afresh: any loss, any input.
    # 每个损失都套一层匿名的包装，输入每次重新抽取：任何损失、任何输入都一样。
    u = np.random.default_rng().uniform(0.2, 0.8, size=3).astype(np.float32)

    def origin(loss, x):
        return nan_origin(lambda v: loss(v), jnp.asarray(x, jnp.float32))

    assert origin(entropy, [0.0, u[0], 1.0 - u[0]]) == ("backward", "mul", "log")
    assert origin(log_likelihood, [u[1], -u[2]]) == ("forward", "log", None)
    assert origin(top_probability, [100.0 + 10 * u[0], u[1]]) == ("forward", "div", "exp")
    assert origin(log_prior, [0.0, 1.0 + u[2]]) == ("backward", "div", "log")
    assert origin(smooth, [0.0, u[1]]) == (None, None, None)
    assert not (jax.config.jax_debug_nans or jax.config.jax_debug_infs)


def test_debug_print_in_cond_follows_the_branches_that_run(capsys):
    """jit 里 cond 只执行选中的分支，所以只有它的 debug.print 会打印；在 vmap 下 cond 变成
    select，两个分支对每个样本都执行，两边的打印都会出现。调试时打印的行告诉你哪些代码真的跑了。
    Under jit a cond runs only the selected branch, so only its debug.print prints; under vmap
    the cond becomes a select, both branches run for every example, and both print. The
    printed lines tell you which code really ran.
    """

    def magnitude(x):
        def positive(x):
            jax.debug.print("pos {x}", x=x)
            return x

        def negative(x):
            jax.debug.print("neg {x}", x=x)
            return -x

        return lax.cond(x > 0, positive, negative, x)

    jax.jit(magnitude)(jnp.float32(-2.0))
    assert printed_lines(capsys) == __
    jax.jit(jax.vmap(magnitude))(jnp.array([1.0, -2.0]))
    assert sorted(printed_lines(capsys)) == __


def test_debug_print_in_scan_reports_every_step(capsys):
    """写 newton_sqrt：在 jit 里，scan 每执行一步，debug.print 打印一次，数值是那一步真实的 x；
    普通的 print 只会在追踪时打印一次 tracer。
    Write newton_sqrt: under jit debug.print prints once per executed scan step, with that step's
    real x; a plain print would print a tracer once, while tracing.
    """
    root = jax.jit(newton_sqrt, static_argnums=1)(jnp.float32(2.0), 5)
    lines = printed_lines(capsys)
    np.testing.assert_allclose(root, np.sqrt(2.0), rtol=1e-6)

    expected, x = [], 2.0
    for i in range(5):
        expected.append((i, x))
        x = (x + 2.0 / x) / 2
    assert [line.split(":")[0] for line in lines] == [f"step {i}" for i, _ in expected]
    np.testing.assert_allclose(
        [float(line.split("= ")[1]) for line in lines], [v for _, v in expected], rtol=1e-6
    )
    jaxpr = str(jax.make_jaxpr(newton_sqrt, static_argnums=1)(jnp.float32(2.0), 5))
    assert "scan" in jaxpr and "debug_print" in jaxpr
    quarter = jax.jit(newton_sqrt, static_argnums=1)(jnp.float32(0.25), 8)  # below one too
    np.testing.assert_allclose(quarter, 0.5, rtol=1e-6)
    assert len(printed_lines(capsys)) == 8
    # 逐元素：一次求几个根 / elementwise: several roots at once
    roots = jax.jit(newton_sqrt, static_argnums=1)(jnp.array([4.0, 9.0], jnp.float32), 8)
    np.testing.assert_allclose(roots, [2.0, 3.0], rtol=1e-6)
    assert len(printed_lines(capsys)) == 8


def test_checkify_turns_silent_faults_into_errors():
    """写 checked：jit 里越界的下标被悄悄夹住，log 负数、除以零悄悄变成 NaN / inf，程序照常
    返回。checkify 把这三种错误都变成主机上的异常，消息说出是哪一种、在哪个原语。
    Write checked: under jit an out-of-bounds index is clamped silently, and the log of a
    negative number or a division by zero silently becomes NaN / inf; the program returns as
    usual. checkify turns all three into an exception on the host whose message says which
    kind and which primitive.
    """

    def score(table, idx, scale):
        return jnp.log(table[idx]) / scale

    table = jnp.arange(1.0, 6.0)
    np.testing.assert_allclose(checked(score)(table, jnp.array([0, 4]), 2.0), np.log([1, 5]) / 2)
    assert jnp.all(jnp.isfinite(jax.jit(score)(table, jnp.array([0, 7]), 1.0)))  # clamped

    faults = {
        "out-of-bounds indexing": (table, jnp.array([0, 7]), 1.0),
        "division by zero": (table, jnp.array([0, 1]), 0.0),
        "nan generated by primitive: log": (-table, jnp.array([0, 1]), 1.0),
    }
    for message, args in faults.items():
        with raises_exactly(__) as info:
            checked(score)(*args)
        assert str(info.value).startswith(message)

    def ratio(values, i):  # 另一个函数、另一组参数 / another function, other arguments
        return values[i] / values[0]

    np.testing.assert_allclose(checked(ratio)(table, jnp.array([2, 4])), [3.0, 5.0])
    for args, message in (((table, jnp.array([9])), "out-of-bounds indexing"),
                          ((table.at[0].set(0.0), jnp.array([1])), "division by zero")):
        try:
            checked(ratio)(*args)
        except Exception as error:  # noqa: BLE001  (its kind is asked above / 种类上面已问过)
            assert str(error).startswith(message)
        else:
            raise AssertionError(f"{message}: 没有报错 / not raised")

    def shifted(values, i):  # 故障在函数里面产生，参数上看不出来 / the faults arise inside: no argument shows them
        return values[i + 3] / (values[i] - 1.0)

    np.testing.assert_allclose(checked(shifted)(table, jnp.array([1])), [5.0])
    for args, message in (((table, jnp.array([2])), "out-of-bounds indexing"),
                          ((table, jnp.array([0])), "division by zero")):
        with raises_exactly(checkify.JaxRuntimeError) as info:
            checked(shifted)(*args)
        assert str(info.value).startswith(message)


# Two failing programs, written afresh for every run: which fault, the functions' names and the
# lines they sit on are drawn at random, so no answer can be read off this file. Each kind is
# (the user function's body, main's call of it); the user function is NAME, called through CALLER.
GRAD = "jax.grad(CALLER)(jnp.ones((3, 2)), jnp.ones((4, 2)))"
SHAPE_FAULTS = (  # under grad: shapes that do not fit
    ("    return x @ w", GRAD),
    ("    return lax.dot(x, w)", GRAD),
    ("    return jnp.stack([w, x])", GRAD),
    ("    return jnp.concatenate([w, x], axis=1)", GRAD),
    ("    return w + x", GRAD),
)
IF_X = "    if x > 0:\n        return x\n    return -x"
TRACER_FAULTS = (  # a Python value asked of a tracer
    (IF_X, "lax.scan(lambda t, v: (t + CALLER(v, v), None), 0.0, jnp.arange(-2.0, 2.0))"),
    (IF_X, "lax.fori_loop(0, 3, lambda i, t: CALLER(t, t) + 1.0, 1.0)"),
    (IF_X, "jax.jit(lambda v: CALLER(v, v))(2.0)"),
    ("    return jnp.zeros(int(x))", "jax.vmap(lambda v: CALLER(v, v))(jnp.arange(3.0))"),
    ("    return jnp.ones(3) * float(x)", "jax.jit(lambda v: CALLER(v, v))(jnp.float32(2.0))"),
    ("    return jnp.arange(x)", "jax.jit(lambda v: CALLER(v, v))(3)"),
)
SCRIPT = """import sys
import traceback

import jax
import jax.numpy as jnp
from jax import lax
{pad_top}

def {name}(w, x):
{pad_body}{body}


def {caller}(w, x):
    h = {name}(w, x)
    return jnp.sum(h ** 2)


def main():
    {call}


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc(file=sys.stdout)
"""


def failing_script(faults, rng):
    """One of `faults` as a script, under fresh names and at a fresh line."""
    body, call = faults[rng.randrange(len(faults))]
    name, caller = (f"{word}_{rng.randrange(16**6):06x}" for word in ("layer", "model"))
    return SCRIPT.format(
        pad_top="\n".join(f"# {i}" for i in range(rng.randrange(1, 12))),
        pad_body="".join(f"    # {i}\n" for i in range(rng.randrange(0, 6))),
        name=name,
        caller=caller,
        body=body,
        call=call.replace("CALLER", caller),
    )


def test_traceback_filtering_off_shows_where_jax_raised(tmp_path):
    """写 where_jax_raised：JAX 默认把自己内部的很多栈帧从回溯里删掉，只留下你的代码和它的
    几层公开接口；这通常够用，但要知道 JAX 内部是哪条规则拒绝了你的程序（比如给 JAX 报 bug，
    或读那条规则的源码），就得在新进程里关掉过滤，再从回溯里读出真正抛出异常的那一帧，以及
    你自己的代码里最深的那一行（要改的地方）。这里的两个出错脚本每次运行都重新生成：一个在 grad
    里形状对不上，一个向 tracer 要一个 Python 值；出的是哪种错、函数叫什么、在第几行，都是随机的。
    Write where_jax_raised: by default JAX removes many of its own frames from a traceback and
    keeps your code and a few layers of its public API; that is usually enough, but to learn
    which rule inside JAX rejected your program (to report a bug, or to read that rule's
    source) you switch the filtering off in a fresh process and read from the traceback the
    frame that really raised, and the deepest line of your own code (the one to fix). The two
    failing scripts here are written afresh on every run, one with shapes that do not fit under
    grad, one that asks a tracer for a Python value; which fault, the functions' names and
    their lines are drawn at random.
    """
    rng = random.Random()
    for faults in (SHAPE_FAULTS, TRACER_FAULTS):
        script = tmp_path / f"failing_{rng.randrange(10**6)}.py"
        source = failing_script(faults, rng)
        script.write_text(source, encoding="utf-8")

        # What JAX says in this process, filtering off: the frames of the exception itself.
        namespace = {"__name__": "failing"}
        exec(compile(source, str(script), "exec"), namespace)
        before = jax.config.jax_traceback_filtering
        jax.config.update("jax_traceback_filtering", "off")
        try:
            namespace["main"]()
        except Exception as error:
            frames = traceback.extract_tb(error.__traceback__)
        finally:
            jax.config.update("jax_traceback_filtering", before)
        raised = [f for f in frames if "jax/_src/" in f.filename][-1]
        mine = [f for f in frames if f.filename == str(script)][-1]
        expected = (raised.filename.split("jax/_src/", 1)[1], raised.name), (mine.lineno, mine.name)

        filtered = run_python("-I", str(script))  # JAX's default filtering
        assert "JAX_TRACEBACK_FILTERING" in filtered  # its note says how to see the rest
        assert f"in {raised.name}\n" not in filtered  # the frame that raised is hidden

        jax_frame, user_frame = where_jax_raised(script)
        print(f"{script.name}: raised in jax/_src/{jax_frame}, called from {user_frame}")
        assert (jax_frame, user_frame) == expected


def test_debug_callback_finds_the_step_where_training_diverges():
    """写 log_gradient_norm：学习率太大，训练在某一步开始发散，但 jit 过的 scan 只交回最后的 w。
    jax.debug.callback 在每一步把一个数值送回主机，于是能看到是哪一步开始爆炸的。
    Write log_gradient_norm: the learning rate is too large and training starts to diverge at
    some step, but the jitted scan hands back only the last w. jax.debug.callback sends one
    value per step back to the host, so you can see which step blew up.
    """
    xs = np.random.default_rng(0).normal(size=(12, 4, 3))
    xs[6:] *= 4.0  # larger inputs in the second half: the same learning rate is now too large
    norms = []
    w = sgd_scan(jnp.zeros(3), jnp.asarray(xs), 0.05, log_gradient_norm, norms.append)
    jax.effects_barrier()

    expected, v = [], np.zeros(3)
    for x in xs:
        g = 2 * x.T @ (x @ v - 1.0)
        expected.append(np.linalg.norm(g))
        v = v - 0.05 * g
    np.testing.assert_allclose([float(n) for n in norms], expected, rtol=1e-4)
    np.testing.assert_allclose(w, v, rtol=1e-4)
    first_blow_up = next(i for i, n in enumerate(norms) if n > 50 * norms[0])
    assert first_blow_up == 6
    # 另一个特征数：范数是整个梯度的 / another feature count: the norm is the whole gradient's
    wide = np.random.default_rng(1).normal(size=(3, 4, 5))
    wide_norms = []
    sgd_scan(jnp.zeros(5), jnp.asarray(wide), 0.01, log_gradient_norm, wide_norms.append)
    jax.effects_barrier()
    v, expected_wide = np.zeros(5), []
    for x in wide:
        g = 2 * x.T @ (x @ v - 1.0)
        expected_wide.append(np.linalg.norm(g))
        v = v - 0.01 * g
    np.testing.assert_allclose([float(n) for n in wide_norms], expected_wide, rtol=1e-4)
    # in step order on every backend, not only on this CPU: the callback's effect is ordered
    jaxpr = jax.make_jaxpr(lambda g: log_gradient_norm(g, norms.append))(jnp.ones(3))
    (callback,) = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "debug_callback"]
    assert str(callback.params["effect"]) == "OrderedDebug"
