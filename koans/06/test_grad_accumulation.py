"""06 · 梯度累积 / gradient accumulation."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives


def _loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)


def _grad(w, x, y):
    return jax.jit(jax.grad(_loss))(w, x, y)


def _data(n=12):
    x = jax.random.normal(jax.random.key(0), (n, 3))
    y = x @ jnp.array([1.0, -2.0, 0.5]) + 0.1 * jax.random.normal(jax.random.key(1), (n,))
    return x, y


def test_accumulating_equal_micro_batches_equals_the_big_batch():
    """等大的微批次：每个微批次的平均梯度再取平均，等于整批的梯度（在浮点误差内）。
    Equal micro-batches: the mean of the micro-batch mean gradients equals the big batch's
    gradient (up to rounding).
    """
    x, y = _data(12)
    w = jnp.zeros(3)
    g_big = _grad(w, x, y)
    micro = [_grad(w, x[i : i + 4], y[i : i + 4]) for i in range(0, 12, 4)]
    g_acc = sum(micro) / __
    np.testing.assert_allclose(g_acc, g_big, rtol=1e-5, atol=1e-6)


def test_unequal_micro_batches_make_the_mean_of_means_wrong():
    """⚠️ 陷阱 / trap：微批次大小不等时（最后一个批次不满），“均值的均值”给小批次的样本更大权重，
    不等于整批梯度；按样本数加权（或累加总和再除以总数）才对。
    ⚠️ trap: with unequal micro-batches (a short last batch) the mean of means overweights the
    small batch's examples and differs from the big batch; weight by size (or sum, then divide
    by the total count).
    """
    x, y = _data(12)
    w = jnp.zeros(3)
    g_big = _grad(w, x, y)
    sizes = [8, 4]
    bounds = [(0, 8), (8, 12)]
    micro = [_grad(w, x[a:b], y[a:b]) for a, b in bounds]
    mean_of_means = (micro[0] + micro[1]) / 2
    assert not np.allclose(mean_of_means, g_big, rtol=1e-3)
    weighted = sum(n * g for n, g in zip(sizes, micro, strict=True)) / __
    np.testing.assert_allclose(weighted, g_big, rtol=1e-5, atol=1e-6)


def test_batch_statistics_depend_on_the_batch():
    """⚠️ 陷阱 / trap：依赖批次统计量的层（BatchNorm、批内归一化）在微批次上看到的是微批次的
    均值和方差；即使微批次等大、梯度取平均，结果也不等于整批。
    ⚠️ trap: layers that use batch statistics (BatchNorm, in-batch normalisation) see each
    micro-batch's mean and variance; even with equal micro-batches and averaged gradients the
    result is not the big batch's.
    """

    def bn_loss(w, x, y):
        h = x @ w
        h = (h - h.mean()) / jnp.sqrt(h.var() + 1e-5)  # batch norm over the batch axis
        return jnp.mean((h - y) ** 2)

    x, y = _data(12)
    w = jnp.array([0.3, 0.1, -0.2])
    g_big = jax.grad(bn_loss)(w, x, y)
    micro = [jax.grad(bn_loss)(w, x[i : i + 4], y[i : i + 4]) for i in range(0, 12, 4)]
    g_acc = jnp.mean(jnp.stack(micro), axis=0)
    assert bool(jnp.allclose(g_acc, g_big, rtol=1e-3)) is __
    rel = float(jnp.linalg.norm(g_acc - g_big) / jnp.linalg.norm(g_big))
    assert rel > 0.05


def test_stepping_adam_per_micro_batch_is_not_one_big_step():
    """⚠️ 陷阱 / trap：每个微批次都调用一次 optimizer 更新，不是梯度累积：参数在微批次之间变了，
    而且 Adam 对梯度是非线性的（m/√v）。三个小步 ≠ 一个大步。
    ⚠️ trap: calling the optimizer once per micro-batch is not accumulation: the parameters move
    between micro-batches and Adam is nonlinear in the gradient (m/√v). Three small steps are not
    one big step.
    """
    x, y = _data(12)
    tx = optax.adam(0.1)
    w0 = jnp.zeros(3)

    state = tx.init(w0)
    updates, _ = tx.update(_grad(w0, x, y), state, w0)
    w_big = optax.apply_updates(w0, updates)

    w, state = w0, tx.init(w0)
    for i in range(0, 12, 4):
        g = _grad(w, x[i : i + 4], y[i : i + 4])
        updates, state = tx.update(g, state, w)
        w = optax.apply_updates(w, updates)
    # Adam's first step moves every coordinate by the learning rate: three steps move ~3x as far.
    np.testing.assert_allclose(jnp.abs(w_big - w0), __, rtol=1e-3)
    assert float(jnp.max(jnp.abs(w - w0))) > 0.25


def test_optax_multisteps_equals_the_big_batch():
    """optax.MultiSteps(tx, every_k_schedule=k) 累积 k 次梯度再做一次真正的更新，中间 k-1 次
    返回零更新；等大微批次时，结果与整批一步相同。
    optax.MultiSteps(tx, every_k_schedule=k) accumulates k gradients and then takes one real
    step, returning zero updates in between; with equal micro-batches it matches one big-batch
    step.
    """
    x, y = _data(12)
    w0 = jnp.zeros(3)
    tx = optax.adam(0.1)
    updates, _ = tx.update(_grad(w0, x, y), tx.init(w0), w0)
    w_big = optax.apply_updates(w0, updates)

    multi = optax.MultiSteps(optax.adam(0.1), every_k_schedule=__)
    state = multi.init(w0)
    w = w0
    moved = []
    for i in range(0, 12, 4):
        g = _grad(w, x[i : i + 4], y[i : i + 4])
        updates, state = multi.update(g, state, w)
        w = optax.apply_updates(w, updates)
        moved.append(bool(jnp.any(w != w0)))
    assert moved == __
    np.testing.assert_allclose(w, w_big, rtol=1e-5, atol=1e-6)


def accumulated_grad(w, x, y, micro):
    """在 jit 里用 lax.scan 做梯度累积：把批次切成 micro 个等大的微批次（reshape 出一根前导轴），
    scan 依次对每个微批次求 _loss 的梯度并累加，最后除以 micro。同一时刻只有一个微批次的激活
    活着。约 6 行。
    Gradient accumulation inside jit with lax.scan: cut the batch into `micro` equal
    micro-batches (reshape out a leading axis), let scan take the gradient of _loss on each in
    turn and add it up, then divide by `micro`. Only one micro-batch's activations are alive at a
    time. About 6 lines.
    """
    todo("accumulated_grad: lax.scan 累加微批次梯度 / add micro-batch gradients with lax.scan")


def test_accumulate_micro_batches_with_scan_inside_jit():
    """真实的训练步把累积放在 jit 里面：Python 循环会把每个微批次展开进程序（程序随微批次数
    变长），lax.scan 只编译一个循环体。结果等于整批梯度。
    A real train step accumulates inside jit: a Python loop unrolls every micro-batch into the
    program (which grows with their number), lax.scan compiles one loop body. The result equals
    the big batch's gradient.
    """
    x, y = _data(12)
    w = jnp.array([0.3, 0.1, -0.2])
    g_big = _grad(w, x, y)
    step = jax.jit(accumulated_grad, static_argnums=3)
    for micro in (2, 3, 4):
        np.testing.assert_allclose(step(w, x, y, micro), g_big, rtol=1e-5, atol=1e-6)
        jaxpr = jax.make_jaxpr(accumulated_grad, static_argnums=3)(w, x, y, micro)
        scans = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "scan"]
        assert len(scans) == 1 and scans[0].params["length"] == micro


def token_mean(losses, mask):
    """填充过的一批序列的平均损失，按真实 token 加权：mask 为 0 的位置（填充）不算数，哪怕那里的
    损失是 inf（比如 log 0）：用 where 选，不要乘掩码（按 IEEE，inf * 0 是 NaN；这台 CPU 上 XLA
    恰好把“乘以布尔掩码”改写成 select，0/1 浮点掩码却没有这个改写，测试两种掩码都用）。约 1 行。
    The mean loss of a padded batch of sequences, weighted by real tokens: positions where mask
    is 0 (padding) count for nothing, even where their loss is inf (a log 0, say): select with
    where, do not multiply by the mask (in IEEE arithmetic inf * 0 is NaN; on this CPU XLA happens
    to rewrite a multiply by a boolean mask into a select, but a 0/1 float mask gets no such
    rewrite, and the test uses both). About 1 line.
    """
    todo("token_mean: 只数真实 token / count real tokens only")


def test_token_weighted_loss_for_padded_batches():
    """⚠️ 陷阱 / trap：长短不一的序列填充成一批后，“每条序列取平均、再对序列取平均”让短序列的
    每个 token 权重更大；按 token 加权才等于把所有真实 token 放在一起取平均。累积微批次时呢：
    能把各个微批次的 token 平均值再平均吗，还是要分别累加损失之和与 token 数？
    ⚠️ trap: once sequences of different lengths are padded into a batch, "average each
    sequence, then average the sequences" gives a short sequence's tokens more weight; weighting
    by tokens equals averaging all real tokens together. And across micro-batches: may their
    token means be averaged, or must the loss sums and token counts be added up separately?
    """
    lengths = [5, 2, 4, 1]
    losses = jax.random.uniform(jax.random.key(3), (4, 5))
    mask = jnp.arange(5)[None, :] < jnp.array(lengths)[:, None]
    padded = jnp.where(mask, losses, jnp.inf)  # padding positions hold garbage
    real = np.concatenate([np.asarray(losses[i, :n]) for i, n in enumerate(lengths)])
    np.testing.assert_allclose(token_mean(padded, mask), real.mean(), rtol=1e-6)
    float_mask = mask.astype(padded.dtype)  # a data loader's 0/1 floats / 0/1 浮点掩码
    np.testing.assert_allclose(token_mean(padded, float_mask), real.mean(), rtol=1e-6)
    blown = padded.at[0, 0].set(jnp.inf)  # a real token's loss overflowed / 真实 token 的损失溢出
    assert float(token_mean(blown, mask)) == float("inf")  # only padding is left out / 只排除填充
    broken = padded.at[2, 1].set(jnp.nan)  # a real token's NaN shows / 真实 token 的 NaN 照样显出来
    assert np.isnan(float(token_mean(broken, float_mask)))
    per_sequence = np.mean(
        [real_row.mean() for real_row in np.split(real, np.cumsum(lengths)[:-1])]
    )
    assert not np.isclose(per_sequence, real.mean(), rtol=1e-3)

    halves = [(padded[:2], mask[:2]), (padded[2:], mask[2:])]
    mean_of_means = np.mean([float(token_mean(p, m)) for p, m in halves])
    assert bool(np.isclose(mean_of_means, real.mean(), rtol=1e-3)) is __
    sums = sum(float(token_mean(p, m)) * float(m.sum()) for p, m in halves)
    np.testing.assert_allclose(sums / float(mask.sum()), real.mean(), rtol=1e-6)
    grad = jax.grad(lambda ls: token_mean(ls, mask))(padded)
    assert bool(jnp.all(jnp.isfinite(grad))) and float(grad[3, 1:].sum()) == 0.0


def _token_losses(w, x, y):
    """Every token's squared error: x is (batch, time, 3), y and the result (batch, time)."""
    return (x @ w - y) ** 2


