"""08 · 综合四：悄悄复制的分片 / capstone four: a sharding that silently replicates.

`# ✍️ BEGIN` 与 `# ✍️ END` 之间是 8 个 CPU 设备上的一个序列编码器：输入是按时间排的序列
x (T, B, D)（时间在前，批次在中间），批次 B 沿 "data" 轴切开；每个 token 做 layer norm、乘一个
投影矩阵、过 tanh；损失是与目标的均方误差。程序读起来没毛病，结果也完全正确；可它悄悄地让每个
设备都拿到了整批数据、做了整批的计算。症状指向的工具：输出的 `.sharding`（或
`jax.debug.visualize_array_sharding`）、编译后 HLO 里的 all-gather、`memory_analysis()` 的每设备
字节数。找到让 XLA 收齐整批的那一处，改掉它。只修改标记之间的代码。

Between `# ✍️ BEGIN` and `# ✍️ END` is a sequence encoder on 8 CPU devices: the input is
time-major sequences x (T, B, D) (time first, the batch in the middle), the batch B split
along the "data" axis; every token goes through a layer norm, a projection and a tanh; the
loss is the mean squared error against targets. The program reads fine and its results are
exactly right, yet it quietly gives every device the whole batch and the whole batch's work.
The tools the symptom calls for: the output's `.sharding` (or
`jax.debug.visualize_array_sharding`), the all-gathers in the compiled HLO, the per-device
bytes of `memory_analysis()`. Find the place that makes XLA gather the whole batch, and change
it. Change only the code between the markers.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans.api.probes import collectives


# ✍️ BEGIN
def layer_norm(h):
    """最后一维上的 layer norm（没有可学的缩放）。Layer norm over the last axis."""
    mu = h.mean(-1, keepdims=True)
    return (h - mu) * lax.rsqrt(((h - mu) ** 2).mean(-1, keepdims=True) + 1e-5)


def encode(x, w):
    """按时间排的序列 x (T, B, D) 的每个 token：layer norm、投影、tanh。返回 (T, B, H)。
    Every token of the time-major sequences x (T, B, D): layer norm, projection, tanh.
    Returns (T, B, H).
    """
    t, b, d = x.shape
    tokens = x.reshape(t * b, d)  # 每个 token 一行 / one row per token
    return jnp.tanh(layer_norm(tokens) @ w).reshape(t, b, -1)


def loss(w, x, y):
    """编码结果与目标 y (T, B, H) 的均方误差。The mean squared error against targets y."""
    return jnp.mean((encode(x, w) - y) ** 2)


# ✍️ END

T, B, D, H = 16, 32, 64, 32


def make_data(seed=0):
    """x (T, B, D)、投影 w (D, H)、目标 y (T, B, H)（NumPy）。/ x, w and y as NumPy arrays."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(T, B, D)).astype(np.float32)
    w = (rng.normal(size=(D, H)) / 8).astype(np.float32)
    y = rng.normal(size=(T, B, H)).astype(np.float32)
    return x, w, y


def numpy_encode(x, w):
    """同样的编码器，用 float64 的 NumPy 写。The same encoder in float64 NumPy."""
    x = x.astype(np.float64)
    centred = x - x.mean(-1, keepdims=True)
    normed = centred / np.sqrt((centred**2).mean(-1, keepdims=True) + 1e-5)
    return np.tanh(normed @ w.astype(np.float64))


def placed(mesh, x, w, y):
    """批次维沿 "data" 切开，投影矩阵复制。The batch axis split along "data", w replicated."""
    batch = NamedSharding(mesh, P(None, "data"))
    return (
        jax.device_put(x, batch),
        jax.device_put(w, NamedSharding(mesh, P())),
        jax.device_put(y, batch),
    )


def auto_mesh():
    return jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))


