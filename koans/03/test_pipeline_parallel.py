"""03 · 流水线并行 / pipeline parallelism.

模型太深、一个设备放不下所有层时，把层分给设备：设备 k 只存第 k 层（一个阶段，stage），激活值
沿设备一站一站往下传（ppermute）。只送一整批的话，任何时刻只有一个设备在算；把批次切成几个
微批次（microbatch）一个接一个送进去，几个阶段就能同时处理不同的微批次（GPipe 的前向调度）。
开头和结尾各有一段有的设备空等的时间（bubble）。这里的 8 个阶段各是一层 tanh(h @ W_k)。

When a model is too deep for one device's memory, its layers are split over the devices:
device k stores layer k only (one stage), and the activations travel from device to device
(ppermute). Sending one whole batch keeps a single device busy at any time; cut the batch
into microbatches sent one after another, and the stages work on different microbatches at
the same time (GPipe's forward schedule). At the start and at the end some devices wait (the
bubble). Here each of the 8 stages is one layer tanh(h @ W_k).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8  # 阶段数 = 设备数（chapter.toml: devices = 8）/ stages = devices
SPECS = {"in_specs": (P("stage"), P()), "out_specs": P("stage")}


def sequential(weights, microbatches):
    """不切分的参考：每个微批次依次穿过 N 层。/ The unsharded reference: every microbatch
    goes through the N layers in turn."""
    h = microbatches
    for w in weights:
        h = jnp.tanh(h @ w)
    return h


def model(microbatches=4, batch=2, d=16, seed=0):
    """N 层的权重 (N, d, d) 和微批次 (M, b, d)。/ N layers' weights and M microbatches."""
    rng = np.random.default_rng(seed)
    weights = rng.standard_normal((N, d, d), dtype=np.float32) / np.sqrt(d)
    xs = rng.standard_normal((microbatches, batch, d), dtype=np.float32)
    return weights, xs


def compiled_pipeline(weights, xs):
    """编译好的 shard_map(pipeline)：权重按 P("stage") 切，每个设备一层；微批次复制。
    The compiled shard_map(pipeline): weights split by P("stage"), one layer per device;
    the microbatches replicated."""
    mesh = jax.make_mesh((N,), ("stage",))
    args = (
        jax.device_put(weights, NamedSharding(mesh, P("stage"))),
        jax.device_put(xs, NamedSharding(mesh, P())),
    )
    step = jax.jit(jax.shard_map(pipeline, mesh=mesh, **SPECS))
    return step.lower(*args).compile(), args


# ---- 你来实现 / your code ---------------------------------------------------------------


def pipeline(w_block, xs):
    """GPipe 的前向：w_block (1, d, d) 是本设备（阶段 k）的那一层，xs (M, b, d) 是全部微批次
    （每个设备都有，只有阶段 0 读它）。时间步 t = 0 … M+N-2，用 Python 循环写：每一步每个阶段
    对手里的输入算 tanh(输入 @ W_k)，然后用 ppermute 把结果交给阶段 k+1（不闭合的链：没人发给
    阶段 0）。阶段 0 在第 t 步的输入是微批次 t（t < M 时），别的阶段的输入是上一步收到的；
    最后一个阶段在第 t 步算完的是微批次 t-(N-1)，把它存进结果。返回 (1, M, b, d)：最后一个
    阶段的块就是整个模型的输出（别的阶段返回什么都行）。按阶段选值用 jnp.where 和
    lax.axis_index("stage")。大约 12 行。
    GPipe's forward pass: w_block (1, d, d) is this device's layer (stage k), xs (M, b, d) all
    the microbatches (on every device; only stage 0 reads them). Time steps t = 0 … M+N-2,
    written as a Python loop: at each step every stage computes tanh(input @ W_k) on what it
    holds, then ppermutes the result to stage k+1 (a chain that does not wrap: nobody sends to
    stage 0). Stage 0's input at step t is microbatch t (while t < M); the other stages' input
    is what arrived at the step before; at step t the last stage has finished microbatch
    t-(N-1): store it in the result. Return (1, M, b, d): the last stage's block is the
    model's output (what the other stages return does not matter). Choose values per stage
    with jnp.where and lax.axis_index("stage"). About 12 lines.
    """
    todo("pipeline: 微批次沿阶段链流过 / microbatches flow down the stages")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_pipeline_equals_the_sequential_model():
    """（先写好 pipeline。）最后一个阶段的输出等于不切分的模型（两种微批次个数）。每个设备只存
    一层：权重的分片是 (1, d, d)。
    (Write pipeline first.) The last stage's output equals the unsharded model (two numbers
    of microbatches). Each device stores one layer: the weights' shard is (1, d, d).
    """
    for microbatches in (4, 1):
        weights, xs = model(microbatches)
        compiled, args = compiled_pipeline(weights, xs)
        assert args[0].sharding.shard_shape(args[0].shape) == (1, 16, 16)
        out = compiled(*args)
        assert out.shape == (N, microbatches, 2, 16)
        last_stage = np.asarray(out)[N - 1]
        np.testing.assert_allclose(last_stage, sequential(weights, xs), rtol=1e-5, atol=1e-6)


