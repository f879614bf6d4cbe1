"""08 · 综合二：一个分片的训练程序 / capstone two: a sharded training program.

`# ✍️ BEGIN` 与 `# ✍️ END` 之间是一个在 8 个 CPU 设备上做数据并行的线性回归训练（批沿
"data" 轴切开，参数复制到每个设备）。它能跑、不报错，但藏着三个 bug：结果和参考实现对不上，
而且又慢又浪费。每个测试钉住一个症状，并在失败时把症状打印出来（"Captured stdout call"）；
要找到病根，得用本章的工具：数编译次数（jax.log_compiles 或 jaxkoans.api.probes 的
counting_compiles）、debug_nans / debug_infs、读编译后的 HLO（jaxkoans.api.probes.collectives）。
只修改标记之间的代码。

Between `# ✍️ BEGIN` and `# ✍️ END` is data-parallel linear-regression training on 8 CPU
devices (the batch split along the "data" axis, the parameters replicated on every device).
It runs without an error, but it hides three bugs: the result disagrees with the reference,
and it is slow and wasteful. Each test pins one symptom and prints it when it fails
("Captured stdout call"); finding the cause takes this chapter's tools: counting compilations
(jax.log_compiles, or counting_compiles from jaxkoans.api.probes), debug_nans / debug_infs, and
reading the compiled HLO (jaxkoans.api.probes.collectives). Change only the code between the
markers.
"""

from functools import partial  # noqa: F401  (the region may use it)

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans.api.probes import collectives, counting_compiles


def data_mesh():
    """8 个设备排成一维的 "data" 网格（Auto 轴）。/ The 8 devices as a 1-D "data" mesh (Auto)."""
    return jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))


# ✍️ BEGIN
def penalty(w):
    """‖w‖₂，零向量处取 0（它在那里不可导，取 0 作次梯度）。
    The Euclidean norm of w, 0 at the zero vector (not differentiable there; 0 as subgradient).
    """
    squared = jnp.sum(w**2)
    safe = jnp.where(squared > 0, squared, 1.0)
    return jnp.where(squared > 0, jnp.sqrt(safe), 0.0)


def loss_fn(w, x, y):
    """均方误差加一点范数正则。Mean squared error plus a little norm penalty."""
    return jnp.mean((x @ w - y) ** 2) + 0.01 * penalty(w)


def sgd_step(w, x, y, lr):
    """一步梯度下降，返回 (新参数, 这一步之前的损失)。One step: (new params, loss before it)."""
    loss, grad = jax.value_and_grad(loss_fn)(w, x, y)
    return w - lr * grad, loss


def train(x, y, steps, lr):
    """批沿 "data" 切开、参数复制；第 i 步的学习率是 lr / (1 + i)。返回 (参数, 每一步的损失)。
    The batch split along "data", the parameters replicated; step i uses lr / (1 + i).
    Returns (params, the loss of every step).
    """
    mesh = data_mesh()
    rows, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    x, y = jax.device_put(x, rows), jax.device_put(y, rows)
    w = jax.device_put(jnp.zeros(x.shape[1], jnp.float32), replicated)
    step = jax.jit(sgd_step)
    losses = []
    with jax.set_mesh(mesh):
        for i in range(steps):
            w, loss = step(w, x, y, lr / (1 + i))
            losses.append(loss)
    return w, jnp.stack(losses)


# ✍️ END


def make_data(n=64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.1 * rng.normal(size=n)).astype(np.float32)
    return x, y


def numpy_reference(x, y, steps, lr):
    """同一个算法的 NumPy（float64）版本 / the same algorithm in NumPy (float64)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    w, losses = np.zeros(x.shape[1]), []
    for i in range(steps):
        r = x @ w - y
        norm = np.linalg.norm(w)
        losses.append(np.mean(r**2) + 0.01 * norm)
        grad = 2 * x.T @ r / len(y) + (0.01 * w / norm if norm > 0 else 0.0)
        w = w - lr / (1 + i) * grad
    return w, np.array(losses)


def placed(x, y):
    mesh = data_mesh()
    rows = NamedSharding(mesh, P("data"))
    return mesh, jax.device_put(x, rows), jax.device_put(y, rows)


def test_the_run_compiles_its_step_once():
    """症状一：训练越长，编译越多。整个训练里 sgd_step 只应该编译一次。
    Symptom one: the longer the run, the more it compiles. sgd_step should compile once in the
    whole run.
    """
    x, y = make_data()
    with counting_compiles() as names:
        train(x, y, steps=6, lr=0.5)
    steps_compiled = [name for name in names if name and "sgd_step" in name]
    print(f"compilations during the run: {names}")
    assert len(steps_compiled) == 1


def test_the_gradient_is_finite_at_the_zero_start():
    """症状二：训练从 w = 0 开始，而那里的梯度不是有限的数。哪个原语先出的问题？
    Symptom two: training starts at w = 0, and the gradient there is not a finite number.
    Which primitive goes wrong first?
    """
    x, y = make_data()
    mesh, x_placed, y_placed = placed(x, y)
    with jax.set_mesh(mesh):
        grad = jax.grad(loss_fn)(jnp.zeros(4, jnp.float32), x_placed, y_placed)
    print(f"gradient at w = 0: {grad}")
    expected = -2 * x.T.astype(np.float64) @ y / len(y)  # the penalty's subgradient is 0
    np.testing.assert_allclose(grad, expected, rtol=1e-5)


def test_the_step_moves_only_the_gradient_between_devices():
    """症状三：数据并行的一步只需要把梯度（和损失）在设备之间加起来：编译后的 HLO 里只该有一次
    all-reduce。多出来的集合通信在搬什么？
    Symptom three: a data-parallel step only needs to add the gradient (and the loss) up across
    the devices: the compiled HLO should hold a single all-reduce. What is any other collective
    moving?
    """
    mesh, x, y = placed(*make_data())
    w = jax.device_put(jnp.zeros(4, jnp.float32), NamedSharding(mesh, P()))
    with jax.set_mesh(mesh):
        hlo = jax.jit(sgd_step).lower(w, x, y, 0.5).compile().as_text()
    found = collectives(hlo)
    print(f"collectives in the compiled step: {found}")
    assert list(found) == ["all-reduce"] and len(found["all-reduce"]) == 1


def test_training_matches_the_numpy_reference():
    """三个 bug 都修好后，参数和每一步的损失与 NumPy 参考实现一致。
    With all three bugs fixed, the parameters and every step's loss match the NumPy reference.
    """
    x, y = make_data()
    w, losses = train(x, y, steps=6, lr=0.5)
    w_ref, losses_ref = numpy_reference(x, y, steps=6, lr=0.5)
    print(f"JAX w {np.asarray(w)}; NumPy w {w_ref}")
    np.testing.assert_allclose(losses, losses_ref, rtol=1e-4)
    np.testing.assert_allclose(w, w_ref, rtol=1e-4, atol=1e-5)
    assert w.sharding.is_fully_replicated
