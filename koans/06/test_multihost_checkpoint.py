"""06 · 两个进程一起存、一起读一个全局数组 / two processes saving and restoring one global array.

多主机训练里，一个全局数组的每一块只在拥有它的那个进程里：没有哪个进程能把整个数组拿到手再
存盘。Orbax 的办法是所有进程用同一个路径一起调用 save：每个进程只把自己那几块写进自己的目录，
主进程还把各进程的块合并（复制）进检查点根目录下的那一个数据库，写元数据，最后写提交标记。
恢复时每个进程给出目标分片（jax.ShapeDtypeStruct 带 sharding），只向存储要目标分片里属于
自己设备的那几块：同一个检查点可以按行切开读回，也可以按另一种分片读回。这里沿用
test_multihost_training.py 的两个本机进程（各 2 个 CPU 设备，每个进程都有超时）：你写的两个
函数在两个进程里各跑一次，本进程只检查它们报告的结果。

In multi-host training each block of a global array lives only in the process that owns it: no
process can get hold of the whole array to write it out. Orbax's answer is that every process
calls save together, with the same path: each process writes only its own blocks, into a folder
of its own; the primary process also merges (copies) every process's blocks into the one
database at the checkpoint's root, writes the metadata and, last, the commit marker. On
restore each process names the target sharding (jax.ShapeDtypeStruct with a sharding) and asks
the store only for the blocks of that sharding that belong to its own devices: one checkpoint can
come back split by rows, or under another sharding. The two local processes of
test_multihost_training.py are reused (2 CPU devices each, every process under a timeout): the
two functions you write run once in each process, and this process only checks what they report.
"""

import json
import os
import shutil
import socket
import subprocess
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
import tensorstore as ts
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.blanks import TodoError

# ---- 给定代码 / given code -------------------------------------------------------------

ROWS, COLS = 8, 2


def make_weights():
    """整个全局数组的值（每个进程都能算，但只放自己那一半）。/ The global array's values."""
    return np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)


def abstract_state():
    """检查点里有什么：形状和 dtype，没有分片。/ What the checkpoint holds: shapes and dtypes."""
    return {
        "w": jax.ShapeDtypeStruct((ROWS, COLS), np.float32),
        "step": jax.ShapeDtypeStruct((), np.int32),
    }


def spoil_other_rows(path, copy):
    """把检查点复制到 copy，在副本里把不属于本进程那几行的每一块（zarr 的 chunk，就是保存时的块）
    换成坏字节，再试着整个读一遍副本里的 "w"。返回 (换掉的块数, 整个读失败了没有)。在副本里只读
    自己那几行的恢复仍然成功；谁读了别的进程的块，谁就失败。
    Copy the checkpoint to copy and, in the copy, replace every block (a zarr chunk: a block as
    it was saved) outside this process's rows with bad bytes, then try to read the copy's "w"
    whole. Return (blocks replaced, whether the whole read failed). A restore that reads only this
    process's rows still succeeds from the copy; one that reads another process's blocks fails.
    """
    shutil.copytree(path, copy)
    store = {"driver": "ocdbt", "base": "file://" + os.path.abspath(copy) + "/"}
    kv = ts.KvStore.open(store).result()
    chunk_rows = json.loads(kv.read(b"w/.zarray").result().value)["chunks"][0]
    half = ROWS // jax.process_count()
    mine = range(jax.process_index() * half, (jax.process_index() + 1) * half)
    spoiled = 0
    for key in kv.list(ts.KvStore.KeyRange(b"w/", b"w0")).result():
        if key != b"w/.zarray" and int(key[2:].split(b".")[0]) * chunk_rows not in mine:
            kv.write(key, b"not a zstd frame").result()
            spoiled += 1
    try:
        ts.open({"driver": "zarr", "kvstore": {**store, "path": "w/"}}).result().read().result()
    except ValueError:
        return spoiled, True
    return spoiled, False


# ---- 每个进程里跑的部分：你来写 / the per-process part: yours to write --------------------


def save_sharded(path, state):
    """每个进程都用同一个 path 调用它，state 里的 "w" 是跨进程的全局数组（本进程只有自己的
    行）。用 Orbax 的 StandardCheckpointer 存下 state，等保存真正完成再返回。大约 3 行。
    Every process calls this with the same path; state's "w" is a global array spanning the
    processes (this process holds only its own rows). Save state with Orbax's
    StandardCheckpointer and return only once the save has really finished. About 3 lines.
    """
    todo("save_sharded: 所有进程一起用 Orbax 保存 / every process saves together with Orbax")