def test_pipeline_passes_one_microbatch_of_activations_per_step():
    """（先写好 pipeline。）编译后的 HLO 里只有 collective-permute：每个时间步一条，传的是一个
    微批次的激活值 (b, d)，从不传权重。最后一步算完的结果不再传出去：循环在最后一步若也调用了
    ppermute，它的结果没人用，删掉它的是 JAX 而不是 XLA——jaxpr 里还有它，JAX 降级时做死代码
    消除，交给 XLA 的 StableHLO 里已经没有了（测试检查 StableHLO 和编译后的 HLO 条数相同）。
    M 个微批次、N 个阶段一共几条？每个设备算几次 dot？其中只有 M 次是有用的，其余落在 bubble
    里。把微批次一个一个地整条链走完（不重叠）要 M·(N-1) 条。
    (Write pipeline first.) The compiled HLO holds collective-permutes only: one per time
    step, each carrying one microbatch of activations (b, d), never a weight. What the last
    step computes is not sent on: if the loop calls ppermute at the last step too, nothing
    uses its result, and JAX, not XLA, deletes it: the jaxpr still holds it, JAX's dead-code
    elimination drops it when lowering, and the StableHLO handed to XLA no longer has it (the
    test checks that the StableHLO and the compiled HLO hold the same number). How many are
    there for M microbatches and N stages? How many dots does each device compute? Only M of them are
    useful; the others fall in the bubble. Walking each microbatch down the whole chain on
    its own (no overlap) would take M·(N-1).
    """
    weights, xs = model(microbatches=4)
    compiled, args = compiled_pipeline(weights, xs)
    hlo = compiled.as_text()
    found = collectives(hlo)
    assert set(found) == {"collective-permute"}
    mesh = jax.make_mesh((N,), ("stage",))
    stablehlo = jax.jit(jax.shard_map(pipeline, mesh=mesh, **SPECS)).lower(*args).as_text()
    # XLA deletes none of them: JAX already did / XLA 一条也没删：JAX 已经删过了
    assert stablehlo.count("stablehlo.collective_permute") == len(found["collective-permute"])
    assert found["collective-permute"] == ["f32[2,16]"] * __  # 一个微批次 (b, d) / one microbatch
    assert len(re.findall(r" dot\(", hlo)) == __


def bubble_fraction(stages, microbatches):
    """GPipe 前向里每个设备空等（落在 bubble 里）的时间步占它全部时间步的比例：M 个微批次流过
    N 个阶段一共要几个时间步，其中每个设备有几步在算有用的微批次？返回一个 Python 浮点数。
    大约 1 行。
    The share of each device's time steps that GPipe's forward spends idle (in the bubble): how
    many time steps do M microbatches take through N stages, and in how many of them does each
    device work on a real microbatch? Return a Python float. About 1 line.
    """
    todo("bubble_fraction: 空等的时间步 / 全部时间步 / idle time steps over all time steps")


