"""06 · 多主机数据并行训练：每个进程只写自己那一份 / multi-host data-parallel training: each process writes its own part.

多主机训练里每台主机跑同一个程序的一份（SPMD），但数据不一样：每个进程只读数据集里属于自己的
那几行（由 jax.process_index() / jax.process_count() 决定），再把这些本地的行拼成一个跨进程的
全局批次（jax.make_array_from_process_local_data）。参数在网格的所有设备上复制一份；jit 编译的
训练步对全局批次求平均损失的梯度，分片让 XLA 在编译好的程序里插入一条跨进程的 all-reduce，
梯度因此在两个进程之间求了平均，不用手写 psum。指标（每个进程自己那几行上的损失）用
multihost_utils.process_allgather 收回每个进程的主机内存。这里沿用第 03 章的两个本机进程
（各 2 个 CPU 设备，gloo 跨进程通信，空闲端口，每个进程都有超时）：你写的函数在两个进程里各跑
一次，本进程只比较它们报告的结果，并和一个单进程在整个批次上的参考训练对照。

In multi-host training every host runs one copy of the same program (SPMD), but on different
data: each process reads only its own rows of the dataset (chosen by jax.process_index() /
jax.process_count()) and assembles them into one global batch that spans the processes
(jax.make_array_from_process_local_data). The parameters are replicated over every device of
the mesh; the jitted train step takes the gradient of the mean loss over the global batch, and
the sharding makes XLA put one cross-process all-reduce into the compiled program, so the
gradients are averaged over both processes with no psum written by hand. A metric (each
process's loss on its own rows) comes back to every process's host memory through
multihost_utils.process_allgather. The two local processes of chapter 03 are reused (2 CPU
devices each, gloo across processes, a free port, every process under a timeout): the functions
you write run once in each process, and this process only compares what they report, against a
single-process reference trained on the whole batch.
"""

import json
import os
import socket
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.blanks import TodoError
from jaxkoans.api.probes import collectives

# ---- 给定代码 / given code -------------------------------------------------------------

ROWS, FEATURES, HIDDEN = 16, 3, 8
STEPS, LEARNING_RATE = 5, 0.2


def make_data():
    """整个数据集（固定种子）：ROWS 行特征和目标。/ The whole dataset (fixed seed)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(ROWS, FEATURES)).astype(np.float32)
    y = np.sin(x @ np.array([1.0, -2.0, 0.5], np.float32))[:, None].astype(np.float32)
    return x, y


def init_params():
    """一个小 MLP 的初始参数（NumPy 数组，固定种子）。/ A small MLP's initial parameters."""
    rng = np.random.default_rng(1)
    return {
        "w1": (0.5 * rng.normal(size=(FEATURES, HIDDEN))).astype(np.float32),
        "b1": np.zeros(HIDDEN, np.float32),
        "w2": (0.5 * rng.normal(size=(HIDDEN, 1))).astype(np.float32),
        "b2": np.zeros(1, np.float32),
    }


def loss_fn(params, x, y):
    """均方误差：对传进来的每一行求平均。/ Mean squared error over the rows given."""
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean((hidden @ params["w2"] + params["b2"] - y) ** 2)


class Dataset:
    """一个只能按行区间读取的数据集，记下每一次读了哪些行（就像从共享存储上读文件）。
    A dataset read by row ranges only; it records every read (like files on shared storage)."""

    def __init__(self, x, y):
        self._x, self._y = x, y
        self.num_rows = len(x)
        self.reads = []

    def read(self, start, stop):
        """第 start 行到第 stop 行（不含）的 (特征, 目标)。/ Rows start..stop (exclusive)."""
        self.reads.append([int(start), int(stop)])
        return self._x[start:stop].copy(), self._y[start:stop].copy()


# ---- 每个进程里跑的部分：你来写 / the per-process part: yours to write --------------------


