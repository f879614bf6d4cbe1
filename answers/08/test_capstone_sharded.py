"""08 · 综合二：一个读不出毛病的加载器 / capstone two: a loader that reads fine.

`# ✍️ BEGIN` 与 `# ✍️ END` 之间是 8 个 CPU 设备上的数据并行线性回归的驱动循环：每一批沿 "data"
轴切开、明确地放上设备，参数复制到每个设备，jit 只建一次。小批量来自别处拼成的生产加载器
loader(seed)：每一批都在准备它的那套设置里交出来，设置由种子抽取。可训练越长，编译越多，
而且每一步都在主机和设备之间搬东西。每一步交给 jit 的参数类型、形状、dtype 和分片都一样（测试
会核对：逐步打印 type()、jax.typeof() 和 .sharding 什么也看不出），用 NumPy 重跑一遍数值也全对；
它们说不出哪一步开始重新编译、编译几次、因为什么。要用工具：`jax.explain_cache_misses` 在每次
没命中缓存时说出哪里和上次不同；`jax.transfer_guard("disallow")` 说出搬的是什么。第一个测试要你
预测工具的报告；其余测试钉住症状。只修改标记之间的代码。

Between `# ✍️ BEGIN` and `# ✍️ END` is the driver loop of data-parallel linear regression on 8
CPU devices: every batch split along the "data" axis and put on the devices explicitly, the
parameters replicated on every device, jit built once. The mini-batches come from a production
loader assembled elsewhere, loader(seed): each batch is handed over in the settings it was
prepared with, the settings drawn from the seed. Yet the longer the run, the more it
compiles, and every step moves something between host and devices. Every step hands jit
arguments of the same types, shapes, dtypes and shardings (the test checks it: printing
type(), jax.typeof() and .sharding at every step shows nothing), and a NumPy re-run gets every
number right; none of them says from which step it recompiles, how often, or why. Use the
tools: `jax.explain_cache_misses` names, at every cache miss, what differs from before;
`jax.transfer_guard("disallow")` names what moves. The first test asks you to predict the
tool's report; the others pin the symptoms. Change only the code between the markers.
"""

import contextlib
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import counting_compiles, recording_jax_logs

STEPS, LR = 8, 0.05


def data_mesh():
    """8 个设备排成一维的 "data" 网格（Auto 轴）。/ The 8 devices as a 1-D "data" mesh (Auto)."""
    return jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))


def sgd_step(w, x, y):
    """一步梯度下降（均方误差，学习率 LR），返回 (新参数, 这一步之前的损失)。
    One gradient step on the mean squared error (rate LR): (new params, the loss before the
    step)."""
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - LR * grad, loss


# ✍️ BEGIN
def train(batches):
    """在 batches 的每个 (x, y) 上走一步：批沿 "data" 切开、参数复制。
    返回 (参数, 每一步的损失)。
    One step on every (x, y) of batches, the batch split along "data", the parameters
    replicated. Returns (params, the loss of every step).
    """
    mesh = data_mesh()
    rows, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    w = jax.device_put(np.zeros(4, np.float32), replicated)
    step = jax.jit(sgd_step)
    losses = []
    for x, y in list(batches):
        w, loss = step(w, jax.device_put(x, rows), jax.device_put(y, rows))
        losses.append(loss)
    return w, jnp.stack(losses)


# ✍️ END


# 准备一批数据时可能用到的设置 / the settings a batch may be prepared with
SETTINGS = (
    contextlib.nullcontext,
    lambda: jax.numpy_dtype_promotion("standard"),
    lambda: jax.default_matmul_precision("highest"),
    lambda: jax.set_mesh(data_mesh()),
)


def loader(seed, n=64):
    """别处拼成的生产加载器：STEPS 个小批量 (x (n, 4), y (n,))（NumPy），每一批在准备它的那套
    设置（SETTINGS 之一，由种子抽取）里交出来。
    A production loader assembled elsewhere: STEPS mini-batches (x (n, 4), y (n,)) as NumPy,
    each handed over in the settings it was prepared with (one of SETTINGS, drawn from
    the seed)."""
    rng = np.random.default_rng(seed)
    for _ in range(STEPS):
        x = rng.normal(size=(n, 4)).astype(np.float32)
        y = (x @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.1 * rng.normal(size=n)).astype(np.float32)
        with SETTINGS[rng.choice(len(SETTINGS), p=[0.4, 0.3, 0.2, 0.1])]():
            yield x, y


