"""04 · 控制梯度：stop_gradient、自定义规则、复数的约定、optimize_remat / steering gradients:
stop_gradient, custom rules, the complex convention, optimize_remat.

lax.stop_gradient 把一个值变成常数：值照算，导数（前向、反向、任意阶）都当它是 0。它能写出
直通估计器（前向取整、反向当作恒等），却写不出“反向时改写余切”的规则（梯度裁剪），那要
custom_vjp。复数输入时，grad 对实值函数返回的是共轭方向，对复值函数要 holomorphic=True；整数
输入要 allow_int=True 才能通过。
custom_vjp 的 optimize_remat=True 改变 checkpoint 下谁在前向运行：原函数，还是 fwd。

lax.stop_gradient turns a value into a constant: the value is computed, every derivative
(forward, reverse, any order) treats it as 0. It writes the straight-through estimator
(round on the way forward, identity on the way back), but not a rule that rewrites the
cotangent on the way back (gradient clipping): that takes custom_vjp. With complex inputs,
grad of a real-valued function returns the conjugate direction, and a complex-valued function
needs holomorphic=True; integer inputs get through only with allow_int=True. custom_vjp's
optimize_remat=True changes what runs forward under checkpoint: the primal function, or fwd.
"""

import io
import re
from contextlib import redirect_stdout

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.ad_checkpoint import print_saved_residuals

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)


def primitive_names(fun, *args):
    """The primitive names of fun's jaxpr, nested programs included, in order."""
    names = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            names.append(eqn.primitive.name)
            for param in eqn.params.values():
                for sub in param if isinstance(param, (list, tuple)) else [param]:
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        walk(inner)

    walk(jax.make_jaxpr(fun)(*args).jaxpr)
    return names


def test_stop_gradient_cuts_a_path_a_custom_rule_can_rewrite_it():
    """stop_gradient(x) 的值就是 x，可在导数里它是常数。x · stop_gradient(x) 的值是 x²，它的导数
    是多少？前向模式（jvp）和二阶导数也按同样的规矩来：stop_gradient 在 jaxpr 里是一个原语，每一种
    变换都看得见它。它只能把一条路径的导数整个变成 0；要在反向时改写余切（比如把梯度裁剪到
    [-1, 1]，前向却是恒等），就得用 custom_vjp：fwd 不存残差，bwd 裁剪传回来的余切。预测：
    10 · clip_gradient(x) 在 x = 2 处的导数？只用 stop_gradient 写的 10 · (x + stop_gradient(0)) 呢？
    stop_gradient(x) has x's value but is a constant to every derivative. x · stop_gradient(x)
    has the value x²: what is its derivative? Forward mode (jvp) and second derivatives follow
    the same rule: stop_gradient is a primitive in the jaxpr, so every transform sees it. It can
    only zero a path's derivative entirely; to rewrite the cotangent on the way back (clip the
    gradient to [-1, 1] while the forward pass is the identity, say) takes custom_vjp: fwd saves
    no residual, bwd clips the incoming cotangent. Predict: the derivative of
    10 · clip_gradient(x) at x = 2? And of 10 · (x + stop_gradient(0)), stop_gradient alone?
    """

    def f(x):
        return x * lax.stop_gradient(x)

    assert float(f(3.0)) == 9.0
    assert float(jax.grad(f)(3.0)) == 3.0
    _, tangent = jax.jvp(f, (3.0,), (2.0,))
    assert float(tangent) == 6.0
    assert float(jax.hessian(f)(3.0)) == 0.0
    assert "stop_gradient" in primitive_names(f, 3.0)

    @jax.custom_vjp
    def clip_gradient(x):
        return x

    def fwd(x):
        return x, None

    def bwd(_, g):
        return (jnp.clip(g, -1.0, 1.0),)

    clip_gradient.defvjp(fwd, bwd)

    assert float(clip_gradient(2.0)) == 2.0
    assert float(jax.grad(lambda x: 10.0 * clip_gradient(x))(2.0)) == 1.0
    assert float(jax.grad(lambda x: 10.0 * (x + lax.stop_gradient(0.0)))(2.0)) == 10.0


