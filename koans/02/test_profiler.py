"""02 · 在 CPU 上真实地做一次 profile / a real profiler trace on CPU.

`jax.profiler.trace(logdir)` 在退出时写出 `plugins/profile/<时间戳>/<主机>.xplane.pb`（给
TensorBoard / XProf）和一个 gzip 压缩的 Chrome trace JSON（`*.trace.json.gz`，也能用
https://ui.perfetto.dev 打开）。这里不用任何界面：直接读 JSON，像读日志一样在里面找事件。

`jax.profiler.trace(logdir)` writes, on exit, `plugins/profile/<timestamp>/<host>.xplane.pb`
(for TensorBoard / XProf) and a gzipped Chrome trace JSON (`*.trace.json.gz`, which
https://ui.perfetto.dev also opens). No UI here: the koans read the JSON and search its
events like a log.
"""

import gzip
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import Deferred

# ---- 给定代码 / given code -------------------------------------------------------------


def read_trace(logdir):
    """jax.profiler.trace 在 logdir 下写出的 Chrome trace 事件列表。
    The events of the Chrome trace that jax.profiler.trace wrote under logdir.
    """
    [path] = Path(logdir).glob("plugins/profile/*/*.trace.json.gz")
    with gzip.open(path) as f:
        return json.load(f)["traceEvents"]


def xplane_names(logdir):
    """同一次 trace 写下的 XSpace（TensorBoard 读的 .xplane.pb）里每个事件的名字，用
    jax.profiler.ProfileData 读出。
    The name of every event in the XSpace the same trace wrote (the .xplane.pb TensorBoard
    reads), read with jax.profiler.ProfileData.
    """
    [path] = Path(logdir).glob("plugins/profile/*/*.xplane.pb")
    data = jax.profiler.ProfileData.from_file(str(path))
    return [e.name for plane in data.planes for line in plane.lines for e in line.events]


def named(events, name):
    """名字为 name 的完整事件（ph == "X"，带 ts 和 dur，单位微秒）。
    The complete events (ph == "X", with ts and dur in microseconds) called name.
    """
    return [e for e in events if e.get("ph") == "X" and e.get("name") == name]


def kernels(events):
    """XLA 执行的内核：带 hlo_op / hlo_module 参数的事件。
    The kernels XLA ran: the events whose args carry hlo_op / hlo_module.
    """
    return [e for e in events if "hlo_op" in e.get("args", {})]


def inside(event, outer):
    """event 的时间段是否落在 outer 之内。/ Whether event's time span lies within outer's."""
    return outer["ts"] <= event["ts"] and event["ts"] + event["dur"] <= outer["ts"] + outer["dur"]


def loss(x):
    return jnp.mean(jnp.tanh(x @ x.T))


def fused(x, y):
    return jnp.exp(jnp.sin(x * y))


def split(x, y):
    a = lax.optimization_barrier(x * y)  # XLA may not fuse across a barrier / 屏障两侧不融合
    b = lax.optimization_barrier(jnp.sin(a))
    return jnp.exp(b)


# ---- 你来实现 / your code ---------------------------------------------------------------


