"""04 · 符号零：求导规则怎样知道哪些输入没被求导 / symbolic zeros: how a rule learns which inputs are not differentiated.

对 f(x, y) 只求 ∂/∂x 时，y 的切向量恒为零。JAX 内部不为它造一个全零数组，而是用一个“符号零”
代替：custom_jvp / custom_vjp 里是 `jax.custom_derivatives.SymbolicZero`（要在
`defjvp(..., symbolic_zeros=True)` / `defvjp(..., symbolic_zeros=True)` 时才交给你的规则），
原语的 JVP 规则里是 `jax.interpreters.ad.Zero`（总会交给你）。规则认出它们，就能跳过那一项——
比如省掉一次矩阵乘法；没认出它们的规则会对一个不是数组的对象做算术，直接出错。

Differentiating f(x, y) by x alone, y's tangent is identically zero. JAX does not build an
array of zeros for it but passes a symbolic zero: `jax.custom_derivatives.SymbolicZero` in
custom_jvp / custom_vjp rules (handed to your rule only with
`defjvp(..., symbolic_zeros=True)` / `defvjp(..., symbolic_zeros=True)`), and
`jax.interpreters.ad.Zero` in a primitive's JVP rule (always). A rule that recognises them can
skip that term, a matrix product for instance; a rule that does not does arithmetic on
something that is not an array and fails.
"""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero
from jax.interpreters import ad, mlir

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)


def test_symbolic_zeros_mark_the_inputs_you_do_not_differentiate():
    """用 symbolic_zeros=True 注册的 custom_jvp 规则，对没被扰动的输入收到 SymbolicZero 而不是数组。
    哪些输入被扰动，取决于你对谁求导，也取决于你怎样传切向量。
    规则若直接拿它做算术，就会失败；不开 symbolic_zeros 时 JAX 先把它实例化成全零数组。
    A custom_jvp rule registered with symbolic_zeros=True receives a SymbolicZero instead of an
    array for every input that is not perturbed. Which inputs are perturbed depends on what you
    differentiate by, and on how you pass the tangents. A rule that does arithmetic on a
    SymbolicZero fails; without symbolic_zeros JAX instantiates it as an array of zeros first.
    """
    marks = []

    @jax.custom_jvp
    def f(x, y):
        return jnp.sin(x) * y

    def careful_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        marks.append([isinstance(t, SymbolicZero) for t in tangents])
        out = jnp.zeros_like(f(x, y))
        if not isinstance(tx, SymbolicZero):
            out = out + jnp.cos(x) * y * tx
        if not isinstance(ty, SymbolicZero):
            out = out + jnp.sin(x) * ty
        return f(x, y), out

    f.defjvp(careful_jvp, symbolic_zeros=True)
    x, y = jnp.float32(1.0), jnp.float32(2.0)
    jax.grad(f, argnums=0)(x, y)
    jax.grad(f, argnums=1)(x, y)
    jax.jvp(f, (x, y), (jnp.float32(1.0), jnp.float32(1.0)))
    jax.jvp(f, (x, y), (jnp.float32(1.0), jnp.zeros_like(y)))
    assert marks == __

    def naive_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return jnp.sin(x) * y, jnp.cos(x) * y * tx + jnp.sin(x) * ty

    @jax.custom_jvp
    def g(x, y):
        return jnp.sin(x) * y

    g.defjvp(naive_jvp, symbolic_zeros=True)
    with raises_exactly(__) as info:
        jax.grad(g, argnums=0)(x, y)
    assert "SymbolicZero" in str(info.value)

    @jax.custom_jvp
    def h(x, y):
        return jnp.sin(x) * y

    h.defjvp(naive_jvp)  # symbolic_zeros=False: the naive rule gets arrays of zeros
    np.testing.assert_allclose(jax.grad(h, argnums=0)(x, y), np.cos(1.0) * 2.0, rtol=1e-6)


@jax.custom_jvp
def dense(x, w, b):
    """tanh(x @ w + b)：一个全连接层。/ A dense layer."""
    return jnp.tanh(x @ w + b)