def straight_through_round(x):
    """直通估计器（STE）：前向给出 jnp.round(x)，导数（grad、jvp、vmap 下都一样）处处是 1，
    好像取整不存在。只用 jnp 和 lax.stop_gradient（不要 custom_jvp / custom_vjp：这一课是
    stop_gradient 能做什么）；一行。
    The straight-through estimator (STE): jnp.round(x) on the way forward, a derivative of 1
    everywhere (under grad, jvp and vmap alike), as if the rounding were not there. jnp and
    lax.stop_gradient only (no custom_jvp / custom_vjp: the lesson is what stop_gradient can
    do); one line.
    """
    return x + lax.stop_gradient(jnp.round(x) - x)


def test_write_a_straight_through_estimator():
    """✍️ 实现 straight_through_round：量化训练里，取整的导数几乎处处是 0，梯度传不回去。
    直通估计器让前向用取整后的值，反向假装取整是恒等映射。stop_gradient 一行就能写出它：
    把“取整带来的差”包成常数加回去。
    Write straight_through_round: in quantization-aware training the derivative of rounding is
    0 almost everywhere, so no gradient flows back. The straight-through estimator uses the
    rounded value forward and pretends the rounding is the identity backward. stop_gradient
    writes it in one line: add back the difference the rounding makes, as a constant.
    """
    xs = jnp.array([0.2, 1.6, -2.7, 3.5, -0.4])
    np.testing.assert_array_equal(jax.jit(straight_through_round)(xs), jnp.round(xs))
    assert float(jax.grad(jnp.round)(1.6)) == 0.0  # rounding itself: no gradient
    grads = jax.vmap(jax.grad(straight_through_round))(xs)
    np.testing.assert_array_equal(grads, np.ones(5))
    _, tangents = jax.jvp(straight_through_round, (xs,), (jnp.full(5, 2.0),))
    np.testing.assert_array_equal(tangents, np.full(5, 2.0))

    def loss(w):  # a quantized layer still trains: the gradient reaches w
        return jnp.sum((straight_through_round(w * 4.0) - jnp.array([1.0, -3.0])) ** 2)

    np.testing.assert_allclose(jax.grad(loss)(jnp.array([0.3, -0.6])), [0.0, 8.0])


def test_complex_grad_conjugates_and_holomorphic_must_be_said():
    """⚠️ 陷阱 / trap：z = x + iy，f 是实数。jax.grad(f)(z) 给出的是上升方向 ∂f/∂x + i ∂f/∂y，
    还是它的共轭？在 |z|² 和 Im z 上预测。这个约定决定了复数参数的梯度下降怎么写：写错了，虚部会
    越走越远，而且不报错。复数到复数的函数（z²）没有“实数损失”的梯度：jax.grad 拒绝复数输出
    （异常是哪一个？），要说 holomorphic=True，这时 grad 给出复导数 f'(z)；反过来，
    holomorphic=True 要求输入和输出都是复数。
    ⚠️ trap: z = x + iy and f is real. Does jax.grad(f)(z) give the ascent direction
    ∂f/∂x + i ∂f/∂y, or its conjugate? Predict it on |z|² and on Im z. The convention decides how
    gradient descent on a complex parameter is written: get it wrong and the imaginary part
    runs away, without an error. A complex-to-complex function (z²) has no real-loss gradient:
    jax.grad refuses a complex output (with which exception?) until you say holomorphic=True, and
    then returns the complex derivative f'(z); conversely, holomorphic=True wants both the input
    and the output complex.
    """

    def loss(z):
        return jnp.abs(z - (1.0 - 2.0j)) ** 2  # smallest at z = 1 - 2i

    z0 = jnp.complex64(3.0 + 4.0j)
    assert complex(jax.grad(lambda z: jnp.abs(z) ** 2)(z0)) == 6 - 8j
    assert complex(jax.grad(lambda z: z.imag)(z0)) == -1j

    def descend(step):
        z = jnp.complex64(0.0)
        for _ in range(50):
            z = step(z, jax.grad(loss)(z))
        return complex(z)

    np.testing.assert_allclose(descend(lambda z, g: z - 0.1 * jnp.conj(g)), 1.0 - 2.0j, atol=1e-4)

    with raises_exactly(TypeError) as info:
        jax.grad(lambda z: z**2)(z0)
    assert "holomorphic=True" in str(info.value)
    assert complex(jax.grad(lambda z: z**2, holomorphic=True)(z0)) == 6 + 8j
    with raises_exactly(TypeError) as info:
        jax.grad(lambda z: jnp.abs(z) ** 2, holomorphic=True)(z0)
    assert "requires outputs with complex dtype" in str(info.value)