def restore_onto(path, mesh, spec):
    """从 path 读回 abstract_state() 描述的状态："w" 按 NamedSharding(mesh, spec) 分片，标量
    "step" 在 mesh 上复制（P()）。给 StandardCheckpointer.restore 一个带 sharding 的
    jax.ShapeDtypeStruct 目标树，返回它读回的树。大约 6 行。
    Read back from path the state abstract_state() describes: "w" sharded as NamedSharding(mesh,
    spec), the scalar "step" replicated on mesh (P()). Hand StandardCheckpointer.restore a target
    tree of jax.ShapeDtypeStruct with shardings and return the tree it reads back. About 6 lines.
    """
    todo("restore_onto: 带分片的恢复目标 / a restore target with shardings")


# The worker: joins the two-process system like test_multihost_training.py's worker, loads this
# very file, runs the two functions above (STAGES) and prints one JSON line with what this
# process saw, or the first stage that raised. The split restore reads from this process's
# spoiled copy (spoil_other_rows), the replicated one from the checkpoint itself.
# worker：加入两个进程的系统，载入本文件，运行上面两个函数，打印一行 JSON。按行切开的恢复读的是
# 本进程那份被弄坏的副本（spoil_other_rows），复制的恢复读原来的检查点。
WORKER = r"""
import importlib.util, json, os, sys, traceback
import jax
koan_file, port, process_id, timeout, path = (
    sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", 2)
jax.distributed.initialize(
    coordinator_address=f"localhost:{port}",
    num_processes=2,
    process_id=process_id,
    initialization_timeout=timeout,
)
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
spec = importlib.util.spec_from_file_location("koan", koan_file)
koan = importlib.util.module_from_spec(spec)
spec.loader.exec_module(koan)
def shards(array):
    return [[s.index[0].start or 0, np.asarray(s.data).tolist()] for s in array.addressable_shards]
report = {"process_index": jax.process_index()}
stage = None
try:
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    rows = NamedSharding(mesh, P("data"))
    half = koan.ROWS // jax.process_count()
    mine = koan.make_weights()[jax.process_index() * half:(jax.process_index() + 1) * half]
    state = {"w": jax.make_array_from_process_local_data(rows, mine), "step": np.int32(3)}
    stage = "save_sharded"
    koan.save_sharded(os.path.join(path, "ckpt"), state)
    report[stage] = {"listing": sorted(os.listdir(os.path.join(path, "ckpt")))}
    koan.ocp.multihost.sync_global_processes("saved", timeout=timeout)
    stage = "restore_onto"
    mine = os.path.join(path, f"spoiled_for_process_{jax.process_index()}")
    spoiled, whole_read_fails = koan.spoil_other_rows(os.path.join(path, "ckpt"), mine)
    report[stage] = {"spoiled": spoiled, "whole_read_fails": whole_read_fails}
    for name, where, source in (("rows", P("data"), mine), ("replicated", P(), os.path.join(path, "ckpt"))):
        restored = koan.restore_onto(source, mesh, where)
        w = restored["w"]
        report[stage][name] = {
            "shards": shards(w),
            "type": str(jax.typeof(w)),
            "fully_replicated": w.sharding.is_fully_replicated,
            "step": int(np.asarray(restored["step"].addressable_data(0))),
        }
    stage = None
except Exception as error:
    lines = [f.lineno for f in traceback.extract_tb(error.__traceback__) if f.filename == koan_file]
    report["failed"] = {
        "stage": stage, "type": type(error).__name__, "message": str(error),
        "traceback": traceback.format_exc()[-3000:], "line": lines[-1] if lines else None,
    }
print(json.dumps(report), flush=True)
if stage is None:
    jax.distributed.shutdown()
"""
STAGES = ["save_sharded", "restore_onto"]
WORKER_TIMEOUT_S = 120  # 每个子进程最多跑这么久 / the most each child may run


