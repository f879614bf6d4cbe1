"""08 · 综合二：一个分片的训练程序 / capstone two: a sharded training program.

`# ✍️ BEGIN` 与 `# ✍️ END` 之间是一个在 8 个 CPU 设备上做数据并行的线性回归训练（批沿
"data" 轴切开，参数复制到每个设备）。它能跑、不报错，但藏着四个 bug：结果和参考实现对不上，
而且又慢又浪费。每个测试钉住一个症状，并在失败时把症状打印出来（"Captured stdout call"）；
要找到病根，得用本章的工具：数编译次数（jax.log_compiles 或 jaxkoans.api.probes 的
counting_compiles）、debug_nans / debug_infs、读编译后的 HLO（jaxkoans.api.probes.collectives）、
传输守卫（jax.transfer_guard_device_to_host）。只修改标记之间的代码。

Between `# ✍️ BEGIN` and `# ✍️ END` is data-parallel linear-regression training on 8 CPU
devices (the batch split along the "data" axis, the parameters replicated on every device).
It runs without an error, but it hides four bugs: the result disagrees with the reference,
and it is slow and wasteful. Each test pins one symptom and prints it when it fails
("Captured stdout call"); finding the cause takes this chapter's tools: counting compilations
(jax.log_compiles, or counting_compiles from jaxkoans.api.probes), debug_nans / debug_infs,
reading the compiled HLO (jaxkoans.api.probes.collectives), and the transfer guard
(jax.transfer_guard_device_to_host). Change only the code between the markers.
"""

import functools
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
    """一步梯度下降，返回 (新参数, 这一步之前每个样本的残差 x @ w - y)。
    One step: (new params, each example's residual x @ w - y before it).
    """
    grad = jax.grad(loss_fn)(w, x, y)
    return w - lr * grad, x @ w - y


def train(x, y, steps, lr):
    """批沿 "data" 切开、参数复制；第 i 步的学习率是 lr / (1 + i)。返回 (参数, 每一步之前
    残差的范数 ‖x @ w - y‖)。
    The batch split along "data", the parameters replicated; step i uses lr / (1 + i).
    Returns (params, the residual norm ‖x @ w - y‖ before every step).
    """
    mesh = data_mesh()
    rows, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    x, y = jax.device_put(x, rows), jax.device_put(y, rows)
    w = jax.device_put(jnp.zeros(x.shape[1], jnp.float32), replicated)
    step = jax.jit(sgd_step)
    norms = []
    with jax.set_mesh(mesh):
        for i in range(steps):
            w, residuals = step(w, x, y, lr / (1 + i))
            norms.append(jnp.linalg.norm(residuals))
    return w, jnp.stack(norms)


# ✍️ END


def make_data(n=64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.1 * rng.normal(size=n)).astype(np.float32)
    return x, y


def numpy_reference(x, y, steps, lr):
    """同一个算法的 NumPy（float64）版本 / the same algorithm in NumPy (float64)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    w, residual_norms = np.zeros(x.shape[1]), []
    for i in range(steps):
        r = x @ w - y
        norm = np.linalg.norm(w)
        residual_norms.append(np.linalg.norm(r))
        grad = 2 * x.T @ r / len(y) + (0.01 * w / norm if norm > 0 else 0.0)
        w = w - lr / (1 + i) * grad
    return w, np.array(residual_norms)


def refusing_the_reference(monkeypatch):
    """train 运行期间，numpy_reference 一被调用就报错：训练要自己做，不能交给参考实现。
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


def placed(x, y):
    mesh = data_mesh()
    rows = NamedSharding(mesh, P("data"))
    return mesh, jax.device_put(x, rows), jax.device_put(y, rows)