def load_my_shard(dataset):
    """本进程只读属于自己的那一段连续的行：把 dataset.num_rows 行平均分给
    jax.process_count() 个进程，第 jax.process_index() 个进程读第几段？用 dataset.read 读，
    只读一次，返回它给的 (特征, 目标)。大约 3 行。
    This process reads only its own contiguous block of rows: split dataset.num_rows rows evenly
    over jax.process_count() processes; which block is process jax.process_index()'s? Read it with
    dataset.read, once, and return the (features, targets) it gives. About 3 lines.
    """
    rows = dataset.num_rows // jax.process_count()
    start = jax.process_index() * rows
    return dataset.read(start, start + rows)


def global_batch(local, mesh):
    """把本进程的 (特征, 目标) 拼成跨进程的全局数组：两者的行都沿网格的 "data" 轴切开，
    每个进程的行落在它自己的设备上。返回 (x, y)。大约 3 行。
    Assemble this process's (features, targets) into global arrays that span the processes:
    the rows of both split over the mesh's "data" axis, each process's rows on its own devices.
    Return (x, y). About 3 lines.
    """
    sharding = NamedSharding(mesh, P("data"))
    return tuple(jax.make_array_from_process_local_data(sharding, part) for part in local)


def replicate(params, mesh):
    """把参数（NumPy 数组的字典）放到网格上，每个设备一份完整的副本。1 行。
    Put the parameters (a dict of NumPy arrays) on the mesh, a whole copy on every device. 1 line.
    """
    return jax.device_put(params, NamedSharding(mesh, P()))


def train_step(params, x, y):
    """一步 SGD（学习率 LEARNING_RATE）：loss_fn 在整个全局批次上的值和梯度，参数减去学习率乘
    梯度。返回 (新参数, 损失)。它会被 jax.jit 编译；梯度怎么跨进程求平均由分片决定，不要自己写
    集合通信。大约 3 行。
    One SGD step (learning rate LEARNING_RATE): loss_fn's value and gradient over the whole
    global batch, and the parameters minus the learning rate times the gradient. Return
    (new parameters, loss). It will be compiled with jax.jit; the sharding decides how the
    gradients are averaged across processes, so write no collective yourself. About 3 lines.
    """
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads), loss


def losses_of_every_process(params, local):
    """指标：本进程在自己那几行（local）上的 loss_fn（在主机上算，params 是 NumPy 数组），再把
    每个进程的这个数收集回来：返回一个 NumPy 数组，第 i 个元素是进程 i 的损失，每个进程都拿到
    同一个数组。大约 2 行。
    A metric: loss_fn on this process's own rows (local), computed on the host (params are NumPy
    arrays), then that number from every process collected: return a NumPy array whose element i
    is process i's loss, the same array in every process. About 2 lines.
    """
    mine = np.float32(loss_fn(params, *local))
    return multihost_utils.process_allgather(mine)