def free_port():
    """让系统挑一个空闲端口：绑定端口 0 再读出来。/ Let the OS pick a free port: bind to 0."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def launch(tmp_path):
    """起两个 worker（同一个端口、同一个检查点目录），等它们结束，返回 [(returncode, 最后一行
    JSON 或 None, stderr)]。子进程不继承父进程的 JAX_* / XLA_FLAGS；超时的进程被杀掉。
    Start the two workers (same port, same checkpoint folder), wait for them and return
    [(returncode, last JSON line or None, stderr)]. The children do not inherit the parent's
    JAX_* / XLA_FLAGS; a child past its timeout is killed."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_") and k != "XLA_FLAGS"}
    env["PYTHONUNBUFFERED"] = "1"
    port = free_port()
    procs = []
    try:
        for pid in (0, 1):
            command = [sys.executable, str(script), __file__, str(port), str(pid), "60", str(tmp_path)]
            procs.append(
                subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            )
        results = []
        for proc in procs:
            try:
                out, err = proc.communicate(timeout=WORKER_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            lines = [line for line in out.strip().splitlines() if line.startswith("{")]
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
    return launch(tmp_path_factory.mktemp("multihost_checkpoint"))


def raise_todo_at(line, message):
    """在本文件的第 line 行（子进程里那个 todo() 所在的行）抛出 TodoError。
    Raise TodoError from line `line` of this file (where the child process met the todo())."""
    if not line:
        raise TodoError(message)
    code = compile("\n" * (line - 1) + "raise TodoError(message)", __file__, "exec")
    exec(code, {"TodoError": TodoError, "message": message})


def reported(reports, function):
    """每个进程运行到 function 为止（含）报告的内容；某个进程在这之前出错时在这里重新抛出。
    What each process reported up to and including function; a failure there or before is raised
    again here: an unwritten TODO stays a TodoError."""
    needed = STAGES[: STAGES.index(function.__name__) + 1]
    for index, (code, report, err) in enumerate(reports):
        failed = (report or {}).get("failed")
        if failed and failed["stage"] in needed:
            if failed["type"] == "TodoError":
                raise_todo_at(failed["line"], failed["message"])
            where = f"process {index}, {failed['stage']}"
            raise AssertionError(f"{where}: {failed['type']}: {failed['message']}\n{failed['traceback']}")
        assert report is not None and code == 0, f"process {index} exited {code}:\n{err[-3000:]}"
    return [report for _, report, _ in reports]


# ---- 检查 / checks ----------------------------------------------------------------------


def test_both_processes_write_one_checkpoint(reports):
    """✍️ 写 save_sharded。两个进程用同一个路径一起保存，得到的是一个检查点：一份元数据、一个
    提交标记，和进程们写下自己那几块的 ocdbt 目录。两个进程看到的目录内容相同。预测：有哪几个
    ocdbt.process_* 目录？
    Write save_sharded. Two processes saving together under one path make one checkpoint: one set
    of metadata, one commit marker, and the ocdbt folders in which the processes wrote their own
    blocks. Both processes see the same folder. Predict: which ocdbt.process_* folders are there?
    """
    got = reported(reports, save_sharded)
    listings = [report["save_sharded"]["listing"] for report in got]
    assert listings[0] == listings[1]
    assert "commit_success.txt" in listings[0] and "_METADATA" in listings[0]
    assert [name for name in listings[0] if name.startswith("ocdbt.process_")] == __


def test_each_process_restores_only_its_own_rows(reports):
    """✍️ 写 restore_onto。目标分片按行切开时，每个进程只读回落在自己两个设备上的那几行（它的
    addressable_shards）。这次恢复读的是本进程的副本，副本里另一个进程的块都换成了坏字节
    （spoil_other_rows）：把整个数组读出来再放上设备、再切片，或者先读成 NumPy 再分片，都会碰到
    那些块而失败。（检查的是解码了哪些块；从磁盘读了哪些字节由 TensorStore 决定：这么小的块直接
    存在共享的索引里。）进程 0 的两块从第 0、2 行开始。预测：进程 1 的两块从第几行开始？
    Write restore_onto. With the target sharding split by rows, each process reads back only the
    rows that fall on its own two devices (its addressable_shards). This restore reads from the
    process's own copy, in which every block of the other process holds bad bytes
    (spoil_other_rows): reading the whole array and then putting it on the devices, or slicing
    it, or reading it into NumPy and then sharding it, touches those blocks and fails. (What is
    checked is which blocks are decoded; which bytes come off the disk is TensorStore's business:
    blocks this small sit inside the shared index.) Process 0's two blocks start at rows 0 and 2.
    Predict: at which rows do process 1's two blocks start?
    """
    got = reported(reports, restore_onto)
    full = make_weights()
    starts = []
    for report in got:
        # The copy is really spoiled: its other half cannot be read whole.
        # 副本确实坏了：另一半让整个读失败。
        assert report["restore_onto"]["spoiled"] == 2 and report["restore_onto"]["whole_read_fails"] is True
        part = report["restore_onto"]["rows"]
        assert part["type"] == "float32[8@data,2]" and part["step"] == 3
        for start, data in part["shards"]:
            np.testing.assert_array_equal(data, full[start : start + 2])
        starts.append([start for start, _ in part["shards"]])
    assert starts[0] == [0, 2]
    assert starts[1] == __


def test_the_same_checkpoint_restores_replicated(reports):
    """同一个检查点也能按另一种分片读回：目标是 P()（复制）。保存时的分片不限制恢复时的分片。
    预测：每个进程有几块，每块多少行？
    The same checkpoint also comes back under another sharding: the target P() (replicated). The
    sharding it was saved with does not constrain the sharding it is restored with. Predict: how
    many blocks does each process hold, and how many rows each?
    """
    got = reported(reports, restore_onto)
    for report in got:
        part = report["restore_onto"]["replicated"]
        assert part["fully_replicated"] is True and part["step"] == 3
        assert len(part["shards"]) == __
        assert {len(data) for _, data in part["shards"]} == __
        for _, data in part["shards"]:
            np.testing.assert_array_equal(data, make_weights())