def test_integer_inputs_get_a_gradient_that_holds_nothing():
    """⚠️ 陷阱 / trap：整数没有切空间：对一个 int32 参数求 jax.grad 会报错（哪一个异常？）。参数树里
    常有整数（步数、索引、掩码），grad(..., allow_int=True) 让它们通过：整数参数拿到的“梯度”是什么
    dtype，形状和字节数呢？它不参与任何算术，所以更新参数时要跳过它。jvp 也一样：整数原始值的
    切向量必须是那个 dtype，给一个 int32 的切向量会报错。
    ⚠️ trap: integers have no tangent space: jax.grad with respect to an int32 argument raises
    (which exception?). Parameter trees often hold integers (a step count, indices, a mask), and
    grad(..., allow_int=True) lets them through: what dtype is an integer argument's
    "gradient", and what are its shape and its bytes? It takes part in no arithmetic, so a
    parameter update must skip it. jvp alike: an integer primal's tangent must have that dtype,
    and an int32 tangent raises.
    """

    def scale(x, n):
        return x * n

    with raises_exactly(TypeError):
        jax.grad(scale, argnums=1)(2.0, 3)
    dx, dn = jax.grad(scale, argnums=(0, 1), allow_int=True)(2.0, 3)
    assert float(dx) == 3.0
    assert dn.dtype == jax.dtypes.float0
    assert (dn.shape, dn.nbytes) == ((), 0)

    params = {"w": jnp.ones(2), "step": jnp.int32(5)}
    grads = jax.grad(lambda p: jnp.sum(p["w"] * p["step"]), allow_int=True)(params)
    with pytest.raises(TypeError):  # 不能参与算术 / no arithmetic on it
        jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    def sgd(p, g):
        return p if g.dtype == dn.dtype else p - 0.1 * g

    updated = jax.tree.map(sgd, params, grads)
    np.testing.assert_allclose(updated["w"], [0.5, 0.5])
    assert int(updated["step"]) == 5

    with raises_exactly(TypeError):
        jax.jvp(scale, (2.0, 3), (1.0, 1))
    _, tangent = jax.jvp(scale, (2.0, 3), (1.0, np.zeros((), dn.dtype)))
    assert float(tangent) == 3.0


