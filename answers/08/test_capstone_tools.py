"""08 · 综合三：读不出来的 bug / capstone three: bugs you cannot read off.

`# ✍️ BEGIN` 与 `# ✍️ END` 之间是 8 个 CPU 设备上的小批量线性回归：特征里有一列比值的对数，
缺失的数据（第 1 列不是正数）不进损失；每一步按给定的顺序取 32 行。每一行代码读起来都对，
程序也不报错；可它藏着三个 bug，只有工具能指出它们在哪：参数变成 NaN，而缺失的行明明权重
为 0（debug_nans / checkify）、每一步都在编译（explain_cache_misses / counting_compiles）、循环
每一步都在主机和设备之间搬数据（transfer_guard）。失败的测试只打印症状，病根要你用工具找。
只修改标记之间的代码。

Between `# ✍️ BEGIN` and `# ✍️ END` is mini-batch linear regression on 8 CPU devices: one
feature is the log of a ratio of two columns, missing data (column 1 not positive) stays out
of the loss, and every step takes 32 rows in a given order. Every line reads right and the
program raises nothing, yet it hides three bugs that only tools locate: the parameters turn
NaN although the missing rows weigh 0 (debug_nans / checkify), every step compiles
(explain_cache_misses / counting_compiles), and the loop moves data between host and devices
at every step (transfer_guard). A failing test prints only its symptom; the cause is for you to
find with the tools. Change only the code between the markers.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans.api.probes import counting_compiles


# ✍️ BEGIN
def features(x):
    """模型的输入：第 0、1 列和 log(第 0 列 / 第 1 列)。第 1 列不是正数的行是缺失数据：
    valid 为 False，它在损失里的权重是 0。返回 (特征, valid)。
    The model's inputs: columns 0 and 1 and log(column 0 / column 1). A row whose column 1 is
    not positive is missing data: valid is False, and its weight in the loss is 0. Returns
    (features, valid).
    """
    valid = x[:, 1] > 0
    ratio = jnp.where(valid, jnp.log(x[:, 0] / x[:, 1]), 0.0)
    return jnp.stack([x[:, 0], x[:, 1], ratio], axis=1), valid


def loss_fn(w, x, y):
    """有效行上的均方误差（缺失的行权重为 0）。Mean squared error over the valid rows."""
    f, valid = features(x)
    per_row = (f @ w - y) ** 2
    return jnp.sum(valid * per_row) / jnp.sum(valid)


def sgd_step(w, x, y, rows, lr):
    """取出 rows 这些行做一步梯度下降；返回 (新参数, 这一步之前的损失)。
    One gradient step on the rows `rows`; returns (new params, the loss before the step).
    """
    loss, grad = jax.value_and_grad(loss_fn)(w, x[rows], y[rows])
    return w - lr * grad, loss


def train(x, y, orders, lr):
    """数据按行放到 8 个设备上，参数复制到每个设备；第 i 步用 orders[i] 里的行。
    返回 (参数, 每一步的损失)。
    The data is placed by rows on the 8 devices, the parameters on every device; step i uses
    the rows in orders[i]. Returns (params, the loss of every step).
    """
    mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
    rows, everywhere = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    x, y = jax.device_put(x, rows), jax.device_put(y, rows)
    w = jax.device_put(np.zeros(3, np.float32), everywhere)
    lr = jax.device_put(np.float32(lr), everywhere)
    orders = [jax.device_put(order, everywhere) for order in orders]
    step = jax.jit(sgd_step)
    losses = []
    for order in orders:
        w, loss = step(w, x, y, order, lr)
        losses.append(loss)
    return w, jnp.stack(losses)


# ✍️ END


def make_data(seed=0, n=64):
    """n 行 2 列的原始数据；第 1 列有两行缺失（记作 -1）。y 由有效行上的一个线性规则加噪声给出。
    Raw data of n rows and 2 columns; two rows of column 1 are missing (marked -1). y follows
    a linear rule plus noise on the valid rows.
    """
    rng = np.random.default_rng(seed)
    x = np.stack([rng.uniform(1, 2, n), rng.uniform(0.5, 1.5, n)], 1).astype(np.float32)
    y = (x[:, 0] - 0.5 * x[:, 1] + 0.3 * np.log(x[:, 0] / x[:, 1])).astype(np.float32)
    y += rng.normal(scale=0.01, size=n).astype(np.float32)
    x[[5, 37], 1] = -1.0
    return x, y


def batch_orders(steps, seed=0, n=64, batch=32):
    """每一步的 32 个行号（NumPy）。The 32 row numbers of every step (NumPy)."""
    rng = np.random.default_rng(100 + seed)
    return [rng.permutation(n)[:batch].astype(np.int32) for _ in range(steps)]


def numpy_reference(x, y, orders, lr):
    """同一个训练，用 float64 的 NumPy 写。The same training in float64 NumPy."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    valid = x[:, 1] > 0
    f = np.stack([x[:, 0], x[:, 1], np.zeros(len(x))], 1)
    f[valid, 2] = np.log(x[valid, 0] / x[valid, 1])
    w, losses = np.zeros(3), []
    for order in orders:
        fb, yb, vb = f[order], y[order], valid[order]
        r = np.where(vb, fb @ w - yb, 0.0)
        losses.append(np.sum(r**2) / vb.sum())
        w = w - lr * 2 * fb.T @ r / vb.sum()
    return w, np.array(losses)


