"""06 · 日常的 Optax / everyday Optax.

实际训练里的优化器很少是一个裸的 `optax.adam`：学习率先预热再衰减，梯度先按全局范数裁剪，
权重衰减只作用在矩阵上（偏置和归一化的缩放不衰减），几个变换用 `optax.chain` 串起来；显存
不够时再用 `optax.MultiSteps` 把几个微批次攒成一步。本文件把这些写出来，并用它们的行为检查。

A real training run's optimizer is rarely a bare `optax.adam`: the learning rate warms up and
then decays, gradients are clipped by their global norm first, weight decay touches only the
matrices (not biases or normalisation scales), and the pieces are strung together with
`optax.chain`; when memory is short, `optax.MultiSteps` turns several micro-batches into one
step. This file writes them and checks them by their behaviour.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------

PEAK, WARMUP, TOTAL, END = 1e-3, 100, 1000, 1e-5
WEIGHT_DECAY, MAX_NORM = 0.01, 1.0


def params():
    return {"kernel": jnp.ones((3, 2)), "bias": jnp.ones(2), "norm_scale": jnp.ones(2)}


def run(tx, grads, steps):
    """Apply tx for `steps` steps with the same gradients; return the params and the state."""
    p = params()
    state = tx.init(p)
    for _ in range(steps):
        updates, state = tx.update(grads, state, p)
        p = optax.apply_updates(p, updates)
    return p, state


# ---- 检查 / checks ----------------------------------------------------------------------


def schedule():
    """返回一个 optax 学习率调度（step → 学习率）：前 WARMUP 步从 0 线性升到 PEAK，之后按余弦
    衰减，到第 TOTAL 步（从 0 算起，包括预热）降到 END，之后保持 END。约 1 行。
    Return an optax learning-rate schedule (step → learning rate): from 0 up to PEAK linearly
    over the first WARMUP steps, then a cosine decay reaching END at step TOTAL (counted from 0,
    warm-up included), END after that. About 1 line.
    """
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=PEAK, warmup_steps=WARMUP, decay_steps=TOTAL, end_value=END
    )


def test_warm_up_then_cosine_decay():
    """预热再衰减是大模型训练的标配：刚开始 Adam 的二阶矩估计还不可靠，小学习率避免一开始
    就走得太远。
    Warm-up then decay is the default of large-model training: early on Adam's second-moment
    estimates are unreliable, and a small learning rate keeps the first steps from going too far.
    """
    lr = schedule()
    at = {step: float(lr(step)) for step in (0, 50, 100, 550, 1000, 5000)}
    np.testing.assert_allclose(
        [at[s] for s in sorted(at)], [0.0, PEAK / 2, PEAK, (PEAK + END) / 2, END, END], rtol=1e-5
    )
    quarter = WARMUP + (TOTAL - WARMUP) // 4  # a cosine, not a straight line / 是余弦，不是直线
    cosine = END + (PEAK - END) * (1 + np.cos(np.pi / 4)) / 2
    np.testing.assert_allclose(float(lr(quarter)), cosine, rtol=1e-5)
    # 每一步都在这条余弦上，不只是整齐的步数 / on the cosine at every step, not only at round ones
    odd = np.random.default_rng(0).integers(WARMUP + 1, TOTAL, size=5)
    phase = np.pi * (odd - WARMUP) / (TOTAL - WARMUP)
    on_cosine = END + (PEAK - END) * (1 + np.cos(phase)) / 2
    np.testing.assert_allclose([float(lr(int(s))) for s in odd], on_cosine, rtol=1e-5)
    late = np.random.default_rng(1).integers(TOTAL + 1, 20 * TOTAL, size=5)  # 之后 / after TOTAL
    np.testing.assert_allclose([float(lr(int(s))) for s in late], END, rtol=1e-5)
    rising = [float(lr(s)) for s in range(0, 101, 10)]
    falling = [float(lr(s)) for s in range(100, 1001, 50)]
    assert rising == sorted(rising) and falling == sorted(falling, reverse=True)


def decay_mask(tree):
    """权重衰减的掩码：矩阵（ndim ≥ 2）为 True，偏置和缩放为 False（给定）。
    The weight-decay mask: True for matrices (ndim ≥ 2), False for biases and scales (given)."""
    return jax.tree.map(lambda p: p.ndim >= 2, tree)


def make_optimizer():
    """一个实际用的优化器：先把梯度按全局范数裁剪到 MAX_NORM，再做 AdamW，学习率用 schedule()，
    权重衰减 WEIGHT_DECAY 只作用在 decay_mask 为 True 的参数上。约 4 行。
    A practitioner's optimizer: clip the gradients to global norm MAX_NORM first, then AdamW
    with schedule() as its learning rate and weight decay WEIGHT_DECAY only on the parameters
    decay_mask marks True. About 4 lines.
    """
    return optax.chain(
        optax.clip_by_global_norm(MAX_NORM),
        optax.adamw(schedule(), weight_decay=WEIGHT_DECAY, mask=decay_mask),
    )


def test_clip_then_adamw_with_a_decay_mask():
    """⚠️ 陷阱 / trap：对 Adam 来说，按比例缩小的梯度几乎走同样的一步（m/√v 与尺度无关），所以
    裁剪的作用要在 Adam 的状态里看：一阶矩 mu 记住的是裁剪后的梯度。权重衰减则在梯度为零时也
    会让矩阵按 学习率 × 衰减率 缩小，而偏置和缩放不动。
    ⚠️ trap: to Adam, a uniformly scaled-down gradient takes almost the same step (m/√v does not
    depend on the scale), so clipping shows in Adam's state: the first moment mu remembers the
    clipped gradient. Weight decay shrinks the matrices by learning rate × decay even with zero
    gradients, while biases and scales stay.
    """
    sizes = {"kernel": 100.0, "bias": -300.0, "norm_scale": 40.0}  # 不均匀 / uneven
    for factor in (1.0, 0.01, 0.001):  # 裁剪、裁剪、低于 MAX_NORM 不动 / clipped, clipped, left
        grads = {name: jnp.full_like(p, sizes[name] * factor) for name, p in params().items()}
        _, state = run(make_optimizer(), grads, steps=1)
        mu = optax.tree.get(state, "mu")
        scale = min(1.0, MAX_NORM / float(optax.tree.norm(grads)))
        for name in params():
            np.testing.assert_allclose(mu[name], 0.1 * grads[name] * scale, rtol=1e-5)

    zero = jax.tree.map(jnp.zeros_like, params())
    steps = 60
    p, _ = run(make_optimizer(), zero, steps)
    lr = schedule()
    shrink = np.prod([1 - float(lr(s)) * WEIGHT_DECAY for s in range(steps)])
    np.testing.assert_allclose(p["kernel"], shrink, rtol=1e-6)
    np.testing.assert_array_equal(p["bias"], 1.0)
    np.testing.assert_array_equal(p["norm_scale"], 1.0)
    # 过了 TOTAL 也一样：学习率跟着优化器状态里的步数走 / past TOTAL as well: the learning rate
    # follows the step count in the optimizer state
    tx = make_optimizer()

    def far(p):  # TOTAL + 100 updates in one program
        def body(_, carry):
            updates, state = tx.update(zero, carry[1], carry[0])
            return optax.apply_updates(carry[0], updates), state

        return jax.lax.fori_loop(0, TOTAL + 100, body, (p, tx.init(p)))[0]

    shrink = np.prod([1 - float(lr(s)) * WEIGHT_DECAY for s in range(TOTAL + 100)])
    np.testing.assert_allclose(jax.jit(far)(params())["kernel"], shrink, rtol=1e-4)

    # 任何名字、任何大小：掩码看的是维数，不是名字，也不是元素个数（offset 比每个矩阵都大）
    # any names, any sizes: the mask's rule is the rank, not the name nor the number of
    # elements (offset is larger than every matrix)
    other = {"embedding": jnp.ones((4, 3)), "offset": jnp.ones(16),
             "bias": jnp.ones((2, 2)), "kernel": jnp.ones(2)}  # fmt: skip
    tx, stepped = make_optimizer(), other
    state = tx.init(other)
    for _ in range(3):  # past the schedule's first step
        updates, state = tx.update(jax.tree.map(jnp.zeros_like, other), state, stepped)
        stepped = optax.apply_updates(stepped, updates)
    assert float(stepped["embedding"][0, 0]) < 1.0 and float(stepped["bias"][0, 0]) < 1.0
    np.testing.assert_array_equal(stepped["offset"], 1.0)
    np.testing.assert_array_equal(stepped["kernel"], 1.0)


def test_multisteps_inside_nnx_optimizer_counts_two_ways():
    """optax.MultiSteps 也能放进 nnx.Optimizer：每 k 次 update 才真正更新一次参数。但有两个计数器：
    nnx.Optimizer 的 step 数的是 update 的调用次数，MultiSteps 的 gradient_step 数的是真正的
    更新次数。按步数算学习率调度时，用对那一个。
    optax.MultiSteps fits into nnx.Optimizer too: the parameters really change only every k
    updates. But there are two counters: nnx.Optimizer's step counts update calls, MultiSteps'
    gradient_step counts real updates. Use the right one when a schedule is driven by steps.
    """
    model = nnx.Linear(3, 1, rngs=nnx.Rngs(0))
    accumulate = optax.MultiSteps(optax.adam(0.1), every_k_schedule=3)
    opt = nnx.Optimizer(model, accumulate, wrt=nnx.Param)
    x = jnp.ones((2, 3))
    moved = []
    for _ in range(8):
        grads = nnx.grad(lambda m: jnp.mean(m(x) ** 2))(model)
        before = model.kernel[...]
        opt.update(model, grads)
        moved.append(bool(jnp.any(model.kernel[...] != before)))
    assert moved == [False, False, True, False, False, True, False, False]
    assert int(opt.step[...]) == 8
    assert int(opt.opt_state.gradient_step[...]) == 2


def make_optimizer_with_hyperparams():
    """和 make_optimizer 里一样的 AdamW（学习率 schedule()，权重衰减 WEIGHT_DECAY，这回不要掩码
    也不裁剪），但学习率和权重衰减要成为优化器状态的一部分：用 optax.inject_hyperparams 包装
    optax.adamw。约 3 行。
    The AdamW of make_optimizer (learning rate schedule(), weight decay WEIGHT_DECAY, this time
    with no mask and no clipping), but with the learning rate and the weight decay made part of
    the optimizer state: wrap optax.adamw in optax.inject_hyperparams. About 3 lines.
    """
    return optax.inject_hyperparams(optax.adamw)(
        learning_rate=schedule(), weight_decay=WEIGHT_DECAY
    )


def test_inject_hyperparams_puts_the_learning_rate_in_the_state():
    """optax.inject_hyperparams 把超参数放进优化器状态：每一步用的学习率可以直接读出来记进日志，
    训练中途也能改一个超参数（比如关掉权重衰减），不用重新初始化 Adam 的矩。
    optax.inject_hyperparams puts the hyperparameters into the optimizer state: the learning
    rate each step used can be read back and logged, and a hyperparameter can be changed in the
    middle of a run (switching weight decay off, say) without re-initialising Adam's moments.
    """
    model = nnx.Linear(3, 1, rngs=nnx.Rngs(0))
    opt = nnx.Optimizer(model, make_optimizer_with_hyperparams(), wrt=nnx.Param)

    @nnx.jit
    def step(model, opt, grads):
        opt.update(model, grads)
        return opt.opt_state.hyperparams["learning_rate"][...]

    zero = jax.tree.map(jnp.zeros_like, nnx.state(model, nnx.Param))
    logged = [float(step(model, opt, zero)) for _ in range(WARMUP + 20)]
    lr = schedule()
    np.testing.assert_allclose(logged, [float(lr(s)) for s in range(WARMUP + 20)], rtol=1e-5)

    # With zero gradients AdamW only decays: the kernel shrinks by 1 - lr × decay per step ...
    before = model.kernel[...]
    step(model, opt, zero)
    np.testing.assert_allclose(
        model.kernel[...], before * (1 - float(lr(WARMUP + 20)) * WEIGHT_DECAY), rtol=1e-6
    )
    # ... until the decay is switched off in the state; the step count runs on.
    opt.opt_state.hyperparams["weight_decay"][...] = jnp.float32(0.0)
    before = model.kernel[...]
    step(model, opt, zero)
    np.testing.assert_array_equal(model.kernel[...], before)
    assert int(opt.opt_state.count[...]) == WARMUP + 22

    # 梯度不为零时，每一步都和 optax.adamw 一样 / with gradients that are not zero, every step is
    # optax.adamw's (the zero gradients above leave Adam's moments, and so b1 and b2, unseen)
    tx = make_optimizer_with_hyperparams()
    adamw = optax.adamw(schedule(), weight_decay=WEIGHT_DECAY)
    p = params()
    ramp = jax.tree.map(lambda x: jnp.linspace(-1.0, 2.0, x.size).reshape(x.shape), p)
    ours, theirs = tx.init(p), adamw.init(p)
    for i in range(4):
        grads = jax.tree.map(lambda r: (i - 1.5) * r, ramp)
        mine, ours = jax.jit(tx.update)(grads, ours, p)
        want, theirs = adamw.update(grads, theirs, p)
        for name in p:
            np.testing.assert_allclose(mine[name], want[name], rtol=1e-4, atol=1e-12)
    # 过了 TOTAL，状态里的学习率停在 END / past TOTAL the state's learning rate stays at END
    def steps(state):  # TOTAL + 100 updates in one program
        return jax.lax.fori_loop(0, TOTAL + 100, lambda _, s: tx.update(grads, s, p)[1], state)

    steps = jax.jit(steps)
    np.testing.assert_allclose(steps(tx.init(p)).hyperparams["learning_rate"], END, rtol=1e-5)
