"""08 · 读代码看不出来的 bug：让工具指出它 / bugs that reading does not show: let the tool point.

下面四组程序读起来都没毛病：一个把 NaN 悄悄换成 0，损失一直有限；一个在很深的辅助函数里每一步
都重新编译；一个在循环里悄悄地在主机和设备之间搬数据；一个让 XLA 悄悄把切开的数组收齐、复制到
每个设备。症状（损失偏了、越跑越慢、设备在等主机、每个设备的内存是整份的）指向一个工具：
`checkify` 的浮点检查、`jax.explain_cache_misses`、`jax.transfer_guard`、编译后的程序（HLO 里的
all-gather 和输出的分片）。每个 koan 里你写的是工具的用法：把它装到一个任意的程序上，让它说出
出错的那一行数据、那个辅助函数、那一次传输、被收齐和被复制的那些数组。测试用几个藏着不同 bug 的程序（还有一个没有 bug 的）核对你的诊断。

The four sets of programs below read fine: one quietly turns a NaN into 0, so its loss stays
finite; one recompiles at every step deep inside a helper; one moves data between host and
devices inside its loop; one makes XLA quietly gather a split array and replicate it on every
device. The symptom (a loss that is off, steps that get slower, devices waiting for the host,
whole-size memory on every device) points to a tool: `checkify`'s float checks,
`jax.explain_cache_misses`, `jax.transfer_guard`, the compiled program (its HLO's all-gathers
and its outputs' shardings). In each koan you write the tool's set-up: attach it to any
program and let it name the row of data, the helper, the transfer, the arrays gathered and
replicated. The tests check your
diagnosis on several programs with different bugs (and one without).
"""

import functools
import re
import traceback
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives, recording_jax_logs

# -- 1. a NaN the data makes and the program hides / 数据造出、程序藏起来的 NaN --------------


def row_loss(row):
    """一个样本的损失：对数间隔加上开方的离散度；“为了稳健”，非有限的项记作 0。
    One example's loss: a log margin plus a square-root spread; "for robustness" a term that is
    not finite counts as 0.
    """
    term = jnp.log(row[0] - row[1]) + jnp.sqrt(row[2])
    return jnp.where(jnp.isfinite(term), term, 0.0) + 0.1 * row[3] ** 2


def training_loss(batch):
    return jnp.mean(jax.vmap(row_loss)(batch))


def first_nan(row_fn, batch):
    """找出 row_fn 在 batch 的哪一行（第 0 维）第一次造出 NaN、由哪个原语造出：返回
    (行号, 原语名)，例如 (4, "exp")；没有 NaN 时返回 None。
    - 用 checkify 的浮点检查包住 row_fn，再按行 vmap（checkify 在 vmap 里面，报错消息才带行号），
      可以 jit；从 err.get() 的消息里取出行号和原语名。
    - 大约 6 行。
    Find the row of batch (axis 0) on which row_fn first makes a NaN, and the primitive that
    makes it: return (row, primitive name), e.g. (4, "exp"); None when there is no NaN.
    - Wrap row_fn in checkify's float checks and vmap it over the rows (checkify inside vmap,
      so that the message carries the row); jit is fine. Take the row and the primitive from
      the message of err.get().
    - About 6 lines.
    """
    todo("first_nan: checkify(float_checks) inside vmap, then parse err.get() / 解析消息")


def make_batch(bad_row, column):
    """8 行 4 列的数据；bad_row 这一行的 column 列坏了（None：没有坏行）。
    Eight rows, four columns; column `column` of row `bad_row` is broken (None: no bad row).
    """
    rng = np.random.default_rng(8)
    batch = np.stack(
        [rng.uniform(2, 3, 8), rng.uniform(0, 1, 8), rng.uniform(1, 2, 8), rng.normal(size=8)], 1
    ).astype(np.float32)
    if bad_row is not None:
        batch[bad_row, column] = -1.0  # a log (column 0) or a sqrt (column 2) of a negative
    return jnp.asarray(batch)