def dense_jvp(primals, tangents):
    """dense 的 JVP 规则（以 symbolic_zeros=True 注册）：返回 (y, ẏ)，y = tanh(x @ w + b)。
    - ẏ = (1 - y²) · (ẋ @ w + x @ ẇ + ḃ)，但只包含被扰动的输入的项：切向量是 SymbolicZero 的
      输入不贡献任何运算（尤其不做它那一次矩阵乘法）。至少有一个输入被扰动。
    - 大约 8 行。
    The JVP rule of dense (registered with symbolic_zeros=True): return (y, ẏ) with
    y = tanh(x @ w + b).
    - ẏ = (1 - y²) · (ẋ @ w + x @ ẇ + ḃ), with the terms of perturbed inputs only: an input
      whose tangent is a SymbolicZero adds no operation at all (in particular not its matrix
      product). At least one input is perturbed.
    - About 8 lines.
    """
    todo("dense_jvp: one term per perturbed input / 每个被扰动的输入一项")


def test_write_a_jvp_rule_that_skips_unperturbed_inputs():
    """✍️ 实现 dense_jvp：对 x 求导时，ẇ 那一项要做一次和 x @ w 一样大的矩阵乘法，结果却乘的是零。
    符号零让规则把这项整个跳过。用 jaxpr 里 dot_general 的个数检验：前向一次，外加每个被扰动的
    矩阵输入一次。
    Write dense_jvp: differentiating by x, the ẇ term costs a matrix product as big as x @ w,
    only to multiply zeros. Symbolic zeros let the rule skip that term entirely. The jaxpr's
    dot_general count checks it: one for the forward pass, plus one per perturbed matrix input.
    """
    dense.defjvp(dense_jvp, symbolic_zeros=True)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(5, 3)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(3, 4)), jnp.float32)
    b = jnp.asarray(rng.normal(size=4), jnp.float32)

    def reference(x, w, b):
        return jnp.tanh(x @ w + b)

    def loss(f):
        return lambda x, w, b: jnp.sum(f(x, w, b) ** 2)

    for argnums in (0, 1, 2, (0, 1, 2)):
        jax.tree.map(
            lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6),
            jax.grad(loss(dense), argnums)(x, w, b),
            jax.grad(loss(reference), argnums)(x, w, b),
        )

    def dots_in_jvp(wrt):
        """dot_generals in the jaxpr of a JVP that perturbs only the inputs named in wrt."""
        primals = {"x": x, "w": w, "b": b}

        def partial_dense(*perturbed):
            return dense(**{**primals, **dict(zip(wrt, perturbed, strict=True))})

        args = tuple(primals[name] for name in wrt)
        jaxpr = jax.make_jaxpr(lambda *a: jax.jvp(partial_dense, a, a))(*args)
        return str(jaxpr).count("dot_general")

    assert dots_in_jvp("x") == 2
    assert dots_in_jvp("w") == 2
    assert dots_in_jvp("b") == 1
    assert dots_in_jvp("xwb") == 3


def test_custom_vjp_with_symbolic_zeros_sees_what_is_perturbed():
    """defvjp(fwd, bwd, symbolic_zeros=True) 时，fwd 收到的每个参数都是 CustomVJPPrimal：
    .value 是原值，.perturbed 说明它是否参与求导；bwd 收到的余切里，没被用到的输出是 SymbolicZero。
    With defvjp(fwd, bwd, symbolic_zeros=True), every argument fwd receives is a
    CustomVJPPrimal: .value holds the value and .perturbed says whether it takes part in
    differentiation; among the cotangents bwd receives, an output nobody used is a SymbolicZero.
    """
    seen = {}

    @jax.custom_vjp
    def polar(r, theta):
        return r * jnp.cos(theta), r * jnp.sin(theta)

    def fwd(r, theta):
        seen["perturbed"] = (r.perturbed, theta.perturbed)
        r, theta = __
        return polar(r, theta), (r, theta)

    def bwd(res, cts):
        r, theta = res
        seen["unused"] = tuple(isinstance(ct, SymbolicZero) for ct in cts)
        jacobian = ((jnp.cos(theta), -r * jnp.sin(theta)), (jnp.sin(theta), r * jnp.cos(theta)))
        dr, dtheta = jnp.zeros_like(r), jnp.zeros_like(theta)
        for ct, (d_r, d_theta) in zip(cts, jacobian, strict=True):
            if not isinstance(ct, SymbolicZero):
                dr, dtheta = dr + ct * d_r, dtheta + ct * d_theta
        return dr, dtheta

    polar.defvjp(fwd, bwd, symbolic_zeros=True)

    grad_theta = jax.grad(lambda r, theta: polar(r, theta)[1], argnums=1)(2.0, 0.5)
    np.testing.assert_allclose(grad_theta, 2.0 * np.cos(0.5), rtol=1e-6)
    assert seen == __