def test_the_bubble_shrinks_as_the_microbatches_grow():
    """（先写好 pipeline 和 bubble_fraction。）从编译后的程序里量出 bubble：每个设备每个时间步算
    一次 dot，有用的只有 M 次，其余的 dot 落在 bubble 里。在 8 个和 4 个阶段上、几种微批次个数下，
    你的公式都等于量出来的比例。微批次越多 bubble 越小，但每个微批次越小、矩阵乘越碎：真实的流水线
    在两者之间取舍。换调度未必有用：标准的 1F1B 的 bubble 和 GPipe 一样大，它省的是内存（本文件
    最后几个 koan）；只有交错的调度（每个设备放几个不相邻的阶段）才把 bubble 缩短（Narayanan 等，
    2021，Megatron-LM 的流水线论文）。
    (Write pipeline and bubble_fraction first.) Measure the bubble from the compiled program:
    each device computes one dot per time step, only M of them useful, the others in the
    bubble. On 8 and on 4 stages, for several numbers of microbatches, your formula equals the
    measured share. More microbatches shrink the bubble, but each microbatch gets smaller and
    the matmuls finer: real pipelines trade the two. Another schedule does not necessarily
    help: the standard 1F1B has GPipe's bubble and saves memory instead (the last koans of this
    file); only an interleaved schedule (each device holding several non-adjacent stages)
    shortens the bubble (Narayanan et al., 2021, Megatron-LM's pipeline paper).
    """
    for stages in (N, 4):
        mesh = jax.make_mesh((stages,), ("stage",), devices=jax.devices()[:stages])
        step = jax.jit(jax.shard_map(pipeline, mesh=mesh, **SPECS))
        for microbatches in (1, 3, 8):
            weights, xs = model(microbatches)
            w = jax.device_put(weights[:stages], NamedSharding(mesh, P("stage")))
            hlo = step.lower(w, jax.device_put(xs, NamedSharding(mesh, P()))).compile().as_text()
            dots = len(re.findall(r" dot\(", hlo))
            measured = 1 - microbatches / dots
            assert isinstance(bubble_fraction(stages, microbatches), float)
            assert abs(bubble_fraction(stages, microbatches) - measured) < 1e-12


# ---- 反向传播 / the backward pass ------------------------------------------------------
# 训练要的是梯度。前向把激活值从阶段 k 送到 k+1；反向把损失对激活值的梯度（余切，cotangent）
# 从阶段 k+1 送回 k，时间步倒着走，每个阶段用前向时存下的输入算出本层权重的梯度。
# Training needs gradients. The forward sends activations from stage k to k+1; the backward
# sends the loss's gradient with respect to them (the cotangent) from stage k+1 back to k,
# walking the time steps in reverse, and each stage forms its layer's weight gradient from the
# inputs it saved in the forward.


def stage_inputs(weights, xs):
    """前向时每个阶段在每个时间步存下的输入 (N, M+N-1, b, d)：阶段 k 在第 t 步拿着微批次 t-k
    进入第 k 层之前的激活值；bubble 里的时间步存 0。/ The input each stage saved at each time
    step of the forward, (N, M+N-1, b, d): at step t stage k held microbatch t-k's activations
    before layer k; the steps in the bubble save zeros."""
    m = xs.shape[0]
    saved = np.zeros((N, m + N - 1, *xs.shape[1:]), np.float32)
    h = np.asarray(xs)
    for k in range(N):
        saved[k, k : k + m] = h
        h = np.tanh(h @ weights[k])
    return saved


def reference_grad(weights, xs, ct):
    """不切分的模型的梯度：损失是 sum(输出 * ct)，所以 ct 就是输出的余切。/ The unsharded model's
    gradient: the loss is sum(output * ct), so ct is the output's cotangent."""
    return jax.grad(lambda w: jnp.vdot(sequential(w, xs), ct))(jnp.asarray(weights))