@pytest.mark.parametrize(("bad_row", "column"), [(2, 0), (5, 2), (None, 0)])
def test_checkify_finds_the_row_that_made_a_hidden_nan(bad_row, column):
    """✍️ 写 first_nan。⚠️ 陷阱 / trap: 程序把非有限的项换成 0，损失一直是有限的，jit 的输出里
    没有 NaN，所以在 jit 下 jax.debug_nans 什么也不报（它检查 jit 函数的输出）。不加 jit、逐个原语
    执行时它停在造出 NaN 的原语上（test_locating_faults.py 里那样），可说不出是哪一行数据。数据里
    坏的那一行照样把损失拉偏了。checkify 的浮点检查看的是每个原语的输出，在 vmap 下还能说出是哪一行。
    Write first_nan. The program replaces a term that is not finite by 0: the loss stays
    finite, no jit output holds a NaN, and so under jit jax.debug_nans reports nothing (it
    checks a jitted function's outputs). Run eagerly, primitive by primitive, it stops at the
    primitive that made the NaN (as in test_locating_faults.py) but cannot say which row of
    data. The bad row still skews the loss. checkify's float checks look at every primitive's
    output and, under vmap, name the row. 整批一次检查：row_fn 的程序只运行一次，不是每行一次。
    The whole batch is checked at once: row_fn's program runs once, not once per row.
    """
    batch = make_batch(bad_row, column)
    loss = jax.jit(training_loss)
    with jax.debug_nans(True):
        assert np.isfinite(float(loss(batch)))  # under jit: nothing raised, nothing shows
    if bad_row is not None:  # eagerly: stops at a primitive, names no row / 不加 jit：没有行号
        with jax.debug_nans(True), pytest.raises(FloatingPointError):
            training_loss(batch)
    # The known answer, from the data / 由数据算出的正确答案
    expected = None if bad_row is None else (bad_row, {0: "log", 2: "sqrt"}[column])
    assert first_nan(row_loss, batch) == expected
    tall = jnp.concatenate([make_batch(None, 0), batch])  # 两位数的行号 / a two-digit row
    assert first_nan(row_loss, tall) == (None if bad_row is None else (8 + bad_row, expected[1]))
    assert first_nan(lambda row: jnp.log(row[0] - row[1]), batch) == (
        None if column != 0 else expected
    )
    runs = []  # each run of row_fn's program, with the shape its rows reached it in

    def tally(rows):
        runs.append(rows.shape)
        return rows

    def watched(row):  # under vmap the callback sees every row together, in one call
        shape = jax.ShapeDtypeStruct(row.shape, row.dtype)
        return row_loss(jax.pure_callback(tally, shape, row, vmap_method="expand_dims"))

    assert first_nan(watched, batch) == expected
    assert runs == [batch.shape], f"{len(runs)} runs of row_fn: check the rows in one vmap"


# -- 2. a recompile deep inside a helper / 藏在辅助函数深处的重新编译 ---------------------------


def make_pipeline(bugs):
    """一条四步的预处理流水线，用到两个辅助函数；bugs 里的名字指定哪个辅助函数带着 bug。
    返回 run()，它对四批数据各跑一步，返回最后一步的结果。
    A four-step preprocessing pipeline through two helpers; the names in bugs say which
    helpers carry a bug. Returns run(), which runs one step on each of four batches and
    returns the last step's result.
    """

    def _zscore(x, eps):
        return (x - x.mean()) / (x.std() + eps)

    def _bound(x, limit):
        return jnp.clip(x, -limit, limit)

    standardise_jit = jax.jit(_zscore)
    clip_static = jax.jit(_bound, static_argnames="limit")
    clip_traced = jax.jit(_bound)

    def standardise(x):
        if "standardise" in bugs:  # a new partial, a new function to jit, every call
            return jax.jit(functools.partial(_zscore, eps=1e-6))(x)
        return standardise_jit(x, 1e-6)

    def clip(x, step):
        limit = 1.0 + 0.5 * step  # the limit widens as the steps go on / 限度随步数放宽
        if "clip" in bugs:  # static: every new limit is a new program
            return clip_static(x, limit=limit)
        return clip_traced(x, np.float32(limit))

    batches = [jnp.asarray(np.random.default_rng(i).normal(size=16), jnp.float32) for i in range(4)]

    def run():
        out = None
        for step, x in enumerate(batches):
            out = clip(standardise(x), step)
        return out

    return run


