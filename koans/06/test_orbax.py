"""06 · Orbax 检查点 / Orbax checkpoints."""

import os
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import run_python


def _model():
    return nnx.Linear(3, 2, rngs=nnx.Rngs(0))


def test_checkpoint_round_trip_is_bit_exact(tmp_path):
    """Orbax 保存 nnx.state(model)（一个 pytree），恢复时给出抽象目标（形状 + dtype）；
    再用 NNX 的一个函数把恢复的状态写回一个新模型，结果逐位相同。
    Orbax saves nnx.state(model) (a pytree) and restores it against an abstract target (shapes
    and dtypes); one function of NNX writes the restored state into a fresh model, bit for bit.
    """
    model = _model()
    state = nnx.state(model)
    ckpt = ocp.StandardCheckpointer()
    ckpt.save(tmp_path / "step_1", state)
    ckpt.wait_until_finished()

    fresh = nnx.Linear(3, 2, rngs=nnx.Rngs(42))  # different initial weights
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, nnx.state(fresh))
    restored = ckpt.restore(tmp_path / "step_1", abstract)
    ckpt.close()
    __(fresh, restored)

    np.testing.assert_array_equal(fresh.kernel[...], model.kernel[...])
    np.testing.assert_array_equal(fresh.bias[...], model.bias[...])
    x = jnp.ones((1, 3))
    assert bool(jnp.all(fresh(x) == model(x)))


def test_saving_over_an_existing_checkpoint_raises(tmp_path):
    """⚠️ 陷阱 / trap：保存到已经存在的目录会抛出异常，不会悄悄覆盖；确实要覆盖时用 force= 这个开关。
    ⚠️ trap: saving into a directory that already exists raises instead of silently
    overwriting; the force= switch is for when you really mean to overwrite.
    """
    path = tmp_path / "ckpt"
    ckpt = ocp.StandardCheckpointer()
    ckpt.save(path, {"w": jnp.zeros(4)})
    ckpt.wait_until_finished()
    with raises_exactly(__) as info:
        ckpt.save(path, {"w": jnp.ones(4)})
        ckpt.wait_until_finished()
    assert "already exists" in str(info.value)
    ckpt.save(path, {"w": jnp.ones(4)}, force=__)
    ckpt.wait_until_finished()
    restored = ckpt.restore(path)
    ckpt.close()
    np.testing.assert_array_equal(restored["w"], np.ones(4))


_WORKER = textwrap.dedent(
    """
    import os, sys, threading
    import jax.numpy as jnp
    import orbax.checkpoint as ocp

    directory, wait = sys.argv[1], sys.argv[2] == "1"
    # Preemption made deterministic: the background commit's last step (the rename of the
    # temporary directory) waits until the job decides to go on, so a job that dies right
    # after save() always dies with the commit still in flight, as a real one can.
    job_goes_on = threading.Event()
    options = ocp.options.AsyncOptions(
        create_directories_asynchronously=False,  # the temporary directory exists on return
        post_finalization_callback=job_goes_on.wait,
    )
    ckpt = ocp.StandardCheckpointer(async_options=options)
    ckpt.save(os.path.join(directory, "ckpt"), {"w": jnp.arange(1_000_000.0)})
    if wait:
        job_goes_on.set()
        ckpt.wait_until_finished()
    os._exit(0)  # a preempted job: no clean shutdown
    """
)


def test_async_save_must_be_waited_for(tmp_path):
    """⚠️ 陷阱 / trap：save 是异步的，返回时检查点还只是一个临时目录，后台线程写完后才把它改名为
    最终目录；进程在 wait_until_finished() 之前被杀掉（抢占、os._exit），留下的只有这个临时目录，
    无法恢复。（工作进程让后台提交的最后一步等主线程放行，抢占因此总是落在这个窗口里。）
    ⚠️ trap: save is asynchronous; when it returns the checkpoint is still a temporary
    directory, which the background thread renames to the final one only when it is done. A
    process killed before wait_until_finished() (preemption, os._exit) leaves only that temporary
    directory behind, and nothing can be restored. (The worker holds the background commit's last
    step until its main thread lets it go on, so the preemption always lands in that window.)
    """
    listings = {}
    for wait in ("0", "1"):
        d = tmp_path / f"wait{wait}"
        d.mkdir()
        run_python("-c", _WORKER, str(d), wait)
        listings[wait] = sorted(os.listdir(d))
    assert listings["0"] == __
    assert listings["1"] == ["ckpt"]
    # The finished checkpoint restores; the unfinished one is not even recognised as one.
    restored = ocp.StandardCheckpointer().restore(tmp_path / "wait1" / "ckpt")
    assert restored["w"].shape == (1_000_000,)
    with raises_exactly(__):
        ocp.StandardCheckpointer().restore(tmp_path / "wait0" / "ckpt")


def test_orbax_v1_saves_before_it_returns(tmp_path):
    """❌ 旧写法 / ✅ 推荐写法：固定版本的 Orbax 里已经有新的 `ocp.v1` API。`ocp.v1.save(path, tree)`
    是同步的（要异步就明确地用 `save_async`，它返回一个要等待的响应）；`ocp.v1.load(path, 抽象目标)`
    恢复；覆盖已有目录的开关从 force= 改名为 overwrite=。
    ❌ old / ✅ new: the pinned Orbax already ships the new `ocp.v1` API. `ocp.v1.save(path,
    tree)` is synchronous (for asynchrony, ask for it with `save_async`, which returns a response
    to wait on); `ocp.v1.load(path, abstract target)` restores; the switch that overwrites an
    existing directory is renamed from force= to overwrite=.
    """
    state = {"w": jnp.arange(4.0)}
    ocp.v1.save(tmp_path / "ckpt", state)
    assert sorted(os.listdir(tmp_path)) == __
    ocp.v1.save(tmp_path / "ckpt", {"w": jnp.ones(4)}, overwrite=True)
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    restored = __
    np.testing.assert_array_equal(restored["w"], np.ones(4))

    response = ocp.v1.save_async(tmp_path / "later", state)
    response.result()  # the asynchronous form: wait on the response
    assert ocp.v1.is_orbax_checkpoint(tmp_path / "later")