def token_weighted_grad(w, x, y, mask, micro):
    """填充批次的梯度累积，放在 jit 里：把批次切成 micro 个等大的微批次，lax.scan 的 carry 是
    (梯度之和, token 数之和)：每个微批次累加“真实 token 的损失之和”（_token_losses，填充位置不
    算）的梯度和它的真实 token 数；最后只除一次。结果等于整批按 token 平均的损失的梯度。约 10 行。
    Gradient accumulation over a padded batch, inside jit: cut the batch into `micro` equal
    micro-batches; lax.scan's carry is (sum of gradients, sum of token counts): each micro-batch
    adds the gradient of its real tokens' loss *sum* (_token_losses, padding excluded) and its
    number of real tokens; divide once at the end. The result is the gradient of the whole
    batch's token-mean loss. About 10 lines.
    """
    todo("token_weighted_grad: 累加损失之和与 token 数 / add up loss sums and token counts")


def test_accumulate_a_token_weighted_loss_over_padded_micro_batches():
    """⚠️ 陷阱 / trap：微批次里的真实 token 数各不相同时，把每个微批次的 token 平均损失的梯度再
    平均，就是“均值的均值”：token 少的微批次权重过大。
    正确做法是分别累加损失之和的梯度与 token 数，最后相除。
    ⚠️ trap: when micro-batches hold different numbers of real tokens, averaging the gradients of
    their token-mean losses is a mean of means: a micro-batch with few tokens weighs too much
    The fix accumulates the gradient of the loss sum and the token count separately and
    divides at the end.
    """
    lengths = jnp.array([8, 7, 8, 6, 2, 1, 3, 2])  # the later sequences are short
    x = jax.random.normal(jax.random.key(4), (8, 8, 3))
    y = x @ jnp.array([1.0, -2.0, 0.5]) + 0.3 * jax.random.normal(jax.random.key(5), (8, 8))
    mask = jnp.arange(8)[None, :] < lengths[:, None]
    w = jnp.array([0.3, 0.1, -0.2])

    def mean_grad(x_real, y_real):
        return jax.grad(lambda w: jnp.mean((x_real @ w - y_real) ** 2))(w)

    want = mean_grad(x[mask], y[mask])  # all real tokens together
    halves = [slice(0, 4), slice(4, 8)]
    mean_of_means = sum(mean_grad(x[h][mask[h]], y[h][mask[h]]) for h in halves) / 2
    assert not np.allclose(mean_of_means, want, rtol=1e-2)

    step = jax.jit(token_weighted_grad, static_argnums=4)
    for micro in (1, 2, 4):
        np.testing.assert_allclose(step(w, x, y, mask, micro), want, rtol=1e-5, atol=1e-6)
    jaxpr = jax.make_jaxpr(token_weighted_grad, static_argnums=4)(w, x, y, mask, 4)
    scans = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "scan"]
    assert len(scans) == 1 and scans[0].params["length"] == 4