@jax.custom_vjp
def tanh_layer(x, w):
    """(tanh(x @ w), x @ w)：一个连预激活也交出来的层。/ A layer that hands back its
    pre-activation too."""
    z = x @ w
    return jnp.tanh(z), z


def tanh_layer_fwd(x, w):
    """tanh_layer 的 fwd（以 symbolic_zeros=True 注册）：x、w 是 CustomVJPPrimal。返回
    ((y, z), 残差)，y = tanh(z)，z = x @ w。
    - 残差只存反向真正要用的：x̄ 要用 w，w̄ 要用 x，另一个的位置放 None；y 总要存
      （tanh'(z) = 1 - y²）。大约 5 行。
    The fwd of tanh_layer (registered with symbolic_zeros=True): x and w are CustomVJPPrimal.
    Return ((y, z), residuals) with y = tanh(z), z = x @ w.
    - Save only what the backward pass will use: x̄ needs w, w̄ needs x; put None in the other's
      place. y is always saved (tanh'(z) = 1 - y²). About 5 lines.
    """
    todo("tanh_layer_fwd: save what the perturbed inputs need / 只存被扰动的输入要用的残差")


def tanh_layer_bwd(residuals, cts):
    """tanh_layer 的 bwd：cts = (ȳ, z̄)，损失没用到的输出的余切是 SymbolicZero：跳过它的项。
    - dz = ȳ·(1 - y²) + z̄（只加真正的余切）；x̄ = dz @ wᵀ，w̄ = xᵀ @ dz；没被扰动的输入
      （它要用的残差是 None）返回 None。至少有一个余切不是零。大约 8 行。
    The bwd of tanh_layer: cts = (ȳ, z̄), and the cotangent of an output the loss does not use
    is a SymbolicZero: skip its term.
    - dz = ȳ·(1 - y²) + z̄ (only the real cotangents); x̄ = dz @ wᵀ, w̄ = xᵀ @ dz; return None
      for an input that was not perturbed (the residual it needs is None). At least one
      cotangent is not a zero. About 8 lines.
    """
    todo("tanh_layer_bwd: skip the SymbolicZero cotangents / 跳过 SymbolicZero 余切")


