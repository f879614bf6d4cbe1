"""08 · 综合二：一份读不出毛病的学习率表 / capstone two: a learning-rate schedule that reads fine.

`# ✍️ BEGIN` 与 `# ✍️ END` 之间是 8 个 CPU 设备上的数据并行线性回归的驱动循环：批沿 "data" 轴
切开，参数复制到每个设备，每一步用学习率表 rates 里的一个数。学习率表由别处的工具按种子拼成
（schedule(seed)），每个数都对；驱动循环也没毛病：jit 只建一次、数据一次放好。可训练越长，编译
越多，而且每一步都往设备上搬东西。哪一步开始重新编译、编译几次、因为哪个参数，读代码说不出来：
这取决于表里每个数是怎么来的。要用工具：`jax.explain_cache_misses` 在每次没命中缓存时说出是哪个
参数、哪里不同；`jax.transfer_guard("disallow")` 说出搬的是什么。第一个测试要你预测工具的报告；
其余测试钉住症状。只修改标记之间的代码。

Between `# ✍️ BEGIN` and `# ✍️ END` is the driver loop of data-parallel linear regression on 8
CPU devices: the batch split along the "data" axis, the parameters replicated on every device,
each step using one number of the schedule rates. The schedule is assembled elsewhere from a
seed (schedule(seed)), and every number in it is right; the driver looks right too: jit built
once, the data placed once. Yet the longer the run, the more it compiles, and every step moves
something to the devices. At which step it starts recompiling, how often it compiles and
because of which argument, reading cannot say: that depends on how each number of the schedule
came to be. Use the tools: `jax.explain_cache_misses` names, at every cache miss, the argument
and what differs; `jax.transfer_guard("disallow")` names what moves. The first test asks you to
predict the tool's report; the others pin the symptoms. Change only the code between the
markers.
"""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import counting_compiles, recording_jax_logs

STEPS = 8


def data_mesh():
    """8 个设备排成一维的 "data" 网格（Auto 轴）。/ The 8 devices as a 1-D "data" mesh (Auto)."""
    return jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))


def sgd_step(w, x, y, lr):
    """一步梯度下降（均方误差），返回 (新参数, 这一步之前的损失)。
    One gradient step on the mean squared error: (new params, the loss before the step)."""
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - lr * grad, loss


# ✍️ BEGIN
def train(x, y, rates):
    """批沿 "data" 切开、参数复制；第 i 步的学习率是 rates[i]。返回 (参数, 每一步的损失)。
    The batch split along "data", the parameters replicated; step i uses rates[i]. Returns
    (params, the loss of every step).
    """
    mesh = data_mesh()
    rows, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    x, y = jax.device_put(x, rows), jax.device_put(y, rows)
    w = jax.device_put(np.zeros(x.shape[1], np.float32), replicated)
    rates = jax.device_put(np.asarray(rates, np.float32), replicated)
    step = jax.jit(sgd_step)
    losses = []
    for lr in rates:
        w, loss = step(w, x, y, lr)
        losses.append(loss)
    return w, jnp.stack(losses)


# ✍️ END


def schedule(seed):
    """别处的工具拼成的学习率表：STEPS 个数，0.3 / (1 + i / 2)，每个数的来历由种子决定。
    The schedule another tool assembles: STEPS numbers, 0.3 / (1 + i / 2), each number's
    origin drawn from the seed."""
    rng = np.random.default_rng(seed)
    origins = (float, np.float32, np.float16)
    return [origins[rng.choice(3, p=[0.6, 0.3, 0.1])](0.3 / (1 + i / 2)) for i in range(STEPS)]


def make_data(seed=0, n=64):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.1 * rng.normal(size=n)).astype(np.float32)
    return x, y


def numpy_reference(x, y, rates):
    """同一个算法的 NumPy（float64）版本，学习率按 float32 取值。
    The same algorithm in NumPy (float64), each rate taken as a float32."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    w, losses = np.zeros(x.shape[1]), []
    for lr in rates:
        r = x @ w - y
        losses.append(np.mean(r**2))
        w = w - float(np.float32(lr)) * 2 * x.T @ r / len(y)
    return w, np.array(losses)


def refusing_the_reference(monkeypatch):
    """train 运行期间，numpy_reference 一被调用就报错：训练要自己做，不能交给参考实现。
    While train runs, calling numpy_reference fails: train must do the training itself.
    """

    def refuse(*args, **kwargs):
        raise AssertionError("train called numpy_reference / train 调用了参考实现")

    monkeypatch.setitem(globals(), "numpy_reference", refuse)


def host_traffic(monkeypatch):
    """从现在起记下主机与设备之间的数据（monkeypatch.undo() 为止）：交给 jit 函数的主机值
    （NumPy 数组和标量、Python 数：每个都是一次隐式的主机到设备传输）记进 "to_device"，从设备
    读回主机的数组（np.asarray、float()、.tolist()、jax.device_get……）记进 "to_host"。它不看
    传输守卫，守卫关掉了也照样记。
    From now on (until monkeypatch.undo()) record the data moved between host and devices:
    host values handed to a jitted function (NumPy arrays and scalars, Python numbers: each an
    implicit host-to-device transfer) go into "to_device", arrays read back to the host
    (np.asarray, float(), .tolist(), jax.device_get...) into "to_host". It does not look at the
    transfer guards, and records the same with a guard switched off.
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


