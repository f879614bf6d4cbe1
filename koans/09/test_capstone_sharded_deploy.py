"""09 · 综合二：部署一个分片的模型 / capstone two: deploy a sharded model.

`save_sharded` 把一个数据并行的模型导出（4 个设备的 "data" 网格：批沿 "data" 切开、参数复制）
并把参数交给 Orbax；`serve` 在一个只有这个目录的全新进程里提供预测：它要搭出和产物一样形状的
网格，把参数直接恢复成产物要求的分片，再调用。设备数不对的进程必须被拒绝。
`save_sharded` exports a data-parallel model (a 4-device "data" mesh: the batch split along
"data", the parameters replicated) and hands the parameters to Orbax; `serve` answers in a fresh
process that has only the directory: it builds a mesh of the artifact's shape, restores the
parameters straight into the shardings the artifact asks for, and calls it. A process with
the wrong number of devices must be refused.

目录布局 / directory layout:
    directory / "model.jaxexport"   serialized Exported of mlp(params, x), x: float32[8, 3]
    directory / "params"            Orbax StandardCheckpointer checkpoint of params
"""

import inspect
import shutil
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import todo  # noqa: F401  (the koans' TODOs)
from jaxkoans.api.probes import run_python

# ---- 给定代码 / given code -------------------------------------------------------------

MODEL_FILE, PARAMS_DIR, BATCH = "model.jaxexport", "params", 8


def mlp(params, x):
    """模型代码：只在导出方存在 / the model code, present only on the exporting side."""
    h = jnp.tanh(x @ params["hidden"]["w"] + params["hidden"]["b"])
    return h @ params["out"]["w"]


def make_params():
    rng = np.random.default_rng(4)
    tree = {
        "hidden": {"w": rng.normal(size=(3, 16)) / 2, "b": np.full(16, 0.1)},
        "out": {"w": rng.normal(size=(16, 2)) / 4},
    }
    return jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), tree)


def inputs(seed=0):
    return np.random.default_rng(seed).normal(size=(BATCH, 3)).astype(np.float32)


def data_mesh(devices):
    """一维 "data" 网格（Explicit 轴）/ a 1-D "data" mesh with an Explicit axis."""
    return Mesh(np.array(devices), ("data",), axis_types=(AxisType.Explicit,))


# ---- ✍️ 作答区 / your code ----------------------------------------------------------------


def save_sharded(params, directory, devices):
    """在 data_mesh(devices) 上导出 jax.jit(mlp)：params 的每个叶子复制（P()），x 的行沿 "data"
    切开（P("data", None)），x 的形状是 [BATCH, 3]，float32。输入规格用带 sharding 的
    jax.ShapeDtypeStruct。序列化到 directory / MODEL_FILE；用 Orbax 的 StandardCheckpointer
    把 params 存到 directory / PARAMS_DIR（等写完再关）。大约 12 行。
    Export jax.jit(mlp) on data_mesh(devices): every leaf of params replicated (P()), x's rows
    split along "data" (P("data", None)), x shaped [BATCH, 3], float32. Use
    jax.ShapeDtypeStruct with a sharding for the input specs. Serialize to
    directory / MODEL_FILE; save params with Orbax's StandardCheckpointer to
    directory / PARAMS_DIR (wait for the write before closing). About 12 lines.
    """
    todo(
        "save_sharded: sharded specs, export, serialize, Orbax save / 分片规格、导出、序列化、保存"
    )


def serve(directory, x):
    """只用 directory 算出 mlp(params, x)，返回 NumPy 数组。规则：这个函数会被原样复制进一个新
    进程，所以 import 都写在函数里面，不能用本文件的任何名字。做法：读回 Exported；用前
    exp.nr_devices 个设备搭一个同样的一维 "data" 网格（Explicit 轴）；exp.in_shardings_jax(mesh)
    给出压平后的每个输入的分片，用 exp.in_tree 还原成 ((params 的分片, x 的分片), {})；Orbax 恢复
    的目标是带这些分片的 ShapeDtypeStruct（形状和 dtype 来自 exp.in_avals）；x 用
    jax.device_put 放好。大约 16 行。
    Compute mlp(params, x) from directory alone; return a NumPy array. Rules: this function is
    copied verbatim into a fresh process, so do every import inside it and use no name from
    this file. The way: read the Exported back; build the same 1-D "data" mesh (Explicit axis)
    from the first exp.nr_devices devices; exp.in_shardings_jax(mesh) gives each flat input's
    sharding, and exp.in_tree rebuilds them as ((params' shardings, x's sharding), {}); restore
    with Orbax against ShapeDtypeStructs carrying those shardings (shapes and dtypes from
    exp.in_avals); place x with jax.device_put. About 16 lines.
    """
    todo("serve: mesh, in_shardings_jax, Orbax restore, call / 网格、分片、恢复、调用")


# ---- 自检 / checks ---------------------------------------------------------------------

# The fresh process: how many CPU devices it has, the server's source, and a main.
MAIN = """
import sys
import numpy as np

directory = sys.argv[1]
x = np.load(f"{directory}/request.npy")
np.save(f"{directory}/response.npy", serve(directory, x))
"""


