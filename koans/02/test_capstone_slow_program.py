"""02 · 综合练习：一个又慢又错的训练循环 / capstone: a training loop that is slow and wrong.

下面给出的 `slow_train` 用 SGD 拟合一个线性模型，每个 batch 一步，学习率按计划逐步减小；最后一个
batch 不满（数据条数不是 32 的倍数）。它有两个毛病：
- 慢：每遇到一个新的 batch 大小就重新编译一次（真实数据里 batch 大小五花八门）；
- 错：学习率计划根本没起作用——jit 只在追踪时读一次全局变量 CONFIG。
`slow_evaluate` 还有第三个毛病：Python 循环被展开进程序，batch 越多，程序越大，编译越慢。

先用本章的工具找到根因（第一个测试：数编译次数，读 TRACING CACHE MISS，算出它实际用了哪些学习率），
再写出快而对的版本：把 batch 补齐到固定大小并用掩码只算真实的行，学习率作为被追踪的参数传入，
评估用 vmap 代替 Python 循环。检查只看编译次数、程序大小和数值，不看耗时。

`slow_train` below fits a linear model by SGD, one step per batch, with a decreasing
learning-rate schedule; the last batch is not full (the data is not a multiple of 32 rows).
It has two problems:
- slow: every new batch size compiles again (real data comes in all sizes);
- wrong: the schedule has no effect, because jit reads the global CONFIG only while tracing.
`slow_evaluate` has a third: its Python loop is unrolled into the program, which grows (and
compiles more slowly) with the number of batches.

First find the root causes with the chapter's tools (the first test: count the
compilations, read the TRACING CACHE MISS, work out which learning rates were really used),
then write the fast and correct version: pad every batch to a fixed size and mask the
padding, pass the learning rate as a traced argument, and evaluate with vmap instead of a
Python loop. The checks look at compile counts, program size and values, never at time.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import counting_compiles, recording_jax_logs

# ---- 给定代码 / given code -------------------------------------------------------------

BATCH = 32
FEATURES = 3
W_TRUE = np.array([1.5, -2.0, 0.5], np.float32)


def make_batches(seed, sizes):
    """sizes[i] 行的第 i 个 batch：(x, y)，y = x @ W_TRUE + 噪声，NumPy float32。
    Batch i has sizes[i] rows: (x, y) with y = x @ W_TRUE + noise, NumPy float32.
    """
    rng = np.random.default_rng(seed)
    batches = []
    for n in sizes:
        x = rng.standard_normal((n, FEATURES)).astype(np.float32)
        y = (x @ W_TRUE + 0.1 * rng.standard_normal(n)).astype(np.float32)
        batches.append((x, y))
    return batches


def numpy_sgd(w, batches, lrs):
    """参照实现：每个 batch 上对均方误差做一步梯度下降，第 i 步学习率 lrs[i]。
    The reference: one gradient step on the mean squared error per batch, rate lrs[i].
    """
    w = np.array(w, np.float64)
    for (x, y), lr in zip(batches, lrs, strict=True):
        residual = x @ w - y
        w = w - lr * 2.0 * x.T @ residual / len(y)
    return w


def loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)


CONFIG = {"lr": 0.0}


@jax.jit
def slow_step(w, x, y):
    return w - CONFIG["lr"] * jax.grad(loss)(w, x, y)


def slow_train(w, batches, lrs):
    for (x, y), lr in zip(batches, lrs, strict=True):
        CONFIG["lr"] = lr
        w = slow_step(w, x, y)
    return w


@jax.jit
def slow_evaluate(w, xs, ys):
    """xs: (k, BATCH, FEATURES)，ys: (k, BATCH)：k 个整 batch 的平均损失。
    The mean loss over k full batches xs[i], ys[i].
    """
    total = 0.0
    for i in range(xs.shape[0]):
        total = total + loss(w, xs[i], ys[i])
    return total / xs.shape[0]


SIZES = [32, 32, 32, 20]  # 116 rows: the last batch is short
LRS = [0.2, 0.1, 0.05, 0.025]


# ---- 你来实现 / your code ---------------------------------------------------------------


def pad_batch(x, y, size=BATCH):
    """把 n (≤ size) 行的 batch 在主机上（NumPy）用 0 补到正好 size 行，返回 (x, y, mask)：
    mask 是 float32，真实的 n 行为 1.0，补的行为 0.0。大约 5 行。

    Pad a batch of n (≤ size) rows to exactly size rows with zeros, on the host (NumPy), and
    return (x, y, mask): mask is float32, 1.0 for the n real rows and 0.0 for padding.
    About 5 lines.
    """
    todo("pad_batch: 在主机上补零并给出掩码 / zero-pad on the host and build the mask")


@jax.jit
def fast_step(w, x, y, mask, lr):
    """补齐后的 batch 上的一步 SGD：损失是按 mask 加权的平方误差之和除以 mask 之和（mask 是
    权重：真实行为 1，补齐行为 0），lr 是被追踪的参数。大约 4 行。

    One SGD step on a padded batch: the loss is the squared errors weighted by mask, summed
    and divided by mask's sum (mask is a weight: 1 on a real row, 0 on padding), and lr is a
    traced argument. About 4 lines.
    """
    todo("fast_step: 掩码均方误差的一步 SGD / one SGD step on the masked mean squared error")


def fast_train(w, batches, lrs):
    """与 numpy_sgd 结果相同，但不管 batch 大小和学习率怎么变，fast_step 只编译一次：
    用 pad_batch 和 fast_step。大约 4 行。

    The same result as numpy_sgd, but fast_step compiles once whatever the batch sizes and
    learning rates: use pad_batch and fast_step. About 4 lines.
    """
    todo("fast_train: 补齐每个 batch，调用 fast_step / pad every batch, call fast_step")


@jax.jit
def fast_evaluate(w, xs, ys):
    """与 slow_evaluate 相同的平均损失，但不用 Python 循环遍历 batch（用 jax.vmap），
    这样程序大小与 batch 个数无关。大约 2 行。

    The same mean loss as slow_evaluate without a Python loop over the batches (use
    jax.vmap), so that the program's size does not depend on the number of batches.
    About 2 lines.
    """
    todo("fast_evaluate: 用 vmap 代替 Python 循环 / vmap instead of a Python loop")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_diagnose_the_slow_training_loop():
    """诊断：数一数 slow_step 编译了几次，读日志看第二次编译的原因，再推断它实际用了哪几个学习率
    （用 numpy_sgd 验证你的推断）。提示：jit 在追踪时读 CONFIG["lr"]，并把它当常量烘焙进程序。
    Diagnose: count how often slow_step compiled, read the log for the reason of the second
    compilation, then work out which learning rates it really used (numpy_sgd checks your
    answer). Hint: jit reads CONFIG["lr"] while tracing and bakes it into the program.
    """
    batches = make_batches(0, SIZES)
    w0 = np.zeros(FEATURES, np.float32)
    slow_step.clear_cache()
    with (
        counting_compiles() as names,
        recording_jax_logs() as messages,
        jax.explain_cache_misses(True),
    ):
        w_slow = slow_train(w0, batches, LRS)
    misses = [m for m in messages if "TRACING CACHE MISS" in m]

    assert names.count("jit(slow_step)") == __
    assert "different input types" in misses[-1]
    assert not np.allclose(w_slow, numpy_sgd(w0, batches, LRS), rtol=1e-3)  # wrong!
    # the learning rates slow_train really used / slow_train 实际用了哪些学习率
    np.testing.assert_allclose(w_slow, numpy_sgd(w0, batches, __), rtol=1e-4, atol=1e-6)


def test_pad_batch_keeps_the_real_rows_and_masks_the_rest():
    """pad_batch：形状固定为 (BATCH, FEATURES) / (BATCH,)，前 n 行是原数据，mask 标出它们
    （真实的行也可能全是 0、目标也可能是 0：mask 只看行数）。
    pad_batch: fixed shapes (BATCH, FEATURES) / (BATCH,), the first n rows are the data,
    and mask marks them (a real row may be all zeros, a target may be 0: the mask counts rows).
    """
    [(x, y)] = make_batches(1, [20])
    xp, yp, mask = pad_batch(x, y)
    assert xp.shape == (BATCH, FEATURES) and yp.shape == (BATCH,) and mask.shape == (BATCH,)
    assert xp.dtype == yp.dtype == mask.dtype == np.float32
    np.testing.assert_array_equal(xp[:20], x)
    np.testing.assert_array_equal(yp[:20], y)
    np.testing.assert_array_equal(mask, [1.0] * 20 + [0.0] * 12)
    np.testing.assert_array_equal(xp[20:], 0.0)
    [(x, y)] = make_batches(2, [BATCH])  # a full batch stays as it is
    np.testing.assert_array_equal(pad_batch(x, y)[2], np.ones(BATCH))
    wide = np.arange(35.0, dtype=np.float32).reshape(7, 5)  # any width and size: the caller's
    xp, yp, mask = pad_batch(wide, np.ones(7, np.float32), size=9)
    assert xp.shape == (9, 5) and yp.shape == mask.shape == (9,)
    np.testing.assert_array_equal(xp[:7], wide)
    wide[2] = 0.0  # a real row of zeros with a zero target is still a real row
    targets = np.array([1.0, 0.0, 0.0, 2.0, 0.0, 3.0, 0.0], np.float32)
    xp, yp, mask = pad_batch(wide, targets, size=9)
    np.testing.assert_array_equal(mask, [1.0] * 7 + [0.0] * 2)
    np.testing.assert_array_equal(yp[:7], targets)


def test_fast_train_matches_the_reference():
    """fast_train 跟随学习率计划，短 batch 的损失只算真实的行：结果等于 numpy_sgd。
    fast_train follows the schedule, and a short batch's loss counts its real rows only: the
    result equals numpy_sgd.
    """
    batches = make_batches(0, SIZES)
    w0 = np.zeros(FEATURES, np.float32)
    w = fast_train(w0, batches, LRS)
    np.testing.assert_allclose(w, numpy_sgd(w0, batches, LRS), rtol=1e-4, atol=1e-6)
    batches = make_batches(3, [32, 7, 32, 1, 19])
    w = fast_train(w, batches, [0.3, 0.2, 0.1, 0.05, 0.01])
    w_ref = numpy_sgd(
        numpy_sgd(w0, make_batches(0, SIZES), LRS), batches, [0.3, 0.2, 0.1, 0.05, 0.01]
    )
    np.testing.assert_allclose(w, w_ref, rtol=1e-4, atol=1e-6)


def test_fast_train_does_not_recompile_for_new_sizes_or_rates():
    """第一轮之后，换一批从没见过的 batch 大小和学习率，再训练一轮，然后再训练一轮只有短 batch 的：
    一次编译也没有。fast_train 的 jaxpr 里每个 batch 恰好一次 fast_step 调用，别无其他。
    After a first epoch, another epoch with batch sizes and learning rates never seen before,
    then an epoch of short batches only, compile nothing at all. fast_train's jaxpr holds
    exactly one fast_step call per batch and nothing else.
    """
    w0 = np.zeros(FEATURES, np.float32)
    with counting_compiles() as first:
        w = fast_train(w0, make_batches(4, SIZES), LRS)
    assert first.count("jit(fast_step)") <= 1  # once (or not at all, if another koan did)
    # the program fast_train builds: one fast_step call per batch, nothing else
    program = jax.make_jaxpr(lambda w: fast_train(w, make_batches(4, SIZES), LRS))(w0)
    assert [e.params.get("name") for e in program.eqns] == ["fast_step"] * len(SIZES)
    with counting_compiles() as second:
        w = fast_train(w, make_batches(5, [32, 11, 32, 3]), [0.07, 0.06, 0.05, 0.04])
        # no batch of this epoch is full, and it holds fewer batches than the others
        w = fast_train(w, make_batches(6, [11, 3, 13]), [0.03, 0.02, 0.01])
        jax.block_until_ready(w)
    assert second == [], f"recompiled: {second}"


def test_fast_evaluate_does_not_grow_with_the_number_of_batches():
    """slow_evaluate 的程序（降级后的 StableHLO 模块，连同它调用的每个函数）随 batch 个数线性增长
    （Python 循环被展开）；fast_evaluate 的不变。fast_evaluate 的数值与 NumPy 相同。
    slow_evaluate's program (the lowered StableHLO module, every function it calls included)
    grows linearly with the number of batches (the Python loop is unrolled); fast_evaluate's
    does not. fast_evaluate's value equals NumPy's.
    """

    def stacked(k, seed):
        batches = make_batches(seed, [BATCH] * k)
        return np.stack([b[0] for b in batches]), np.stack([b[1] for b in batches])

    w = jnp.asarray(W_TRUE) * 0.9
    size = {}
    for k in (4, 16):
        xs, ys = stacked(k, seed=k)
        size[k] = tuple(  # lines of the lowered module / 降级后模块的行数
            len(f.lower(w, xs, ys).as_text().splitlines()) for f in (slow_evaluate, fast_evaluate)
        )
        expected = np.mean(
            [np.mean((x @ np.asarray(w) - y) ** 2) for x, y in zip(xs, ys, strict=True)]
        )
        np.testing.assert_allclose(fast_evaluate(w, xs, ys), expected, rtol=1e-5)
    assert size[16][0] > 3 * size[4][0]  # the unrolled loop: 4× the batches, ~4× the program
    assert size[16][1] == size[4][1] < size[4][0]
