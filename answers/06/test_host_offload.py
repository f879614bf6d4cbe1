"""06 · 把优化器状态放到主机内存 / optimizer state in host memory.

Adam 的两个矩（mu、nu）和参数一样大，训练大模型时常常放不进加速器的内存。JAX 让数组住在设备的
另一种内存里：memory_kind="pinned_host"（锁页的主机内存，加速器可以直接读写）。状态在两步之间
待在主机上，每一步要么搬到设备上更新再搬回去，要么干脆在主机上更新
（jax.experimental.compute_on）。在 Explicit 网格上内存空间是类型的一部分。这台 CPU 上“设备”
内存本来就在主机上，XLA 仍然按内存空间编译，所以类型、HLO 的布局和数值都能检查；只是
memory_analysis() 不把主机内存单列出来。

Adam's two moments (mu, nu) are as large as the parameters, and for a large model they often do
not fit in the accelerator's memory. JAX lets an array live in another memory of its device:
memory_kind="pinned_host" (page-locked host memory the accelerator reads and writes directly).
The state stays on the host between steps, and each step either moves it to the device, updates
it and moves it back, or updates it on the host itself (jax.experimental.compute_on). On an
Explicit mesh the memory space is part of the type. On this CPU "device" memory is host memory
anyway, and XLA still compiles by memory space, so the types, the HLO's layouts and the numbers
can be checked; only memory_analysis() does not count host memory apart.
"""

import re

import jax
import numpy as np
import optax
from jax.experimental.compute_on import compute_on
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)

Host, Device = jax.memory.Space.Host, jax.memory.Space.Device


def _problem():
    """A (64, 16) weight split by rows over the 8 devices of an Explicit mesh, its gradient, and
    Adam (optax) with a fresh state."""
    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Explicit,))
    rng = np.random.default_rng(0)
    rows = NamedSharding(mesh, P("data"))
    w = jax.device_put(rng.normal(size=(64, 16)).astype(np.float32), rows)
    g = jax.device_put(rng.normal(size=(64, 16)).astype(np.float32), rows)
    return mesh, w, g, optax.adam(1e-2)


def park(state, mesh, memory_kind):
    """Put every leaf of an optimizer state on mesh in the given memory: the moments split by rows
    like the weight, the step counter replicated."""

    def place(leaf):
        spec = P("data") if leaf.ndim else P()
        return jax.device_put(leaf, NamedSharding(mesh, spec, memory_kind=memory_kind))

    return jax.tree.map(place, state)


def _reference(w, g, opt):
    """One Adam step in NumPy-backed arrays on the default device."""
    w, g = np.asarray(w), np.asarray(g)
    updates, _ = opt.update(g, opt.init(w), w)
    return np.asarray(optax.apply_updates(w, updates))


def _memory_kinds(tree):
    return {leaf.sharding.memory_kind for leaf in jax.tree.leaves(tree)}


def _parameter_spaces(compiled):
    """The memory space of every parameter of the compiled entry computation: 'S(5)' marks host
    memory in an HLO layout, nothing marks the default (device) memory."""
    layout = re.search(r"entry_computation_layout=\{\((.*?)\)->", compiled.as_text()).group(1)
    return ["host" if ":S(5)" in part else "device" for part in re.split(r"(?<=\}), ", layout)]


def test_the_memory_space_is_part_of_the_type():
    """⚠️ 陷阱 / trap: 在 Explicit 网格上，jax.typeof 除了分片还写出内存空间；主机上的数组和设备
    上的数组不能直接相加，哪怕它们在同一组设备上、分片一模一样。optax 的更新把梯度和状态相加，所以
    直接把住在主机上的状态交给它会失败。预测：mu 的类型怎么写？失败时抛出什么异常？
    On an Explicit mesh jax.typeof writes the memory space beside the sharding; an array in host
    memory and one in device memory cannot be added, even on the same devices with the very same
    sharding. optax's update adds the gradient to the state, so handing it a state that lives on
    the host fails. Predict: how is mu's type written? What does the failure raise?
    """
    mesh, w, g, opt = _problem()
    state = park(opt.init(w), mesh, "pinned_host")
    assert _memory_kinds(state) == {"pinned_host"}
    assert str(jax.typeof(state[0].mu)) == "float32<host>[64@data,16]"
    assert str(jax.typeof(w)) == "float32[64@data,16]"

    with raises_exactly(ValueError) as info:
        jax.jit(opt.update)(g, state, w)
    assert "memory_space" in str(info.value)


