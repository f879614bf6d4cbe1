"""01 · vmap 的轴：in_axes 是 pytree 前缀、axis_name 让集合通信在 vmap 里可用 / vmap's axes: in_axes pytrees, named axes."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import primitives


def masked_loss(params, batch):
    """一个样本的掩码平方误差 / one example's masked squared error."""
    pred = batch["x"] @ params["w"] + params["b"]
    return jnp.sum(jnp.where(batch["mask"], (pred - batch["y"]) ** 2, 0.0))


def test_in_axes_is_a_pytree_prefix_of_the_arguments():
    """in_axes 不只是一个整数：它是参数的 pytree 前缀，每个叶子（或一整棵子树）各有自己的批轴，
    None 表示不批处理、原样广播给每个样本。数据来自不同的加载器时，批轴常常不在同一个位置：
    这里 x 的批轴在第 0 轴，y 和 mask 的批轴在第 1 轴，参数对所有样本共用。
    in_axes is not just an int: it is a pytree prefix of the arguments, each leaf (or whole
    subtree) with its own batch axis, and None for "not batched, broadcast to every example".
    Data from different loaders often puts the batch axis in different places: here x is
    batched along axis 0, y and mask along axis 1, and the parameters are shared.
    """
    rng = np.random.default_rng(0)
    params = {"w": jnp.asarray(rng.normal(size=(3, 2)), jnp.float32), "b": jnp.array([0.5, -1.0])}
    batch = {
        "x": jnp.asarray(rng.normal(size=(4, 3)), jnp.float32),  # [B, 3]
        "y": jnp.asarray(rng.normal(size=(2, 4)), jnp.float32),  # [2, B]
        "mask": jnp.array([[True, False, True, True], [True, True, False, True]]),  # [2, B]
    }

    def example(b):
        return {"x": batch["x"][b], "y": batch["y"][:, b], "mask": batch["mask"][:, b]}

    expected = [float(masked_loss(params, example(b))) for b in range(4)]

    per_example = jax.vmap(masked_loss, in_axes=__)(params, batch)
    np.testing.assert_allclose(per_example, expected, rtol=1e-6)

    with raises_exactly(ValueError) as info:  # one int for the whole batch dict: y has no axis 0 of size 4
        jax.vmap(masked_loss, in_axes=(None, 0))(params, batch)
    assert "inconsistent sizes for array axes to be mapped" in str(info.value)


def standardize(x):
    """在 jax.vmap(standardize, axis_name="batch") 下调用：x 是一个样本 [F]，返回它在整批上逐特征
    标准化的结果 (x - 批均值) / sqrt(批方差 + 1e-5)（方差是总体方差，除以批大小）。
    - 函数只看得到一个样本：整批的统计量要靠名为 "batch" 的轴上的集合通信（lax.p*）。
    - 方差为 0 的特征给出 0，不是 NaN。大约 3 行。
    Called under jax.vmap(standardize, axis_name="batch"): x is one example [F]; return it
    standardized per feature over the whole batch, (x - batch mean) / sqrt(batch variance +
    1e-5) (the population variance, divided by the batch size).
    - The function sees one example only: the batch statistics come from collectives (lax.p*)
      over the axis named "batch".
    - A feature with zero variance gives 0, not NaN. About 3 lines.
    """
    todo("standardize: batch statistics by collectives over the named axis / 命名轴上的集合通信")


def test_write_a_batch_norm_with_a_named_vmap_axis():
    """✍️ 实现 standardize：vmap 的 axis_name 给被映射的轴起名，函数内部就能对整批做 psum、pmean、
    all_gather——与第 03 章在设备之间用的是同一套集合通信，只是这里的“设备”是批里的样本。
    在 vmap 下它们变成沿批轴的归约；离开 vmap，这个名字就没有绑定。嵌套 vmap 时，
    只有带这个名字的那一层被归约。
    Write standardize: vmap's axis_name names the mapped axis, so the function can psum, pmean
    or all_gather over the batch, the same collectives chapter 03 uses across devices, with
    the examples of a batch as the "devices". Under vmap they become reductions along the batch
    axis; outside vmap the name is unbound. With nested vmaps only the named level is reduced.
    """

    def reference(xs):
        xs = np.asarray(xs, np.float64)
        return (xs - xs.mean(axis=0)) / np.sqrt(xs.var(axis=0) + 1e-5)

    xs = jnp.stack([jnp.arange(5.0) ** 1.5, jnp.full(5, 2.0), jnp.sin(jnp.arange(5.0))], axis=1)
    batch_norm = jax.jit(jax.vmap(standardize, axis_name="batch"))
    np.testing.assert_allclose(batch_norm(xs), reference(xs), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(batch_norm(xs[:3]), reference(xs[:3]), rtol=1e-5, atol=1e-6)
    over_batch = jax.make_jaxpr(standardize, axis_env=[("batch", 5)])(xs[0])  # one example
    assert primitives(over_batch) & {"psum", "all_gather"}  # a collective over the batch

    groups = jnp.stack([xs[:4], xs[1:] * 2.0])  # [groups, batch, F]: normalise within each group
    per_group = jax.vmap(jax.vmap(standardize, axis_name="batch"))(groups)
    np.testing.assert_allclose(per_group[1], reference(groups[1]), rtol=1e-5, atol=1e-6)

    with raises_exactly(NameError):  # no vmap, no axis called "batch"
        standardize(xs[0])