# ---- 分片的训练步里的梯度累积 / accumulation in a sharded step ---------------------------


def _matrix_loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)


def _sharded_problem():
    """A (16, 8) weight split by rows over the 8 devices (FSDP), and 4 micro-batches of 32 rows
    each, every micro-batch's rows split over the devices too."""
    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Explicit,))
    rng = np.random.default_rng(0)
    w = jax.device_put(rng.normal(size=(16, 8)).astype(np.float32), NamedSharding(mesh, P("data")))
    xs = rng.normal(size=(4, 32, 16)).astype(np.float32)
    ys = rng.normal(size=(4, 32, 8)).astype(np.float32)
    batch = NamedSharding(mesh, P(None, "data"))
    return mesh, w, jax.device_put(xs, batch), jax.device_put(ys, batch)


def _big_batch_grad(w, xs, ys):
    return jax.grad(_matrix_loss)(np.asarray(w), np.asarray(xs).reshape(-1, 16), np.asarray(ys).reshape(-1, 8))


def loop_and_rest(hlo):
    """编译后 HLO 的集合通信分成两份：while 循环体里的（每一步都执行）和其余的（只执行一次），
    各是 {指令: 条数}。/ The compiled HLO's collectives in two parts: those inside while-loop
    bodies (run at every step) and the rest (run once), each {instruction: count}."""
    bodies = set(re.findall(r"\swhile\(.*?body=(%[\w.-]+)", hlo))
    loop, rest = {}, {}
    for computation in re.split(r"\n(?=\S)", hlo):
        name = computation.split(" ", 2)[1] if computation.startswith("ENTRY") else computation.split(" ", 1)[0]
        for kind, types in collectives(computation).items():
            part = loop if name in bodies else rest
            part[kind] = part.get(kind, 0) + len(types)
    return loop, rest


