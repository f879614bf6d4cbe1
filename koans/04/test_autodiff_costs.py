"""04 · 反向传播存什么、雅可比用哪种模式 / what the backward pass keeps, and which mode builds a Jacobian.

反向模式要用前向的中间值（残差）。jax.ad_checkpoint.print_saved_residuals 把它们一行一行列出来：
形状、是参数还是哪个原语的输出、checkpoint_name 给的名字。jax.checkpoint 的 policy 决定哪些
中间值存下、哪些在反向时重算；policy 就是一个函数，你也可以自己写。雅可比矩阵 [m, n] 可以用
n 次 JVP（jacfwd）或 m 次 VJP（jacrev）建出来：哪种便宜取决于形状，cost_analysis() 的 flops
把差别量出来。

Reverse mode needs intermediates of the forward pass (residuals).
jax.ad_checkpoint.print_saved_residuals lists them line by line: the shape, whether it is an
argument or which primitive's output, and the name checkpoint_name gave it. A jax.checkpoint
policy decides which intermediates are kept and which are recomputed on the way back; a policy
is just a function, and you can write your own. An [m, n] Jacobian is built from n JVPs
(jacfwd) or m VJPs (jacrev): which is cheaper depends on the shape, and cost_analysis()'s flops
measure the difference.
"""

import io
import re
from contextlib import redirect_stdout

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import checkpoint_name, print_saved_residuals

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

B, D = 4, 8


def block(w1, w2, x, names=("h", "g", "s")):
    """一个两层的小块，三个中间值带名字：h [B, 4D]、g [B, D]、s [B]（names 可以换掉这三个名字）。
    A small two-layer block with three named intermediates: h [B, 4D], g [B, D], s [B] (names
    may replace those three names)."""
    h = checkpoint_name(jnp.sin(x @ w1), names[0])
    g = checkpoint_name(jnp.cos(h @ w2), names[1])
    s = checkpoint_name(jnp.sum(g * g, axis=-1), names[2])
    return jnp.sum(jnp.tanh(g) * s[:, None])


def _block_args(rows=B):
    rng = np.random.default_rng(0)
    w1 = jnp.asarray(rng.normal(size=(D, 4 * D)) / 3, jnp.float32)
    w2 = jnp.asarray(rng.normal(size=(4 * D, D)) / 6, jnp.float32)
    x = jnp.asarray(rng.normal(size=(rows, D)), jnp.float32)
    return w1, w2, x


def saved(fun, *args):
    """print_saved_residuals 打印的每一行 / each line print_saved_residuals prints."""
    out = io.StringIO()
    with redirect_stdout(out):
        print_saved_residuals(fun, *args)
    return out.getvalue().splitlines()


def test_print_saved_residuals_lists_what_the_backward_pass_reads():
    """print_saved_residuals(f, *args) 列出 grad(f) 的反向传播要读的值：先是 f 的参数，再是前向
    存下的中间值（“output of 某原语”或“named 'h'”）。不加 checkpoint 时 block 存下十个值；
    nothing_saveable 和 dots_saveable 各存几个？
    print_saved_residuals(f, *args) lists the values grad(f)'s backward pass reads: f's arguments
    first, then the intermediates the forward pass kept ("output of some primitive" or
    "named 'h'"). Without a checkpoint block keeps ten values; how many do nothing_saveable and
    dots_saveable keep?
    """
    args = _block_args()
    policies = jax.checkpoint_policies
    plain = saved(block, *args)
    assert len(plain) == 10 and plain[0].endswith("from the argument w1")
    nothing = saved(jax.checkpoint(block, policy=policies.nothing_saveable), *args)
    dots = saved(jax.checkpoint(block, policy=policies.dots_saveable), *args)
    assert len(nothing) == __
    assert len(dots) == __
    assert sum("output of dot_general" in line for line in dots) == 2
    named = saved(jax.checkpoint(block, policy=policies.save_only_these_names("g", "s")), *args)
    assert re.findall(r"named '(\w+)'", "\n".join(named)) == ["g", "s"]


