"""09 · 服务端的冷启动 / a server's cold start.

一个新启动的服务进程在回答第一个请求之前要有一个可执行程序。导出的产物（`jax.export`）跨版本、
跨机器都能用，但它是 StableHLO：新进程要先把它编译一遍；持久化编译缓存（第 02 章）能让下一个
进程从磁盘读回编译结果。`jax.experimental.serialize_executable` 更进一步：把已经编译好的
可执行程序本身写成字节，新进程读回来就能运行，既不编译也不查缓存；它只收编译时的那个形状。
这里在全新的进程里数编译请求和缓存的命中、写入，只打印耗时之比，不比较耗时。

A freshly started server process needs an executable before it can answer its first request.
An exported artifact (`jax.export`) works across versions and machines, but it is StableHLO:
the new process compiles it first; the persistent compilation cache (chapter 02) lets the next
process read the compiled result back from disk. `jax.experimental.serialize_executable` goes
further: it writes the compiled executable itself as bytes, and a new process that reads them
back runs it with neither a compilation nor a cache lookup; it takes only the shape it was
compiled for. The koan counts compile requests and the cache's hits and writes in fresh
processes, and prints the ratio of the times without comparing them.
"""

import json
import pickle

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from jax.experimental import serialize_executable

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import run_python


def model(x):
    """一个小的两层网络，权重由固定的数生成。A small two-layer net with fixed weights."""
    w1 = jnp.sin(jnp.arange(48.0).reshape(8, 6))
    w2 = jnp.cos(jnp.arange(18.0).reshape(6, 3))
    return jax.nn.softmax(jnp.tanh(x @ w1) @ w2)


def save_executable(fn, example, path):
    """把 jax.jit(fn) 为 example 的形状编译好，用 serialize_executable.serialize 写成
    (字节, 输入树, 输出树) 三样，pickle 到文件 path。大约 3 行。
    Compile jax.jit(fn) for the shape of example, turn it into (bytes, input tree, output tree)
    with serialize_executable.serialize, and pickle the three to the file path. About 3 lines.
    """
    todo("save_executable: lower, compile, serialize_executable.serialize, pickle")


def load_executable(path):
    """服务端：从 path 读回 save_executable 写的三样，用 serialize_executable.deserialize_and_load
    装载，返回一个可以直接调用的可执行程序。不许重新追踪或编译。大约 3 行。
    The server side: read back from path the three things save_executable wrote, load them
    with serialize_executable.deserialize_and_load and return an executable you can call. No
    tracing or compiling again. About 3 lines.
    """
    todo("load_executable: unpickle, serialize_executable.deserialize_and_load")


# The server process: loads this file, then serves the first request of each route named in
# argv[3:], counting the compile requests (jax.monitoring's backend_compile_duration, which a
# persistent cache hit also records) and the cache's hits and writes, and timing each answer.
# 服务进程：载入本文件，再按 argv[3:] 里的每条路线回答第一个请求，数编译请求（持久化缓存命中时
# 也记一次 backend_compile_duration）、缓存的命中与写入，并计时。
SERVER = r"""
import importlib.util, json, sys, time
import numpy as np
import jax
from jax import export

koan_file, workdir, routes = sys.argv[1], sys.argv[2], sys.argv[3:]
jax.config.update("jax_compilation_cache_dir", workdir + "/cache")
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
spec = importlib.util.spec_from_file_location("koan", koan_file)
koan = importlib.util.module_from_spec(spec)
spec.loader.exec_module(koan)

# The server counts every trace of the model code: it is to serve what it reads, not trace it.
# 服务进程数模型代码被追踪了几次：它要服务读回来的东西，而不是再追踪一遍。
traces = []
original = koan.model
koan.model = lambda x: (traces.append(1), original(x))[1]

events = []
jax.monitoring.register_event_listener(lambda e, **kw: events.append(e.rsplit("/", 1)[-1]))
jax.monitoring.register_event_duration_secs_listener(
    lambda e, secs, **kw: events.append(e.rsplit("/", 1)[-1]))
request = np.linspace(-1, 1, 8 * 8, dtype=np.float32).reshape(8, 8)
report = {}
for route in routes:
    events.clear()
    traces.clear()
    start = time.perf_counter()
    if route == "executable":
        serve = koan.load_executable(workdir + "/model.executable")
    else:
        with open(workdir + "/model.exported", "rb") as file:
            serve = export.deserialize(bytearray(file.read())).call
    answer = np.asarray(serve(request))
    report[route] = {
        "seconds": time.perf_counter() - start,
        "compile_requests": events.count("backend_compile_duration"),
        "cache_hits": events.count("cache_hits"),
        "cache_writes": events.count("cache_misses"),  # a miss that wrote a new entry
        "model_traces": len(traces),
        "served": type(serve).__name__,
        "answer": answer.tolist(),
    }
print(json.dumps(report))
"""