def compiled_backward(weights, saved, ct):
    """编译好的 shard_map(pipeline_backward)：权重和存下的输入按 P("stage") 切，余切复制。
    The compiled shard_map(pipeline_backward): weights and saved inputs split by P("stage"),
    the cotangent replicated."""
    mesh = jax.make_mesh((N,), ("stage",))
    args = (
        jax.device_put(weights, NamedSharding(mesh, P("stage"))),
        jax.device_put(saved, NamedSharding(mesh, P("stage"))),
        jax.device_put(ct, NamedSharding(mesh, P())),
    )
    specs = {"in_specs": (P("stage"), P("stage"), P()), "out_specs": P("stage")}
    step = jax.jit(jax.shard_map(pipeline_backward, mesh=mesh, **specs))
    return step.lower(*args).compile(), args


def pipeline_backward(w_block, saved, ct):
    """GPipe 的反向：w_block (1, d, d) 是本阶段的层，saved (1, T, b, d) 是本阶段前向时第 0 … T-1
    步存下的输入（T = M+N-1），ct (M, b, d) 是整个模型输出的余切（每个设备都有，只有最后一个阶段
    读它）。时间步倒着走，t = T-1 … 0，用 Python 循环写：每一步每个阶段先得到本层输出的余切 g——
    最后一个阶段在第 t 步的输出是微批次 t-(N-1)（t ≥ N-1 时），它的余切是 ct 的那一项；别的阶段
    用上一步（也就是第 t+1 步）从阶段 k+1 收到的。然后用存下的输入 h 重算本层的输出
    y = tanh(h @ W)，本层权重的梯度加上 hᵀ @ (g·(1-y²))，把输入的余切 (g·(1-y²)) @ Wᵀ 用
    ppermute 送回阶段 k-1（不闭合的链）。返回本层权重的梯度 (1, d, d)。不重算前向的传递：
    只用 saved。大约 12 行。
    GPipe's backward pass: w_block (1, d, d) is this stage's layer, saved (1, T, b, d) the
    inputs this stage saved at steps 0 … T-1 of the forward (T = M+N-1), ct (M, b, d) the
    cotangent of the whole model's output (on every device; only the last stage reads it).
    Walk the time steps in reverse, t = T-1 … 0, as a Python loop: at each step every stage
    first gets the cotangent g of its layer's output: at step t the last stage's output is
    microbatch t-(N-1) (when t ≥ N-1), whose cotangent is that entry of ct; the other stages
    use what arrived from stage k+1 at the step before (step t+1). Then recompute the layer's
    output y = tanh(h @ W) from the saved input h, add hᵀ @ (g·(1-y²)) to the layer's weight
    gradient, and ppermute the input's cotangent (g·(1-y²)) @ Wᵀ back to stage k-1 (a chain
    that does not wrap). Return the layer's weight gradient (1, d, d). Do not redo the
    forward's transfers: use saved only. About 12 lines.
    """
    todo("pipeline_backward: 余切沿链倒着走 / cotangents walk the chain backwards")


def test_the_backward_pass_gives_the_unpipelined_gradient():
    """（先写好 pipeline_backward。）每个阶段算出的权重梯度拼起来等于不切分的模型的梯度
    （两种微批次个数）；每个设备只存、只返回一层的梯度：(1, d, d)。
    (Write pipeline_backward first.) The stages' weight gradients, put together, equal the
    unsharded model's gradient (two numbers of microbatches); each device stores and returns
    one layer's gradient only: (1, d, d).
    """
    for microbatches in (4, 1):
        weights, xs = model(microbatches)
        ct = np.random.default_rng(1).standard_normal(xs.shape, dtype=np.float32)
        compiled, args = compiled_backward(weights, stage_inputs(weights, xs), ct)
        grads = compiled(*args)
        assert grads.sharding.shard_shape(grads.shape) == (1, 16, 16)
        np.testing.assert_allclose(grads, reference_grad(weights, xs, ct), rtol=1e-4, atol=1e-5)