def test_write_a_custom_vjp_that_skips_what_nobody_differentiates():
    """✍️ 实现 tanh_layer_fwd 和 tanh_layer_bwd：不开 symbolic_zeros 时，fwd 不知道谁被求导，
    只能把 x 和 w 都存下来，bwd 两次矩阵乘法都要做，没用到的输出还会收到一个全零余切。开了以后，
    fwd 按 .perturbed 只存需要的残差，bwd 跳过零余切的项和没被扰动的输入。用 jax.vjp 返回的
    函数里的残差、jaxpr 里 dot_general 的个数、以及只用 z 时 tanh 的输出在梯度程序里没人用来检验。
    Write tanh_layer_fwd and tanh_layer_bwd: without symbolic_zeros, fwd cannot tell what is
    differentiated, so it saves both x and w, bwd does both matrix products, and an unused output
    gets a cotangent of zeros. With it, fwd saves only the residuals .perturbed asks for, and bwd
    skips the terms of zero cotangents and the inputs that are not perturbed. Checked by the
    residuals inside the function jax.vjp returns, by the jaxpr's dot_general count, and by the
    tanh output going unused in the gradient program when only z is used.
    """
    tanh_layer.defvjp(tanh_layer_fwd, tanh_layer_bwd, symbolic_zeros=True)
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(5, 3)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(3, 4)), jnp.float32)

    def reference(x, w):
        z = x @ w
        return jnp.tanh(z), z

    def loss(layer, outputs):
        def scalar(x, w):
            both = layer(x, w)
            return sum(jnp.sum(both[i] ** 2) for i in outputs)

        return scalar

    for outputs in ((0,), (1,), (0, 1)):
        for argnums in (0, 1, (0, 1)):
            jax.tree.map(
                lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5),
                jax.grad(loss(tanh_layer, outputs), argnums)(x, w),
                jax.grad(loss(reference, outputs), argnums)(x, w),
            )

    def residual_shapes(f, *args):
        """The arrays jax.vjp keeps for the backward pass (the function it returns holds them)."""
        _, f_vjp = jax.vjp(f, *args)
        return sorted(leaf.shape for leaf in jax.tree.leaves(f_vjp) if isinstance(leaf, jax.Array))

    def dots(layer, argnums):
        grad = jax.grad(loss(layer, (0, 1)), argnums)
        return str(jax.make_jaxpr(grad)(x, w)).count("dot_general")

    # Without symbolic_zeros: fwd gets plain arrays, bwd a cotangent of zeros for an unused output.
    unused = []

    @jax.custom_vjp
    def plain(x, w):
        return reference(x, w)

    def plain_bwd(residuals, cts):
        x, w, y = residuals
        assert not isinstance(cts[0], SymbolicZero)
        jax.debug.callback(lambda ct: unused.append(np.asarray(ct)), cts[0])  # its values
        dz = cts[0] * (1 - y**2) + cts[1]
        return dz @ w.T, x.T @ dz

    def plain_fwd(x, w):
        assert not hasattr(x, "perturbed")  # a plain array: nothing says what is differentiated
        y, z = reference(x, w)
        return (y, z), (x, w, y)

    plain.defvjp(plain_fwd, plain_bwd)
    jax.grad(loss(plain, (1,)))(x, w)
    jax.effects_barrier()
    assert unused[0].shape == (5, 4) and not unused[0].any()
    assert residual_shapes(lambda x: plain(x, w), x) == [(3, 4), (5, 3), (5, 4)]
    assert (dots(plain, 0), dots(plain, 1), dots(plain, (0, 1))) == (3, 3, 3)

    assert residual_shapes(lambda x: tanh_layer(x, w), x) == [(3, 4), (5, 4)]  # w and y
    assert residual_shapes(lambda w: tanh_layer(x, w), w) == [(5, 3), (5, 4)]  # x and y
    assert (dots(tanh_layer, 0), dots(tanh_layer, 1), dots(tanh_layer, (0, 1))) == (2, 2, 3)

    by_z = jax.make_jaxpr(jax.grad(loss(tanh_layer, (1,))))(x, w).jaxpr
    (tanh,) = [e for e in by_z.eqns if e.primitive.name == "tanh"]
    read = {v for e in by_z.eqns for v in e.invars if isinstance(v, jax.extend.core.Var)}
    assert tanh.outvars[0] not in read | set(by_z.outvars)  # nothing computes with y


def make_weighted_sum():
    """一个新的原语 weighted_sum(x, w) = Σ x·w，带 impl、抽象求值和降级（没有 JVP 规则）。
    A fresh primitive weighted_sum(x, w) = Σ x·w with impl, abstract evaluation and lowering
    (no JVP rule yet)."""
    prim = jax.extend.core.Primitive("weighted_sum")

    def reference(x, w):
        return jnp.sum(x * w)

    prim.def_impl(reference)
    prim.def_abstract_eval(lambda x, w: jax.core.ShapedArray((), x.dtype))
    mlir.register_lowering(prim, mlir.lower_fun(reference, multiple_results=False))
    return prim


