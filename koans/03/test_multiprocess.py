"""03 · 真正的多进程：一台机器上的两个 JAX 进程 / a real multi-process run: two JAX processes on one machine.

多机训练时每台主机跑一个 Python 进程，`jax.distributed.initialize` 让它们互相找到：进程 0
在 coordinator_address 上启动协调服务，其余进程连上去。之后 `jax.devices()` 是所有进程的设备，
`jax.local_devices()` 只是自己的；同一个程序在每个进程里各跑一份（SPMD），集合通信跨进程进行
（CPU 上用 gloo）。这里在本机起两个子进程，各有 2 个 CPU 设备：端口先绑定 0 再取一个空闲的，
每个进程都有超时，失败时两个都杀掉，什么也不留下。每个进程只为自己的设备加载数据
（`jax.make_array_from_callback`），`multihost_utils.process_allgather` 再把全局数组收回主机。

In multi-host training each host runs one Python process, and `jax.distributed.initialize`
makes them find each other: process 0 starts the coordination service at
coordinator_address, the others connect to it. After that `jax.devices()` lists the devices
of all processes and `jax.local_devices()` only one's own; the same program runs in every
process (SPMD) and collectives cross the process boundary (gloo on CPU). Here two child
processes with 2 CPU devices each run on this machine: the port is a free one (bind to 0
first), every process runs under a timeout, and on failure both are killed, leaving nothing
behind. Each process loads data for its own devices only
(`jax.make_array_from_callback`), and `multihost_utils.process_allgather` brings the global
array back to the host.
"""

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from jaxkoans import __  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------

# The worker: configures JAX before any computation (CPU, 2 devices), joins the distributed
# system, builds a global array from each process's local data, runs psum and all_gather in
# shard_map over the 4 devices of both processes, loads an array piece by piece with
# make_array_from_callback, collects it with process_allgather, and prints what this process sees.
WORKER = r"""
import json, sys
import jax

port, process_id, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", 2)
jax.distributed.initialize(
    coordinator_address=f"localhost:{port}",
    num_processes=2,
    process_id=process_id,
    initialization_timeout=timeout,
)

import numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((jax.device_count(),), ("i",))
sharding = NamedSharding(mesh, P("i"))
local = np.array([10.0 * process_id + k for k in range(jax.local_device_count())], np.float32)
x = jax.make_array_from_process_local_data(sharding, local)

def run(f):
    return jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P("i"), out_specs=P("i")))(x)

def mine(array):
    return [np.asarray(s.data).tolist() for s in array.addressable_shards]

total = run(lambda v: lax.psum(v, "i"))

# 每个进程只为自己的设备读数据；process_allgather 把全局数组取回每个进程的主机内存
# each process loads data for its own devices only; process_allgather brings the global array
# back into every process's host memory
from jax.experimental import multihost_utils

asked = []

def load(index):
    asked.append(str(index))
    return np.array([0.0, 1.0, 10.0, 11.0], np.float32)[index]

loaded = jax.make_array_from_callback((jax.device_count(),), sharding, load)
gathered = multihost_utils.process_allgather(loaded, tiled=True)
everything = run(lambda v: lax.all_gather(v, "i", tiled=True))

# 每个进程手里的一块主机数据（host-local）拼成一个全局数组；pspec 说这一块在全局数组里怎么放
# each process's block of host data (host-local) becomes one global array; the pspec says how
# the blocks sit in the global array
rows = np.arange(4, dtype=np.float32).reshape(2, 2) + 100 * jax.process_index()
split = multihost_utils.host_local_array_to_global_array(rows, mesh, P("i"))
copied = multihost_utils.host_local_array_to_global_array(rows, mesh, P())
back = multihost_utils.global_array_to_host_local_array(split, mesh, P("i"))
print(json.dumps({
    "process_index": jax.process_index(),
    "process_count": jax.process_count(),
    "device_count": jax.device_count(),
    "local_device_count": jax.local_device_count(),
    "x_fully_addressable": x.is_fully_addressable,
    "x_local": mine(x),
    "psum_local": mine(total),
    "all_gather_local": mine(everything),
    "load_calls": len(asked),
    "loaded_local": mine(loaded),
    "gathered_type": type(gathered).__name__,
    "gathered": gathered.tolist(),
    "split_shape": list(split.shape),
    "split_local": mine(split),
    "copied_shape": list(copied.shape),
    "copied_local": mine(copied),
    "back": np.asarray(back).tolist(),
}))
jax.distributed.shutdown()
"""

WORKER_TIMEOUT_S = 60  # 每个子进程最多跑这么久 / the most each child may run