def trace_one_step(logdir, step, *args, label):
    """对 step(*args) 的一次调用做 profile，写到 logdir：用 jax.profiler.trace 包住，
    里面用一个名为 label 的 jax.profiler.TraceAnnotation 包住这次调用，并且在标注结束之前
    等结果算完（异步派发！）。返回结果。大约 4 行。

    Profile one call of step(*args) into logdir: jax.profiler.trace around it, and inside a
    jax.profiler.TraceAnnotation named label around the call; wait for the result before the
    annotation closes (dispatch is asynchronous!). Return the result. About 4 lines.
    """
    todo("trace_one_step: jax.profiler.trace、TraceAnnotation，并等待结果 / trace, annotate, wait for the result")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_your_annotation_is_in_the_written_trace(tmp_path):
    """自己写一次 trace：TraceAnnotation 在 trace 里成为一个完整事件（ph "X"），它的时间段
    包住了 jit 函数的派发（PjitFunction(loss)）和 XLA 在另一个线程上执行的内核。
    Write a trace yourself: a TraceAnnotation becomes one complete event (ph "X") whose span
    encloses the dispatch of the jitted function (PjitFunction(loss)) and the kernels XLA ran
    on another thread. 同一个标注也在 trace 写下的 XSpace（.xplane.pb）里。然后换一个标注名和一个
    Deferred 的 step（另一个形状，结果是一个 pytree）：它要有人等它才派发，所以只有在标注里等整个结果，
    它的内核才落进标注，固定时长的等待（sleep、盯着时钟空转）或只等第一个叶子做不到。
    The same annotation is in the XSpace the trace wrote (.xplane.pb). Then another label and
    a Deferred step (another shape, its result a pytree), dispatched only when someone waits for
    it: only a wait for the whole result inside the annotation puts its kernels there, and no
    wait of a fixed length (a sleep, a loop watching the clock) nor one on the first leaf does.
    """
    # Tens of milliseconds of work: an asynchronous dispatch returns long before it ends.
    x = jnp.linspace(0.0, 1.0, 1024 * 1024).reshape(1024, 1024) / 32
    step = jax.jit(loss)
    step(x).block_until_ready()  # compile first: the trace shows one steady-state step

    out = trace_one_step(tmp_path, step, x, label="my_train_step")
    np.testing.assert_allclose(out, loss(x), rtol=1e-5)
    assert {p.suffix for p in tmp_path.glob("plugins/profile/*/*")} == {".gz", ".pb"}

    events = read_trace(tmp_path)
    [mine] = named(events, "my_train_step")
    dispatches = named(events, "PjitFunction(loss)")
    assert dispatches and all(inside(d, mine) for d in dispatches)
    ran = kernels(events)
    assert ran and all(inside(k, mine) for k in ran), "block on the result inside the annotation"
    assert {k["tid"] for k in ran}.isdisjoint({mine["tid"]})  # XLA's threads, not Python's
    assert xplane_names(tmp_path).count("my_train_step") == 1, "annotate inside the trace"

    y = x[:512, :256]
    step(y).block_until_ready()
    def later_step(*a):  # a pytree whose first leaf is no array: wait for all of it
        return {"batch": a[0].shape[0], "loss": Deferred(step, *a)}

    out = trace_one_step(tmp_path / "later", later_step, y, label="later_step")
    events = read_trace(tmp_path / "later")
    later = named(events, "later_step")
    assert len(later) == 1, "annotate with the label you are given"
    ran = kernels(events)
    assert ran and all(inside(k, later[0]) for k in ran), "wait for the result, not a fixed time"
    assert out["loss"].done, "wait for the whole result, every leaf"
    np.testing.assert_allclose(out["loss"], loss(y), rtol=1e-5)


def test_kernels_are_named_after_the_compiled_hlo(tmp_path):
    """trace 里的内核事件以编译后 HLO 的指令命名，参数 hlo_module 是 XLA 模块名：
    jit 给模块起的名字是 "jit_" 加函数名。拿这两个名字就能回到 compiled.as_text() 里找到那条指令。
    The kernel events of a trace are named after instructions of the compiled HLO, and their
    hlo_module argument is the XLA module, which jit names "jit_" plus the function's name.
    With the two names you find the instruction in compiled.as_text().
    """
    x = jnp.linspace(-1.0, 1.0, 64 * 32).reshape(64, 32)
    step = jax.jit(loss)
    step(x).block_until_ready()
    trace_one_step(tmp_path, step, x, label="step")

    ran = kernels(read_trace(tmp_path))
    assert {k["args"]["hlo_module"] for k in ran} == {__}
    hlo = step.lower(x).compile().as_text()
    assert hlo.split()[:2] == ["HloModule", ran[0]["args"]["hlo_module"] + ","]
    for k in ran:
        assert f"%{k['args']['hlo_op']} = " in hlo  # an instruction of the entry computation


def test_fusion_is_visible_as_fewer_kernels(tmp_path):
    """融合在 profile 里看得见：编译后 HLO 入口里的每条 fusion 指令执行时是一个内核，profile
    里内核的个数就是 fusion 的个数；XLA 不会跨过 optimization_barrier 融合。各有几个内核？
    Fusion is visible in a profile: every fusion instruction of the compiled entry computation
    runs as one kernel, so the profile holds as many kernels as there are fusions; XLA does
    not fuse across an optimization_barrier. How many kernels does each version run?
    """
    x = jnp.linspace(0.0, 1.0, 4096)
    counts = {}
    for fn in (fused, split):
        step = jax.jit(fn)
        step(x, x).block_until_ready()
        logdir = tmp_path / fn.__name__
        trace_one_step(logdir, step, x, x, label=fn.__name__)
        counts[fn.__name__] = len(kernels(read_trace(logdir)))
        hlo = step.lower(x, x).compile().as_text()
        assert counts[fn.__name__] == hlo.split("ENTRY")[1].count(" fusion(")
    assert counts == __


