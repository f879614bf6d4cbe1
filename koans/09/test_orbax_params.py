"""09 · 参数交给 Orbax / the parameters, with Orbax.

部署时把两样东西分开存：参数（一个 pytree）交给 Orbax，程序交给 `jax.export`。
本文件讲参数这一半：恢复时给出的“目标”树决定了你拿回来的是什么。
A deployment stores two things apart: the parameters (a pytree) go to Orbax, the program to
`jax.export`. This file covers the parameters: the target tree you restore against decides
what you get back.
"""

import shutil

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------


def make_params():
    """一个小 MLP 的参数 / the parameters of a small MLP."""
    rng = np.random.default_rng(0)
    return {
        "dense": {
            "w": jnp.asarray(rng.normal(size=(3, 4)), jnp.float32),
            "b": jnp.asarray(rng.normal(size=4), jnp.float32),
        },
        "step": jnp.asarray(7, jnp.int32),
    }


def save(path, tree):
    """保存并等待异步写入结束 / save and wait for the asynchronous write to finish."""
    ckpt = ocp.StandardCheckpointer()
    ckpt.save(path, tree)
    ckpt.wait_until_finished()
    ckpt.close()


def restore(path, target=None):
    ckpt = ocp.StandardCheckpointer()
    try:
        return ckpt.restore(path, target)
    finally:
        ckpt.close()


class Classifier(nnx.Module):
    """主干加一个输出头；换任务时输出头的类别数会变。
    A backbone and a head; the head's number of classes changes with the task."""

    def __init__(self, classes, rngs):
        self.backbone = nnx.Linear(3, 8, rngs=rngs)
        self.head = nnx.Linear(8, classes, rngs=rngs)

    def __call__(self, x):
        return self.head(jax.nn.relu(self.backbone(x)))


def pure(module):
    """模块参数的纯字典，拷贝成 NumPy / a module's parameters as a pure dict, copied to NumPy."""
    return jax.tree.map(np.array, nnx.to_pure_dict(nnx.state(module)))


# ---- 你来实现 / your code ---------------------------------------------------------------


def restore_backbone(path, model):
    """path 处是 Orbax 存下的 nnx.to_pure_dict(nnx.state(旧模型))，旧模型的输出头类别数和 model
    的不同；旧输出头的文件可能根本不在。把检查点里的 "backbone" 原地恢复进 model，model 的输出头
    保持初始化时的样子。做法：从 model 的状态做一棵只有 "backbone" 的抽象目标树，用
    ocp.PyTreeCheckpointer 和一个只恢复一部分的 ocp.args.PyTreeRestore（上一个 koan 的写法）恢复
    （restore_args 由 ocp.checkpoint_utils.construct_restore_args(目标) 给出），再用
    nnx.replace_by_pure_dict 和 nnx.update 写回 model。不返回值。大约 12 行。

    At path is nnx.to_pure_dict(nnx.state(an old model)) saved by Orbax; the old model's head
    has another number of classes than model's, and its files may not be there at all. Restore
    the checkpoint's
    "backbone" into model in place and keep model's head as initialised. The way: build an
    abstract target holding only "backbone" from model's state, restore it with
    ocp.PyTreeCheckpointer and a partial ocp.args.PyTreeRestore (as in the koan before; the
    restore_args from ocp.checkpoint_utils.construct_restore_args(target)), then write it back into model
    with nnx.replace_by_pure_dict and nnx.update. Return nothing. About 12 lines.
    """
    todo("restore_backbone: a backbone-only target, a partial restore, nnx.update")


# ---- 练习 / koans ----------------------------------------------------------------------


def test_restore_against_an_abstract_target(tmp_path):
    """恢复时不必先造一份真实参数：一棵只有形状和 dtype 的抽象树（叶子是 jax.ShapeDtypeStruct）
    就是目标。推理服务里常这样做——它不想为了“知道形状”而先初始化一遍模型。
    Restoring needs no real parameters: an abstract tree whose leaves are jax.ShapeDtypeStruct
    (shape and dtype only) is the target. Inference servers do this, so that they need not
    initialise a model just to learn its shapes.
    """
    params = make_params()
    save(tmp_path / "params", params)

    abstract = jax.tree.map(__, params)
    assert all(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in jax.tree.leaves(abstract))
    restored = restore(tmp_path / "params", abstract)
    assert jax.tree.structure(restored) == jax.tree.structure(params)
    jax.tree.map(np.testing.assert_array_equal, restored, params)


