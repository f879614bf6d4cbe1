"""06 · 用 CheckpointManager 保存整个训练状态 / a whole train state with CheckpointManager.

真实的训练任务会被抢占：要能从最近一个完整的检查点接着训练，得到和没被打断时一样的结果。
`ocp.CheckpointManager` 按步数管理一个目录下的检查点：按间隔保存（`save_interval_steps`）、
只留最近几个（`max_to_keep`）、找出最近完成的一步（`latest_step`），并且能把检查点恢复到另一个
网格上。要存的不只是参数：优化器状态、随机数 key 和数据读到的位置都属于训练状态。

A real training job gets preempted: it must go on from its latest complete checkpoint and end
where an uninterrupted run would. `ocp.CheckpointManager` keeps a directory of checkpoints by
step: it saves at an interval (`save_interval_steps`), keeps only the last few
(`max_to_keep`), finds the latest finished step (`latest_step`), and restores onto another
mesh. More than the parameters must be saved: the optimizer state, the random key and the
position in the data are all part of the train state.
"""

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import run_python

# ---- 给定代码 / given code -------------------------------------------------------------

# 训练代码：本进程和“被抢占的任务”子进程运行的是同一段代码。
# The training code: this process and the "preempted job" child run the very same code.
TRAINING = textwrap.dedent(
    """
    import jax
    import jax.numpy as jnp
    import optax

    TX = optax.adam(0.1)
    BATCH = 4

    def dataset():
        x = jax.random.normal(jax.random.key(0), (64, 3))
        return x, x @ jnp.array([1.0, -2.0, 0.5])

    def init_state():
        params = {"w": jnp.zeros(3)}
        return {
            "params": params,
            "opt_state": TX.init(params),
            "rng": jax.random.key_data(jax.random.key(1)),  # typed keys are saved as their data
            "data_position": jnp.int32(0),
        }

    @jax.jit
    def train_step(state):
        x, y = dataset()
        start = state["data_position"]
        xb = jax.lax.dynamic_slice_in_dim(x, start, BATCH)
        yb = jax.lax.dynamic_slice_in_dim(y, start, BATCH)
        rng, noise_key = jax.random.split(jax.random.wrap_key_data(state["rng"]))
        yb = yb + 0.01 * jax.random.normal(noise_key, yb.shape)  # label noise: uses the rng
        loss = lambda p: jnp.mean((xb @ p["w"] - yb) ** 2)
        updates, opt_state = TX.update(jax.grad(loss)(state["params"]), state["opt_state"])
        return {
            "params": optax.apply_updates(state["params"], updates),
            "opt_state": opt_state,
            "rng": jax.random.key_data(rng),
            "data_position": (start + BATCH) % x.shape[0],
        }
    """
)

# 被抢占的任务：每 2 步存一次、只留 2 个，第 6 步的检查点还在后台提交时进程就死了。后台提交在
# 最后一步（把临时目录改名）之前等主线程放行；主线程等它走到那里再退出，所以抢占总是落在这个窗口里。
# The preempted job: saves every 2 steps, keeps 2, and dies while step 6's checkpoint is still
# being committed in the background. The commit waits for the main thread before its last step
# (renaming the temporary directory), and the main thread exits once it got there, so the
# preemption always lands in that window, however slow the machine.
PREEMPTED_JOB = TRAINING + textwrap.dedent(
    """
    import os, sys, threading
    import orbax.checkpoint as ocp

    directory, crash_at = sys.argv[1], int(sys.argv[2])
    commit_may_finish, commit_waits = threading.Event(), threading.Event()
    commit_may_finish.set()

    def before_the_rename():
        commit_waits.set()
        commit_may_finish.wait()

    options = ocp.CheckpointManagerOptions(
        max_to_keep=2,
        save_interval_steps=2,
        async_options=ocp.options.AsyncOptions(post_finalization_callback=before_the_rename),
    )
    manager = ocp.CheckpointManager(directory, options=options)
    state = init_state()
    for step in range(10):
        state = train_step(state)
        if step == crash_at:
            manager.wait_until_finished()  # the earlier checkpoints are complete
            commit_may_finish.clear()  # this one is still in flight when the job dies
            commit_waits.clear()
        manager.save(step, args=ocp.args.StandardSave(state))
        if step == crash_at:
            commit_waits.wait()  # written, not yet renamed
            os._exit(0)  # preempted: no clean shutdown
    """
)