def weighted_sum_jvp(prim, primals, tangents):
    """weighted_sum 的 JVP 规则：(primals, tangents) → (Σ x·w, Σ ẋ·w + Σ x·ẇ)。
    - 没被扰动的输入的切向量是 ad.Zero（不是数组，不能参与算术）：跳过它的项。至少一个被扰动。
    - 原值用 prim.bind(x, w) 求；切向量项用 jnp。大约 7 行。
    The JVP rule of weighted_sum: (primals, tangents) → (Σ x·w, Σ ẋ·w + Σ x·ẇ).
    - The tangent of an input that is not perturbed is an ad.Zero (not an array, no
      arithmetic with it): skip its term. At least one input is perturbed.
    - Compute the primal with prim.bind(x, w), the tangent terms with jnp. About 7 lines.
    """
    todo("weighted_sum_jvp: skip the ad.Zero tangents / 跳过 ad.Zero 切向量")


def test_a_primitive_jvp_rule_receives_ad_zero():
    """✍️ 实现 weighted_sum_jvp：原语的 JVP 规则（ad.primitive_jvps）总会对没被扰动的输入收到
    ad.Zero——这里没有开关。先看一个不管它的规则怎样失败，再写一个认出它、跳过那一项的规则：
    grad、jit、jvp 都要对，而且只对 x 求导时切向量里只有一次乘法（mul 或 dot 都算），
    原值由原语本身给出（bind 一次）。
    Write weighted_sum_jvp: a primitive's JVP rule (ad.primitive_jvps) always receives an
    ad.Zero for every input that is not perturbed; there is no switch. First see a rule that
    ignores it fail, then write one that recognises it and skips the term: grad, jit and jvp
    must be right, and differentiating by x alone puts a single multiplication (a mul or a dot,
    either counts) in the tangent and the primitive itself (bound once) in the primal.
    """
    x = jnp.arange(1.0, 4.0)
    w = jnp.array([0.5, -2.0, 3.0])

    naive = make_weighted_sum()
    ad.primitive_jvps[naive] = lambda primals, tangents: (
        naive.bind(*primals),
        jnp.sum(tangents[0] * primals[1]) + jnp.sum(primals[0] * tangents[1]),
    )
    with raises_exactly(__) as info:
        jax.grad(naive.bind)(x, w)
    assert "Zero" in str(info.value)

    prim = make_weighted_sum()
    ad.primitive_jvps[prim] = lambda primals, tangents: weighted_sum_jvp(prim, primals, tangents)
    np.testing.assert_allclose(jax.grad(prim.bind, argnums=0)(x, w), w)
    np.testing.assert_allclose(jax.grad(prim.bind, argnums=1)(x, w), x)
    np.testing.assert_allclose(jax.jit(jax.grad(prim.bind, argnums=(0, 1)))(x, w), (w, x))
    _, tangent = jax.jvp(prim.bind, (x, w), (jnp.ones(3), jnp.ones(3)))
    np.testing.assert_allclose(tangent, float(jnp.sum(w) + jnp.sum(x)), rtol=1e-6)

    by_x = jax.make_jaxpr(lambda x, t: jax.jvp(lambda x: prim.bind(x, w), (x,), (t,)))(x, x)
    names = [e.primitive.name for e in by_x.eqns]
    assert names.count("mul") + names.count("dot_general") == 1  # jnp.sum(t * w) or jnp.vdot(t, w)
    assert [e.primitive.name for e in by_x.eqns].count("weighted_sum") == 1  # prim.bind: the primal


