"""03 · 交错的 1F1B：微批次比阶段多 / interleaved 1F1B with more microbatches than stages.

流水线那个文件的 1F1B 每个设备放一层；交错调度的那个文件每个设备放 V 个虚拟阶段，但只做前向，
而且 M ≤ N。这里把两者合起来：N 个设备、每个设备 V 层（设备 k 拿第 k、k+N……层），M 个微批次
（M 是 N 的倍数，可以比 N 多很多），每个时间步每个设备做一层的前向和一层的反向。微批次按 N 个
一组进入流水线：一组沿环走完 V 圈，下一组才进入，所以设备 0 从来不用同时接住新的微批次和
绕回来的旧微批次。

The pipeline file's 1F1B holds one layer per device; the interleaved file holds V virtual
stages per device, but runs the forward only, with M ≤ N. Here the two meet: N devices with V
layers each (device k holds layers k, k+N, ...), M microbatches (a multiple of N, possibly many
more than N), and at every time step every device runs one layer's forward and one layer's
backward. The microbatches enter in groups of N: a group goes V times around the ring before
the next group enters, so device 0 never has to take a new microbatch and one coming back
around at the same step.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api import program as program_reader

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8  # 设备数（chapter.toml: devices = 8）/ devices


def training_data(microbatches, virtual, batch=2, d=8, seed=0):
    """N·virtual 层 (N·V, d, d)、同样的权重排成 (N, V, d, d)（weights[k, v] 是第 v·N + k 层）、
    微批次和目标 (M, b, d)。/ N·virtual layers (N·V, d, d), the same weights laid out
    (N, V, d, d) (weights[k, v] is layer v·N + k), microbatches and targets (M, b, d)."""
    rng = np.random.default_rng(seed)
    layers = rng.standard_normal((virtual * N, d, d), dtype=np.float32) / np.sqrt(d)
    weights = layers.reshape(virtual, N, d, d).transpose(1, 0, 2, 3)
    xs = rng.standard_normal((microbatches, batch, d), dtype=np.float32)
    targets = rng.standard_normal((microbatches, batch, d), dtype=np.float32)
    return layers, weights, xs, targets


def train_loss(layers, xs, targets):
    """不切分的参考：所有微批次穿过所有层，损失 0.5·Σ(输出 - 目标)²。/ The unsharded
    reference: every microbatch through every layer, loss 0.5·Σ(output - target)²."""
    h, _ = lax.scan(lambda h, w: (jnp.tanh(h @ w), None), xs, layers)  # 一层接一层 / layer by layer
    return 0.5 * jnp.sum((h - targets) ** 2)


def reference(layers, xs, targets):
    """参考的损失和梯度，梯度排成 (N, V, d, d)，和权重一样。/ The reference loss and gradient,
    the gradient laid out (N, V, d, d) like the weights."""
    loss, grad = jax.jit(jax.value_and_grad(train_loss))(jnp.asarray(layers), xs, targets)
    virtual = layers.shape[0] // N
    return loss, np.asarray(grad).reshape(virtual, N, *grad.shape[1:]).transpose(1, 0, 2, 3)


def schedule_step(weights, xs, targets):
    """jit(shard_map(interleaved_1f1b)) 和放好的参数：权重按 P("stage") 切（每个设备 V 层），
    微批次和目标复制。/ jit(shard_map(interleaved_1f1b)) and its placed arguments: the weights
    split by P("stage") (V layers per device), microbatches and targets replicated."""
    mesh = jax.make_mesh((N,), ("stage",))
    args = (
        jax.device_put(weights, NamedSharding(mesh, P("stage"))),
        jax.device_put(xs, NamedSharding(mesh, P())),
        jax.device_put(targets, NamedSharding(mesh, P())),
    )
    specs = {"in_specs": (P("stage"), P(), P()), "out_specs": (P("stage"), P("stage"))}
    return jax.jit(jax.shard_map(interleaved_1f1b, mesh=mesh, **specs)), args


# ---- 你来实现 / your code ---------------------------------------------------------------


def interleaved_1f1b(w_block, xs, targets):
    """交错的 1F1B 训练步。w_block (1, V, d, d)：本设备（k）的 V 层，第 v 层是模型的第 v·N + k 层；
    xs、targets (M, b, d)，M 是 N 的倍数。返回 (损失 (1,), 梯度 (1, V, d, d))：损失只在最后一个
    设备上是整个模型的 0.5·Σ(输出 - 目标)²（别的设备返回什么都行），梯度是本设备 V 层的。
    写成一个 lax.fori_loop，t = 0 … M·V + V·N + N - 3。每个设备按同一个顺序处理它的“单元”
    （微批次, 虚拟阶段）：第 i 个单元是微批次 (i // (N·V))·N + i % N 的虚拟阶段 (i // N) % V。
    - 前向：第 t 步设备 k 做第 j = t - k 个单元（0 ≤ j < M·V 时才算数）。输入 h：设备 0 在
      虚拟阶段 0 取 xs 的那个微批次，其余情况取上一步收到的激活值；y = tanh(h @ W_v)；h 存进
      环形缓冲区的第 t % R 格；y 沿闭合的环 ppermute 给设备 (k+1) % N。最后一个设备在最后一个
      虚拟阶段算完时，误差 y - 目标就是输出的余切，也加进损失（单元不算数时为 0）。
    - 反向：第 t 步设备 k 反向第 i = t - (V·N + N - 2 - k) 个单元，但虚拟阶段倒过来：
      V - 1 - (i // N) % V，微批次照旧。它在本设备的前向是哪一步、存在哪一格？取出它的输入，
      重算这一层的输出；本层输出的余切：最后一个设备在最后一个虚拟阶段用刚算的误差，其余情况用
      上一步从设备 (k+1) % N 收到的。把这一层的梯度加进梯度的第 v 层，输入的余切沿反过来的环
      送给设备 (k-1) % N。
    R 要多大（只能取决于 N 和 V）？carry 里的零先用 lax.pcast(…, "stage", to="varying") 变成
    随设备不同的值。大约 35 行。
    Interleaved 1F1B's training step. w_block (1, V, d, d): this device's (k) V layers, its
    layer v being the model's layer v·N + k; xs, targets (M, b, d), M a multiple of N. Return
    (loss (1,), gradient (1, V, d, d)): the loss, on the last device only, is the whole model's
    0.5·Σ(output - target)² (what other devices return does not matter), the gradient that of
    this device's V layers. Write one lax.fori_loop, t = 0 … M·V + V·N + N - 3. Every device
    works through its "units" (microbatch, virtual stage) in the same order: unit i is
    microbatch (i // (N·V))·N + i % N at virtual stage (i // N) % V.
    - Forward: at step t device k runs unit j = t - k (it counts when 0 ≤ j < M·V). Its input
      h: device 0 at virtual stage 0 takes that microbatch of xs, everything else takes the
      activations received at the step before; y = tanh(h @ W_v); store h in slot t % R of a
      ring buffer; ppermute y around the closed ring to device (k+1) % N. When the last device
      finishes the last virtual stage, the error y - target is the output's cotangent and goes
      into the loss too (0 when the unit does not count).
    - Backward: at step t device k runs the backward of unit i = t - (V·N + N - 2 - k), with
      the virtual stages reversed: V - 1 - (i // N) % V, the microbatch as before. At which
      step did this device run its forward, in which slot is it? Take its input, recompute the
      layer's output; the cotangent of the layer's output: on the last device at the last
      virtual stage the error just computed, otherwise what arrived from device (k+1) % N at
      the step before. Add the layer's gradient to layer v of the gradient, and send the
      input's cotangent around the reversed ring to device (k-1) % N.
    How large must R be (it may depend on N and V only)? The zeros of the carry must first be
    made device-varying with lax.pcast(…, "stage", to="varying"). About 35 lines.
    """
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    virtual, m = w_block.shape[1], xs.shape[0]
    forward = [(j, (j + 1) % n) for j in range(n)]
    back = [((j + 1) % n, j) for j in range(n)]
    ring = 2 * virtual * n - 1  # 设备 0 的虚拟阶段 0 等得最久 / device 0's stage 0 waits longest
    lag = virtual * n + n - 2  # 设备 k 的第一个反向在第 lag - k 步 / device k's first backward

    def unit(i):  # 第 i 个单元：(微批次, 虚拟阶段) / unit i: (microbatch, virtual stage)
        return (i // (n * virtual)) * n + i % n, (i // n) % virtual

    def tick(t, carry):
        saved, got_forward, got_back, loss, grad = carry
        micro, v = unit(t - k)
        h = jnp.where((k == 0) & (v == 0), xs[jnp.clip(micro, 0, m - 1)], got_forward)
        y = jnp.tanh(h @ w_block[0, v])
        saved = lax.dynamic_update_index_in_dim(saved, h, t % ring, 0)
        counts = (t - k >= 0) & (t - k < m * virtual)
        ends = counts & (k == n - 1) & (v == virtual - 1)
        err = jnp.where(ends, y - targets[jnp.clip(micro, 0, m - 1)], 0.0)
        loss = loss + 0.5 * jnp.sum(err**2)

        i = t - (lag - k)
        v_b = virtual - 1 - unit(i)[1]
        j = (i // (n * virtual)) * n * virtual + v_b * n + i % n  # 同一单元的前向序号 / its forward
        h_b = lax.dynamic_index_in_dim(saved, (k + j) % ring, 0, keepdims=False)
        w_b = w_block[0, v_b]
        g = jnp.where((k == n - 1) & (v_b == virtual - 1), err, got_back)
        g_pre = g * (1 - jnp.tanh(h_b @ w_b) ** 2)
        grad = grad.at[v_b].add(h_b.T @ g_pre)
        sent_forward = lax.ppermute(y, "stage", forward)
        sent_back = lax.ppermute(g_pre @ w_b.T, "stage", back)
        return saved, sent_forward, sent_back, loss, grad

    zero = jnp.zeros(xs.shape[1:], xs.dtype)
    stash = jnp.zeros((ring, *xs.shape[1:]), xs.dtype)
    start = lax.pcast((stash, zero, zero, jnp.zeros((), xs.dtype)), "stage", to="varying")
    carry = (*start, jnp.zeros_like(w_block[0]))
    *_, loss, grad = lax.fori_loop(0, m * virtual + lag, tick, carry)
    return loss[None], grad[None]


# ---- 检查 / checks ----------------------------------------------------------------------


def test_interleaved_1f1b_runs_more_microbatches_than_stages():
    """（先写好 interleaved_1f1b。）16 个微批次、8 个设备、每个设备 2 层：最后一个设备的损失和每个
    设备的梯度都等于不切分的 16 层模型的（jax.value_and_grad）。然后从程序里量出它的两个好处。
    时间：用课程的程序读取器（jaxkoans/api/program.py）从 jaxpr 里读出循环串行走的步数；同一个
    函数在 V = 1 时就是一个设备一层的 1F1B。把 16 层按 V = 1 的办法放（每个设备连续 2 层），每个
    时间步要算 2 层；交错的调度用的步数比这个的两倍少。内存：编译后 memory_analysis() 的
    temp_size_in_bytes 在 8 个和 16 个微批次下一样大：每个设备存下的激活值个数不随 M 增长。
    (Write interleaved_1f1b first.) 16 microbatches, 8 devices, 2 layers per device: the last
    device's loss and every device's gradient equal the unsharded 16-layer model's
    (jax.value_and_grad). Then measure its two gains from the program. Time: the course's
    program reader (jaxkoans/api/program.py) reads the loop's serial steps from the jaxpr; the
    same function with V = 1 is 1F1B with one layer per device. Lay the 16 layers out the
    V = 1 way (2 consecutive layers per device) and every time step computes 2 layers; the
    interleaved schedule takes fewer steps than twice that. Memory: memory_analysis()'s
    temp_size_in_bytes of the compiled step is the same for 8 and for 16 microbatches: the
    activations each device keeps do not grow with M.
    """
    microbatches, virtual = 16, 2
    layers, weights, xs, targets = training_data(microbatches, virtual)
    step, args = schedule_step(weights, xs, targets)
    compiled = step.lower(*args).compile()
    loss, grads = compiled(*args)
    assert grads.sharding.shard_shape(grads.shape) == (1, virtual, 8, 8)
    ref_loss, ref_grads = reference(layers, xs, targets)
    np.testing.assert_allclose(np.asarray(loss)[N - 1], ref_loss, rtol=1e-5)
    np.testing.assert_allclose(grads, ref_grads, rtol=1e-4, atol=1e-5)

    steps = program_reader.of(step, *args).costs().serial_steps
    assert steps == microbatches * virtual + virtual * N + N - 2
    plain_step, plain_args = schedule_step(*training_data(microbatches, 1)[1:])
    plain = program_reader.of(plain_step, *plain_args).costs().serial_steps
    assert plain == microbatches + 2 * N - 2
    assert steps < virtual * plain

    fewer_step, fewer_args = schedule_step(*training_data(N, virtual)[1:])
    fewer = fewer_step.lower(*fewer_args).compile()
    temp = compiled.memory_analysis().temp_size_in_bytes
    assert fewer.memory_analysis().temp_size_in_bytes == temp