def test_the_run_compiles_its_step_once():
    """症状一：训练越长，编译越多。从冷缓存开始，6 步的训练不该比 2 步的多编译任何东西，
    而且一次训练里没有哪个程序被编译两次（每一步跑的是同一个编译好的程序）。
    Symptom one: the longer the run, the more it compiles. From a cold cache, a 6-step run
    should compile nothing more than a 2-step run, and no program should compile twice in one
    run (every step runs the same compiled program).
    """
    x, y = make_data()

    def compiled_during(steps):
        jax.clear_caches()  # a cold start: what this run compiles, whatever ran before
        with counting_compiles() as names:
            train(x, y, steps=steps, lr=0.5)
        return names

    short, long = compiled_during(2), compiled_during(6)
    print(f"compilations in a 2-step run: {short}")
    print(f"compilations in a 6-step run: {long}")
    assert len(long) == len(short)
    assert sorted({name for name in long if long.count(name) > 1}) == []


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
    """症状三：数据并行的一步只需要把梯度在设备之间加起来：编译后的 HLO 里只该有一次
    all-reduce。多出来的集合通信在搬什么？
    Symptom three: a data-parallel step only needs to add the gradient up across the devices:
    the compiled HLO should hold a single all-reduce. What is any other collective moving?
    """
    mesh, x, y = placed(*make_data())
    w = jax.device_put(jnp.zeros(4, jnp.float32), NamedSharding(mesh, P()))
    with jax.set_mesh(mesh):
        hlo = jax.jit(sgd_step).lower(w, x, y, 0.5).compile().as_text()
    found = collectives(hlo)
    print(f"collectives in the compiled step: {found}")
    assert list(found) == ["all-reduce"] and len(found["all-reduce"]) == 1


def test_the_loop_leaves_its_values_on_the_devices(monkeypatch):
    """症状四：循环每一步都把一个数组拷回主机。拷贝要等这一步算完，Python 只好停下来等设备，
    异步派发（第 02 章 test_dispatch.py）就帮不上忙了。在 jax.transfer_guard_device_to_host
    ("disallow") 之下跑 train 不该被拒绝，记下的每一步的数也该留在 8 个设备上。注意：CPU 上
    这个守卫只拦得住由几个不同分片拼成的数组；放在单个设备上或完整复制到每个设备上的数组
    （比如一个标量损失）它拦不住，所以这里还检查结果放在几个设备上。被拒绝的那次拷贝是什么
    形状，是哪个数组？不靠守卫的计数（host_traffic）也不该找到读回主机的数组。
    Symptom four: every step copies an array back to the host. The copy waits until the step
    is computed, so Python stops to wait for the devices and asynchronous dispatch (chapter
    02's test_dispatch.py) no longer helps. Running train under
    jax.transfer_guard_device_to_host("disallow") should not be refused, and the value logged
    for every step should stay on the 8 devices. Note: on CPU this guard stops only arrays made
    of several distinct shards; an array on a single device or fully replicated on every device
    (a scalar loss, say) gets past it, so the koan also checks on how many devices the result
    lives. A count that does not rely on the guard (host_traffic) must find no array read back
    to the host either. What shape has the copy that was refused, and which array is it?
    """
    x, y = make_data()
    refusing_the_reference(monkeypatch)
    moved = host_traffic(monkeypatch)
    try:
        with jax.transfer_guard_device_to_host("disallow"):
            _, norms = train(x, y, steps=6, lr=0.5)
    except jax.errors.JaxRuntimeError as refusal:
        monkeypatch.undo()
        print(f"the transfer guard refused: {str(refusal).splitlines()[0]}")
        raise AssertionError("train copied an array to the host inside its loop") from None
    monkeypatch.undo()
    print(f"arrays read back to the host: {moved['to_host']}")
    assert moved["to_host"] == []  # counted without the guard / 不靠守卫的计数
    devices = norms.sharding.device_set
    print(f"the logged values live on {len(devices)} device(s): {norms.sharding}")
    assert len(devices) == 8


def test_training_matches_the_numpy_reference(monkeypatch):
    """四个 bug 都修好后，参数和每一步的残差范数与 NumPy 参考实现一致。
    With all four bugs fixed, the parameters and every step's residual norm match the NumPy
    reference.
    """
    x, y = make_data()
    refusing_the_reference(monkeypatch)
    w, norms = train(x, y, steps=6, lr=0.5)
    monkeypatch.undo()
    w_ref, norms_ref = numpy_reference(x, y, steps=6, lr=0.5)
    print(f"JAX w {np.asarray(w)}; NumPy w {w_ref}")
    np.testing.assert_allclose(norms, norms_ref, rtol=1e-4)
    np.testing.assert_allclose(w, w_ref, rtol=1e-4, atol=1e-5)
    assert w.sharding.is_fully_replicated