def budget_policy(max_size):
    """返回一个 jax.checkpoint 的 policy：只存 checkpoint_name 标了名字、而且不超过 max_size 个元素的
    值，其余一概重算。policy 的签名是 policy(prim, *avals, **params) -> bool，对前向的每个方程
    调用一次：prim 是原语（checkpoint_name 的原语叫 "name"，名字在 params["name"]），avals 是它的
    输入的抽象值（.size 是元素个数）。大约 4 行。

    Return a jax.checkpoint policy that keeps only values tagged by checkpoint_name with at most
    max_size elements, and recomputes everything else. A policy's signature is
    policy(prim, *avals, **params) -> bool, called once per equation of the forward pass: prim is
    the primitive (checkpoint_name's is called "name", with the name in params["name"]), avals
    are the abstract values of its inputs (.size is the element count). About 4 lines.
    """

    todo("budget_policy: a policy(prim, *avals, **params) / 写一个 policy 函数")


@pytest.mark.parametrize(
    ("max_size", "kept", "kept_one_row", "kept_eight_rows"),
    [
        (4, ["s"], ["s"], []),
        (32, ["g", "s"], ["h", "g", "s"], ["s"]),
        (127, ["g", "s"], ["h", "g", "s"], ["g", "s"]),
        (128, ["h", "g", "s"], ["h", "g", "s"], ["g", "s"]),
    ],
)
def test_write_a_memory_budget_policy(max_size, kept, kept_one_row, kept_eight_rows):
    """✍️ 实现 budget_policy：库里的 policy 按名字或按原语挑（save_only_these_names、
    dots_saveable），没有按大小挑的。你的 policy 在 print_saved_residuals 里留下的只有三个参数和
    装得下的带名字的值（B 行一批和一行一批都要对，bfloat16 的也要对：数的是元素个数）；梯度和不加
    checkpoint 时一样。再换 8 行一批，和换了名字的同一个块。
    Write budget_policy: the library's policies choose by name or by primitive
    (save_only_these_names, dots_saveable), none by size. Your policy leaves only the three
    arguments and the named values that fit in print_saved_residuals' listing, for a batch of B
    rows and of one row, and in bfloat16 too (max_size counts elements, not bytes); the gradient
    is the one without a checkpoint. Then 8 rows, and the same block with other names.
    """
    remat = jax.checkpoint(block, policy=budget_policy(max_size))
    batches = [(_block_args(), kept), (_block_args(rows=1), kept_one_row)]
    for args, names in batches + [(_block_args(rows=8), kept_eight_rows)]:
        lines = saved(remat, *args)
        assert re.findall(r"named '(\w+)'", "\n".join(lines)) == names, args[2].shape
        assert len(lines) == 3 + len(names), lines  # nothing else: no unnamed output is kept
        for got, want in zip(
            jax.jit(jax.grad(remat, (0, 1, 2)))(*args),
            jax.grad(block, (0, 1, 2))(*args),
            strict=True,
        ):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    half = [a.astype(jnp.bfloat16) for a in _block_args()]  # half the bytes, the same sizes
    named = re.findall(r"named '(\w+)'", "\n".join(saved(remat, *half)))
    assert named == kept, "max_size counts elements, whatever their dtype"
    renamed = {"h": "up", "g": "gate", "s": "score"}
    other = jax.checkpoint(
        lambda *a: block(*a, names=tuple(renamed.values())), policy=budget_policy(max_size)
    )
    named = re.findall(r"named '(\w+)'", "\n".join(saved(other, *_block_args())))
    assert named == [renamed[n] for n in kept], "any name checkpoint_name gives, not only h, g, s"


def mlp(n, m, hidden=64, seed=0):
    """一个 R^n → R^m 的两层网络（给定）/ a two-layer network from R^n to R^m (given)."""
    rng = np.random.default_rng(seed)
    w1 = jnp.asarray(rng.normal(size=(hidden, n)) / np.sqrt(n), jnp.float32)
    w2 = jnp.asarray(rng.normal(size=(m, hidden)) / np.sqrt(hidden), jnp.float32)
    return lambda x: w2 @ jnp.tanh(w1 @ x)