def test_xla_reduces_the_gradient_at_every_micro_step():
    """⚠️ 陷阱 / trap: 权重按行切开（FSDP）、每个微批次的行也切开时，jit 里的 scan 累积把每个
    微批次的梯度都在设备之间归约一次：归约在 while 循环体里，4 个微批次就执行 4 次。梯度是线性的，
    其实可以先在每个设备上把局部梯度加起来，最后只归约一次（下一个 koan）。预测：循环体里和循环
    外各有哪些集合通信、各几条？
    With the weight split by rows (FSDP) and every micro-batch's rows split too, scan accumulation
    inside jit reduces each micro-batch's gradient across the devices: the reduction sits in the
    while-loop body and runs 4 times for 4 micro-batches. The gradient is linear, so each device
    could add its local gradients first and reduce once at the end (the next koan). Predict: which
    collectives, and how many of each, sit inside the loop body and outside it?
    """
    _, w, xs, ys = _sharded_problem()

    def scan_accumulate(w, xs, ys):
        def add_one(total, batch):
            return total + jax.grad(_matrix_loss)(w, *batch), None

        total, _ = jax.lax.scan(add_one, jnp.zeros_like(w), (xs, ys))
        return total / xs.shape[0]

    step = jax.jit(scan_accumulate)
    np.testing.assert_allclose(step(w, xs, ys), _big_batch_grad(w, xs, ys), rtol=1e-5, atol=1e-6)
    loop, rest = loop_and_rest(step.lower(w, xs, ys).compile().as_text())
    assert loop == __
    assert rest == __