def test_the_backward_sends_cotangents_the_other_way():
    """（先写好 pipeline_backward。）编译后的 HLO 里只有 collective-permute，每个时间步一条、传一个
    微批次的余切 (b, d)：第 0 步送回的余切没人用，和前向最后一步一样被删掉。每条的
    source_target_pairs 写着谁发给谁：和前向的链比一比。
    (Write pipeline_backward first.) The compiled HLO holds collective-permutes only, one per
    time step, each carrying one microbatch of cotangents (b, d): what step 0 would send back
    nobody uses, and it is deleted like the forward's last transfer. Each one's
    source_target_pairs say who sends to whom: compare them with the forward's chain.
    """
    weights, xs = model(microbatches=3)
    ct = np.ones(xs.shape, np.float32)
    compiled, _ = compiled_backward(weights, stage_inputs(weights, xs), ct)
    hlo = compiled.as_text()
    found = collectives(hlo)
    assert set(found) == {"collective-permute"}
    assert found["collective-permute"] == ["f32[2,16]"] * __
    pairs = set(re.findall(r"collective-permute\(.*source_target_pairs=(\{[^ ]*\})", hlo))
    assert pairs == __


# ---- 1F1B：前向和反向交替 / 1F1B: forwards and backwards interleaved -------------------
# GPipe 先把 M 个微批次的前向全部做完，才开始反向：每个阶段要把 M 个微批次的输入都存到反向用完。
# 1F1B（one forward, one backward）让最后一个阶段一算完某个微批次的前向就开始它的反向，之后每个
# 时间步每个阶段都做一次前向和一次反向：一个微批次的输入在阶段 k 只需要存到它的余切回来为止，
# 存下的激活值个数不随 M 增长。
# GPipe runs all M microbatches' forwards before any backward: every stage keeps the inputs of
# all M microbatches until the backward has used them. 1F1B (one forward, one backward) starts
# a microbatch's backward as soon as the last stage has finished its forward, and from then on
# every stage does one forward and one backward per time step: stage k keeps a microbatch's
# input only until its cotangent comes back, so the number of saved activations does not grow
# with M.


def train_loss(weights, xs, targets):
    """不切分的模型的训练损失：0.5·Σ(输出 - 目标)²。/ The unsharded model's training loss."""
    return 0.5 * jnp.sum((sequential(weights, xs) - targets) ** 2)


def training_data(microbatches, seed=0):
    """权重、微批次和目标 (M, b, d)。/ Weights, microbatches and targets (M, b, d)."""
    weights, xs = model(microbatches, seed=seed)
    targets = np.random.default_rng(seed + 1).standard_normal(xs.shape, dtype=np.float32)
    return weights, xs, targets


def gpipe_grads(w_block, xs, targets):
    """GPipe 的训练步：对你的 pipeline 求导（反向是 JAX 转置出来的，在全部前向之后）。
    GPipe's training step: the derivative of your pipeline (JAX transposes it into a backward
    that runs after every forward)."""
    k, n = lax.axis_index("stage"), lax.axis_size("stage")

    def local_loss(w):
        out = pipeline(w, xs)[0]
        return jnp.where(k == n - 1, 0.5 * jnp.sum((out - targets) ** 2), 0.0)

    return jax.grad(local_loss)(w_block)


def compiled_step(schedule, weights, xs, targets):
    """编译好的 shard_map(schedule)：权重按 P("stage") 切，微批次和目标复制。
    The compiled shard_map(schedule): weights split by P("stage"), microbatches and targets
    replicated."""
    mesh = jax.make_mesh((N,), ("stage",))
    args = (
        jax.device_put(weights, NamedSharding(mesh, P("stage"))),
        jax.device_put(xs, NamedSharding(mesh, P())),
        jax.device_put(targets, NamedSharding(mesh, P())),
    )
    specs = {"in_specs": (P("stage"), P(), P()), "out_specs": P("stage")}
    step = jax.jit(jax.shard_map(schedule, mesh=mesh, **specs))
    return step.lower(*args).compile(), args