def test_the_target_decides_dtype_and_array_type(tmp_path):
    """目标树的每个叶子决定恢复结果：ShapeDtypeStruct 的 dtype 会让 Orbax 在读取时转换类型，
    NumPy 数组作叶子则拿回 NumPy 数组（而不是 jax.Array）。
    Each leaf of the target decides what comes back: a ShapeDtypeStruct's dtype makes Orbax
    cast while reading, and a NumPy leaf gives back a NumPy array (not a jax.Array).
    """
    params = make_params()
    save(tmp_path / "params", params)
    target = {
        "dense": {
            "w": jax.ShapeDtypeStruct((3, 4), jnp.bfloat16),
            "b": np.zeros(4, np.float32),
        },
        "step": jax.ShapeDtypeStruct((), jnp.int32),
    }
    restored = restore(tmp_path / "params", target)
    assert restored["dense"]["w"].dtype == __
    assert type(restored["dense"]["b"]) is __
    assert int(restored["step"]) == 7
    np.testing.assert_allclose(
        np.asarray(restored["dense"]["w"], np.float32), params["dense"]["w"], rtol=1e-2
    )


def test_a_target_that_does_not_match_the_checkpoint_raises(tmp_path):
    """⚠️ 陷阱 / trap：默认设置下（StandardCheckpointer.restore 的 strict=True，
    PyTreeRestore 的 partial_restore=False），目标与磁盘上的树不一致时 Orbax 不截断、不补零，
    也不只恢复一部分：形状不同、键不同都直接报错。模型代码改了形状，旧检查点就加载不进来，
    除非你明确要求（见下一个 koan）。
    ⚠️ trap: with the defaults (strict=True for StandardCheckpointer.restore,
    partial_restore=False for PyTreeRestore), a target that disagrees with the tree on disk is
    neither truncated nor padded nor restored in part: a different shape or a different set of
    keys is an error. Change a shape in the model and the old checkpoint no longer loads,
    unless you ask for it (next koan).
    """
    params = make_params()
    save(tmp_path / "kernel", {"w": params["dense"]["w"]})  # a (3, 4) kernel on disk
    with raises_exactly(__) as info:
        restore(tmp_path / "kernel", {"w": jax.ShapeDtypeStruct((4, 3), jnp.float32)})
    assert "not compatible with the stored shape" in str(info.value)

    save(tmp_path / "params", params)
    only_dense = {  # "step" left out
        "dense": {
            "w": jax.ShapeDtypeStruct((3, 4), jnp.float32),
            "b": jax.ShapeDtypeStruct((4,), jnp.float32),
        }
    }
    with raises_exactly(__) as info:
        restore(tmp_path / "params", only_dense)
    assert "tree structures do not match" in str(info.value)


def test_padding_and_partial_restore_are_opt_in(tmp_path):
    """这两种放宽都要明确打开，而且都是微调时的真实需求：strict=False 让形状不同的叶子按目标
    形状截断或补齐（比如扩大了的词表），PyTreeRestore 在被要求时只恢复目标里有的键（比如只要
    主干、换掉输出头）。补出来的是什么值？部分恢复要怎么写？
    Both relaxations must be asked for, and fine-tuning needs both: strict=False truncates or
    pads a leaf to the target's shape (a grown vocabulary, say), and PyTreeRestore, when asked,
    restores only the keys the target has (keep the backbone, replace the head). What do the padded entries hold? How is a partial restore
    written?
    """
    params = make_params()
    save(tmp_path / "params", params)
    grown = {
        "dense": {
            "w": jax.ShapeDtypeStruct((4, 4), jnp.float32),  # one more row than on disk
            "b": jax.ShapeDtypeStruct((4,), jnp.float32),
        },
        "step": jax.ShapeDtypeStruct((), jnp.int32),
    }
    shrunk = jax.tree.map(lambda s: s, grown)
    shrunk["dense"]["w"] = jax.ShapeDtypeStruct((2, 4), jnp.float32)  # one row fewer
    ckpt = ocp.StandardCheckpointer()
    try:
        padded = ckpt.restore(tmp_path / "params", grown, strict=False)
        truncated = ckpt.restore(tmp_path / "params", shrunk, strict=False)
    finally:
        ckpt.close()
    np.testing.assert_array_equal(truncated["dense"]["w"], params["dense"]["w"][:2])
    np.testing.assert_array_equal(padded["dense"]["w"][:3], params["dense"]["w"])
    assert padded["dense"]["w"][3].tolist() == __

    backbone = {"dense": jax.eval_shape(lambda: params["dense"])}  # shapes and dtypes only
    shardings = ocp.checkpoint_utils.construct_restore_args(backbone)  # as RestoreArgs
    ckpt = ocp.PyTreeCheckpointer()
    try:
        args = ocp.args.PyTreeRestore(__, item=backbone, restore_args=shardings)
        part = ckpt.restore(tmp_path / "params", args=args)
    finally:
        ckpt.close()
    assert jax.tree.structure(part) == jax.tree.structure(backbone)
    jax.tree.map(np.testing.assert_array_equal, part["dense"], params["dense"])