def recompiling_helpers(run):
    """用 jax.explain_cache_misses 找出哪些函数里的 jit 调用一再重新编译：运行 run()，收集 "jax"
    日志器写出的 "TRACING CACHE MISS" 消息（jaxkoans.api.probes.recording_jax_logs），每条消息的
    开头 "TRACING CACHE MISS at 文件:行:列 (限定名):" 说出发生未命中的调用在哪个函数里（限定名如
    "make_pipeline.<locals>.clip"，取最后一个点之后的函数名）；返回未命中超过一次的函数名，排好序。第一次调用一个 jit 函数总会未命中一次，那不算 bug。大约 6 行。
    With jax.explain_cache_misses, find the functions whose jit calls compile again and again:
    run run(), collect the "TRACING CACHE MISS" messages of the "jax" logger
    (jaxkoans.api.probes.recording_jax_logs); each begins "TRACING CACHE MISS at FILE:LINE:COL
    (QUALNAME):", naming the function the missing call is in (a qualified name such as
    "make_pipeline.<locals>.clip": keep the function name after the last dot). Return the names
    of the functions that missed more than once, sorted. The first call of a jitted function always misses
    once; that is no bug. About 6 lines.
    """
    todo("recompiling_helpers: explain_cache_misses + recording_jax_logs, count the callers")


@pytest.mark.parametrize("bugs", [("standardise",), ("clip",), ("clip", "standardise"), ()])
def test_explain_cache_misses_names_the_helper_that_recompiles(bugs):
    """✍️ 写 recompiling_helpers。“越跑越慢”，可 jit 的函数本身没有问题：问题在调用它的地方，
    一个每次都新建的 functools.partial，或者一个每步都变的静态参数。explain_cache_misses 在每次
    未命中时写出调用发生在哪个函数里、为什么没命中。修好的流水线每个 jit 函数只编译一次。
    Write recompiling_helpers. "It gets slower", yet the jitted functions are fine: the fault
    is where they are called, a functools.partial made anew at every call, or a static
    argument that changes at every step. At every miss explain_cache_misses writes which
    function made the call and why it missed. The repaired pipeline compiles each jitted
    function once.
    """
    # The known answer, from counting the traces of each function / 数每个函数被追踪的次数
    traced = []

    def on_event(event, duration, **kwargs):
        if event == "/jax/core/compile/jaxpr_trace_duration" and kwargs["fun_name"][0] == "_":
            traced.append(kwargs["fun_name"])

    jax.monitoring.register_event_duration_secs_listener(on_event)
    try:
        make_pipeline(bugs)()
    finally:
        jax.monitoring.unregister_event_duration_listener(on_event)
    inner = {"standardise": "_zscore", "clip": "_bound"}  # the jitted function each helper calls
    assert sorted(traced) == sorted(["_bound", "_zscore"] + [inner[b] for b in bugs for _ in "abc"])
    assert recompiling_helpers(make_pipeline(bugs)) == sorted(bugs)


# -- 3. a transfer hidden in the loop / 藏在循环里的传输 --------------------------------------