def one_f_one_b(w_block, xs, targets):
    """1F1B 的训练步，返回本阶段那一层的权重梯度 (1, d, d)（损失是 0.5·Σ(输出 - 目标)²）。
    时间步 t = 0 … M+2N-3，写成 lax.fori_loop（不是 Python 循环）。第 t 步阶段 k：
    - 前向：输入 h 是 xs 的第 t 个微批次（阶段 0，t 超出 M 后取什么都行）或上一步收到的激活值；
      y = tanh(h @ W)；把 h 存进一个环形缓冲区的第 t % R 格；y 用 ppermute 交给阶段 k+1。
    - 反向：这一步反向的是微批次 t-(2N-2)+k，它在本阶段的前向是第 t-2N+2+2k 步，从那一格取出
      它的输入 h_b，重算 y_b = tanh(h_b @ W)。本层输出的余切 g：最后一个阶段用刚算完的
      y - 目标（微批次 t-(N-1) 不存在时用 0），别的阶段用上一步从阶段 k+1 收到的。
      梯度加上 h_bᵀ @ (g·(1-y_b²))，把 (g·(1-y_b²)) @ Wᵀ 用 ppermute 送回阶段 k-1。
    R 取多大，缓冲区里的内容才不会在用到之前被覆盖？循环的 carry 里的零要先用
    lax.pcast(…, "stage", to="varying") 变成随设备不同的值。大约 25 行。
    1F1B's training step: return the weight gradient of this stage's layer (1, d, d) (the loss
    is 0.5·Σ(output - target)²). Time steps t = 0 … M+2N-3, written as a lax.fori_loop (not a
    Python loop). At step t stage k does:
    - forward: its input h is microbatch t of xs (stage 0; past M anything will do) or the
      activations received at the step before; y = tanh(h @ W); store h in slot t % R of a
      ring buffer; ppermute y to stage k+1.
    - backward: this step's backward is microbatch t-(2N-2)+k, whose forward on this stage was
      step t-2N+2+2k: take its input h_b from that slot and recompute y_b = tanh(h_b @ W). The
      cotangent g of the layer's output: the last stage uses the y it just computed minus the
      target (0 when microbatch t-(N-1) does not exist), the others what arrived from stage k+1
      at the step before. Add h_bᵀ @ (g·(1-y_b²)) to the gradient and ppermute
      (g·(1-y_b²)) @ Wᵀ back to stage k-1.
    How large must R be so that nothing in the ring is overwritten before it is used? The
    zeros in the loop's carry must first be made device-varying with
    lax.pcast(…, "stage", to="varying"). About 25 lines.
    """
    todo("one_f_one_b: 每一步一次前向、一次反向 / one forward and one backward per step")


def test_1f1b_gives_the_unpipelined_gradient():
    """（先写好 one_f_one_b。）每个阶段的权重梯度拼起来等于 jax.grad 对不切分的模型算出的梯度
    （损失是各微批次之和，梯度也是）：微批次比阶段多、比阶段少、只有一个，三种情况都对；每个设备
    只返回一层的梯度 (1, d, d)。
    (Write one_f_one_b first.) The stages' weight gradients put together equal jax.grad of the
    unsharded model (the loss is a sum over the microbatches, and so is the gradient): with
    more microbatches than stages, fewer, and only one; each device returns one layer's
    gradient (1, d, d).
    """
    grad_of_one = jax.jit(jax.grad(train_loss))  # one microbatch's gradient / 一个微批次的梯度
    for microbatches in (12, 3, 1):
        weights, xs, targets = training_data(microbatches)
        compiled, args = compiled_step(one_f_one_b, weights, xs, targets)
        grads = compiled(*args)
        assert grads.sharding.shard_shape(grads.shape) == (1, 16, 16)
        expected = sum(
            grad_of_one(weights, x[None], y[None]) for x, y in zip(xs, targets, strict=True)
        )
        np.testing.assert_allclose(grads, expected, rtol=1e-4, atol=1e-5)