def serve_in_a_fresh_process(workdir, *routes):
    out = run_python("-c", SERVER, __file__, str(workdir), *routes)
    return json.loads(out.strip().splitlines()[-1])


def test_a_cold_server_loads_a_compiled_executable(tmp_path):
    """✍️ 写 save_executable 和 load_executable。第一个服务进程只有导出的产物：它要编译一次，
    编译结果写进持久化缓存；第二个进程从缓存读回，而不是编译。读回序列化的可执行程序的那条路线
    连缓存都不用查，也没有编译。它是为一个形状编译的：别的形状被拒绝。
    Write save_executable and load_executable. The first server process has only the exported
    artifact: it compiles once, and the result goes into the persistent cache; the second
    process reads it back from the cache instead of compiling. The route that reads back the
    serialized executable consults no cache and compiles nothing either. It was compiled for
    one shape: other shapes are refused.
    """
    example = jax.ShapeDtypeStruct((8, 8), jnp.float32)
    (tmp_path / "model.exported").write_bytes(export.export(jax.jit(model))(example).serialize())
    save_executable(model, example, tmp_path / "model.executable")

    first = serve_in_a_fresh_process(tmp_path, "exported")
    counts = ("compile_requests", "cache_hits", "cache_writes")
    assert [first["exported"][c] for c in counts] == [1, 0, 1]
    written = [p.name for p in (tmp_path / "cache").iterdir() if p.name.endswith("-cache")]
    assert len(written) == 1

    second = serve_in_a_fresh_process(tmp_path, "executable", "exported")
    assert [second["exported"][c] for c in counts] == [1, 1, 0]  # read back, not compiled
    assert [second["executable"][c] for c in counts] == [0, 0, 0]
    # What each route serves: the loaded executable, and the artifact's call; the model code
    # is traced by neither. 每条路线服务的是什么：读回的可执行程序、产物的 call；模型代码都没被追踪。
    assert second["executable"]["served"] == "Compiled"
    assert [second[r]["model_traces"] for r in ("executable", "exported")] == [0, 0]
    request = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    for answer in (first["exported"], second["exported"], second["executable"]):
        np.testing.assert_allclose(answer["answer"], model(request), rtol=1e-5, atol=1e-6)
    ratio = second["executable"]["seconds"] / first["exported"]["seconds"]
    print(f"first answer, executable / compiled from the artifact: {ratio:.2f} (not asserted)")

    served = load_executable(tmp_path / "model.executable")
    assert isinstance(served, jax.stages.Compiled)
    with raises_exactly(TypeError):
        served(np.zeros((4, 8), np.float32))
    # 为另一个形状保存的，就为那个形状服务 / saved for another shape, it serves that shape
    save_executable(model, jax.ShapeDtypeStruct((4, 8), jnp.float32), tmp_path / "four.executable")
    four = load_executable(tmp_path / "four.executable")
    assert [arg.shape for arg in jax.tree.leaves(four.args_info)] == [(4, 8)]