def test_fine_tuning_restores_the_backbone_only(tmp_path):
    """写 restore_backbone：在新任务上微调时，要保留预训练的主干，输出头换成新的，形状也不同。
    按整个模型恢复，默认会被拒绝；strict=False 不报错，却把旧的输出头截断或补齐后塞进新的输出头，
    悄悄地错了。只恢复主干，新的输出头保持初始化的值。部分恢复只读目标里有的数组：不用 OCDBT
    存时每个数组一个目录，删掉旧输出头的目录（比如只拷来了主干），只恢复主干照样成功，而读整个
    检查点会因找不到文件而失败。
    Write restore_backbone: fine-tuning on a new task keeps the pretrained backbone and starts
    a new head of another shape. Restoring the whole model is refused by default; strict=False
    raises nothing but fits the old head into the new one, truncated or padded: silently
    wrong. Restore only the backbone and keep the new head as initialised. A partial restore
    reads only the arrays its target names: saved without OCDBT, each array has a directory of
    its own; with the old head's directories deleted (only the backbone was copied, say),
    restoring the backbone alone still works, where reading the whole checkpoint fails for the
    files it cannot find.
    """
    pretrained = Classifier(2, nnx.Rngs(0))
    save(tmp_path / "pretrained", nnx.to_pure_dict(nnx.state(pretrained)))
    model = Classifier(5, nnx.Rngs(1))
    new_head = pure(model.head)
    whole = jax.eval_shape(lambda: nnx.to_pure_dict(nnx.state(model)))

    ckpt = ocp.StandardCheckpointer()
    try:
        padded = ckpt.restore(tmp_path / "pretrained", whole, strict=False)
    finally:
        ckpt.close()
    np.testing.assert_array_equal(padded["head"]["kernel"][:, :2], pure(pretrained.head)["kernel"])

    restore_backbone(tmp_path / "pretrained", model)
    jax.tree.map(np.testing.assert_array_equal, pure(model.backbone), pure(pretrained.backbone))
    jax.tree.map(np.testing.assert_array_equal, pure(model.head), new_head)
    x = np.random.default_rng(3).normal(size=(4, 3)).astype(np.float32)
    np.testing.assert_allclose(model.backbone(x), pretrained.backbone(x), rtol=1e-6)
    assert model(x).shape == (4, 5)

    apart = ocp.PyTreeCheckpointer(use_ocdbt=False)  # one directory per array / 每个数组一个目录
    try:
        apart.save(tmp_path / "backbone_only", nnx.to_pure_dict(nnx.state(pretrained)))
    finally:
        apart.close()
    heads = sorted((tmp_path / "backbone_only").glob("head.*"))
    assert [d.name for d in heads] == ["head.bias", "head.kernel"]
    for directory in heads:
        shutil.rmtree(directory)  # the old head's files are gone / 旧输出头的文件没了
    other = Classifier(3, nnx.Rngs(2))
    other_head = pure(other.head)
    restore_backbone(tmp_path / "backbone_only", other)
    jax.tree.map(np.testing.assert_array_equal, pure(other.backbone), pure(pretrained.backbone))
    jax.tree.map(np.testing.assert_array_equal, pure(other.head), other_head)