def jacobian(f, x):
    """f 在 x 处的雅可比矩阵 [m, n]（x 是 [n]，f(x) 是 [m]），用两种模式中便宜的那种：n 次 JVP
    的 jax.jacfwd 或 m 次 VJP 的 jax.jacrev。不调用 f 就能知道 m：jax.eval_shape。n == m 时随意。
    大约 3 行。

    f's Jacobian [m, n] at x (x is [n], f(x) is [m]), by whichever mode is cheaper: jax.jacfwd
    (n JVPs) or jax.jacrev (m VJPs). jax.eval_shape tells m without running f. Either when
    n == m. About 3 lines.
    """
    todo("jacobian: jacfwd or jacrev by the shapes / 按形状选 jacfwd 或 jacrev")


def _flops(fn, x):
    return jax.jit(fn).lower(x).compile().cost_analysis()["flops"]


def test_pick_the_jacobian_mode_by_shape():
    """✍️ 实现 jacobian。窄而高的雅可比（n = 4 个输入，m = 256 个输出）用 jacrev 要做 256 次
    VJP，宽而矮的（n = 256，m = 4）用 jacfwd 要做 256 次 JVP：编译后的 flops 相差几十倍。你的
    jacobian 两种形状下都和 jacfwd 的结果一致，flops 等于两种模式里少的那个。
    Write jacobian. A tall Jacobian (n = 4 inputs, m = 256 outputs) costs jacrev 256 VJPs, a
    wide one (n = 256, m = 4) costs jacfwd 256 JVPs: the compiled flops differ by dozens of
    times. Your jacobian equals jacfwd's result for both shapes, and its flops are the smaller of
    the two modes'.
    """
    for n, m in ((4, 256), (256, 4)):
        f = mlp(n, m)
        x = jnp.linspace(-1.0, 1.0, n, dtype=jnp.float32)
        forward, reverse = _flops(jax.jacfwd(f), x), _flops(jax.jacrev(f), x)
        assert max(forward, reverse) > 20 * min(forward, reverse)
        got = jax.jit(lambda x, f=f: jacobian(f, x))
        assert got(x).shape == (m, n)
        np.testing.assert_allclose(got(x), jax.jacfwd(f)(x), rtol=1e-5, atol=1e-6)
        assert _flops(lambda x, f=f: jacobian(f, x), x) == min(forward, reverse), (n, m)
    for n, m in ((48, 40), (48, 56), (64, 56)):  # nearly square: neither n nor m alone decides
        f, x = mlp(n, m), jnp.linspace(-1.0, 1.0, n, dtype=jnp.float32)
        cheaper = jax.jacfwd(f) if n < m else jax.jacrev(f)  # fewer passes, as above
        assert _flops(cheaper, x) < _flops(jax.jacrev(f) if n < m else jax.jacfwd(f), x), (n, m)
        got = jax.make_jaxpr(lambda x, f=f: jacobian(f, x))(x)
        assert str(got) == str(jax.make_jaxpr(cheaper)(x)), (n, m)


# ---- cost_analysis 看不见循环次数 / cost_analysis does not see the trip count ---------------

H = 64


def rnn_step(w, h):
    """一步循环：[H, H] 的矩阵乘向量，再 tanh（给定）/ one step: an [H, H] matvec, then tanh (given)."""
    return jnp.tanh(w @ h)


def rnn_scan(w, h, n):
    """用 lax.scan 走 n 步，返回最后状态之和（给定）/ n steps with lax.scan, summed (given)."""
    h, _ = jax.lax.scan(lambda h, _: (rnn_step(w, h), None), h, None, length=n)
    return h.sum()


def rnn_unrolled(w, h, n):
    """同样的 n 步，用 Python 循环展开（给定）/ the same n steps, unrolled by a Python loop (given)."""
    for _ in range(n):
        h = rnn_step(w, h)
    return h.sum()


def _cost(fn, *args):
    return jax.jit(fn).lower(*args).compile().cost_analysis()