def test_adam_state_waits_in_pinned_host_between_steps():
    """补全：每一步先把状态搬到设备上（在 jit 里用 jax.device_put 加一个内存空间），在设备上
    更新，再把新状态搬回主机。编译后的入口布局里，状态的参数和输出都标着主机内存；这台 CPU 的
    memory_analysis() 把它们算在普通的参数字节里。预测：它给一个设备的程序算出多少参数字节？
    Complete: each step moves the state to the device first (jax.device_put with a memory space,
    inside jit), updates it there, and moves the new state back to the host. In the compiled
    entry layout the state's parameters and outputs are marked as host memory; this CPU's
    memory_analysis() counts them with the ordinary argument bytes. Predict: how many argument
    bytes does it count for one device's program?
    """
    mesh, w, g, opt = _problem()
    state = park(opt.init(w), mesh, "pinned_host")

    def step(w, g, state):
        on_device = jax.device_put(state, Device)
        updates, new_state = opt.update(g, on_device, w)
        return optax.apply_updates(w, updates), jax.device_put(new_state, Host)

    compiled = jax.jit(step).lower(w, g, state).compile()
    new_w, new_state = compiled(w, g, state)
    np.testing.assert_allclose(new_w, _reference(w, g, opt), rtol=1e-6, atol=1e-6)
    assert _memory_kinds(new_state) == {"pinned_host"}
    assert new_w.sharding.memory_kind == "device"
    assert _parameter_spaces(compiled) == ["device", "device", "host", "host", "host"]
    stats = compiled.memory_analysis()
    assert stats.host_argument_size_in_bytes == 0
    assert stats.argument_size_in_bytes == 2 * 8 * 16 * 4 + 4 + 2 * 8 * 16 * 4  # w, g, count, mu, nu


def host_adam_step(opt, w, g, state):
    """✍️ 一步 Adam，更新本身在主机上算：把 opt.update 和 optax.apply_updates 包进
    jax.experimental.compute_on（compute_type="device_host"；它还要求 out_memory_spaces，每个输出
    一个内存空间），它的输出一个放回设备内存（新的参数）、一个留在主机内存（新的状态）。三个输入
    都先用 jax.device_put 放到主机内存（Host、Device 是文件开头的两个内存空间）：g 和 w 在设备上；
    state 通常已经在主机上，这时 device_put 什么也不做。返回 (新参数, 新状态)。大约 6 行。
    One Adam step with the update itself computed on the host: wrap opt.update and
    optax.apply_updates in jax.experimental.compute_on (compute_type="device_host"; it also
    requires out_memory_spaces, one memory space per output), one of its outputs back in device
    memory (the new parameters), one left in host memory (the new state).
    Put all three inputs in host memory first with jax.device_put (Host and Device are the two
    memory spaces at the top of the file): g and w are on the device; state usually is on the
    host already, and then device_put does nothing. Return (new parameters, new state). About 6
    lines.
    """

    def update(w, g, state):
        updates, new_state = opt.update(g, state, w)
        return optax.apply_updates(w, updates), new_state

    on_host = compute_on(update, compute_type="device_host", out_memory_spaces=(Device, Host))
    return on_host(jax.device_put(w, Host), jax.device_put(g, Host), jax.device_put(state, Host))


def test_compute_the_optimizer_update_on_the_host():
    """✍️ 实现 host_adam_step。compute_on 把一段计算标成在主机上执行（StableHLO 里是
    _xla_compute_type = "host" 的调用）：状态从不离开主机内存，只有梯度和参数过去、新参数回来。
    在 GPU 上这省下设备内存和两次状态的搬运；在这台 CPU 上检查的是结构和数值。
    Write host_adam_step. compute_on marks a piece of computation to run on the host (a call
    with _xla_compute_type = "host" in the StableHLO): the state never leaves host memory, only
    the gradient and the parameters go over and the new parameters come back. On a GPU this
    saves device memory and two moves of the state; on this CPU the structure and the numbers are
    what is checked.
    """
    mesh, w, g, opt = _problem()
    state = park(opt.init(w), mesh, "pinned_host")
    step = jax.jit(host_adam_step, static_argnums=0)
    new_w, new_state = step(opt, w, g, state)
    np.testing.assert_allclose(new_w, _reference(w, g, opt), rtol=1e-6, atol=1e-6)
    assert new_w.sharding.memory_kind == "device"
    assert _memory_kinds(new_state) == {"pinned_host"}
    lowered = step.lower(opt, w, g, state)
    assert 'mhlo.frontend_attributes = {_xla_compute_type = "host"}' in lowered.as_text()
    assert _parameter_spaces(lowered.compile()) == ["device", "device", "host", "host", "host"]