def test_1f1b_sends_one_activation_and_one_cotangent_per_step():
    """（先写好 one_f_one_b。）编译后的 HLO 里是一个 while 循环，XLA 在 backend_config 里记下了它的
    known_trip_count：M+2N-2 步。循环体里恰好两条 collective-permute，各传一个微批次 (b, d)：
    一条沿前向的链（每一对都是 k → k+1），一条沿反向的链（k+1 → k）。没有 all-gather：权重从不
    离开自己的阶段。这里的 1F1B 把一次前向和一次反向合进同一步，没有只做前向的热身段：M = 4、
    N = 8 时 18 步里每个阶段只有 4 步的前向是真正的微批次，空等 14 步，比例比 GPipe 的 bubble
    还大（和 bubble_fraction(8, 4) 比一比）；它换来的是下一个 koan 里的内存。
    (Write one_f_one_b first.) The compiled HLO holds one while loop whose backend_config
    records its known_trip_count: M+2N-2 steps. Its body holds exactly two collective-permutes,
    each carrying one microbatch (b, d): one along the forward chain (every pair k → k+1), one
    along the backward chain (k+1 → k). No all-gather: the weights never leave their stage.
    This 1F1B fuses one forward and one backward into every step, with no forward-only
    warm-up: for M = 4 and N = 8, in only 4 of the 18 steps does a stage's forward work on a
    real microbatch, 14 steps idle, a larger share than GPipe's bubble (compare
    bubble_fraction(8, 4)); what it buys is the memory of the next koan.
    """
    weights, xs, targets = training_data(microbatches=4)
    compiled, _ = compiled_step(one_f_one_b, weights, xs, targets)
    hlo = compiled.as_text()
    found = collectives(hlo)
    assert set(found) == {"collective-permute"}
    assert found["collective-permute"] == ["f32[2,16]"] * 2
    assert re.findall(r'"known_trip_count":\{"n":"(\d+)"\}', hlo) == ["18"]
    pairs = re.findall(r"collective-permute\(.*source_target_pairs=(\{[^ ]*\})", hlo)
    # 每条链里 目标 - 源 的集合 / each chain's set of target - source
    moves = [re.findall(r"\{(\d+),(\d+)\}", chain) for chain in pairs]
    assert sorted(len(chain) for chain in moves) == [N - 1, N - 1]
    assert {frozenset(int(t) - int(s) for s, t in chain) for chain in moves} == {
        frozenset({1}),
        frozenset({-1}),
    }


def test_1f1b_memory_does_not_grow_with_the_microbatches():
    """（先写好 pipeline 和 one_f_one_b。）1F1B 的意义在内存：memory_analysis() 的
    temp_size_in_bytes（每个设备的临时缓冲区）在 2 个和 8 个微批次下一样大；GPipe（对 pipeline
    求导）的从 2 个微批次到 4 个就增长了，也比 1F1B 的大。
    (Write pipeline and one_f_one_b first.) 1F1B is about memory: memory_analysis()'s
    temp_size_in_bytes (each device's temporary buffers) is the same for 2 and for 8
    microbatches; GPipe's (the derivative of pipeline) already grows from 2 microbatches to 4,
    and is larger than 1F1B's.
    """
    temp = {}
    for name, schedule, microbatches in (
        ("1f1b", one_f_one_b, 2),
        ("1f1b", one_f_one_b, 8),
        ("gpipe", gpipe_grads, 2),
        ("gpipe", gpipe_grads, 4),
    ):
        compiled, _ = compiled_step(schedule, *training_data(microbatches))
        temp[name, microbatches] = compiled.memory_analysis().temp_size_in_bytes
    assert temp["1f1b", 8] == temp["1f1b", 2]
    assert temp["gpipe", 4] > temp["gpipe", 2] > temp["1f1b", 2]
