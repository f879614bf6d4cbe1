"""02 · 持久化编译缓存 / the persistent compilation cache.

`jax.config.update("jax_compilation_cache_dir", path)` 打开持久化缓存：编译好的 XLA 程序写到
磁盘上，下一个进程直接读回来，省掉 XLA 编译。要看它是否真的命中，必须用两个进程——同一个
进程里第二次调用走的是内存里的缓存，根本不会去查磁盘。这里每个实验都在子进程里跑
（`subprocess.run(..., timeout=...)`），子进程用 `jax.monitoring` 记录事件，汇报给测试。

`jax.config.update("jax_compilation_cache_dir", path)` turns the persistent cache on:
compiled XLA programs are written to disk, and the next process reads them back instead of
compiling. Seeing a hit takes two processes: within one process a second call is served by
the in-memory cache and never looks at the disk. Every experiment here runs in child
processes (`subprocess.run(..., timeout=...)`) that record `jax.monitoring` events and report
them to the test.
"""

import json

import jax

from jaxkoans import __  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import run_python

# ---- 给定代码 / given code -------------------------------------------------------------

# The child process: applies the config, jits `program` under the names it is given, calls it
# on NumPy inputs (so that nothing else compiles) and prints, per call, the short names of the
# jax.monitoring events recorded during the call, plus the cache's log messages.
CHILD = r"""
import json, logging, sys
import numpy as np
import jax, jax.numpy as jnp

spec = json.loads(sys.argv[1])
for name, value in spec["config"].items():
    jax.config.update(name, value)
jax.config.update("jax_explain_cache_misses", True)  # the cache explains itself in the log

events, messages = [], []
jax.monitoring.register_event_listener(lambda e, **kw: events.append(e.rsplit("/", 1)[-1]))
jax.monitoring.register_event_duration_secs_listener(
    lambda e, secs, **kw: events.append(e.rsplit("/", 1)[-1]))

class Collect(logging.Handler):
    def emit(self, record):
        messages.append(record.getMessage())

logging.getLogger("jax._src.compiler").addHandler(Collect(logging.WARNING))

def make(name):
    def program(x):
        return jnp.sin(x) * 2.0
    program.__name__ = program.__qualname__ = name
    return jax.jit(program)

jitted, calls = {}, []
for name, size, value in spec["calls"]:
    f = jitted.setdefault(name, make(name))
    events.clear()
    f(np.full(size, value, np.float32)).block_until_ready()
    calls.append(list(events))
print(json.dumps({"calls": calls, "messages": messages}))
"""


def run_child(cache_dir, config, calls):
    """在一个新进程里打开 cache_dir 处的持久化缓存，应用 config，依次执行 calls
    （每个是 (函数名, 长度, 填充值)），返回 {"calls": 每次调用的事件名列表, "messages": 日志}。
    In a fresh process with the persistent cache at cache_dir and config applied, make the
    calls (each (function name, length, fill value)); return {"calls": the event names of
    each call, "messages": the cache's log messages}.
    """
    spec = {"config": {"jax_compilation_cache_dir": str(cache_dir), **config}, "calls": calls}
    out = run_python("-c", CHILD, json.dumps(spec))
    return json.loads(out.strip().splitlines()[-1])


def outcome(events):
    """一次调用的事件说明了什么。/ What the events of one call say happened.

    "hit": 从磁盘读回，没有编译 / read back from disk, not compiled;
    "written": 没找到，编译了，写进缓存 / not found, compiled, written to the cache
               (JAX records this as the event "cache_misses");
    "not written": 没找到，编译了，没写 / not found, compiled, not written;
    "in memory": 进程内的缓存，根本没编译 / the process's own cache, no compilation at all.
    """
    if "cache_hits" in events:
        return "hit"
    if "cache_misses" in events:
        return "written"
    if "backend_compile_duration" in events:
        return "not written"
    return "in memory"


def cache_entries(cache_dir):
    """缓存目录里的条目，只留模块名（文件名是 <模块名>-<键的哈希>-cache）。
    The entries of the cache directory by module name (files are <module>-<key hash>-cache).
    """
    return sorted(p.name.split("-")[0] for p in cache_dir.iterdir() if p.name.endswith("-cache"))


WRITE_EVERYTHING = {"jax_persistent_cache_min_compile_time_secs": 0}


# ---- 检查 / checks ----------------------------------------------------------------------


def test_a_fast_compile_meets_the_default_threshold(tmp_path):
    """⚠️ 陷阱 / trap：只设置缓存目录，再编译一个 CPU 上的小程序：结果是 outcome 的哪一种？
    持久缓存只收编译时间超过 jax_persistent_cache_min_compile_time_secs 的程序，这个阈值的默认值
    是多少？缓存确实打开了、也查过了，日志说明了结果的原因。后面的 koan 把这个阈值设为 0
    （WRITE_EVERYTHING）。
    ⚠️ trap: with only the cache directory set, compile a small CPU program: which of outcome's
    cases is it? The persistent cache takes only programs that took longer than
    jax_persistent_cache_min_compile_time_secs to compile; what is that threshold's default?
    The cache is on and was looked up; the log says why it came out as it did. The next koans
    set the threshold to 0 (WRITE_EVERYTHING).
    """
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 1.0  # the default
    report = run_child(tmp_path, {}, [("scaled", 8, 1.0)])
    [events] = report["calls"]
    assert "compile_requests_use_cache" in events  # the cache is on and was consulted
    assert outcome(events) == "not written"
    assert cache_entries(tmp_path) == []
    assert any("seconds to compile" in m for m in report["messages"]), report["messages"]


def test_a_second_process_reads_the_program_back(tmp_path):
    """第二个进程命中缓存（"cache_hits"），省掉的只是 XLA 编译：追踪（jaxpr）和降级
    （StableHLO）每个进程都要重做——缓存的键正是由降级后的程序算出来的。
    The second process hits the cache ("cache_hits"), and what it saves is the XLA compilation
    only: tracing (the jaxpr) and lowering (StableHLO) happen again in every process; the
    cache key is computed from the lowered program.
    """
    first = run_child(tmp_path, WRITE_EVERYTHING, [("scaled", 8, 1.0)])
    second = run_child(tmp_path, WRITE_EVERYTHING, [("scaled", 8, 1.0)])
    assert [outcome(e) for e in first["calls"]] == ["written"]
    assert [outcome(e) for e in second["calls"]] == ["hit"]

    stages = ["jaxpr_trace_duration", "jaxpr_to_mlir_module_duration"]
    assert [stage in second["calls"][0] for stage in stages] == [True, True]


def test_the_cache_key_is_the_lowered_program(tmp_path):
    """缓存的键来自降级后的程序：形状和 dtype 在里面，数值不在；模块名（"jit_" + 函数名）也在里面，
    所以同一段计算换个函数名就认不出来了。同一进程里第二次同形状的调用连缓存都不查。
    The cache key comes from the lowered program: shapes and dtypes are in it, values are not;
    the module name ("jit_" + the function's name) is in it too, so the same computation
    under another name is not recognised. A second call of the same shape in one process does
    not even consult the cache.
    """
    run_child(tmp_path, WRITE_EVERYTHING, [("scaled", 8, 1.0)])
    report = run_child(
        tmp_path,
        WRITE_EVERYTHING,
        [("scaled", 8, 2.0), ("scaled", 8, 3.0), ("scaled", 16, 1.0), ("renamed", 8, 1.0)],
    )
    assert [outcome(e) for e in report["calls"]] == ["hit", "in memory", "written", "written"]