def serving_script(tmp_path, devices):
    header = f"import jax\njax.config.update('jax_num_cpu_devices', {devices})\n\n"
    source = textwrap.dedent(inspect.getsource(serve))
    assert "mlp" not in source.split('"""')[-1], "the server must not use the model code"
    script = tmp_path / f"serve_on_{devices}.py"
    script.write_text(header + source + MAIN, encoding="utf-8")
    return script


def test_the_artifact_records_its_mesh_and_serves_here(tmp_path, monkeypatch):
    """写 save_sharded 和 serve：产物记着 4 个设备，x 按行切开（Explicit 网格下分片就写在类型
    里）；参数是 Orbax 恢复得了的检查点；在本进程里提供服务，结果与 mlp 一致，换上一个 Orbax
    写的新检查点后也一致。服务端运行的是产物里的程序：下一版模型只换了产物，同一个 serve 照样服务。
    Write save_sharded and serve: the artifact records 4 devices and x split by rows (on an
    Explicit mesh the sharding is part of the type); the parameters are a checkpoint Orbax
    restores; served here, the result equals mlp's, also after a new checkpoint written by Orbax
    takes the old one's place. The server runs the artifact's program: the next model version
    changes only the artifact, and the same serve serves it. 服务端的设备数也跟着产物走：记着
    2 个设备的产物照样服务。The server's device count follows the artifact too: one recorded on
    2 devices is served as well.
    """
    params = make_params()
    save_sharded(params, tmp_path, jax.devices()[:4])
    exp = export.deserialize(bytearray((tmp_path / MODEL_FILE).read_bytes()))
    assert exp.nr_devices == 4
    assert [str(a) for a in exp.in_avals][-1] == "float32[8@data,3]"  # Explicit: in the type
    assert '[{"data"}, {}]' in exp.mlir_module()
    np.testing.assert_allclose(serve(tmp_path, inputs()), mlp(params, inputs()), rtol=1e-5)

    # The parameters are an Orbax checkpoint that Orbax restores, and the server serves a
    # retrained checkpoint Orbax writes in its place.
    # 参数是 Orbax 恢复得了的检查点；用 Orbax 写一个重新训练的检查点换掉它，服务端就给出新的预测。
    import orbax.checkpoint as ocp

    checkpoint = tmp_path / PARAMS_DIR
    orbax = ocp.StandardCheckpointer()
    assert (checkpoint / "_CHECKPOINT_METADATA").is_file()
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)
    jax.tree.map(np.testing.assert_array_equal, orbax.restore(checkpoint, target), params)
    retrained = jax.tree.map(lambda a: 1.5 * a - 0.1, params)
    shutil.rmtree(checkpoint)
    orbax.save(checkpoint, retrained)
    orbax.wait_until_finished()
    orbax.close()
    np.testing.assert_allclose(serve(tmp_path, inputs()), mlp(retrained, inputs()), rtol=1e-5)

    # The server runs the artifact's program: the next model version changes only the artifact.
    # 服务端运行的是产物里的程序：下一版模型只换了产物，同一个 serve 就给出新模型的预测。
    model = mlp

    def calibrated(params, x):  # the next model version
        return jax.nn.softmax(2.0 * model(params, x))

    (tmp_path / "v2").mkdir()
    monkeypatch.setitem(globals(), "mlp", calibrated)  # save_sharded exports it instead
    save_sharded(params, tmp_path / "v2", jax.devices()[:4])
    monkeypatch.undo()
    np.testing.assert_allclose(
        serve(tmp_path / "v2", inputs()), calibrated(params, inputs()), rtol=1e-5, atol=1e-6
    )

    # An artifact of another device count: the server's mesh follows the artifact, not a number.
    # 另一个设备数的产物：服务端的网格跟着产物走，而不是一个写死的数。
    (tmp_path / "pair").mkdir()
    save_sharded(params, tmp_path / "pair", jax.devices()[4:6])
    pair = export.deserialize(bytearray((tmp_path / "pair" / MODEL_FILE).read_bytes()))
    assert pair.nr_devices == 2
    np.testing.assert_allclose(serve(tmp_path / "pair", inputs()), mlp(params, inputs()), rtol=1e-5)


def test_a_fresh_process_with_the_same_mesh_serves_and_another_is_refused(tmp_path):
    """新进程（-I 隔离模式）只有 serve 的源码和产物目录：有 4 个设备时预测与本进程一致；只有
    2 个设备时，分片对不上，服务被拒绝。
    A fresh process (-I, isolated) has only serve's source and the directory: with 4 devices
    its predictions match this process; with only 2 the shardings do not fit and serving is
    refused.
    """
    params = make_params()
    (tmp_path / "artifact").mkdir()
    save_sharded(params, tmp_path / "artifact", jax.devices()[:4])
    np.save(tmp_path / "artifact" / "request.npy", inputs(seed=1))

    run_python("-I", str(serving_script(tmp_path, 4)), str(tmp_path / "artifact"))
    served = np.load(tmp_path / "artifact" / "response.npy")
    np.testing.assert_allclose(served, mlp(params, inputs(seed=1)), rtol=1e-5, atol=1e-6)

    with pytest.raises(AssertionError) as info:  # run_python fails with the child's stderr
        run_python("-I", str(serving_script(tmp_path, 2)), str(tmp_path / "artifact"))
    assert "does not match the mesh used for export" in str(info.value)