def free_port():
    """让系统挑一个空闲端口：绑定端口 0 再读出来。/ Let the OS pick a free port: bind to 0."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def launch(tmp_path, process_ids, init_timeout_s):
    """为 process_ids 里的每个进程号起一个 worker（同一个端口），等它们结束，返回
    [(returncode, 最后一行 JSON 或 None, stderr)]。子进程不继承父进程的 JAX_* / XLA_FLAGS，
    超时或出错时把还活着的全部杀掉。
    Start one worker per process id in process_ids (same port), wait for them and return
    [(returncode, last JSON line or None, stderr)]. The children do not inherit the parent's
    JAX_* / XLA_FLAGS; on a timeout or an error every survivor is killed.
    """
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_") and k != "XLA_FLAGS"}
    env["PYTHONUNBUFFERED"] = "1"
    port = free_port()
    procs = []
    try:
        for pid in process_ids:
            command = [sys.executable, str(script), str(port), str(pid), str(init_timeout_s)]
            procs.append(
                subprocess.Popen(
                    command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
                )
            )
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=WORKER_TIMEOUT_S)
            lines = out.strip().splitlines()
            results.append((proc.returncode, json.loads(lines[-1]) if lines else None, err))
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """两个进程跑一次，本文件的 koan 共用结果。/ One run of both processes, shared by the koans."""
    results = launch(tmp_path_factory.mktemp("two_processes"), [0, 1], init_timeout_s=30)
    for code, _, err in results:
        assert code == 0, err[-3000:]
    return [report for _, report, _ in results]


# ---- 检查 / checks ----------------------------------------------------------------------


def test_two_processes_see_one_global_set_of_devices(reports):
    """两个进程、每个 2 个 CPU 设备：每个进程里 jax.device_count() 和 jax.local_device_count()
    各是多少？网格用 jax.device_count() 建，跨越两个进程；一个进程能读到 x 的所有分片吗
    （is_fully_addressable）？
    Two processes with 2 CPU devices each: what are jax.device_count() and
    jax.local_device_count() in each process? The mesh, built from jax.device_count(), spans
    both processes; can one process read all of x's shards (is_fully_addressable)?
    """
    assert [r["process_index"] for r in reports] == [0, 1]
    for report in reports:
        assert report["process_count"] == 2
        assert report["device_count"] == __
        assert report["local_device_count"] == __
        assert report["x_fully_addressable"] is __
    assert [r["x_local"] for r in reports] == [[[0.0], [1.0]], [[10.0], [11.0]]]


def test_collectives_cross_the_process_boundary(reports):
    """同样的 shard_map 代码，集合通信跨进程进行：psum 把 4 个设备的块加起来，all_gather
    （tiled）把它们按设备顺序拼起来，每个进程的每个本地设备都得到同样的结果。
    The same shard_map code, with collectives across processes: psum adds the blocks of all 4
    devices, all_gather (tiled) concatenates them in device order, and every local device of
    every process gets the same result.
    """
    for report in reports:
        assert report["psum_local"] == __
        assert report["all_gather_local"] == __


def test_each_process_loads_its_own_shards_and_process_allgather_collects_them(reports):
    """多主机加载数据：jax.make_array_from_callback 在每个进程里只为本进程的设备调用 load——每个
    进程调用几次？每个进程拿到的块正好是 x 在这个进程里的那几块。
    multihost_utils.process_allgather(…, tiled=True) 把一个跨进程的数组收齐到每个进程的主机内存：
    结果是哪个类型（类名），值是什么？
    Loading data on many hosts: in each process jax.make_array_from_callback calls load only
    for that process's devices: how many calls per process? Each process gets exactly the
    blocks x has in that process. multihost_utils.process_allgather(…, tiled=True) collects an
    array that spans processes into every process's host memory: of which type (its class
    name) is the result, and what are its values?
    """
    for report in reports:
        assert report["load_calls"] == __
        assert report["gathered_type"] == __
        assert report["gathered"] == __
    assert [r["loaded_local"] for r in reports] == [r["x_local"] for r in reports]


def test_host_local_arrays_become_one_global_array(reports):
    """multihost_utils.host_local_array_to_global_array(本地数组, mesh, pspec)：每个进程交出自己
    主机上的一块 (2, 2)（进程 1 的每个数加 100），pspec 说这一块在全局数组里占哪儿。P("i")：各进程
    的块沿第 0 轴排起来，全局形状是什么？每个本地设备拿到几行？P()：每个进程的块就是整个数组
    （复制）——全局形状是什么？⚠️ 陷阱 / trap：没有人检查各进程交的是不是同一份数据；
    global_array_to_host_local_array 把全局数组还原成本进程的那一块。
    multihost_utils.host_local_array_to_global_array(local array, mesh, pspec): each process
    hands in its block (2, 2) of host data (process 1 adds 100 to every number), and the pspec
    says where that block sits in the global array. P("i"): the processes' blocks are stacked
    along axis 0: what is the global shape? How many rows does each local device get? P():
    each process's block is the whole array (replicated): what is the global shape? Nothing
    checks that the processes handed in the same data; global_array_to_host_local_array turns
    the global array back into this process's block.
    """
    for report in reports:
        assert report["split_shape"] == __
        assert report["copied_shape"] == __
    assert [r["split_local"] for r in reports] == [
        [[[0.0, 1.0]], [[2.0, 3.0]]],
        [[[100.0, 101.0]], [[102.0, 103.0]]],
    ]
    # 一个“复制”的数组，两个进程里的副本不一样 / one "replicated" array, different copies
    assert [r["copied_local"][0] for r in reports] == [
        [[0.0, 1.0], [2.0, 3.0]],
        [[100.0, 101.0], [102.0, 103.0]],
    ]
    assert [r["back"] for r in reports] == [r["copied_local"][0] for r in reports]


def test_a_missing_peer_makes_the_survivor_abort(tmp_path):
    """⚠️ 陷阱 / trap：只启动进程 0，它等不到进程 1。initialization_timeout 秒后它不是抛出
    Python 异常（try/except 接不住），而是在 C++ 里检查失败、进程被一个信号终止。subprocess 给出
    的 returncode 是什么？所以 worker 一定要在超时之下运行，初始化超时要设短。
    Start process 0 alone: it never hears from process 1. After initialization_timeout
    seconds it does not raise a Python exception (try/except cannot catch it): a check fails
    in C++ and a signal ends the process. What returncode does subprocess report? So always
    run workers under a timeout, and keep the initialization timeout short.
    """
    [(code, report, err)] = launch(tmp_path, [0], init_timeout_s=1)
    assert report is None  # 什么也没打印 / it never got to print
    assert code == __
    assert "DEADLINE_EXCEEDED" in err