def test_explain_cache_misses_names_the_schedule():
    """先诊断，再修。测试自己的循环：一个新 jit 的 sgd_step，按 schedule(6) 的学习率一步步调用，
    打开 jax.explain_cache_misses，数编译次数。预测：一共编译几次？第一次重新编译发生在第几步
    （从 0 数起）？日志里 "* at 名字," 点名的是哪个参数？读代码说不出这些：要自己跑工具。
    Diagnose first, then repair. The test's own loop: a freshly jitted sgd_step called step by
    step with the rates of schedule(6), under jax.explain_cache_misses, counting compilations.
    Predict: how many compilations in all? At which step (from 0) does the first recompilation
    happen? Which argument does the log's "* at NAME," line name? Reading cannot tell: run the
    tool yourself.
    """
    jax.clear_caches()  # a cold start, whatever ran before / 冷启动，不管之前跑过什么
    mesh = data_mesh()
    x, y = (jax.device_put(a, NamedSharding(mesh, P("data"))) for a in make_data())
    w = jax.device_put(np.zeros(4, np.float32), NamedSharding(mesh, P()))
    step, first_recompile = jax.jit(sgd_step), None
    with (
        counting_compiles() as compiled,
        recording_jax_logs() as logs,
        jax.explain_cache_misses(True),
    ):
        for i, lr in enumerate(schedule(6)):
            w, _ = step(w, x, y, lr)
            if len(compiled) > 1 and first_recompile is None:
                first_recompile = i
    named = re.findall(r"\* at (\w+),", "\n".join(logs))
    assert (len(compiled), first_recompile) == (3, 4)
    assert named[0] == "lr"


def test_the_run_compiles_its_step_once():
    """症状一：训练越长，编译越多。从冷缓存开始，一次训练里没有哪个程序被编译两次；换一份学习率表
    （形状相同的数据）再训练一次，什么也不该再编译。
    Symptom one: the longer the run, the more it compiles. From a cold cache, no program should
    compile twice in one run, and a second run with another schedule (data of the same shapes)
    should compile nothing at all.
    """
    jax.clear_caches()  # a cold start, whatever ran before / 冷启动，不管之前跑过什么
    with counting_compiles() as first:
        train(*make_data(0), schedule(6))
    with counting_compiles() as second:
        train(*make_data(1), schedule(11))
    print(f"the first run compiled {first}, the second {second}")
    assert sorted({name for name in first if first.count(name) > 1}) == []
    assert second == []


def test_the_loop_moves_nothing_implicitly(monkeypatch):
    """症状二：除了 train 自己明确地用 jax.device_put 放上设备的东西，循环不该在主机和设备之间
    搬任何数据。在 jax.transfer_guard("disallow") 之下跑 train 不该被拒绝；不看守卫的计数
    （host_traffic）也该是空的：交给 jit 函数的全是设备上的数组，没有数组被读回主机。参数和每一步
    的损失仍与 NumPy 参考实现一致，参数复制在 8 个设备上。
    Symptom two: beyond what train puts on the devices explicitly with jax.device_put, its loop
    should move no data between host and devices. Running train under
    jax.transfer_guard("disallow") should not be refused, and a count that does not rely on the
    guard (host_traffic) should come back empty: every value handed to a jitted function is on
    the devices already, and no array is read back to the host. The parameters and every
    step's loss still match the NumPy reference, the parameters replicated on the 8 devices.
    """
    x, y = make_data()
    rates = schedule(6)
    refusing_the_reference(monkeypatch)
    moved = host_traffic(monkeypatch)
    try:
        with jax.transfer_guard("disallow"):
            w, losses = jax.block_until_ready(train(x, y, rates))
    except jax.errors.JaxRuntimeError:
        monkeypatch.undo()
        print("the transfer guard refused a transfer inside train")
        raise AssertionError("train moved data implicitly") from None
    monkeypatch.undo()
    print(f"host values handed to jitted calls: {moved['to_device']}")
    print(f"arrays read back to the host: {moved['to_host']}")
    assert moved == {"to_device": [], "to_host": []}
    w_ref, losses_ref = numpy_reference(x, y, rates)
    np.testing.assert_allclose(losses, losses_ref, rtol=1e-4)
    np.testing.assert_allclose(w, w_ref, rtol=1e-4, atol=1e-5)
    assert len(w.sharding.device_set) == 8 and w.sharding.is_fully_replicated