def refusing_the_reference(monkeypatch):
    """train 运行期间，numpy_reference 一被调用就报错：训练要自己做。
    While train runs, calling numpy_reference fails: train must do the training itself.
    """

    def refuse(*args, **kwargs):
        raise AssertionError("train called numpy_reference / train 调用了参考实现")

    monkeypatch.setitem(globals(), "numpy_reference", refuse)


def host_traffic(monkeypatch):
    """从现在起记下主机与设备之间的数据（monkeypatch.undo() 为止）：交给 jit 函数的主机值
    （NumPy 数组、Python 数：每个都是一次隐式的主机到设备传输）记进 "to_device"，从设备读回
    主机的数组（np.asarray、float()、.tolist()、jax.device_get……）记进 "to_host"。它不看
    传输守卫，守卫关掉了也照样记。
    From now on (until monkeypatch.undo()) record the data moved between host and devices:
    host values handed to a jitted function (NumPy arrays, Python numbers: each an implicit
    host-to-device transfer) go into "to_device", arrays read back to the host (np.asarray,
    float(), .tolist(), jax.device_get...) into "to_host". It does not look at the transfer
    guards, and records the same with a guard switched off.
    """
    moved = {"to_device": [], "to_host": []}
    real_jit, array_type = jax.jit, type(jnp.zeros(()))
    value, to_numpy = array_type._value, array_type.__array__

    def jit(fun, *args, **kwargs):
        jitted = real_jit(fun, *args, **kwargs)

        @functools.wraps(fun)
        def call(*call_args, **call_kwargs):
            for leaf in jax.tree.leaves((call_args, call_kwargs)):
                if not isinstance(leaf, jax.Array):
                    moved["to_device"].append(f"{type(leaf).__name__} {np.shape(leaf)}")
            return jitted(*call_args, **call_kwargs)

        call.lower, call.clear_cache = jitted.lower, jitted.clear_cache
        return call

    reading = []  # __array__ reads through _value: count such a read once / 只记一次

    def host_value(array):
        if not reading:
            moved["to_host"].append(f"{array.dtype}{list(array.shape)}")
        return value.fget(array)

    def host_copy(array, *args, **kwargs):
        moved["to_host"].append(f"{array.dtype}{list(array.shape)}")
        reading.append(array)
        try:
            return to_numpy(array, *args, **kwargs)
        finally:
            reading.pop()

    monkeypatch.setattr(jax, "jit", jit)
    monkeypatch.setattr(array_type, "_value", property(host_value))
    monkeypatch.setattr(array_type, "__array__", host_copy)
    return moved