def test_cost_analysis_counts_a_loop_body_once():
    """⚠️ 陷阱 / trap：lax.scan 和 fori_loop 编译成一个 while 循环，循环次数是运行时才数的。
    cost_analysis() 会把循环体乘上次数吗？先预测：每步对 H 个元素做一次 tanh（一个超越函数），
    scan 走 10 步、走 100 步、以及展开的 10 步各报出几个 transcendentals？它们的 grad 呢？
    在“scan 还是展开”“要不要 checkpoint”之间做选择时，你得知道这个数字数的是一步还是整个循环；
    最后一行给出老实的估计：一步的代价乘以步数，再加上循环外面的部分。
    ⚠️ trap: lax.scan and fori_loop compile to a while loop whose trip count is counted at run
    time. Does cost_analysis() multiply the body by it? Predict first: each step takes one tanh
    (a transcendental) of H elements; how many transcendentals do 10 and 100 steps of the scan
    report, and 10 unrolled steps? And their gradients? Choosing between a scan and an unrolled
    loop, or whether to checkpoint, you must know whether the figure counts one step or the
    whole loop; the last line gives the honest estimate: one step's cost times the number of
    steps, plus what lies outside the loop.
    """
    w = jnp.asarray(np.random.default_rng(0).normal(size=(H, H)) / H, jnp.float32)
    h = jnp.linspace(-1.0, 1.0, H, dtype=jnp.float32)
    scan = {n: _cost(lambda w, h, n=n: rnn_scan(w, h, n), w, h) for n in (10, 100)}
    unrolled = _cost(lambda w, h: rnn_unrolled(w, h, 10), w, h)
    assert scan[10]["transcendentals"] == __
    assert scan[100]["transcendentals"] == __
    assert unrolled["transcendentals"] == __
    grads = {n: _cost(jax.grad(lambda w, h, n=n: rnn_scan(w, h, n)), w, h) for n in (10, 100)}
    assert (grads[100]["flops"] == grads[10]["flops"]) is __
    one_step = _cost(rnn_step, w, h)["flops"]
    assert unrolled["flops"] == 10 * one_step + (H - 1)  # ten steps, then the sum's H - 1 adds


def _squashed(w, x):
    return jnp.tanh(jnp.sin(x @ w) * 2 + x)


def test_prevent_cse_keeps_the_recomputation_apart_from_the_forward():
    """jax.checkpoint 默认 prevent_cse=True：反向里重算的那段前向被放进 optimization_barrier
    （lowering 后的 StableHLO 里看得到），XLA 就不能把它当作前向的公共子表达式合并掉。先预测：
    jit 里四层 checkpoint 的梯度，prevent_cse=True 和 False 各有几个 optimization_barrier？
    编译后，False 的 flops 更少、临时内存更多吗（重算被合并掉了）？放进 lax.scan 的循环体里，
    两种设置编译出的 flops 和临时内存一样吗？
    jax.checkpoint defaults to prevent_cse=True: the forward pass recomputed on the way back is
    put inside an optimization_barrier (visible in the lowered StableHLO), so XLA cannot merge it
    with the forward pass as a common subexpression. Predict: for the gradient of four
    checkpointed layers under jit, how many optimization_barriers do prevent_cse=True and False
    hold? Once compiled, does False take fewer flops and more temporary memory (the recomputation
    merged away)? Inside a lax.scan body, do the two settings compile to the same flops and
    temporary memory?
    """
    w = jax.random.normal(jax.random.key(0), (256, 256)) / 16
    x = jnp.ones((128, 256))

    def unrolled(prevent_cse):
        layer = jax.checkpoint(_squashed, prevent_cse=prevent_cse)

        def loss(w, x):
            for _ in range(4):
                x = layer(w, x)
            return jnp.sum(x**2)

        return jax.jit(jax.grad(loss)).lower(w, x)

    def scanned(prevent_cse):
        layer = jax.checkpoint(_squashed, prevent_cse=prevent_cse)

        def loss(w, x):
            x, _ = jax.lax.scan(lambda x, _: (layer(w, x), None), x, None, length=4)
            return jnp.sum(x**2)

        return jax.jit(jax.grad(loss)).lower(w, x)

    def measured(lowered):
        compiled = lowered.compile()
        return compiled.cost_analysis()["flops"], compiled.memory_analysis().temp_size_in_bytes

    lowered = {cse: unrolled(cse) for cse in (True, False)}
    barriers = [lowered[cse].as_text().count("stablehlo.optimization_barrier") for cse in (True, False)]
    assert barriers == __
    (flops_kept, temp_kept), (flops_merged, temp_merged) = (measured(lowered[c]) for c in (True, False))
    assert (flops_merged < flops_kept, temp_merged > temp_kept) == __
    assert (measured(scanned(True)) == measured(scanned(False))) is __