# The worker: joins the two-process system like chapter 03's worker, loads this very file and
# runs the functions above in order (STAGES); it prints one JSON line with what this process
# saw, or the first stage that raised.
# worker：像第 03 章那样加入两个进程的系统，载入本文件，按顺序运行上面的函数，打印一行 JSON。
WORKER = r"""
import importlib.util, json, sys, traceback
import jax

koan_file, port, process_id, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", 2)
jax.distributed.initialize(
    coordinator_address=f"localhost:{port}",
    num_processes=2,
    process_id=process_id,
    initialization_timeout=timeout,
)

import numpy as np

spec = importlib.util.spec_from_file_location("koan", koan_file)
koan = importlib.util.module_from_spec(spec)
spec.loader.exec_module(koan)

def listed(a):
    return np.asarray(a).tolist()

def shards(array):
    return [
        [[s.index[0].start or 0, s.index[0].stop or array.shape[0]], listed(s.data)]
        for s in array.addressable_shards
    ]

report = {"process_index": jax.process_index()}
stage = None
try:
    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    dataset = koan.Dataset(*koan.make_data())

    stage = "load_my_shard"
    local = koan.load_my_shard(dataset)
    shorter = koan.Dataset(*(part[: koan.ROWS - 4] for part in koan.make_data()))
    koan.load_my_shard(shorter)  # a dataset of another length / 另一个长度的数据集
    report[stage] = {"rows": [listed(part) for part in local], "shorter": shorter.reads}

    stage = "global_batch"
    x, y = koan.global_batch(local, mesh)
    report[stage] = {
        "shapes": [list(a.shape) for a in (x, y)],
        "types": [str(jax.typeof(a)) for a in (x, y)],
        "fully_addressable": [a.is_fully_addressable for a in (x, y)],
        "shards": [shards(a) for a in (x, y)],
    }

    stage = "replicate"
    params = koan.replicate(koan.init_params(), mesh)
    report[stage] = {k: str(jax.typeof(v)) for k, v in params.items()}

    stage = "train_step"
    step = jax.jit(koan.train_step)
    hlo = step.lower(params, x, y).compile().as_text()
    losses = []
    for _ in range(koan.STEPS):
        params, loss = step(params, x, y)
        losses.append(float(loss.addressable_data(0)))
    host = {k: np.asarray(v.addressable_data(0)) for k, v in params.items()}
    try:
        step(koan.init_params(), x, y)
        numpy_params = "no error"
    except Exception as error:
        numpy_params = f"{type(error).__name__}: {error}"
    report[stage] = {
        "losses": losses,
        "params": {k: listed(v) for k, v in host.items()},
        "types": {k: str(jax.typeof(v)) for k, v in params.items()},
        "fully_addressable": all(v.is_fully_addressable for v in params.values()),
        "hlo": hlo,
        "numpy_params": numpy_params,
    }

    stage = "losses_of_every_process"
    gathered = koan.losses_of_every_process(host, local)
    report[stage] = {"type": type(gathered).__name__, "value": listed(gathered)}
    stage = None
except Exception as error:
    lines = [f.lineno for f in traceback.extract_tb(error.__traceback__) if f.filename == koan_file]
    report["failed"] = {
        "stage": stage, "type": type(error).__name__, "message": str(error),
        "traceback": traceback.format_exc()[-3000:], "line": lines[-1] if lines else None,
    }
report["reads"] = dataset.reads if "dataset" in dir() else []
print(json.dumps(report), flush=True)
if stage is None:
    jax.distributed.shutdown()
"""

STAGES = ["load_my_shard", "global_batch", "replicate", "train_step", "losses_of_every_process"]
WORKER_TIMEOUT_S = 120  # 每个子进程最多跑这么久（负载高的机器上也够）/ the most each child may run (enough on a loaded machine)