def test_the_profile_shows_which_steps_compile(tmp_path):
    """用 StepTraceAnnotation 标出训练步（参数 step_num 在 JSON 里是字符串）。编译也会被记录：
    XLA 的 pass 事件名里带着模块名。第一步要编译；输入形状一变，那一步又编译一次——
    profile 直接告诉你哪一步在重新编译。
    StepTraceAnnotation marks training steps (its step_num arrives as a string in the JSON).
    Compilation is recorded too: XLA's pass events carry the module name. The first step
    compiles, and so does any step whose input shape is new: the profile tells you which step
    recompiles.
    """

    def train_loss(x):  # a fresh function each run: nothing compiled for it yet
        return loss(x)

    step = jax.jit(train_loss)
    sizes = [8, 8, 16, 8, 16]
    with jax.profiler.trace(tmp_path):
        for i, n in enumerate(sizes):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                step(jnp.ones((n, 4))).block_until_ready()

    events = read_trace(tmp_path)
    steps = named(events, "train")
    assert [s["args"]["step_num"] for s in steps] == __
    compiling = [e for e in events if "(jit_train_loss)" in e.get("name", "") and e.get("ph") == "X"]
    assert compiling, "XLA's compiler passes are in the trace"
    steps_that_compile = [
        int(s["args"]["step_num"]) for s in steps if any(inside(c, s) for c in compiling)
    ]
    assert steps_that_compile == __


# ---- 设备内存的 profile / the device memory profile ------------------------------------
# jax.profiler.device_memory_profile() 返回此刻设备内存的快照：gzip 压缩的 pprof 格式
# （`go tool pprof` / https://pprof.me 能打开），每个活着的缓冲区一个样本，带着创建它时的
# Python 调用栈。找“谁占着内存”时看它，比看 trace 更直接。
# jax.profiler.device_memory_profile() returns a snapshot of device memory now: a gzipped
# pprof profile (`go tool pprof` / https://pprof.me open it), one sample per live buffer, with
# the Python call stack that created it. To find "who holds the memory", read it rather than a
# trace.


def _varint(buf, i):
    value = shift = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def _fields(buf):
    """protobuf 线格式的 (字段号, 值) 列表。/ A protobuf message's (field number, value) list."""
    i, out = 0, []
    while i < len(buf):
        key, i = _varint(buf, i)
        if key & 7 == 0:
            value, i = _varint(buf, i)
        else:  # 长度前缀：pprof 用到的另一种线类型 / length-delimited, pprof's other wire type
            n, i = _varint(buf, i)
            value, i = buf[i : i + n], i + n
        out.append((key >> 3, value))
    return out


def _ints(value):
    if isinstance(value, int):
        return [value]
    i, out = 0, []
    while i < len(value):
        n, i = _varint(value, i)
        out.append(n)
    return out


def read_pprof(profile):
    """解开 gzip 压缩的 pprof：返回 (样本类型, 样本)。样本类型是 [(类型, 单位), …]；每个样本是
    {"values": {类型: 值}, "labels": {键: 值}, "stack": [(函数名, 文件名), …]}，stack 从最里层的
    调用开始。
    Decode a gzipped pprof profile: return (sample types, samples). The sample types are
    [(type, unit), …]; each sample is {"values": {type: value}, "labels": {key: value},
    "stack": [(function name, file name), …]}, the stack starting at the innermost call.
    """
    message = _fields(gzip.decompress(profile))
    strings = [v.decode() for f, v in message if f == 6]
    sub = lambda f: [dict(_fields(v)) for g, v in message if g == f]  # noqa: E731
    types = [(strings[t.get(1, 0)], strings[t.get(2, 0)]) for t in sub(1)]
    function_name = {fn.get(1): (strings[fn.get(2, 0)], strings[fn.get(4, 0)]) for fn in sub(5)}
    location = {}
    for f, v in message:
        if f == 4:
            loc = _fields(v)
            lines = [dict(_fields(line)).get(1) for g, line in loc if g == 4]
            location[dict(loc).get(1)] = [function_name[fn] for fn in lines]
    samples = []
    for f, v in message:
        if f == 2:
            fields = _fields(v)
            ids = [n for g, x in fields if g == 1 for n in _ints(x)]
            values = [n for g, x in fields if g == 2 for n in _ints(x)]
            labels = [dict(_fields(x)) for g, x in fields if g == 3]
            samples.append({
                "values": dict(zip([t for t, _ in types], values, strict=True)),
                "labels": {strings[d.get(1, 0)]: strings[d.get(2, 0)] for d in labels},
                "stack": [name for ident in ids for name in location[ident]],
            })
    return types, samples