def reduce_once(mesh, w, xs, ys):
    """✍️ 同样的梯度累积，用 jax.shard_map 写每个设备上的程序：w 按行切在 "data" 轴上，xs、ys 的
    第 1 根轴（每个微批次的行）也切在 "data" 上。先用 all_gather 拿到整个 w（一次），lax.scan 依次
    对每个微批次求 _matrix_loss 在本设备那几行上的梯度并加起来（循环里不做集合通信），循环之后用
    psum_scatter 把各设备的和归约、并按行切回 w 的分片，一次；再除以微批次数和设备数（本设备的
    损失只是一部分行的平均）。返回的梯度与 w 同样按行切开。大约 10 行。
    The same accumulation, with jax.shard_map writing the per-device program: w split by rows
    over "data", the second axis of xs and ys (each micro-batch's rows) split over "data" too.
    all_gather the whole w first (once); lax.scan takes _matrix_loss's gradient on this device's
    rows of each micro-batch in turn and adds it up (no collective inside the loop); after the
    loop psum_scatter reduces the devices' sums and splits the result back into w's row blocks,
    once; then divide by the number of micro-batches and of devices (a device's loss is the mean
    over its own rows only). The gradient comes back split by rows like w. About 10 lines.
    """
    todo("reduce_once: 局部累加，循环后 reduce-scatter 一次 / add up locally, reduce-scatter once after the loop")


def test_accumulate_locally_and_reduce_scatter_once():
    """✍️ 实现 reduce_once。在 shard_map 里你决定集合通信放在哪里：每个设备先把自己各个微批次的
    局部梯度加起来，循环结束后只做一次 reduce-scatter（FSDP 的梯度本来就要按行切开），而不是每个
    微批次一次。结果与整批梯度相同；HLO 的 while 循环体里没有集合通信。
    Write reduce_once. Inside shard_map you decide where the collectives go: each device adds up
    its local gradients of all the micro-batches first and does one reduce-scatter after the loop
    (FSDP wants the gradient split by rows anyway), not one per micro-batch. The result equals the
    big batch's gradient; the HLO's while-loop body holds no collective.
    """
    mesh, w, xs, ys = _sharded_problem()
    step = jax.jit(reduce_once, static_argnums=0)
    grad = step(mesh, w, xs, ys)
    np.testing.assert_allclose(grad, _big_batch_grad(w, xs, ys), rtol=1e-5, atol=1e-6)
    assert grad.sharding.is_equivalent_to(w.sharding, grad.ndim)
    loop, rest = loop_and_rest(step.lower(mesh, w, xs, ys).compile().as_text())
    assert loop == {}
    assert rest == {"all-gather": 1, "reduce-scatter": 1}
