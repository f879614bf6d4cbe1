"""03 · 交错的流水线调度 / an interleaved pipeline schedule.

GPipe 把连续的几层放在一个设备上（一个阶段）。交错调度（interleaved，Megatron-LM 的虚拟阶段）把
N·V 层轮流分给 N 个设备：设备 k 拿第 k、k+N、k+2N…… 层（V 个虚拟阶段），微批次沿环走 V 圈，
从最后一个设备回到设备 0 进入下一圈。每个时间步每个设备算一层。
`# ✍️ BEGIN` 与 `# ✍️ END` 之间的 interleaved_pipeline 是照着流水线那个文件的 GPipe 改出来的，
能跑、不报错，但有两处错：结果和不切分的模型对不上。只修改标记之间的代码。

GPipe puts consecutive layers on one device (one stage). The interleaved schedule (Megatron-LM's
virtual stages) deals N·V layers out to N devices in turn: device k holds layers k, k+N,
k+2N, ... (V virtual stages), and the microbatches go V times around the ring, from the last
device back to device 0 for the next round. At each time step each device computes one layer.
The interleaved_pipeline between `# ✍️ BEGIN` and `# ✍️ END` was adapted from the pipeline
file's GPipe; it runs without an error but has two mistakes: its result disagrees with the
unsharded model. Change only the code between the markers.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8  # 设备数（chapter.toml: devices = 8）/ devices
M = 8  # 微批次个数（这里的调度要 M ≤ N）/ microbatches (this schedule needs M ≤ N)
SPECS = {"in_specs": (P("stage"), P()), "out_specs": P("stage")}


def model(virtual, batch=2, d=8, seed=0):
    """N·virtual 层的权重，排成 (N, virtual, d, d)：weights[k, v] 是第 v·N + k 层；M 个微批次。
    The weights of N·virtual layers laid out (N, virtual, d, d): weights[k, v] is layer v·N + k;
    M microbatches."""
    rng = np.random.default_rng(seed)
    layers = rng.standard_normal((virtual * N, d, d), dtype=np.float32) / np.sqrt(d)
    weights = layers.reshape(virtual, N, d, d).transpose(1, 0, 2, 3)
    return layers, weights, rng.standard_normal((M, batch, d), dtype=np.float32)


def sequential(layers, xs):
    """不切分的参考：每个微批次依次穿过所有层。/ The reference: every microbatch through all layers."""
    h = xs
    for w in layers:
        h = jnp.tanh(h @ w)
    return h


def compiled_schedule(weights, xs):
    """编译好的 shard_map(interleaved_pipeline)：权重按 P("stage") 切（每个设备 V 层），微批次复制。
    The compiled shard_map(interleaved_pipeline): weights split by P("stage") (V layers per
    device), the microbatches replicated."""
    mesh = jax.make_mesh((N,), ("stage",))
    args = (jax.device_put(weights, NamedSharding(mesh, P("stage"))), jax.device_put(xs, NamedSharding(mesh, P())))
    return jax.jit(jax.shard_map(interleaved_pipeline, mesh=mesh, **SPECS)).lower(*args).compile(), args


# ✍️ BEGIN
def interleaved_pipeline(w_block, xs):
    """w_block (1, V, d, d)：本设备（k）的 V 层，第 v 层是整个模型的第 v·N + k 层；xs (M, b, d)。
    时间步 t 时设备 k 在算微批次 (t - k) % N 的第 (t - k) // N 个虚拟阶段（这两个数在范围内时；
    否则它空等）。返回 (1, M, b, d)：最后一个设备的块是模型的输出。
    w_block (1, V, d, d): this device's (k) V layers, its layer v being the model's layer
    v·N + k; xs (M, b, d). At time step t device k works on microbatch (t - k) % N at virtual
    stage (t - k) // N (when both are in range; otherwise it idles). Returns (1, M, b, d): the
    last device's block is the model's output."""
    n, k = lax.axis_size("stage"), lax.axis_index("stage")
    virtual, m = w_block.shape[1], xs.shape[0]
    ring = [(j, (j + 1) % n) for j in range(n)]

    def tick(t, carry):
        arrived, outputs = carry
        stage, micro = (t - k) // n, (t - k) % n
        inp = jnp.where((k == 0) & (t < m), xs[jnp.minimum(t, m - 1)], arrived)
        out = jnp.tanh(inp @ w_block[0, jnp.clip(stage, 0, virtual - 1)])
        done = (k == n - 1) & (stage == virtual - 1) & (micro < m)
        outputs = jnp.where(done, outputs.at[micro].set(out), outputs)
        return lax.ppermute(out, "stage", ring), outputs

    start = lax.pcast((jnp.zeros_like(xs[0]), jnp.zeros_like(xs)), "stage", to="varying")
    _, outputs = lax.fori_loop(0, m + n * virtual - 1, tick, start)
    return outputs[None]
# ✍️ END


# ---- 检查 / checks ----------------------------------------------------------------------


def test_the_interleaved_schedule_equals_the_sequential_model():
    """修好以后，最后一个设备的输出等于不切分的 N·V 层模型：V = 2（16 层）和 V = 1（8 层，就是
    一个设备一层的 GPipe）。
    Once fixed, the last device's output equals the unsharded model of N·V layers: V = 2 (16
    layers) and V = 1 (8 layers: GPipe with one layer per device).
    """
    for virtual in (2, 1):
        layers, weights, xs = model(virtual)
        compiled, args = compiled_schedule(weights, xs)
        assert args[0].sharding.shard_shape(args[0].shape)[:2] == (1, virtual)
        out = np.asarray(compiled(*args))[N - 1]
        np.testing.assert_allclose(out, sequential(layers, xs), rtol=1e-5, atol=1e-5)


def test_the_bubble_is_read_from_the_loops_trip_count():
    """bubble 从编译后的程序里量：HLO 里 while 的 known_trip_count 是时间步数 T，每个设备在其中
    M·V 步里算有用的层，其余 T - M·V 步空等。V = 2 时 T 是多少？空等几步？V = 1 的同一个函数就是
    GPipe。把 V = 2 的 16 层按 GPipe 放（每个设备连续 2 层）时，每个时间步要算 2 层，空等的比例和
    V = 1 的一样：交错调度空等的比例更小。循环体里只有一条 collective-permute，它的环从最后一个设备
    回到设备 0。循环里没有多余的一步：同一个函数在一个设备、一个微批次上正好循环 V 次，每步一层
    （测试检查了这一点），所以 T 是这个调度本身的长度，不是多垫了几步的。
    Measure the bubble from the compiled program: the HLO's while records known_trip_count, the
    number of time steps T; in M·V of them each device computes a useful layer, and idles in the
    other T - M·V. With V = 2, what is T? How many steps idle? The same function with V = 1 is
    GPipe. Lay V = 2's 16 layers out GPipe's way (2 consecutive layers per device) and each time
    step computes 2 layers, idling the same share as V = 1: the interleaved schedule idles a
    smaller share. The loop's body holds one collective-permute only, its ring running from the
    last device back to device 0. No step is spare: on one device with one microbatch the same
    function loops exactly V times, one layer a step (the test checks it), so T is the
    schedule's own length, not a padded one.
    """

    def trip_count(virtual):
        _, weights, xs = model(virtual)
        hlo = compiled_schedule(weights, xs)[0].as_text()
        (found,) = re.findall(r'"known_trip_count":\{"n":"(\d+)"\}', hlo)
        return int(found), hlo

    steps, hlo = trip_count(2)
    gpipe_steps, _ = trip_count(1)
    assert steps == 23
    assert gpipe_steps == 15
    assert steps - M * 2 == gpipe_steps - M  # 空等的步数相同 / as many idle steps
    assert 1 - M * 2 / steps < 1 - M / gpipe_steps
    assert collectives(hlo) == {"collective-permute": ["f32[2,8]"]}
    (pairs,) = re.findall(r"collective-permute\(.*source_target_pairs=(\{[^ ]*\})", hlo)
    assert "{7,0}" in pairs  # 环闭合 / the ring closes

    # 一个设备、一个微批次：V 层正好 V 步，没有一步空等 / one device, one microbatch: V layers
    # take exactly V steps, not one idle
    layers, weights, xs = model(2)
    lone = jax.make_mesh((1,), ("stage",), devices=jax.devices()[:1])
    args = (
        jax.device_put(weights[:1], NamedSharding(lone, P("stage"))),
        jax.device_put(xs[:1], NamedSharding(lone, P())),
    )
    alone = jax.jit(jax.shard_map(interleaved_pipeline, mesh=lone, **SPECS)).lower(*args).compile()
    np.testing.assert_allclose(
        alone(*args)[0], sequential(layers[::N], xs[:1]), rtol=1e-5, atol=1e-5
    )  # device 0's layers 0 and N / 设备 0 的第 0 层和第 N 层
    assert re.findall(r'"known_trip_count":\{"n":"(\d+)"\}', alone.as_text()) == ["2"]