def make_rotate_split():
    """一个线性原语 rotate_split(x; angle) = [cos(angle)·x, sin(angle)·x]（两个输出），带 impl、
    抽象求值、降级和 JVP（切向量也走 rotate_split，所以反向模式需要它的转置规则）。
    A linear primitive rotate_split(x; angle) = [cos(angle)·x, sin(angle)·x] (two outputs) with
    impl, abstract evaluation, lowering and a JVP (the tangent goes through rotate_split too, so
    reverse mode needs its transpose rule)."""
    prim = jax.extend.core.Primitive("rotate_split")
    prim.multiple_results = True

    def reference(x, *, angle):
        return [x * np.cos(angle), x * np.sin(angle)]

    prim.def_impl(reference)
    prim.def_abstract_eval(lambda x, *, angle: [jax.core.ShapedArray(x.shape, x.dtype)] * 2)
    mlir.register_lowering(prim, mlir.lower_fun(reference, multiple_results=True))
    ad.primitive_jvps[prim] = lambda primals, tangents, *, angle: (
        prim.bind(*primals, angle=angle),
        prim.bind(*tangents, angle=angle),
    )
    return prim


def rotate_split_transpose(cts, x, *, angle):
    """rotate_split 的转置规则：cts = [输出 0 的余切, 输出 1 的余切]，x 是 ad.UndefinedPrimal
    （线性输入的占位，x.aval 给出形状）。返回 [x 的余切]：cos(angle)·ct0 + sin(angle)·ct1。
    - 没被用到的输出的余切是 ad.Zero：跳过它的项，不要为它做乘法；两个都是 ad.Zero 时返回
      [ad.Zero(x.aval)]。大约 5 行。
    The transpose rule of rotate_split: cts = [output 0's cotangent, output 1's cotangent], x is
    an ad.UndefinedPrimal (the placeholder of a linear input; x.aval gives its shape). Return
    [x's cotangent]: cos(angle)·ct0 + sin(angle)·ct1.
    - The cotangent of an output nobody used is an ad.Zero: skip its term, no multiplication
      for it; when both are ad.Zero return [ad.Zero(x.aval)]. About 5 lines.
    """
    todo("rotate_split_transpose: skip the ad.Zero cotangents / 跳过 ad.Zero 余切")


def test_a_transpose_rule_receives_ad_zero_cotangents():
    """✍️ 实现 rotate_split_transpose：反向模式把线性原语“转置”，每个输出的余切变成输入的余切。
    损失只用到一个输出时，另一个输出的余切是 ad.Zero；不认出它的规则拿 ad.Zero 做乘法，直接失败。
    Write rotate_split_transpose: reverse mode transposes a linear primitive, turning each
    output's cotangent into the input's. When the loss uses one output only, the other output's
    cotangent is an ad.Zero; a rule that does not recognise it multiplies an ad.Zero and fails.
    """
    angle, x = 0.3, jnp.arange(1.0, 4.0)

    naive = make_rotate_split()
    ad.primitive_transposes[naive] = lambda cts, x, *, angle: [
        np.cos(angle) * cts[0] + np.sin(angle) * cts[1]
    ]
    with raises_exactly(__):
        jax.grad(lambda x: naive.bind(x, angle=angle)[0].sum())(x)

    prim = make_rotate_split()
    ad.primitive_transposes[prim] = rotate_split_transpose

    def uses(*outputs):
        return lambda x: sum(prim.bind(x, angle=angle)[i].sum() for i in outputs)

    np.testing.assert_allclose(jax.grad(uses(0))(x), np.full(3, np.cos(angle)), rtol=1e-6)
    np.testing.assert_allclose(jax.jit(jax.grad(uses(1)))(x), np.full(3, np.sin(angle)), rtol=1e-6)
    np.testing.assert_allclose(
        jax.grad(uses(0, 1))(x), np.full(3, np.cos(angle) + np.sin(angle)), rtol=1e-6
    )
    transposed = jax.linear_transpose(lambda x: prim.bind(x, angle=angle), x)
    (ct_x,) = transposed([jnp.full(3, 2.0), jnp.full(3, -1.0)])
    np.testing.assert_allclose(ct_x, np.full(3, 2 * np.cos(angle) - np.sin(angle)), rtol=1e-6)

    grad_jaxpr = jax.make_jaxpr(jax.grad(uses(0)))(x)
    assert [e.primitive.name for e in grad_jaxpr.eqns].count("mul") == 1  # no term for the zero
