"""08 · 综合一：只活在梯度程序里的错 / capstone one: a fault that lives only in the gradient program.

一个二维输出的回归，用小批量梯度下降训练，数据是按种子生成的一串小批量。损失是每一行预测误差的
欧氏长度，带一个容差：绝对值不超过 EPS 的误差分量算作 0（jnp.where）。生产环境在 checkify 的
浮点检查之下跑每一步（它的 NaN 守卫）：程序里任何地方有一项浮点检查不过，任务就中止。在种子 5 的
数据上它在某一步中止了，可它返回过的每个损失、梯度和参数都是有限的数：对每一行的梯度查 isnan、
每一步打印 isfinite、关掉 jit 打印损失的每个中间值，都找不到它。出事的值只活在梯度程序里面，
从来不是输出。哪一步、哪一行、checkify 说了什么？要用工具：checkify 的浮点检查放在按行的 vmap
里面。生产环境里跑的那一版损失留在 loss_v1 里给事后分析用；`# ✍️ BEGIN` 与 `# ✍️ END` 之间是它
的一份副本 loss_fn，由你修好。第一个测试要你预测工具的报告，其余测试钉住症状。只修改标记之间的
代码。

Regression with two outputs, trained by mini-batch gradient descent on a stream of mini-batches
generated from a seed. The loss is the Euclidean length of each row's prediction error, with a
tolerance: error components within EPS of zero count as 0 (jnp.where). Production runs every
step under checkify's float checks, its NaN guard: a float check failing anywhere in the
program aborts the job. On seed 5's data it aborted at some step, yet every loss, gradient and
parameter it ever returned is a finite number: isnan on every row's gradient, isfinite printed
at every step, and every intermediate of the loss printed with jit switched off all miss it.
The value at fault lives only inside the gradient program and is never an output. Which step,
which row, and what does checkify say? Use the tool: checkify's float checks inside a vmap over
the rows. The loss as it ran in production stays in loss_v1 for the post-mortem; between
`# ✍️ BEGIN` and `# ✍️ END` is a copy of it, loss_fn, for you to repair. The first test asks
you to predict the tool's report; the others pin the symptoms. Change only the code between
the markers.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from jaxkoans import __  # noqa: F401  (the koans' blanks)

B, D, OUT, STEPS, LR, EPS = 32, 3, 2, 12, 0.5, 0.05
# 生产环境的守卫，在标记之前取好 / production's guard, taken before the markers
GUARD, FLOAT_CHECKS = checkify.checkify, checkify.float_checks


def loss_v1(params, x, y):
    """生产环境里跑的那一版：每一行误差（容差以内的分量算作 0）的欧氏长度的平均。
    The version that ran in production: the mean Euclidean length of each row's error, the
    components within the tolerance counted as 0."""
    e = x @ params["w"] + params["b"] - y
    e = jnp.where(jnp.abs(e) > EPS, e, 0.0)  # within the tolerance counts as exact / 容差以内算准
    return jnp.mean(jnp.sqrt(jnp.sum(e**2, axis=1)))


# ✍️ BEGIN
def loss_fn(params, x, y):
    """每一行误差（容差以内的分量算作 0）的欧氏长度的平均。
    The mean Euclidean length of each row's error, the components within the tolerance
    counted as 0."""
    e = x @ params["w"] + params["b"] - y
    e = jnp.where(jnp.abs(e) > EPS, e, 0.0)  # within the tolerance counts as exact / 容差以内算准
    return jnp.mean(jnp.sqrt(jnp.sum(e**2, axis=1)))


# ✍️ END


def make_stream(seed=5):
    """STEPS 个小批量 (x (B, D), y (B, OUT))（NumPy），由种子生成。
    STEPS mini-batches (x (B, D), y (B, OUT)) as NumPy, generated from the seed."""
    rng = np.random.default_rng(seed)
    w_true = np.array([[1.0, -0.5], [0.5, 2.0], [-1.0, 0.3]])
    stream = []
    for _ in range(STEPS):
        x = rng.normal(size=(B, D)).astype(np.float32)
        y = (x @ w_true + 0.03 * rng.normal(size=(B, OUT))).astype(np.float32)
        stream.append((x, y))
    return stream


def start():
    return {"w": jnp.zeros((D, OUT)), "b": jnp.zeros(OUT)}


def train(loss, stream):
    """生产环境的训练：从零开始，每个小批量一步梯度下降（学习率 LR），每一步都在 checkify 的
    浮点检查之下算损失和梯度，检查不过就抛出（err.throw()）。返回 (参数, 每一步之前的损失)。
    Production's training: from zero, one gradient step (rate LR) per mini-batch, the loss and
    gradient of every step computed under checkify's float checks, and a failed check raised
    (err.throw()). Returns (params, the loss before every step)."""
    step = jax.jit(GUARD(jax.value_and_grad(loss), errors=FLOAT_CHECKS))
    params, losses = start(), []
    for x, y in stream:
        err, (value, grads) = step(params, x, y)
        err.throw()
        params = jax.tree.map(lambda p, g: p - LR * g, params, grads)
        losses.append(value)
    return params, jnp.stack(losses)


def numpy_reference(stream):
    """同一个训练，用 float64 的 NumPy 写：一行的梯度是 e / |e|（e 为零向量的行是 0）。
    The same training in float64 NumPy: a row's gradient is e / |e| (0 for a row whose e is
    the zero vector)."""
    w, b, losses = np.zeros((D, OUT)), np.zeros(OUT), []
    for x, y in stream:
        x, y = x.astype(np.float64), y.astype(np.float64)
        e = x @ w + b - y
        e = np.where(np.abs(e) > EPS, e, 0.0)
        length = np.sqrt((e**2).sum(axis=1))
        losses.append(length.mean())
        r = e / np.where(length > 0, length, 1.0)[:, None]
        w, b = w - LR * x.T @ r / len(y), b - LR * r.mean(axis=0)
    return w, b, np.array(losses)


def test_checkify_names_the_step_row_and_fault():
    """先诊断，再修。测试拿 loss_v1 训练种子 5 的数据，每一步之前用 checkify 的浮点检查、按行
    vmap 检查这一批每一行的梯度，也看 isnan 会看到的东西：这些梯度本身是不是都是有限的数。预测：
    checkify 第一次报告是在第几步（从 0 数起）、这一批的第几行，它说了什么（消息里
    "at mapped index N: " 后面的那句，去掉句末的点）？那一步每一行的梯度都是有限的吗？读代码说不出
    这些：要自己跑工具。
    Diagnose first, then repair. The test trains loss_v1 on seed 5's data and, before every
    step, checks the gradient of every row of the batch with checkify's float checks, vmapped
    over the rows, and looks at what isnan would see: whether those gradients are all finite.
    Predict: at which step (from 0) does checkify first report, in which row of that batch, and
    what does it say (the words after "at mapped index N: " in its message, without the final
    full stop)? Are all the row gradients of that step finite? Reading cannot tell: run the tool
    yourself.
    """

    def row_grad(params, x, y):
        return jax.grad(loss_v1)(params, x[None], y[None])

    checked = checkify.checkify(row_grad, errors=checkify.float_checks)
    check, grad = jax.jit(jax.vmap(checked, (None, 0, 0))), jax.jit(jax.grad(loss_v1))
    params, report, finite = start(), None, None
    for k, (x, y) in enumerate(make_stream()):
        err, row_grads = check(params, x, y)
        if err.get() is not None:
            found = re.search(r"mapped index (\d+): ([^\n]*)", err.get())
            report = (k, int(found[1]), found[2].rstrip("."))
            finite = all(bool(jnp.isfinite(g).all()) for g in jax.tree.leaves(row_grads))
            break
        grads = grad(params, x, y)
        params = jax.tree.map(lambda p, g: p - LR * g, params, grads)
    assert report == (__, __, __)
    assert finite is __


def test_the_guard_passes_a_row_inside_the_tolerance():
    """症状一：一行的误差整个落在容差以内时，它的损失和梯度都是 0，另一行的梯度是 e / |e|，全是
    有限的数；可生产环境的守卫（checkify 的浮点检查）照样拦下这一步。修好之后守卫什么也不报，
    损失和梯度不变。
    Symptom one: when a row's error lies wholly within the tolerance, its loss and gradient are
    0 and the other row's gradient is e / |e|, all finite numbers; yet production's guard
    (checkify's float checks) stops the step. Once repaired the guard reports nothing, and the
    loss and gradient are unchanged. 一批全在容差以内时损失恰好是 0.0（根号下不加 eps）。
    A batch wholly within the tolerance has a loss of exactly 0.0 (no eps under the root).
    """
    x = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    y = jnp.zeros((2, OUT))
    params = {"w": jnp.array([[0.01, -0.02], [3.0, 4.0], [0.0, 0.0]]), "b": jnp.zeros(OUT)}
    guarded = jax.jit(GUARD(jax.value_and_grad(loss_fn), errors=FLOAT_CHECKS))
    err, (loss, grads) = guarded(params, x, y)
    print(f"loss {loss}; gradients {grads}; the guard says {err.get()}")
    np.testing.assert_allclose(loss, 2.5, rtol=1e-6)  # row 0: 0, row 1: |(3, 4)| = 5
    np.testing.assert_allclose(grads["w"], [[0, 0], [0.3, 0.4], [0, 0]], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grads["b"], [0.3, 0.4], rtol=1e-6)
    assert err.get() is None
    exact = {"w": jnp.zeros((D, OUT)), "b": jnp.zeros(OUT)}  # every row's error is 0
    err, (loss, grads) = guarded(exact, x, y)
    assert float(loss) == 0.0 and err.get() is None  # exactly 0, not the root of an eps
    assert not any(np.asarray(g).any() for g in jax.tree.leaves(grads))


def test_training_matches_the_numpy_reference():
    """症状二：种子 5 的数据上，生产环境的训练（每一步都在守卫之下）中途中止。修好之后它跑完全部
    STEPS 步，每一步的损失和最后的参数与 NumPy 参考实现一致。
    Symptom two: on seed 5's data production's training (every step under the guard) aborts
    halfway. Once repaired it runs all STEPS steps, and every step's loss and the final
    parameters match the NumPy reference.
    """
    stream = make_stream()
    params, losses = train(loss_fn, stream)
    print(f"losses {np.asarray(losses)}; w {np.asarray(params['w'])}")
    w, b, ref_losses = numpy_reference(stream)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    np.testing.assert_allclose(params["w"], w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(params["b"], b, rtol=1e-4, atol=1e-5)