def training():
    """The TRAINING code's names, run in this process."""
    names = {}
    exec(TRAINING, names)
    return names


def abstract_of(tree):
    """Shapes, dtypes and shardings of a pytree: a restore target."""
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)


# ---- 检查 / checks ----------------------------------------------------------------------


def test_the_manager_saves_on_an_interval_and_keeps_the_last_few(tmp_path):
    """CheckpointManager.save(step, ...) 每一步都可以调用：不到间隔的步它直接跳过（返回 False），
    超过 max_to_keep 的旧检查点在新的完成后删掉。预测最后留下了哪些步。
    CheckpointManager.save(step, ...) can be called at every step: steps off the interval are
    skipped (it returns False), and checkpoints beyond max_to_keep are deleted once newer ones
    finish. Predict which steps remain.
    """
    options = ocp.CheckpointManagerOptions(max_to_keep=3, save_interval_steps=2)
    manager = ocp.CheckpointManager(tmp_path, options=options)
    saved = [
        manager.save(step, args=ocp.args.StandardSave({"w": jnp.full(4, float(step))}))
        for step in range(10)
    ]
    manager.wait_until_finished()
    assert sum(saved) == 5
    assert manager.all_steps() == [4, 6, 8]
    assert manager.latest_step() == max(manager.all_steps())
    assert sorted(int(p.name) for p in tmp_path.iterdir()) == manager.all_steps()
    manager.close()


def resume(manager, fresh_state):
    """从 manager 目录里最近一个完整的检查点接着训练：返回 (下一步的步数, 训练状态)。状态按
    fresh_state 的形状、dtype 和分片恢复（abstract_of）；目录里还没有检查点时返回
    (0, fresh_state)。约 5 行。
    Go on from the latest complete checkpoint in the manager's directory: return (the next
    step's number, the train state). Restore the state against fresh_state's shapes, dtypes and
    shardings (abstract_of); with no checkpoint there yet, return (0, fresh_state). About 5
    lines.
    """
    step = manager.latest_step()
    if step is None:
        return 0, fresh_state
    restored = manager.restore(step, args=ocp.args.StandardRestore(abstract_of(fresh_state)))
    return step + 1, restored


def test_resume_from_the_latest_checkpoint_after_a_crash(tmp_path):
    """⚠️ 陷阱 / trap：被抢占的任务留下的最新目录可能只是一个没提交完的临时目录；
    latest_step 只数完整的检查点。从那里恢复整个训练状态（参数、Adam 状态、随机数 key、数据
    位置），接着训练到第 10 步，结果和一次没被打断的训练逐位相同。
    ⚠️ trap: the newest directory a preempted job leaves may be an uncommitted temporary one;
    latest_step counts complete checkpoints only. Restore the whole train state from there
    (parameters, Adam state, random key, data position), train on to step 10, and the result
    equals an uninterrupted run bit for bit.
    """
    t = training()
    uninterrupted = [t["init_state"]()]
    for _ in range(10):
        uninterrupted.append(t["train_step"](uninterrupted[-1]))

    fresh = ocp.CheckpointManager(tmp_path / "fresh")
    first, state = resume(fresh, t["init_state"]())
    assert first == 0
    np.testing.assert_array_equal(state["params"]["w"], np.zeros(3))

    job = tmp_path / "job"
    run_python("-c", PREEMPTED_JOB, str(job), "6")
    assert sorted(p.name for p in job.iterdir()) == ["2", "4", "6.orbax-checkpoint-tmp"]
    manager = ocp.CheckpointManager(job)
    first, state = resume(manager, t["init_state"]())
    assert first == 5
    # The checkpoint of step 4 holds the state after 5 train steps.
    for got, want in zip(jax.tree.leaves(state), jax.tree.leaves(uninterrupted[5]), strict=True):
        np.testing.assert_array_equal(got, want)
    for _ in range(first, 10):
        state = t["train_step"](state)
    for got, want in zip(jax.tree.leaves(state), jax.tree.leaves(uninterrupted[10]), strict=True):
        np.testing.assert_array_equal(got, want)
    manager.close()