def make_activations():
    return jnp.ones((256, 1000))


def make_scratch():
    return jnp.ones((64, 1000))


def fill_cache(cache, n):
    """往 cache 里放 n 个数组，第 i 个是 (i + 1, 100) 的 float32。/ Put n arrays in cache."""
    for i in range(n):
        cache.append(jnp.zeros((i + 1, 100)))


def test_the_memory_profile_names_who_allocated_each_buffer():
    """device_memory_profile 返回 gzip 压缩的字节串。解开之后：每个样本有两种值（各是什么、单位
    是什么？）；make_activations 创建的那个数组是一个样本，它的标签说明它是什么、在哪个设备上。
    profile 里还有另一种样本：编译好的程序（executable），它们在 CPU 上占几字节？数组一删，它的
    样本就不在了。
    device_memory_profile returns gzipped bytes. Decoded: every sample carries two values (which,
    in which units?); the array make_activations created is one sample, whose labels say what
    it is and on which device. The profile holds another kind of sample too: the compiled
    programs (executables); how many bytes do they take on CPU? Delete the array and its
    sample is gone.
    """
    activations = make_activations()
    raw = jax.profiler.device_memory_profile()
    assert raw[:2] == b"\x1f\x8b"  # gzip 的魔数 / gzip's magic number
    types, samples = read_pprof(raw)
    assert types == __
    [mine] = [s for s in samples if (make_activations.__name__, __file__) in s["stack"] and s["labels"]["kind"] == "buffer"]
    assert mine["values"]["space"] == __
    assert mine["labels"] == __
    executables = [s for s in samples if s["labels"]["kind"] == "executable"]
    assert executables and {s["values"]["space"] for s in executables} == __
    del activations
    _, samples = read_pprof(jax.profiler.device_memory_profile())
    assert not [s for s in samples if (make_activations.__name__, __file__) in s["stack"] and s["labels"]["kind"] == "buffer"]


def bytes_held_by(function):
    """此刻活着的设备缓冲区里，在 Python 函数 function 里创建的那些一共占多少字节：取一份
    device_memory_profile，用 read_pprof 解开，只数缓冲区（kind 为 buffer）的样本里 stack 含有
    这个函数的（函数名和它所在的文件都要对上），加起它们的字节数。返回 int。大约 4 行。
    How many bytes the live device buffers created inside the Python function `function` take
    right now: take a device_memory_profile, decode it with read_pprof, and of the buffer
    samples (kind buffer) count those whose stack holds this function (both its name and the
    file it lives in must match), adding up their bytes. Return an int. About 4 lines.
    """
    todo("bytes_held_by: 取 profile、解开、只数 function 名下的缓冲区 / profile, decode, count the buffers under function")


def test_find_who_holds_the_memory():
    """（先写好 bytes_held_by。）fill_cache 往缓存里放的数组还活着，profile 就把它们记在
    fill_cache 名下；别处创建、同样活着的数组不算在内——也包括另一个文件里同名的 fill_cache 创建的。
    缓存清空之后，fill_cache 名下一字节也不剩。
    (Write bytes_held_by first.) While the arrays fill_cache put in the cache live, the profile
    books them under fill_cache; arrays created elsewhere and just as alive do not count, those
    of another file's fill_cache of the same name included. Once the cache is emptied, not a
    byte is left under fill_cache.
    """
    twin = {"jnp": jnp}
    source = "def fill_cache(cache, n):\n    cache.append(jnp.zeros((n, 10)))\n"
    exec(compile(source, f"elsewhere_{__name__}.py", "exec"), twin)  # another file, the same name
    elsewhere, other_cache = make_scratch(), []
    twin["fill_cache"](other_cache, 7)
    for n in (3, 5):
        cache = []
        fill_cache(cache, n)
        assert bytes_held_by(fill_cache) == sum(400 * (i + 1) for i in range(n))
        assert bytes_held_by(make_scratch) == 256000
        assert bytes_held_by(twin["fill_cache"]) == 280
        cache.clear()
        assert bytes_held_by(fill_cache) == 0
    del elsewhere
    assert bytes_held_by(make_scratch) == 0
