"""04 · 截断梯度与 Hessian-向量积 / cutting a gradient, and Hessian-vector products.

有时要让一个值在前向照常计算，反向却当它是常数（直通估计器、目标网络、EM 里固定的一半）；
有时要二阶信息却付不起 n×n 的 Hessian（牛顿-CG、曲率估计、影响函数）：对 grad(f) 再做一次 JVP
（forward-over-reverse），一次就得到 H·v，花的只是几次梯度的代价，中间值都只有 n 个数。

Sometimes a value must be computed as usual going forward but count as a constant going
backward (the straight-through estimator, target networks, the fixed half of EM); sometimes
second-order information is needed where an n×n Hessian is unaffordable (Newton-CG, curvature
estimates, influence functions): one JVP of grad(f) (forward-over-reverse) gives H·v at the
cost of a few gradients, with intermediates of n numbers only.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api import program as program_reader


def test_a_blocked_value_is_a_constant_to_grad():
    """前向照常计算、反向却当常数：目标网络给出的目标、EM 里固定的那一半、梯度控制那个文件里的直通
    估计器，都要这样一个 c：前向是恒等，反向导数为 0。这里用它把向量除以自己的平方和 s = Σx²：
    挡住 s 以后，对 grad 来说 x / c(s) 就是 x 除以一个常数，每个分量的导数都是 1/s；不挡的话，
    s 随 x 变化的那一项也进了梯度。
    Computed as usual going forward, a constant going backward: the target a target network
    gives, the fixed half of EM, the straight-through estimator of the gradient-control file
    all need such a c, the identity forward with derivative 0. Here it divides a vector by its
    own sum of squares s = Σx²: with s blocked, x / c(s) is x over a constant to grad, and
    every component's derivative is 1/s; unblocked, the way s moves with x enters the gradient
    too.
    """
    xs = jnp.array([1.0, -1.0, 1.0, 1.0])  # s = 4

    block = lax.stop_gradient  # c: the identity forward, derivative 0 / 前向恒等、导数为 0

    def normalised(x):
        return x / block(jnp.sum(x**2))

    np.testing.assert_array_equal(normalised(xs), xs / 4.0)
    np.testing.assert_array_equal(jax.grad(lambda x: normalised(x).sum())(xs), [0.25] * 4)
    unblocked = jax.grad(lambda x: (x / jnp.sum(x**2)).sum())(xs)  # 1/s - 2x·Σx / s²
    np.testing.assert_allclose(unblocked, [0.0, 0.5, 0.0, 0.0], atol=1e-7)

    # a blocked factor is a constant to grad, though computed from x / 被挡住的因子对 grad 是常数
    assert float(jax.grad(lambda x: block(x) * x)(3.0)) == 3.0


def hvp(f, x, v):
    """标量函数 f 在 x 处的 Hessian 与 v 的乘积 H(x)·v，不建 Hessian：对 jax.grad(f) 在 x 处沿 v
    做一次 jax.jvp（forward-over-reverse），取它的切向量输出。x、v 是形状相同的一维数组。1 行。

    The product H(x)·v of scalar f's Hessian at x with v, without building the Hessian: one
    jax.jvp of jax.grad(f) at x along v (forward-over-reverse); take its tangent output. x and
    v are 1-D arrays of one shape. 1 line.
    """
    return jax.jvp(jax.grad(f), (x,), (v,))[1]


def test_write_a_hessian_vector_product():
    """✍️ 实现 hvp：float64 下与稠密 Hessian 乘 v 的结果一致到 1e-12（有限差分做不到这么准），
    在 jit 和 vmap（一次好几个 v）下都成立；它的 jaxpr 里没有任何中间值含有 n² 个数——
    jax.hessian 那样先建矩阵再乘的写法过不了。
    Write hvp: in float64 it agrees with the dense Hessian times v to 1e-12 (finite differences
    cannot get that close), under jit and under vmap (several v at once), and its jaxpr holds
    no intermediate of n² numbers: building the matrix first, as jax.hessian does, fails.
    """

    def f(x):  # a banded, non-quadratic function / 非二次的带状函数
        return jnp.sum(jnp.exp(0.5 * x[:-1] * x[1:])) + jnp.sum(x**4) / 4 + jnp.sum(jnp.sin(x))

    n = 64
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        x = rng.normal(size=n)
        vs = rng.normal(size=(3, n))
        dense = np.asarray(jax.hessian(f)(x))  # the reference, n×n / 参照
        got = jax.jit(lambda x, v: hvp(f, x, v))(x, vs[0])
        assert got.dtype == jnp.float64
        np.testing.assert_allclose(got, dense @ vs[0], rtol=1e-12, atol=1e-12)
        batched = jax.jit(jax.vmap(lambda v: hvp(f, x, v)))(vs)
        np.testing.assert_allclose(batched, vs @ dense.T, rtol=1e-12, atol=1e-12)

        def sizes(jaxpr):  # the size of every intermediate, nested jaxprs included
            for eqn in jaxpr.eqns:
                yield from (var.aval.size for var in eqn.outvars)
                for param in eqn.params.values():
                    for sub in param if isinstance(param, tuple | list) else (param,):
                        if hasattr(inner := getattr(sub, "jaxpr", sub), "eqns"):
                            yield from sizes(inner)

        program = jax.make_jaxpr(lambda x, v: hvp(f, x, v))(x, vs[0]).jaxpr
        assert max(sizes(program)) < n * n, "an n×n intermediate: the Hessian was built"


def test_forward_over_reverse_runs_a_loop_half_as_often():
    """同一个 H·v 也可以对 v·∇f 再求一次梯度（reverse-over-reverse）：数值一样，flops 几乎一样
    （相差不到 1%）。差别在循环上：f 里有一个 T 步的 scan 时，每种写法把它跑几遍（Program.costs()
    的 serial_steps 是每个循环体乘以它的步数之和）？你的 hvp 编译后的临时内存也不到另一种的一半。
    The same H·v can also be taken as the gradient of v·∇f (reverse-over-reverse): the same numbers
    and almost the same flops (within 1 %). The difference is in the loops: when f holds a scan of
    T steps, how many times does each way run it (Program.costs()'s serial_steps sums every loop
    body times its trip count)? Your hvp's compiled program also keeps less than half the other's
    temporary memory.
    """
    n, steps = 16, 100
    with jax.enable_x64(True):
        rng = np.random.default_rng(1)
        w = rng.normal(size=(n, n)) / 4

        def f(x):  # a recurrence driven by x / 由 x 驱动的递推
            h, _ = lax.scan(lambda h, _: (jnp.tanh(w @ h + x), None), jnp.zeros(n), None, length=steps)
            return jnp.sum(h**2)

        def reverse_over_reverse(x, v):
            return jax.grad(lambda x: jnp.vdot(jax.grad(f)(x), v))(x)

        def forward_over_reverse(x, v):
            return hvp(f, x, v)

        x, v = rng.normal(size=n), rng.normal(size=n)
        fwd, rev = (jax.jit(g).lower(x, v).compile() for g in (forward_over_reverse, reverse_over_reverse))
        np.testing.assert_allclose(fwd(x, v), rev(x, v), rtol=1e-10)
        mine, theirs = (program_reader.of(g, x, v).costs() for g in (forward_over_reverse, reverse_over_reverse))
        assert abs(mine.flops["outside"] - theirs.flops["outside"]) < 0.01 * theirs.flops["outside"]
        assert (mine.serial_steps // steps, theirs.serial_steps // steps) == (2, 4)
        temp = [c.memory_analysis().temp_size_in_bytes for c in (fwd, rev)]
        assert temp[0] < temp[1] / 2