def onto_mesh(abstract, mesh, specs):
    """恢复目标：abstract（一棵 jax.ShapeDtypeStruct 树，保存时的形状和 dtype）里的每个数组，换成
    同形状、同 dtype、分片为 NamedSharding(mesh, specs 里对应的规格) 的 jax.ShapeDtypeStruct。
    约 3 行。
    A restore target: every array of abstract (a tree of jax.ShapeDtypeStruct, the shapes and
    dtypes as saved) becomes a jax.ShapeDtypeStruct of the same shape and dtype, sharded
    NamedSharding(mesh, the matching spec of specs). About 3 lines.
    """

    def one(struct, spec):
        return jax.ShapeDtypeStruct(struct.shape, struct.dtype, sharding=NamedSharding(mesh, spec))

    return jax.tree.map(one, abstract, specs)


def test_restore_onto_another_mesh(tmp_path):
    """检查点存的是整个数组和它的形状，不是设备的布局：在 8 个设备的一维 FSDP 网格上保存的参数，
    可以恢复到 4 × 2（或 2 × 4）的数据 × 模型网格上、按另一种规格分片，只要恢复目标带上新的分片；
    每个设备只读自己那一块，每个数组保持保存时的 dtype。不给目标时，Orbax 按保存时的分片恢复。
    A checkpoint holds whole arrays and their shapes, not the devices' layout: parameters saved
    on an 8-device 1-D FSDP mesh restore onto a 4 × 2 (or 2 × 4) data × model mesh with another
    spec, as long as the restore target carries the new sharding; each device reads only its
    block, and every array keeps the dtype it was saved with. Without a target Orbax restores the
    sharding the arrays were saved with.
    """
    old_mesh = jax.make_mesh((8,), ("fsdp",), axis_types=(AxisType.Auto,))
    saved = {
        "kernel": jnp.arange(64 * 32, dtype=jnp.float32).reshape(64, 32),
        "bias": jnp.arange(32, dtype=jnp.float32),
        "seen": jnp.arange(8, dtype=jnp.int32),  # keeps its dtype / 保持 dtype
    }
    saved = jax.device_put(saved, NamedSharding(old_mesh, P("fsdp")))
    manager = ocp.CheckpointManager(tmp_path)
    manager.save(0, args=ocp.args.StandardSave(saved))
    manager.wait_until_finished()

    specs = {"kernel": P(None, "model"), "bias": P("model"), "seen": P("data")}
    abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), saved)
    for shape in ((4, 2), (2, 4)):  # whichever mesh the target names / 目标说哪个网格就是哪个
        new_mesh = jax.make_mesh(shape, ("data", "model"), axis_types=(AxisType.Auto,) * 2)
        restored = manager.restore(
            0, args=ocp.args.StandardRestore(onto_mesh(abstract, new_mesh, specs))
        )
        for name, spec in specs.items():
            np.testing.assert_array_equal(restored[name], saved[name])
            assert restored[name].dtype == saved[name].dtype
            assert restored[name].sharding == NamedSharding(new_mesh, spec)
        blocks = {s.data.shape for s in restored["kernel"].addressable_shards}
        assert blocks == {(64, 32 // shape[1])}
    as_saved = manager.restore(0)["kernel"]
    assert as_saved.sharding.mesh.shape == {"fsdp": 8}
    manager.close()


class Regressor(nnx.Module):
    """An NNX model whose state is more than parameters: Dropout keeps its own RNG stream (given)."""

    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(3, 16, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)
        self.out = nnx.Linear(16, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(self.drop(jax.nn.relu(self.hidden(x))))


def new_model_and_optimizer(seed):
    """A freshly initialised model and its Adam optimizer (given)."""
    model = Regressor(nnx.Rngs(seed, dropout=seed + 1))
    return model, nnx.Optimizer(model, optax.adam(0.01), wrt=nnx.Param)


@nnx.jit
def nnx_train_step(model, opt, x, y):
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    opt.update(model, grads)
    return loss


def batch_at(position, size=4):
    """The batch of `size` examples starting at `position` of a fixed data set (given)."""
    x = jax.random.normal(jax.random.key(0), (64, 3))
    y = x @ jnp.array([[1.0], [-2.0], [0.5]])
    return x[position : position + size], y[position : position + size]


def save_nnx_train_state(manager, step, model, opt, data_position):
    """用 manager 在第 step 步保存整个 NNX 训练状态，分成两项（ocp.args.Composite）：state 项是
    {"model": nnx.state(model), "optimizer": nnx.state(opt)}（数组，StandardSave），data 项是
    {"position": data_position}（一个 Python 整数，JsonSave）。返回 manager.save 的返回值。
    约 5 行。
    Save the whole NNX train state with manager at step `step`, as two items
    (ocp.args.Composite): a state item {"model": nnx.state(model), "optimizer": nnx.state(opt)}
    (arrays, StandardSave) and a data item {"position": data_position} (a Python int, JsonSave).
    Return what manager.save returns. About 5 lines.
    """
    arrays = {"model": nnx.state(model), "optimizer": nnx.state(opt)}
    return manager.save(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardSave(arrays),
            data=ocp.args.JsonSave({"position": data_position}),
        ),
    )


def restore_nnx_train_state(manager, model, opt):
    """把 manager 里最近一步的检查点写回 model 和 opt（新建的对象，原地更新：nnx.update），返回
    (下一步的步数, 数据位置)。state 项按 model 和 opt 现在的状态恢复（abstract_of），data 项用
    JsonRestore。约 8 行。
    Write the manager's latest checkpoint back into model and opt (freshly built objects,
    updated in place: nnx.update) and return (the next step's number, the data position).
    Restore the state item against model's and opt's current state (abstract_of), the data item
    with JsonRestore. About 8 lines.
    """
    step = manager.latest_step()
    target = abstract_of({"model": nnx.state(model), "optimizer": nnx.state(opt)})
    restored = manager.restore(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardRestore(target), data=ocp.args.JsonRestore()
        ),
    )
    nnx.update(model, restored.state["model"])
    nnx.update(opt, restored.state["optimizer"])
    return step + 1, restored.data["position"]


def test_an_nnx_train_state_with_its_rng_and_data_position(tmp_path):
    """NNX 的训练状态分在几个对象里：参数和 Dropout 的随机数流（一个 key 和一个计数）在模型里，
    Adam 的矩和步数在 nnx.Optimizer 里，读到哪条数据在数据管道里（一个整数，存成 JSON）。
    都存下来，从第 3 步的检查点接着训练，和没停过的训练逐位相同；漏掉任何一样都不同。
    An NNX train state lives in several objects: the parameters and Dropout's random stream (a
    key and a count) in the model, Adam's moments and step count in the nnx.Optimizer, the
    position in the data in the input pipeline (an int, saved as JSON). Save them all, go on from
    step 3's checkpoint, and the run equals one that never stopped, bit for bit; leave any of
    them out and it does not.
    """
    model, opt = new_model_and_optimizer(0)
    options = ocp.CheckpointManagerOptions(save_interval_steps=3)
    manager = ocp.CheckpointManager(tmp_path, options=options)
    position, losses = 0, []
    for step in range(10):
        losses.append(float(nnx_train_step(model, opt, *batch_at(position))))
        position = (position + 4) % 64
        if step < 5:  # the job stops after step 5; the later steps are the uninterrupted run
            save_nnx_train_state(manager, step, model, opt, position)
    manager.wait_until_finished()
    manager.close()
    uninterrupted = nnx.state(model, nnx.Param)
    assert {p.name for p in (tmp_path / "3").iterdir()} >= {"state", "data"}  # one per item

    model, opt = new_model_and_optimizer(42)  # another initialisation and dropout stream
    manager = ocp.CheckpointManager(tmp_path)
    first, position = restore_nnx_train_state(manager, model, opt)
    manager.close()
    assert (first, position, int(opt.step[...])) == (4, 16, 4)
    assert int(model.drop.rngs.count[...]) == 4  # four dropout masks drawn so far
    resumed = []
    for _ in range(first, 10):
        resumed.append(float(nnx_train_step(model, opt, *batch_at(position))))
        position = (position + 4) % 64
    assert resumed == losses[first:]
    for got, want in zip(
        jax.tree.leaves(nnx.state(model, nnx.Param)), jax.tree.leaves(uninterrupted), strict=True
    ):
        np.testing.assert_array_equal(got, want)

    # 数据位置是数据管道记下的、读回来的，不是从步数推出来的 / the data position is the one the
    # pipeline recorded, read back, not worked out from the step number
    elsewhere = ocp.CheckpointManager(tmp_path / "elsewhere")
    save_nnx_train_state(elsewhere, 7, model, opt, 50)
    elsewhere.wait_until_finished()
    assert restore_nnx_train_state(elsewhere, *new_model_and_optimizer(1)) == (8, 50)
    elsewhere.close()
