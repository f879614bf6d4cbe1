"""08 · 综合：修好一个训练脚本 / capstone: fix a training script.

下面 `# ✍️ BEGIN` 与 `# ✍️ END` 之间是一个用纯 JAX 写的逻辑回归训练脚本（全批量梯度下降）。
它藏着三个 bug：跑起来不报错，却学不到东西。每个测试钉住一个症状，并在失败时把症状打印出来
（pytest 输出里的 "Captured stdout call"）；用本章的工具（debug.print、debug_nans /
debug_infs / checkify、读 jaxpr）找到病根，只修改标记之间的代码。最后一个测试把训练结果与
一个纯 NumPy 的参考实现逐数比较。

Between `# ✍️ BEGIN` and `# ✍️ END` below is a logistic-regression training script in plain
JAX (full-batch gradient descent). It hides three bugs: it runs without an error and learns
nothing. Each test pins one symptom and prints it when it fails (pytest's "Captured stdout
call"); use this chapter's tools (debug.print, debug_nans / debug_infs / checkify, reading the
jaxpr) to find the cause, and change only the code between the markers. The last test
compares the training result number by number with a plain NumPy reference.
"""

import jax
import jax.numpy as jnp
import numpy as np


# ✍️ BEGIN
def standardize(x):
    """每个特征（列）减去均值、除以标准差。Each feature (column) to mean 0 and std 1."""
    return (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True)


def loss_fn(params, x, y):
    """逻辑模型的平均二元交叉熵。The logistic model's mean binary cross-entropy."""
    logits = x @ params["w"] + params["b"]
    p = jax.nn.sigmoid(logits)
    return -jnp.mean(y * jnp.log(p) + (1 - y) * jnp.log(1 - p))


@jax.jit
def gd_step(params, x, y, lr):
    """一步梯度下降，返回 (新参数, 这一步之前的损失)。One step: (new params, loss before it)."""
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    params = jax.tree.map(lambda p, g: p - lr * g, params, grads)
    return params, loss


def train(x, y, steps, lr):
    """标准化特征后从零开始训练；返回 (参数, 每一步的损失)。
    Standardises the features and trains from zero; returns (params, the loss of every step).
    """
    x = standardize(x)
    params = {"w": jnp.zeros(x.shape[1]), "b": jnp.zeros(())}
    losses = []
    for _ in range(steps):
        new_params, loss = gd_step(params, x, y, lr)
        losses.append(loss)
    return params, jnp.stack(losses)


# ✍️ END


def make_data(n=64):
    """特征的尺度相差很大（1、100、0.01）；标签由一个线性规则加噪声给出。
    Features on very different scales (1, 100, 0.01); labels from a noisy linear rule.
    """
    rng = np.random.default_rng(0)
    z = rng.normal(size=(n, 3))
    x = (z * np.array([1.0, 100.0, 0.01]) + np.array([0.0, 500.0, 0.0])).astype(np.float32)
    y = (z @ np.array([1.5, -2.0, 1.0]) + 0.5 * rng.normal(size=n) > 0).astype(np.float32)
    return x, y


def numpy_reference(x, y, steps, lr):
    """同一个算法的纯 NumPy（float64）实现：标准化、解析梯度、梯度下降。
    The same algorithm in plain NumPy (float64): standardise, analytic gradient, descent.
    """
    x = np.asarray(x, np.float64)
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    w, b, losses = np.zeros(x.shape[1]), 0.0, []
    for _ in range(steps):
        z = x @ w + b
        losses.append(np.mean(np.logaddexp(0.0, z) - y * z))  # stable cross-entropy
        r = 1.0 / (1.0 + np.exp(-z)) - y  # dL/dz · n
        w, b = w - lr * x.T @ r / len(y), b - lr * r.mean()
    return w, b, np.array(losses)


def refusing_the_reference(monkeypatch):
    """train 运行期间，numpy_reference 一被调用就报错：训练要自己做，不能交给参考实现。
    While train runs, calling numpy_reference fails: train must do the training itself.
    """

    def refuse(*args, **kwargs):
        raise AssertionError("train called numpy_reference / train 调用了参考实现")

    monkeypatch.setitem(globals(), "numpy_reference", refuse)


def test_standardized_features_have_zero_mean_and_unit_std():
    """症状一：标准化之后，每一列（每个特征）的均值应为 0、标准差应为 1。
    Symptom one: after standardisation every column (every feature) has mean 0 and std 1.
    """
    x, _ = make_data()
    s = np.asarray(standardize(jnp.asarray(x)))
    print(f"shape {s.shape}; column means {s.mean(axis=0)}; column stds {s.std(axis=0)}")
    assert s.shape == x.shape
    np.testing.assert_allclose(s.mean(axis=0), 0.0, atol=1e-4)
    np.testing.assert_allclose(s.std(axis=0), 1.0, rtol=1e-4)


def test_loss_stays_finite_for_confident_predictions():
    """症状二：模型很自信时（|logit| 很大）损失和梯度不再是有限的数。哪个原语先出的问题？
    Symptom two: when the model is confident (a large |logit|) the loss and the gradient are no
    longer finite numbers. Which primitive goes wrong first?
    """
    x = jnp.array([[1.0], [-1.0], [1.0]])
    y = jnp.array([1.0, 0.0, 0.0])  # the third example is confidently wrong
    params = {"w": jnp.array([40.0]), "b": jnp.array(0.0)}
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    print(f"loss {loss}; gradients {grads}")
    z = np.array([40.0, -40.0, 40.0])
    expected = np.mean(np.logaddexp(0.0, z) - np.asarray(y) * z)
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
    assert all(bool(jnp.isfinite(g).all()) for g in jax.tree.leaves(grads))


def test_training_lowers_the_loss(monkeypatch):
    """症状三：损失一动不动。每一步的损失都应该比上一步低，而且最后远低于 log 2（全零参数的损失）。
    Symptom three: the loss never moves. Every step's loss should be below the previous one,
    and the last far below log 2 (the loss of all-zero parameters).
    """
    x, y = make_data()
    refusing_the_reference(monkeypatch)
    _, losses = train(jnp.asarray(x), jnp.asarray(y), steps=30, lr=0.5)
    losses = np.asarray(losses)
    print(f"losses of the 30 steps: {losses}")
    np.testing.assert_allclose(losses[0], np.log(2.0), rtol=1e-5)
    assert np.all(np.diff(losses) < 0)
    assert losses[-1] < 0.5 * losses[0]


def test_training_matches_the_numpy_reference(monkeypatch):
    """三个 bug 都修好后，JAX 的训练结果（参数和每一步的损失）与 NumPy 参考实现一致。
    With all three bugs fixed, JAX's training (the parameters and every step's loss) matches the
    NumPy reference.
    """
    x, y = make_data()
    refusing_the_reference(monkeypatch)
    params, losses = train(jnp.asarray(x), jnp.asarray(y), steps=30, lr=0.5)
    monkeypatch.undo()
    w, b, ref_losses = numpy_reference(x, y, steps=30, lr=0.5)
    print(f"JAX w {np.asarray(params['w'])}, b {float(params['b'])}; NumPy w {w}, b {b}")
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    np.testing.assert_allclose(params["w"], w, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(params["b"], b, rtol=1e-3, atol=1e-4)