def test_optimize_remat_runs_the_primal_forward_under_checkpoint():
    """custom_vjp 在 jax.checkpoint 里：前向不存残差，反向要重算它们。原函数 f 和规则的 fwd 各是
    一个不透明的回调（像 Pallas 内核或 custom call：XLA 拆不开，fwd 一算就连输出带残差一起算）。
    预测：求一次梯度，两者各跑几次？defvjp(..., optimize_remat=True) 又怎样？这个选项就是为这种
    拆不开的 fwd 准备的。这里逐个原语执行（不 jit）；jit 之后 XLA 会合并相同的纯回调、删掉没用上的，
    次数就不同了。
    A custom_vjp inside jax.checkpoint: the forward pass saves no residuals, so the backward
    pass must recompute them. The primal f and the rule's fwd are each one opaque callback (like
    a Pallas kernel or a custom call: XLA cannot split them, and fwd computes the output and the
    residual together). Predict: for one gradient, how often does each run? And with
    defvjp(..., optimize_remat=True)? The option exists for just such an fwd. This runs op by op
    (no jit); under jit XLA merges identical pure callbacks and drops unused ones, and the
    counts differ.
    """
    calls = {"primal": 0, "fwd": 0}

    def np_primal(x):
        calls["primal"] += 1
        return np.sin(np.exp(x)).astype(np.float32)

    def np_fwd(x):
        calls["fwd"] += 1
        e = np.exp(x)
        return np.sin(e).astype(np.float32), e.astype(np.float32)

    def make(optimize_remat):
        @jax.custom_vjp
        def f(x):
            return jax.pure_callback(np_primal, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

        def fwd(x):  # one opaque call gives the output and the residual together
            spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
            return jax.pure_callback(np_fwd, (spec, spec), x)

        def bwd(e, g):
            return (g * jnp.cos(e) * e,)

        f.defvjp(fwd, bwd, optimize_remat=optimize_remat)
        return f

    x = jnp.arange(3.0) / 3
    want = np.cos(np.exp(x)) * np.exp(x)
    counts = {}
    for optimize_remat in (False, True):
        calls.update(primal=0, fwd=0)
        f = make(optimize_remat)
        grads = jax.grad(lambda x, f=f: jax.checkpoint(f)(x).sum())(x)
        np.testing.assert_allclose(grads, want, rtol=1e-6)
        counts[optimize_remat] = dict(calls)
    assert counts[False] == {"primal": 0, "fwd": 2}
    assert counts[True] == {"primal": 1, "fwd": 1}
    assert "remat_opt" in primitive_names(
        jax.grad(lambda x: jax.checkpoint(make(True))(x).sum()), x
    )


def test_a_custom_vjp_in_a_scan_saves_its_residuals_per_step():
    """custom_vjp 放进 lax.scan 的循环体：反向传播要的是每一步的残差，scan 把它们沿步数叠起来存下。
    存什么由规则的 fwd 决定，不由 JAX 的自动微分决定。预测：走 5 步、每步一个 [3] 的值，带规则的版本
    存下几个残差、什么形状？不带规则的同一个函数（sin(exp(x)) 直接求导）又存几个？
    A custom_vjp in the body of a lax.scan: the backward pass needs every step's residuals, and
    scan keeps them stacked along the steps. What is kept is decided by the rule's fwd, not by
    JAX's autodiff. Predict: over 5 steps of a [3] carry, how many residuals does the version
    with the rule keep, of what shape? And the same function without a rule (sin(exp(x))
    differentiated directly)?
    """

    @jax.custom_vjp
    def f(x):
        return jnp.sin(jnp.exp(x))

    def fwd(x):
        e = jnp.exp(x)
        return jnp.sin(e), e

    def bwd(e, g):
        return (g * jnp.cos(e) * e,)

    f.defvjp(fwd, bwd)

    def steps(step):
        return lambda x: lax.scan(lambda c, _: (step(c), None), x, None, length=5)[0].sum()

    def saved(fun, x):
        out = io.StringIO()
        with redirect_stdout(out):
            print_saved_residuals(fun, x)
        return [
            tuple(map(int, s.split(","))) for s in re.findall(r"f32\[([\d,]+)\]", out.getvalue())
        ]

    x = jnp.arange(3.0) / 3
    with_rule = saved(steps(f), x)
    without = saved(steps(lambda x: jnp.sin(jnp.exp(x))), x)
    assert len(with_rule) == 1
    assert with_rule[0] == (5, 3)
    assert len(without) == 2
    np.testing.assert_allclose(
        jax.grad(steps(f))(x), jax.grad(steps(lambda x: jnp.sin(jnp.exp(x))))(x), rtol=1e-6
    )
