"""09 · 综合：部署到一个全新的进程 / capstone: deploy into a fresh process.

把训练好的小模型交付出去：`save_artifacts` 把程序（jax.export，批维是符号维度）和参数（Orbax）
写进一个目录；`load_and_predict` 只靠这个目录做推理——它在一个全新的 Python 进程里运行，
那里没有 `mlp`，也没有这个测试文件。
Ship a small trained model: `save_artifacts` writes the program (jax.export, with a symbolic
batch dimension) and the parameters (Orbax) into one directory; `load_and_predict` serves
predictions from that directory alone. It runs in a fresh Python process that has neither
`mlp` nor this test file.

目录布局 / directory layout:
    directory / "model.jaxexport"   serialized Exported of mlp(params, x), x: float32[b, 3]
    directory / "params"            Orbax StandardCheckpointer checkpoint of params
"""

import inspect
import os
import shutil
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
from jax import export

from jaxkoans import todo  # noqa: F401  (the koans' TODOs)
from jaxkoans.api.probes import run_python

# ---- 给定代码 / given code -------------------------------------------------------------

MODEL_FILE, PARAMS_DIR = "model.jaxexport", "params"


def mlp(params, x):
    """模型代码：只在导出方存在 / the model code, present only on the exporting side."""
    h = jax.nn.gelu(x @ params["hidden"]["w"] + params["hidden"]["b"])
    return jax.nn.log_softmax(h @ params["out"]["w"] + params["out"]["b"])


def make_params():
    rng = np.random.default_rng(9)
    tree = {
        "hidden": {"w": rng.normal(size=(3, 8)) / 2, "b": np.full(8, 0.1)},
        "out": {"w": rng.normal(size=(8, 4)) / 3, "b": np.linspace(-0.2, 0.2, 4)},
    }
    return jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), tree)


def inputs(n):
    return np.linspace(-2.0, 2.0, 3 * n, dtype=np.float32).reshape(n, 3)


# ---- ✍️ 作答区 / your code ----------------------------------------------------------------


def save_artifacts(params, directory):
    """把 mlp 导出（x 的批维是符号维度 "b"）并序列化到 directory / MODEL_FILE；用 Orbax 的
    StandardCheckpointer 把 params 存到 directory / PARAMS_DIR（记得等写完再关）。约 8 行。
    Export mlp (x's batch dimension symbolic, "b"), serialize it to directory / MODEL_FILE;
    save params with Orbax's StandardCheckpointer to directory / PARAMS_DIR (wait for the
    write before closing). About 8 lines.
    """
    todo("save_artifacts: export + serialize, Orbax save / 导出并序列化，Orbax 保存")


def load_and_predict(directory, x):
    """只用 directory 里的两样东西算出 mlp(params, x)，返回 NumPy 数组。规则：这个函数会被
    原样复制进一个新进程运行，所以 import 都写在函数里面（jax、jax.export、orbax.checkpoint、
    numpy、pathlib），不能用本文件的任何名字。恢复参数的目标树可以从 Exported 的
    in_tree / in_avals 搭出来。约 10 行。
    Compute mlp(params, x) from the two things in directory alone; return a NumPy array.
    Rules: this function is copied verbatim into a fresh process, so do every import inside
    it (jax, jax.export, orbax.checkpoint, numpy, pathlib) and use no name from this file. The
    restore target can be built from the Exported's in_tree / in_avals. About 10 lines.
    """
    todo("load_and_predict: deserialize, restore, call / 反序列化、恢复、调用")


# ---- 自检 / checks ---------------------------------------------------------------------

# The fresh process: the loader's source plus a main that reads the inputs and writes outputs.
MAIN = """
import sys
import numpy as np

directory = sys.argv[1]
for name in sys.argv[2:]:
    x = np.load(f"{directory}/{name}.in.npy")
    np.save(f"{directory}/{name}.out.npy", load_and_predict(directory, x))
"""