def test_the_features_stay_split_over_the_batch():
    """症状一：输入的批次维切在 8 个设备上，编码结果 (T, B, H) 也该这样切：每个设备 (T, B/8, H)。
    打印的是结果的分片；值与 NumPy 参考一致。
    Symptom one: the input's batch axis is split over the 8 devices, and so should the encoded
    (T, B, H) be: (T, B/8, H) per device. The test prints the result's sharding; the values
    match the NumPy reference.
    """
    x_np, w_np, y_np = make_data()
    x, w, _ = placed(auto_mesh(), x_np, w_np, y_np)
    out = jax.jit(encode)(x, w)
    print(f"encode's output: {out.sharding}")
    np.testing.assert_allclose(out, numpy_encode(x_np, w_np), rtol=1e-4, atol=1e-5)
    assert out.sharding.shard_shape(out.shape) == (T, B // 8, H)


def test_the_training_step_gathers_nothing():
    """症状二：损失和梯度是标量和 (D, H)，本来就复制在每个设备上，看结果的分片什么也看不出来。
    编译后的训练步里不该有 all-gather，集合通信只有一条 all-reduce（损失和梯度合成一个元组，一起
    沿批次求和），每个设备的临时内存
    （memory_analysis().temp_size_in_bytes）不超过它自己那块 x 的两倍，每个设备的浮点运算
    （cost_analysis()["flops"]）不到单个设备算整批的四分之一。
    Symptom two: the loss and the gradient are a scalar and (D, H), replicated on every device
    anyway: their shardings show nothing. The compiled training step should hold no
    all-gather, and one collective only: an all-reduce that sums the loss and the gradient over
    the batch together, as one tuple. Each device's temporaries
    (memory_analysis().temp_size_in_bytes) should stay within twice its own block of x, and
    each device's floating-point work (cost_analysis()["flops"]) under a quarter of one device
    doing the whole batch.
    """
    x_np, w_np, y_np = make_data()
    x, w, y = placed(auto_mesh(), x_np, w_np, y_np)
    step = jax.jit(jax.value_and_grad(loss))
    compiled = step.lower(w, x, y).compile()
    found = collectives(compiled.as_text())
    temp = compiled.memory_analysis().temp_size_in_bytes
    whole = jax.jit(jax.value_and_grad(loss)).lower(w_np, x_np, y_np).compile()  # one device
    flops, flops_whole = compiled.cost_analysis()["flops"], whole.cost_analysis()["flops"]
    print(f"collectives {found}; temp {temp} B per device; flops {flops} vs {flops_whole}")
    value, grad = compiled(w, x, y)
    expected_value = np.mean((numpy_encode(x_np, w_np) - y_np) ** 2)
    np.testing.assert_allclose(value, expected_value, rtol=1e-4)
    np.testing.assert_allclose(grad, jax.grad(loss)(w_np, x_np, y_np), rtol=1e-4, atol=1e-6)
    assert "all-gather" not in found
    assert list(found) == ["all-reduce"] and len(found["all-reduce"]) == 1  # (loss, grad)
    assert temp <= 2 * x.addressable_shards[0].data.nbytes
    assert flops < flops_whole / 4


def test_explicit_axes_accept_the_program():
    """症状三：在 Explicit 轴的网格上（jax.set_mesh），分片是类型的一部分，JAX 在追踪时就拒绝
    一个只能靠收齐整批才能做的操作，不会悄悄复制。修好的编码器在这里照样能跑，结果的类型里批次维
    还是切开的。
    Symptom three: on a mesh of Explicit axes (jax.set_mesh) shardings are part of the types,
    and JAX refuses at trace time an op that only gathering the whole batch could do, instead
    of replicating quietly. The repaired encoder runs here too, and its result's type keeps
    the batch axis split.
    """
    mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Explicit,))
    x_np, w_np, y_np = make_data()
    with jax.set_mesh(mesh):
        x, w, _ = placed(mesh, x_np, w_np, y_np)
        out = jax.jit(encode)(x, w)  # a refusal raises here, naming the op / 拒绝时在这里报错
    np.testing.assert_allclose(out, numpy_encode(x_np, w_np), rtol=1e-4, atol=1e-5)
    assert jax.typeof(out).sharding.spec == P(None, "data", None)