# 项目里另一个模块的辅助函数：它的帧不属于本文件 / a helper of another module of the project:
# its frame is not this file's
log_helpers = types.ModuleType("log_helpers")
exec(  # a module made from its source / 由源码造出的模块
    compile(
        "import numpy as np\n\n\ndef to_host(a):\n    return np.asarray(a)\n",
        "log_helpers.py",
        "exec",
    ),
    vars(log_helpers),
)


def make_loop(bug):
    """8 个设备上的数据并行最小二乘，跑 4 步，返回 run()；bug 指定哪一处藏着一次隐式传输
    （None：没有）。run() 返回 (参数, 每一步的残差列表)。
    Data-parallel least squares on 8 devices, 4 steps; returns run(). bug names where an
    implicit transfer hides (None: nowhere). run() returns (params, the residuals of each step).
    """
    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    rows, everywhere = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    rng = np.random.default_rng(3)
    x = jax.device_put(rng.normal(size=(16, 3)).astype(np.float32), rows)
    y = jax.device_put(rng.normal(size=16).astype(np.float32), rows)
    w0 = jax.device_put(np.zeros(3, np.float32), everywhere)
    rates = [jax.device_put(np.float32(0.5 / (1 + i)), everywhere) for i in range(4)]
    decay = jnp.float32(0.9) if bug == "decay" else jax.device_put(np.float32(0.9), everywhere)
    history = []

    @jax.jit
    def step(w, x, y, lr):
        residual = x @ w - y
        return w - lr * x.T @ residual / len(y), residual

    @jax.jit
    def scale(w, factor):
        return w * factor

    def learning_rate(i):
        return np.float32(0.5 / (1 + i)) if bug == "lr" else rates[i]

    def apply_decay(w):
        return scale(w, decay)

    def log_residual(residual):
        if bug == "helper":  # the same read, inside another module's helper
            residual = log_helpers.to_host(residual)
        history.append(np.asarray(residual) if bug == "log" else residual)

    def run():
        w = w0
        for i in range(4):
            w, residual = step(w, x, y, learning_rate(i))
            w = apply_decay(w)
            log_residual(residual)
        return w, history

    return run


def first_refused_transfer(run):
    """在 jax.transfer_guard("disallow") 之下运行 run()：隐式的传输（主机到设备、设备到设备、
    设备到主机）都会被拒绝，抛出 jax.errors.JaxRuntimeError，消息里写着
    "Disallowed 方向 transfer"。返回 (方向, 函数名)：方向如 "host-to-device"，函数名取异常回溯里
    属于本文件（__file__）的最内层那一帧。run() 没被拒绝时返回 None。大约 8 行。
    Run run() under jax.transfer_guard("disallow"): implicit transfers (host to device, device
    to device, device to host) are refused with a jax.errors.JaxRuntimeError whose message
    reads "Disallowed DIRECTION transfer". Return (direction, function name): the direction
    such as "host-to-device", the function from the innermost frame of the exception's
    traceback that belongs to this file (__file__). None when run() is not refused. About 8
    lines.
    """
    todo("first_refused_transfer: transfer_guard('disallow'), then the traceback / 再看回溯")