def test_artifacts_serve_any_batch_in_process(tmp_path, monkeypatch):
    """产物目录里有序列化的程序和参数检查点（Orbax 要读得出、恢复得了）；读回的 Exported 批维是符号的，一个产物服务所有批大小。
    服务端运行的是产物里的程序：下一版模型（输出概率而不是对数概率）只换了产物，同一个
    load_and_predict 就给出新模型的预测。
    The directory holds the serialized program and the parameter checkpoint, which Orbax must
    be able to read and restore; the Exported read back has a symbolic batch dimension, so one
    artifact serves every batch size. The
    server runs the artifact's program: the next model version (probabilities instead of
    log-probabilities) changes only the artifact, and the same load_and_predict serves it.
    """
    params = make_params()
    save_artifacts(params, tmp_path)
    assert sorted(os.listdir(tmp_path)) == [MODEL_FILE, PARAMS_DIR]

    exp = export.deserialize(bytearray((tmp_path / MODEL_FILE).read_bytes()))
    assert [str(a) for a in exp.out_avals] == ["float32[b,4]"]
    for n in (1, 5):
        np.testing.assert_allclose(
            load_and_predict(tmp_path, inputs(n)),
            jax.jit(mlp)(params, inputs(n)),
            rtol=1e-5,
            atol=1e-6,
        )

    # The parameters are an Orbax checkpoint: Orbax reads its metadata and restores it, and a
    # retrained checkpoint written by Orbax in its place is what the same server then serves.
    # 参数是一个 Orbax 检查点：Orbax 读得出它的元数据、恢复得了它；用 Orbax 写一个重新训练的
    # 检查点换掉它，同一个服务端就给出新参数的预测。
    import orbax.checkpoint as ocp

    checkpoint = tmp_path / PARAMS_DIR
    orbax = ocp.StandardCheckpointer()
    assert (checkpoint / "_CHECKPOINT_METADATA").is_file()
    assert set(orbax.metadata(checkpoint).item_metadata.tree) == {"hidden", "out"}
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)
    restored = orbax.restore(checkpoint, target)
    jax.tree.map(np.testing.assert_array_equal, restored, params)
    retrained = jax.tree.map(lambda a: 1.5 * a - 0.1, params)
    shutil.rmtree(checkpoint)
    orbax.save(checkpoint, retrained)
    orbax.wait_until_finished()
    orbax.close()
    np.testing.assert_allclose(
        load_and_predict(tmp_path, inputs(5)),
        jax.jit(mlp)(retrained, inputs(5)),
        rtol=1e-5,
        atol=1e-6,
    )

    model = mlp

    def probabilities(params, x):  # the next model version
        return jnp.exp(model(params, x))

    (tmp_path / "v2").mkdir()
    monkeypatch.setitem(globals(), "mlp", probabilities)  # save_artifacts exports it instead
    save_artifacts(params, tmp_path / "v2")
    monkeypatch.undo()
    served = load_and_predict(tmp_path / "v2", inputs(5))
    np.testing.assert_allclose(served, jax.jit(probabilities)(params, inputs(5)), rtol=1e-5)


def test_a_fresh_process_reproduces_the_predictions(tmp_path):
    """新进程（sys.executable -I：隔离模式，脚本所在目录不进 sys.path，PYTHON* 环境变量被忽略）
    只拿到 load_and_predict 的源码和产物目录，算出的预测必须与本进程里的 mlp 一致，批大小 2 和 7
    都要对。
    A fresh process (sys.executable -I: isolated mode, the script's directory is not put on
    sys.path and PYTHON* variables are ignored) gets only load_and_predict's source and the
    artifact directory; its predictions must match mlp in this process, for batch sizes 2 and 7.
    """
    params = make_params()
    (tmp_path / "artifact").mkdir()
    save_artifacts(params, tmp_path / "artifact")
    load_and_predict(tmp_path / "artifact", inputs(1))  # works here first

    source = textwrap.dedent(inspect.getsource(load_and_predict))
    assert "mlp" not in source.split('"""')[-1], "the loader must not use the model code"
    script = tmp_path / "serve.py"
    script.write_text(source + MAIN, encoding="utf-8")
    for n in (2, 7):
        np.save(tmp_path / "artifact" / f"batch{n}.in.npy", inputs(n))

    run_python("-I", str(script), str(tmp_path / "artifact"), "batch2", "batch7")
    for n in (2, 7):
        served = np.load(tmp_path / "artifact" / f"batch{n}.out.npy")
        np.testing.assert_allclose(served, jax.jit(mlp)(params, inputs(n)), rtol=1e-5, atol=1e-6)