def free_port():
    """让系统挑一个空闲端口：绑定端口 0 再读出来。/ Let the OS pick a free port: bind to 0."""
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def launch(tmp_path):
    """起两个 worker（同一个端口），等它们结束，返回 [(returncode, 最后一行 JSON 或 None,
    stderr)]。子进程不继承父进程的 JAX_* / XLA_FLAGS；超时的进程被杀掉，它已经打印的仍然读回。
    Start the two workers (same port), wait for them and return [(returncode, last JSON line or
    None, stderr)]. The children do not inherit the parent's JAX_* / XLA_FLAGS; a child past
    its timeout is killed, and what it printed is still read back."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_") and k != "XLA_FLAGS"}
    env["PYTHONUNBUFFERED"] = "1"
    port = free_port()
    procs = []
    try:
        for pid in (0, 1):
            command = [sys.executable, str(script), __file__, str(port), str(pid), "60"]
            procs.append(
                subprocess.Popen(
                    command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
                )
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
    return launch(tmp_path_factory.mktemp("multihost_training"))


def raise_todo_at(line, message):
    """在本文件的第 line 行（子进程里那个 todo() 所在的行）抛出 TodoError，这样报告指向你的 TODO。
    Raise TodoError from line `line` of this file (where the child process met the todo()), so
    that the report points at your TODO."""
    if not line:
        raise TodoError(message)
    code = compile("\n" * (line - 1) + "raise TodoError(message)", __file__, "exec")
    exec(code, {"TodoError": TodoError, "message": message})


def reported(reports, function):
    """每个进程运行到 function 为止（含）报告的内容；某个进程在这之前（或在它里面）出错时，在这里
    重新抛出：没写的 TODO 仍然是 TodoError。
    What each process reported up to and including function; where a process failed there or
    before, the failure is raised again here: an unwritten TODO stays a TodoError."""
    needed = STAGES[: STAGES.index(function.__name__) + 1]
    for index, (code, report, err) in enumerate(reports):
        failed = (report or {}).get("failed")
        if failed and failed["stage"] in needed:
            if failed["type"] == "TodoError":
                raise_todo_at(failed["line"], failed["message"])
            where = f"process {index}, {failed['stage']}"
            raise AssertionError(
                f"{where}: {failed['type']}: {failed['message']}\n{failed['traceback']}"
            )
        assert report is not None and code == 0, f"process {index} exited {code}:\n{err[-3000:]}"
    return [report for _, report, _ in reports]


# ---- 检查 / checks ----------------------------------------------------------------------


def test_each_process_reads_only_its_own_rows(reports):
    """✍️ 写 load_my_shard。每个进程只读自己的一段：两个进程读的行互不重叠、合起来正好是整个
    数据集，每个进程只读一次（Dataset 记下了每一次读）；读回的行就是数据集里的那几行；换一个长度的
    数据集也一样平分；只有一个进程时（pytest 自己这个进程），它读全部的行。
    Write load_my_shard. Each process reads only its own block: the two processes' rows do not
    overlap and together are the whole dataset, each process reads once (the Dataset records
    every read), and the rows read back are exactly those rows of the dataset; a dataset of
    another length is split the same way; and in a system of one process (pytest's own) it reads
    every row.
    """
    got = reported(reports, load_my_shard)
    x, y = make_data()
    half = ROWS // 2
    assert [r["reads"] for r in got] == [[[0, half]], [[half, ROWS]]]
    shorter = (ROWS - 4) // 2  # 短一些的数据集也平分 / a shorter dataset is split evenly too
    assert [r["load_my_shard"]["shorter"] for r in got] == [[[0, shorter]], [[shorter, ROWS - 4]]]
    for index, report in enumerate(got):
        rows = slice(index * half, (index + 1) * half)
        features, targets = report["load_my_shard"]["rows"]
        np.testing.assert_array_equal(features, x[rows])
        np.testing.assert_array_equal(targets, y[rows])
    alone = Dataset(x, y)  # this pytest process is a system of one process: every row is its own
    load_my_shard(alone)
    assert alone.reads == [[0, ROWS]]


def test_the_global_batch_spans_both_processes(reports):
    """✍️ 写 global_batch。每个进程只有 8 行，得到的却是 16 行的全局数组：它的类型把行沿 "data"
    切开（jax.make_mesh 的轴默认是 Explicit，分片写在类型里），没有一个进程能读到全部
    （is_fully_addressable 为 False）；每个本地设备上的那一块是本进程的 4 行。
    Write global_batch. Each process holds 8 rows, yet gets a global array of 16: its type
    splits the rows over "data" (jax.make_mesh's axes are Explicit by default, so the sharding is
    in the type), no process can read all of it (is_fully_addressable is False), and each local
    device's block is 4 of this process's rows.
    """
    got = reported(reports, global_batch)
    x, y = make_data()
    for index, report in enumerate(got):
        batch = report["global_batch"]
        assert batch["shapes"] == [[ROWS, FEATURES], [ROWS, 1]]
        assert batch["types"] == [f"float32[{ROWS}@data,{FEATURES}]", f"float32[{ROWS}@data,1]"]
        assert batch["fully_addressable"] == [False, False]
        for whole, blocks in zip((x, y), batch["shards"], strict=True):
            starts = [[4 * (2 * index + k), 4 * (2 * index + k + 1)] for k in range(2)]
            assert [rows for rows, _ in blocks] == starts
            for (start, stop), data in blocks:
                np.testing.assert_array_equal(data, whole[start:stop])


def test_the_sharding_averages_the_gradients_across_processes(reports):
    """✍️ 写 replicate 和 train_step。训练 STEPS 步之后两个进程的参数逐位相同，并且和一个进程在
    整个 16 行的批次上训练的结果一致（容差很紧）：梯度是整个全局批次的平均。编译好的训练步里有
    跨进程的 all-reduce（网格的 4 个设备，两个进程各 2 个），没有别的集合通信；参数仍在每个设备上
    复制一份。⚠️ 陷阱 / trap：在 Explicit 网格上直接传 NumPy 参数，反向里收缩批次轴的矩阵乘两边
    都沿 "data" 切开，结果该怎么切不明确，jit 拒绝。
    Write replicate and train_step. After STEPS steps both processes hold bit-identical
    parameters, equal (to a tight tolerance) to one process trained on the whole 16-row batch:
    the gradient is the mean over the whole global batch. The compiled step holds a
    cross-process all-reduce (the mesh's 4 devices, 2 in each process) and no other collective;
    the parameters stay replicated on every device. The trap: passing NumPy parameters straight
    to the step on an Explicit mesh is refused, because the backward matmul that contracts the
    batch axis has both sides split over "data" and its output sharding is ambiguous.
    """
    got = reported(reports, train_step)
    x, y = make_data()
    params = init_params()
    want_losses = []
    for _ in range(STEPS):  # the single-process reference on the whole batch
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        params = jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads)
        want_losses.append(float(loss))
    first, second = (r["train_step"] for r in got)
    assert first["params"] == second["params"]
    assert first["losses"] == second["losses"]
    for name, value in params.items():
        np.testing.assert_allclose(first["params"][name], value, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(first["losses"], want_losses, rtol=1e-5)
    assert first["losses"][-1] < first["losses"][0]
    replicated = {k: f"float32[{','.join(map(str, v.shape))}]" for k, v in params.items()}
    for report in got:
        assert report["replicate"] == replicated
        assert report["train_step"]["types"] == replicated
        assert report["train_step"]["fully_addressable"] is False
        hlo = report["train_step"]["hlo"]
        assert set(collectives(hlo)) == {"all-reduce"}
        groups = {
            line.split("replica_groups=")[1].split(", ")[0]
            for line in hlo.splitlines()
            if " all-reduce(" in line
        }
        assert groups == {"mesh['data'=4] {'data'}"}
        assert report["train_step"]["numpy_params"].startswith("ShardingTypeError: Contracting")


def test_process_allgather_brings_every_process_loss_home(reports):
    """✍️ 写 losses_of_every_process。每个进程在自己的 8 行上算出不同的损失；收集之后两个进程
    拿到同一个 NumPy 数组 [进程 0 的, 进程 1 的]，它们的平均就是整个批次上的损失。
    Write losses_of_every_process. Each process computes a different loss on its own 8 rows;
    once collected, both processes hold the same NumPy array [process 0's, process 1's], whose
    mean is the loss over the whole batch.
    """
    got = reported(reports, losses_of_every_process)
    x, y = make_data()
    params = {k: np.asarray(v, np.float32) for k, v in got[0]["train_step"]["params"].items()}
    half = ROWS // 2
    want = [float(loss_fn(params, x[:half], y[:half])), float(loss_fn(params, x[half:], y[half:]))]
    for report in got:
        metric = report["losses_of_every_process"]
        assert metric["type"] == "ndarray"
        np.testing.assert_allclose(metric["value"], want, rtol=1e-6)
    assert abs(want[0] - want[1]) > 1e-3  # the two processes' losses differ
    np.testing.assert_allclose(np.mean(want), float(loss_fn(params, x, y)), rtol=1e-5)