@pytest.mark.parametrize(
    ("bug", "expected"),
    [
        ("lr", ("host-to-device", "run")),
        ("decay", ("device-to-device", "apply_decay")),
        ("log", ("device-to-host", "log_residual")),
        ("helper", ("device-to-host", "log_residual")),
        (None, None),
    ],
)
def test_transfer_guard_finds_the_hidden_transfer(bug, expected):
    """✍️ 写 first_refused_transfer。一个 NumPy 标量学习率、一个放在单个设备上的常数、一次记录
    日志时的 np.asarray：每一步都悄悄地搬一次数据，Python 要停下来等，结果却完全正确。
    jax.transfer_guard("disallow") 拒绝隐式传输（显式的 jax.device_put / jax.device_get 照常放行），
    拒绝的那一刻的回溯指向做这件事的函数。注意：CPU 上读一个整份放在一个设备上的数组（单设备的或
    复制的，np.asarray）不用拷贝，守卫不拦；这里的残差沿 8 个设备切开，读它就是一次设备到主机的传输。
    Write first_refused_transfer. A NumPy scalar learning rate, a constant that sits on a
    single device, an np.asarray while logging: each moves data quietly at every step, makes
    Python wait, and leaves the result exactly right. jax.transfer_guard("disallow") refuses
    implicit transfers (explicit jax.device_put / jax.device_get still pass), and the traceback
    at the refusal points to the function that made it. Note: on CPU, reading an array held
    whole on one device (single-device or replicated, np.asarray) needs no copy and the guard
    lets it pass; the residual here is split over 8 devices, so reading it is a device-to-host
    transfer.
    """
    w, _ = make_loop(bug)()
    w_clean, _ = make_loop(None)()
    np.testing.assert_allclose(w, w_clean, rtol=1e-6)  # every variant computes the same
    with jax.transfer_guard("disallow"):  # CPU: one device's whole array reads without a copy
        np.asarray(w_clean)  # replicated: passes / 复制的：放行
    assert first_refused_transfer(make_loop(bug)) == expected


# -- 4. a sharding that silently replicates / 悄悄复制的分片 ----------------------------------


def make_program(bug):
    """8 个设备上的一个小程序：x (64, 32) 的行沿 "data" 切开，返回 (f, x)；f(x) 返回
    (中心化的行, 每行的范数)。bug 指定哪一处让 XLA 悄悄复制（None：没有）。
    A small program on 8 devices: the rows of x (64, 32) split along "data"; returns (f, x),
    and f(x) returns (the centred rows, each row's norm). bug names where XLA is made to
    replicate quietly (None: nowhere).
    """
    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    rng = np.random.default_rng(4)
    x = jax.device_put(rng.normal(size=(64, 32)).astype(np.float32), NamedSharding(mesh, P("data")))

    def f(x):
        centred = x - x.mean(0)
        if bug == "interleave":  # rows regrouped in blocks of 8 / 行按 8 个一组重排
            centred = centred.reshape(8, 8, 32).transpose(1, 0, 2).reshape(64, 32)
        if bug == "running":  # a running mean down the rows / 沿行的累积平均
            centred = jnp.cumsum(centred, axis=0) / jnp.arange(1, 65)[:, None]
        norms = jnp.sqrt((centred**2).sum(1))
        if bug == "fresh":  # one overall norm for every row / 每行都用总的范数
            norms = jnp.full((64,), 1.0) * jnp.sqrt((centred**2).sum())
        return centred, norms

    return f, x


def silent_replication(fn, *args):
    """编译 jax.jit(fn)(*args)，返回 (gathers, replicated)：gathers 是编译后 HLO 里每条
    all-gather 的结果形状（jaxkoans.api.probes.collectives 的写法，如 "f32[64,32]"），按出现的
    顺序；replicated 是输出（jax.tree.leaves 的顺序）里每个设备都拿着一整份的那些的下标
    （分片的 is_fully_replicated），从小到大。大约 5 行。
    Compile jax.jit(fn)(*args) and return (gathers, replicated): gathers holds the result
    shape of each all-gather in the compiled HLO (written as jaxkoans.api.probes.collectives
    writes it, e.g. "f32[64,32]"), in order; replicated the indices of the outputs (in
    jax.tree.leaves order) that every device holds whole (their sharding's
    is_fully_replicated), in increasing order. About 5 lines.
    """
    todo("silent_replication: 编译后 HLO 的 all-gather、输出的分片 / all-gathers, out shardings")