def numpy_reference(batches):
    """同一个算法的 NumPy（float64）版本。/ The same algorithm in NumPy (float64)."""
    w, losses = np.zeros(4), []
    for x, y in batches:
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        r = x @ w - y
        losses.append(np.mean(r**2))
        w = w - LR * 2 * x.T @ r / len(y)
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


def test_explain_cache_misses_names_what_differs():
    """先诊断，再修。测试自己的循环：一个新 jit 的 sgd_step，在 loader(6) 的每一批上一步步调用，
    打开 jax.explain_cache_misses，数编译次数。它同时记下每一步交给 jit 的参数的 type()、
    jax.typeof() 和 .sharding（每一步都一样），还有 jax.config.values。预测：一共编译几次？
    第一次重新编译发生在第几步（从 0 数起）？日志里第一条 "* 名字 differs" 点名的是什么？读代码
    说不出这些，逐步打印参数和配置、用 NumPy 重跑也说不出：要自己跑工具。
    Diagnose first, then repair. The test's own loop: a freshly jitted sgd_step called step by
    step on the batches of loader(6), under jax.explain_cache_misses, counting compilations. It
    also records the type(), jax.typeof() and .sharding of every argument handed to jit (the
    same at every step) and jax.config.values. Predict: how many compilations in all? At which
    step (from 0) does the first recompilation happen? What does the log's first
    "* NAME differs" line name? Reading cannot tell, nor can printing the arguments and the
    configuration at every step or a NumPy re-run: run the tool yourself.
    """
    jax.clear_caches()  # a cold start, whatever ran before / 冷启动，不管之前跑过什么
    mesh = data_mesh()
    rows = NamedSharding(mesh, P("data"))
    w = jax.device_put(np.zeros(4, np.float32), NamedSharding(mesh, P()))
    step, first_recompile, seen, configs = jax.jit(sgd_step), None, set(), []
    with (
        counting_compiles() as compiled,
        recording_jax_logs() as logs,
        jax.explain_cache_misses(True),
        contextlib.closing(loader(6)) as batches,
    ):
        for i, (x, y) in enumerate(batches):
            args = (w, jax.device_put(x, rows), jax.device_put(y, rows))
            seen.add(tuple((type(a), jax.typeof(a), a.sharding) for a in args))
            configs.append(dict(jax.config.values))
            w, _ = step(*args)
            if len(compiled) > 1 and first_recompile is None:
                first_recompile = i
    named = re.findall(r"\* (\w+) differs", "\n".join(logs))
    assert len(seen) == 1  # what printing the arguments shows / 逐步打印参数能看到的
    assert configs[first_recompile] == configs[0]  # what diffing jax.config shows / 比较配置看到的
    assert (len(compiled), first_recompile) == (3, 2)
    assert named[0] == "abstract_mesh_context_manager"


def test_the_run_compiles_its_step_once():
    """症状一：训练越长，编译越多。从冷缓存开始，一次训练里没有哪个程序被编译两次；换一个种子的
    加载器（形状相同的数据）再训练一次，什么也不该再编译。
    Symptom one: the longer the run, the more it compiles. From a cold cache, no program should
    compile twice in one run, and a second run on another seed's loader (data of the same
    shapes) should compile nothing at all.
    """
    jax.clear_caches()  # a cold start, whatever ran before / 冷启动，不管之前跑过什么
    # closing: a loader left halfway by an error leaves its with block / 中途出错也退出加载器的块
    with counting_compiles() as first, contextlib.closing(loader(0)) as batches:
        train(batches)
    with counting_compiles() as second, contextlib.closing(loader(11)) as batches:
        train(batches)
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
    refusing_the_reference(monkeypatch)
    moved = host_traffic(monkeypatch)
    try:
        with jax.transfer_guard("disallow"), contextlib.closing(loader(6)) as batches:
            w, losses = jax.block_until_ready(train(batches))
    except jax.errors.JaxRuntimeError:
        monkeypatch.undo()
        print("the transfer guard refused a transfer inside train")
        raise AssertionError("train moved data implicitly") from None
    monkeypatch.undo()
    print(f"host values handed to jitted calls: {moved['to_device']}")
    print(f"arrays read back to the host: {moved['to_host']}")
    assert moved == {"to_device": [], "to_host": []}
    w_ref, losses_ref = numpy_reference(loader(6))
    np.testing.assert_allclose(losses, losses_ref, rtol=1e-4)
    np.testing.assert_allclose(w, w_ref, rtol=1e-4, atol=1e-5)
    assert len(w.sharding.device_set) == 8 and w.sharding.is_fully_replicated