def test_the_parameters_stay_finite():
    """症状一：6 步之后参数该是有限的数，最后一步的损失不到第一步的十分之一。
    Symptom one: after 6 steps the parameters should be finite numbers, and the last step's
    loss under a tenth of the first's.
    """
    x, y = make_data()
    w, losses = train(x, y, batch_orders(6), lr=0.1)
    print(f"losses {np.asarray(losses)}; w {np.asarray(w)}")
    assert np.isfinite(np.asarray(w)).all()
    assert float(losses[-1]) < float(losses[0]) / 10


def test_training_again_compiles_nothing():
    """症状二：第二次训练（新数据，形状相同）不该再编译任何东西；第一次训练里也没有哪个程序
    被编译两次。
    Symptom two: a second training run (new data of the same shapes) should compile nothing,
    and no program should compile twice in the first run.
    """
    jax.clear_caches()  # a cold start, whatever ran before / 冷启动，不管之前跑过什么
    with counting_compiles() as first:
        train(*make_data(0), batch_orders(6, seed=0), lr=0.1)
    with counting_compiles() as second:
        train(*make_data(1), batch_orders(6, seed=1), lr=0.1)
    print(f"the first run compiled {len(first)} programs, the second {len(second)}")
    assert second == []
    assert len(first) == len(set(first))


def test_the_loop_moves_nothing_implicitly(monkeypatch):
    """症状三：除了 train 自己明确地用 jax.device_put 放上设备的东西，循环不该在主机和设备之间
    搬任何数据。在 jax.transfer_guard("disallow") 之下跑 train 不该被拒绝；不看守卫的计数
    （host_traffic）也该是空的：交给 jit 函数的全是设备上的数组，没有数组被读回主机。
    Symptom three: beyond what train puts on the devices explicitly with jax.device_put, its
    loop should move no data between host and devices. Running train under
    jax.transfer_guard("disallow") should not be refused, and a count that does not rely on
    the guard (host_traffic) should come back empty: every value handed to a jitted function
    is on the devices already, and no array is read back to the host.
    """
    x, y = make_data()
    orders = batch_orders(6)
    moved = host_traffic(monkeypatch)
    try:
        with jax.transfer_guard("disallow"):
            jax.block_until_ready(train(x, y, orders, lr=0.1))
    except jax.errors.JaxRuntimeError:
        monkeypatch.undo()
        print("the transfer guard refused a transfer inside train")
        raise AssertionError("train moved data implicitly") from None
    monkeypatch.undo()
    print(f"host values handed to jitted calls: {moved['to_device']}")
    print(f"arrays read back to the host: {moved['to_host']}")
    assert moved == {"to_device": [], "to_host": []}


def test_training_matches_the_numpy_reference(monkeypatch):
    """三个 bug 都修好后，参数和每一步的损失与 NumPy 参考实现一致，参数复制在 8 个设备上。
    With the three bugs fixed, the parameters and every step's loss match the NumPy
    reference, and the parameters are replicated on the 8 devices.
    """
    x, y = make_data()
    orders = batch_orders(6)
    refusing_the_reference(monkeypatch)
    w, losses = train(x, y, orders, lr=0.1)
    monkeypatch.undo()
    assert isinstance(w, jax.Array) and isinstance(losses, jax.Array)
    w_ref, losses_ref = numpy_reference(x, y, orders, lr=0.1)
    print(f"JAX w {np.asarray(w)}; NumPy w {w_ref}")
    np.testing.assert_allclose(losses, losses_ref, rtol=1e-4)
    np.testing.assert_allclose(w, w_ref, rtol=1e-4, atol=1e-5)
    assert len(w.sharding.device_set) == 8 and w.sharding.is_fully_replicated