@pytest.mark.parametrize(
    ("bug", "expected"),
    [
        ("interleave", (["f32[8,8,32]"], [0, 1])),
        ("running", (["f32[64,32]"], [])),
        ("fresh", ([], [1])),
        (None, ([], [])),
    ],
)
def test_the_compiled_program_shows_what_replicates(bug, expected):
    """✍️ 写 silent_replication。⚠️ 陷阱 / trap: 四个程序算出的值都对，读代码也看不出谁让 XLA
    把整个数组收齐到每个设备：一次把行重新分组的 reshape、一次沿切开的轴的 cumsum、一个在 jit
    里新建、不从输入继承分片的数组。工具是编译后的程序：HLO 里的 all-gather 说出收齐了什么，
    输出的分片说出什么留成了复制的（也可以运行程序，看结果的 .sharding）。
    Write silent_replication. All four programs compute the right values, and reading them
    does not tell which makes XLA gather a whole array onto every device: a reshape that
    regroups the rows, a cumsum along the split axis, an array made inside jit that inherits
    no sharding from the inputs. The tool is the compiled program: its HLO's all-gathers say
    what was gathered, its outputs' shardings what was left replicated (running the program
    and reading the results' .sharding tells the same).
    """
    f, x = make_program(bug)
    # The known answer, from running the program / 运行程序得到的已知答案
    outputs = jax.tree.leaves(jax.jit(f)(x))
    assert [i for i, out in enumerate(outputs) if out.sharding.is_fully_replicated] == expected[1]
    assert silent_replication(f, x) == expected
    # 分片写着一根只有一个设备的轴：每个设备仍拿着整份
    # a sharding may name an axis of one device: every device still holds the whole
    if bug is None:
        mesh = jax.make_mesh((8, 1), ("data", "one"))  # Explicit axes / 显式轴
        with jax.set_mesh(mesh):
            y = jax.device_put(x, NamedSharding(mesh, P("data")))

            def total(y):
                return 2 * y, jax.sharding.reshard(y.sum(0), P("one"))

            found = silent_replication(total, y)
        assert found == ([], [1])


def test_inspect_array_sharding_reads_the_middle_of_a_program():
    """jax.debug.inspect_array_sharding(值, callback=...) 写在 jit 里面：编译时，XLA 给这个中间值
    选定了什么分片，就把它交给 callback。程序中间的分片，输入和输出的分片都看不出来。下面三个
    中间值（中心化的行、沿行的累积和、按 8 个一组重排的行）哪些是每个设备都拿着一整份的？
    累积和那一步在 HLO 里有一次收齐整个数组的 all-gather（上一个 koan）：它算出来的值最后每个
    设备拿着多大一块？分片说的是值放在哪里，不是为了算它搬过什么。
    jax.debug.inspect_array_sharding(value, callback=...) written inside jit hands callback,
    while compiling, the sharding XLA chose for that intermediate value: the middle of a
    program, which neither the inputs' nor the outputs' shardings show. Of the three
    intermediates below (the centred rows, a running sum down the rows, the rows regrouped in
    blocks of 8), which does every device hold whole? The running sum's step holds an
    all-gather of the whole array in its HLO (previous koan): how large a block of the value it
    computes does each device hold in the end? A sharding says where a value lives, not what
    was moved to compute it.
    """
    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    x = jax.device_put(np.ones((64, 32), np.float32), NamedSharding(mesh, P("data")))
    seen = {}

    def watch(name, value):
        jax.debug.inspect_array_sharding(value, callback=lambda s: seen.__setitem__(name, s))

    def f(x):
        centred = x - x.mean(0)
        watch("centred", centred)
        running = jnp.cumsum(centred, axis=0)
        watch("running", running)
        regrouped = centred.reshape(8, 8, 32).transpose(1, 0, 2).reshape(64, 32)
        watch("regrouped", regrouped)
        return running.sum() + regrouped.sum()

    jax.jit(f).lower(x).compile()  # the callbacks run while compiling / 回调在编译时执行
    assert sorted(seen) == ["centred", "regrouped", "running"]
    whole = [name for name in ("centred", "running", "regrouped") if seen[name].is_fully_replicated]
    assert whole == __
    assert seen["running"].shard_shape((64, 32)) == __
