"""05 · 自定义原语及其全部规则 / a custom primitive and all its rules.

The primitive of this file, leaky_sum, is a leaky running sum along the last axis (every
leading axis is a batch axis), the same operation as the C++ kernel of test_ffi_kernel.py:

    y[..., i] = decay * y[..., i - 1] + x[..., i]       (reverse=True: from the end backwards)

It is linear in x, and its transpose is the same recurrence run in the other direction.
"""

from functools import partial

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo
from jax.interpreters import ad, batching, mlir

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import equations, primitives


def leaky_sum_reference(x, *, decay, reverse):
    """The plain-JAX definition of leaky_sum: a scan along the last axis."""

    def step(carry, xi):
        carry = decay * carry + xi
        return carry, carry

    xs = jnp.moveaxis(x, -1, 0)
    _, ys = lax.scan(step, jnp.zeros(x.shape[:-1], x.dtype), xs, reverse=reverse)
    return jnp.moveaxis(ys, 0, -1)


def leaky_sum_abstract_eval(x, *, decay, reverse):
    """Tracing sees only shapes and dtypes: the output looks like the input."""
    return jax.core.ShapedArray(x.shape, x.dtype)


def leaky_sum_jvp(prim, primals, tangents, *, decay, reverse):
    """JVP rule: return (primal output, tangent output). leaky_sum is linear in x, so the
    tangent goes through the same operation. Bind `prim` (not the reference), with the same
    parameters. About 3 lines.
    JVP 规则：返回 (原始输出, 切向输出)。leaky_sum 对 x 线性，切向量走同一个运算；用 prim.bind。
    """
    todo("leaky_sum_jvp: 线性原语的 JVP / the JVP of a linear primitive")


def leaky_sum_transpose(prim, ct, x, *, decay, reverse):
    """Transpose rule: given the output cotangent ct, return a tuple with the cotangent of x
    (x itself is an ad.UndefinedPrimal here: a linear input has no value). The transpose of
    the recurrence is the same recurrence run in the other direction. About 1 line.
    转置规则：给定输出余切 ct，返回 x 的余切组成的元组。递推的转置就是反方向的同一个递推。
    """
    todo("leaky_sum_transpose: 反方向的递推 / the recurrence run the other way")


def leaky_sum_batch(prim, args, dims, *, decay, reverse):
    """Batching rule: args = (x,), dims = (the batch axis of x,). leaky_sum already treats
    every leading axis as a batch axis, so move the batch axis to the front (jnp.moveaxis),
    bind once, and return (output, the output's batch axis). About 3 lines.
    批处理规则：把批次轴移到最前面，调用一次 prim.bind，返回 (输出, 输出的批次轴)。
    """
    todo("leaky_sum_batch: 批次轴移到最前面 / batch axis to the front")


def make_leaky_sum(*, abstract_eval=True, lowering=True, jvp=True, transpose=True, batch=True):
    """A fresh leaky_sum primitive with the chosen rules, so each koan starts from its own."""
    prim = jax.extend.core.Primitive("leaky_sum")
    prim.def_impl(leaky_sum_reference)  # eager evaluation
    if abstract_eval:
        prim.def_abstract_eval(leaky_sum_abstract_eval)
    if lowering:
        mlir.register_lowering(prim, mlir.lower_fun(leaky_sum_reference, multiple_results=False))
    if jvp:
        ad.primitive_jvps[prim] = partial(leaky_sum_jvp, prim)
    if transpose:
        ad.primitive_transposes[prim] = partial(leaky_sum_transpose, prim)
    if batch:
        batching.primitive_batchers[prim] = partial(leaky_sum_batch, prim)
    return prim


def test_a_primitive_needs_an_impl_to_run_eagerly():
    """jax.extend.core.Primitive 只是一个名字；bind 把参数和关键字参数（原语的 params）交给
    当前的解释器。没有变换时用的是 impl（def_impl）；没有 impl，bind 就报错。
    A jax.extend.core.Primitive is just a name; bind hands the operands and the keyword
    parameters (the primitive's params) to the current interpreter. With no transformation
    that is the impl (def_impl); without one, bind raises.
    """
    prim = jax.extend.core.Primitive("leaky_sum")
    x = jnp.ones(4)
    with raises_exactly(__):
        prim.bind(x, decay=0.5, reverse=False)

    prim.def_impl(leaky_sum_reference)
    np.testing.assert_allclose(prim.bind(x, decay=0.5, reverse=False), __)
    np.testing.assert_allclose(prim.bind(x, decay=0.5, reverse=True), __)


def test_abstract_eval_is_what_tracing_sees():
    """jit、make_jaxpr 追踪时不运行 impl，而是调用抽象求值规则（def_abstract_eval）：它只拿到
    形状和 dtype（ShapedArray），返回输出的 ShapedArray。原语的 params 原样记进 jaxpr。
    Tracing (jit, make_jaxpr) does not run the impl but the abstract evaluation rule
    (def_abstract_eval): it receives shapes and dtypes only (ShapedArray) and returns the
    output's ShapedArray. The primitive's params are recorded in the jaxpr as they are.
    """
    prim = make_leaky_sum(abstract_eval=False)
    x = jnp.ones((2, 3))

    def f(x):
        return prim.bind(x, decay=0.5, reverse=True)

    with pytest.raises(NotImplementedError) as info:
        jax.make_jaxpr(f)(x)
    assert "Abstract evaluation" in str(info.value)

    seen = []

    def abstract_eval(x, *, decay, reverse):
        seen.append(x)
        return jax.core.ShapedArray(x.shape, x.dtype)

    prim.def_abstract_eval(abstract_eval)
    eqn = jax.make_jaxpr(f)(x).eqns[0]
    assert type(seen[0]).__name__ == __
    assert eqn.params == __
    assert eqn.outvars[0].aval.shape == (2, 3)


def test_jit_needs_a_lowering():
    """jit 还需要把原语翻译成 StableHLO：mlir.register_lowering(原语, 规则)。mlir.lower_fun
    把一个 JAX 函数变成 lowering 规则，它被内联进模块，HLO 里不再有原语的名字。
    jit also needs to translate the primitive into StableHLO: mlir.register_lowering(primitive,
    rule). mlir.lower_fun turns a JAX function into a lowering rule; it is inlined into the
    module and the HLO no longer mentions the primitive.
    """
    prim = make_leaky_sum(lowering=False)
    x = jnp.ones((2, 3))

    def f(x):
        return prim.bind(x, decay=0.5, reverse=False)

    with pytest.raises(NotImplementedError) as info:
        jax.jit(f)(x)
    assert "MLIR translation rule" in str(info.value)

    mlir.register_lowering(prim, __)
    np.testing.assert_allclose(jax.jit(f)(x), leaky_sum_reference(x, decay=0.5, reverse=False))
    hlo = jax.jit(f).lower(x).as_text()
    assert ("leaky_sum" in hlo, hlo.count("stablehlo.while")) == __


def batch_norm_reference(x, scale, offset, mean, var, *, epsilon, feature_index):
    """Inference batch norm in plain JAX: each feature (the axis feature_index) normalised by
    its given mean and variance, then scaled and shifted."""
    shape = [1] * x.ndim
    shape[feature_index] = -1
    scale, offset, mean, var = (v.reshape(shape) for v in (scale, offset, mean, var))
    return (x - mean) * lax.rsqrt(var + epsilon) * scale + offset


def batch_norm_lowering(ctx, x, scale, offset, mean, var, *, epsilon, feature_index):
    """Lowering rule of batch_norm_inference written by hand: emit one StableHLO op,
    stablehlo.BatchNormInferenceOp (the dialect of jax.extend.mlir.dialects), on the five
    operands, which arrive as MLIR values. The primitive's params become the op's attributes:
    epsilon an ir.FloatAttr of 32-bit floats, feature_index an ir.IntegerAttr of 64-bit signless
    integers. Return a list holding the op's result. About 5 lines.
    手写的 lowering 规则：对五个操作数（MLIR 值）发出一个 StableHLO 运算 BatchNormInferenceOp；
    原语的 params 变成它的属性：epsilon 是 32 位浮点的 ir.FloatAttr，feature_index 是 64 位
    不区分符号（signless）整数的 ir.IntegerAttr。返回装着它的结果的列表。
    """
    todo("batch_norm_lowering: 一个 StableHLO 运算 / one StableHLO op")


def make_batch_norm():
    """A fresh batch_norm_inference primitive whose only lowering is batch_norm_lowering."""
    prim = jax.extend.core.Primitive("batch_norm_inference")
    prim.def_abstract_eval(lambda x, *stats, **params: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(prim, batch_norm_lowering)
    return prim


def stablehlo_ops(lowered):
    """The operations of a lowered module's functions, in order, read by MLIR's own walk
    (func.func and func.return left out)."""
    names = []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    names.append(inner.operation.name)
                    visit(inner.operation)

    visit(lowered.compiler_ir("stablehlo").operation)
    return [n for n in names if not n.startswith("func.")]


@pytest.mark.parametrize(
    "shape, feature_index, epsilon", [((3, 4, 3), 0, 1e-3), ((3, 4, 3), 2, 1e-5)]
)
def test_a_lowering_written_by_hand_emits_exactly_its_ops(shape, feature_index, epsilon):
    """mlir.register_lowering 也接受手写的规则：它收到 ctx（ctx.avals_in、ctx.avals_out）和
    MLIR 值形式的操作数，用 StableHLO 方言的运算类（jax.extend.mlir.dialects.stablehlo）构造
    运算，返回结果值的列表。写出 batch_norm_lowering：模块里只有你发出的那一个运算，数值与纯
    JAX 的参考一致（同样形状的操作数，两种特征轴和 epsilon）；XLA 的 CPU 编译器再把它展开
    （编译后的 HLO 里没有 batch-norm 指令）。
    mlir.register_lowering also takes a rule written by hand: it receives ctx (ctx.avals_in,
    ctx.avals_out) and the operands as MLIR values, builds operations with the op classes of the
    StableHLO dialect (jax.extend.mlir.dialects.stablehlo) and returns a list of result values.
    Write batch_norm_lowering: the module holds the one op you emitted and nothing else, and the
    values match the plain-JAX reference (operands of the same shapes, two feature axes and
    epsilons); XLA's CPU compiler then expands it (the compiled HLO holds no batch-norm
    instruction).
    """
    prim = make_batch_norm()
    keys = jax.random.split(jax.random.key(feature_index), 5)
    x = 2.0 * jax.random.normal(keys[0], shape) + 0.5
    n = shape[feature_index]
    scale, offset = jax.random.normal(keys[1], (n,)), jax.random.normal(keys[2], (n,))
    mean = jax.random.normal(keys[3], (n,))
    var = jax.random.uniform(keys[4], (n,), minval=1e-4, maxval=1e-2)  # epsilon matters
    args = (x, scale, offset, mean, var)
    params = {"epsilon": epsilon, "feature_index": feature_index}
    f = jax.jit(lambda *a: prim.bind(*a, **params))
    np.testing.assert_allclose(f(*args), batch_norm_reference(*args, **params), rtol=2e-5, atol=1e-5)
    lowered = f.lower(*args)
    assert stablehlo_ops(lowered) == ["stablehlo.batch_norm_inference"]
    assert "batch-norm-inference" not in lowered.compile().as_text()


def test_jvp_rule_gives_forward_mode():
    """ad.primitive_jvps[原语] 是 JVP 规则：(primals, tangents) → (输出, 切向输出)。写出
    leaky_sum_jvp；有了它 jax.jvp 就能用了，jit 下也一样（jacfwd 还要用到 vmap，也就是批处理规则）。
    ad.primitive_jvps[primitive] holds the JVP rule: (primals, tangents) → (output, output
    tangent). Write leaky_sum_jvp; with it jax.jvp works, under jit as well (jacfwd also needs
    vmap, that is a batching rule). The koan reads the program the rule builds: the jvp's jaxpr
    must bind leaky_sum itself, for the output and for the tangent, not a scan that imitates it.
    A linear map's tangent does not depend on the point it is taken at: it stays exact at a
    primal 10⁴ times larger.
    JVP 规则构造的程序也要检查：jvp 的 jaxpr 里输出和切向量都由 leaky_sum 原语计算，而不是模仿它的 scan。
    线性映射的切向量与求导点无关：原始输入放大 10⁴ 倍，切向量仍然精确。
    """
    prim = make_leaky_sum(jvp=False, transpose=False, batch=False)
    x = jnp.array([[1.0, -2.0, 0.5, 3.0], [0.0, 1.0, 2.0, -1.0]])
    t = jnp.array([[0.5, 1.0, -1.0, 2.0], [1.0, 0.0, 0.0, 1.0]])
    params = {"decay": 0.8, "reverse": False}

    def f(x):
        return jnp.tanh(prim.bind(x, **params))

    with pytest.raises(NotImplementedError):
        jax.jvp(f, (x,), (t,))
    ad.primitive_jvps[prim] = partial(leaky_sum_jvp, prim)

    def reference(x):
        return jnp.tanh(leaky_sum_reference(x, **params))

    expected = jax.jvp(reference, (x,), (t,))
    for got in (jax.jvp(f, (x,), (t,)), jax.jit(lambda x, t: jax.jvp(f, (x,), (t,)))(x, t)):
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-5, atol=1e-6)
    bound = equations("leaky_sum", lambda x, t: jax.jvp(f, (x,), (t,)), x, t)
    assert [e.params for e in bound] == [params, params], "输出和切向量都用 prim.bind / bind prim for both"
    assert "scan" not in primitives(jax.make_jaxpr(lambda x, t: jax.jvp(f, (x,), (t,)))(x, t).jaxpr)
    _, far = jax.jvp(lambda v: prim.bind(v, **params), (1e4 * x,), (t,))
    np.testing.assert_allclose(far, leaky_sum_reference(t, **params), rtol=1e-6)


def test_transpose_rule_gives_reverse_mode():
    """grad 先做 JVP，再把线性部分转置：线性原语还需要转置规则 ad.primitive_transposes[原语]。
    写出 leaky_sum_transpose；有了它 grad、vjp、linear_transpose 都能用。
    grad runs the JVP and then transposes its linear part, so a linear primitive also needs a
    transpose rule, ad.primitive_transposes[primitive]. Write leaky_sum_transpose; with it grad,
    vjp and linear_transpose all work.
    """
    prim = make_leaky_sum(transpose=False, batch=False)
    params = {"decay": 0.7, "reverse": False}
    x = jnp.array([0.3, -1.0, 2.0, 0.5, 1.5])
    ct = jnp.array([1.0, 0.0, -2.0, 0.5, 3.0])

    def linear(v):
        return prim.bind(v, **params)

    with pytest.raises(NotImplementedError) as info:
        jax.linear_transpose(linear, x)(ct)
    assert "Transpose rule" in str(info.value)
    ad.primitive_transposes[prim] = partial(leaky_sum_transpose, prim)

    (transposed,) = jax.linear_transpose(linear, x)(ct)
    (expected,) = jax.vjp(lambda v: leaky_sum_reference(v, **params), x)[1](ct)
    np.testing.assert_allclose(transposed, expected, rtol=1e-6)
    # The other direction transposes too.
    rev = jax.linear_transpose(lambda v: prim.bind(v, decay=0.7, reverse=True), x)(ct)[0]
    np.testing.assert_allclose(rev, leaky_sum_reference(ct, decay=0.7, reverse=False), rtol=1e-6)

    # grad = the JVP rule, then this transpose of its linear part.
    def loss(x):
        return jnp.sum(jnp.sin(linear(x)) ** 2)

    def reference_loss(x):
        return jnp.sum(jnp.sin(leaky_sum_reference(x, **params)) ** 2)

    np.testing.assert_allclose(jax.grad(loss)(x), jax.grad(reference_loss)(x), rtol=1e-5)


def test_batching_rule_gives_vmap():
    """vmap 需要批处理规则 batching.primitive_batchers[原语]：收到带批次轴的参数和批次轴的
    位置，返回 (输出, 输出的批次轴)。写出 leaky_sum_batch：一次 bind 处理整批，不展开循环；
    批次轴在哪根轴上（三根轴都试，还有两层 vmap）都一样。
    vmap needs a batching rule, batching.primitive_batchers[primitive]: it receives the batched
    operands and where their batch axes are, and returns (output, the output's batch axis).
    Write leaky_sum_batch: one bind for the whole batch, no loop, wherever the batch axis is
    (each of the three axes, and a vmap of a vmap).
    """
    prim = make_leaky_sum(batch=False)
    params = {"decay": 0.5, "reverse": True}
    xs = jnp.arange(24.0).reshape(2, 3, 4) / 10

    def f(x):
        return prim.bind(x, **params)

    with pytest.raises(NotImplementedError):
        jax.vmap(f)(xs)
    batching.primitive_batchers[prim] = partial(leaky_sum_batch, prim)

    def reference(x):
        return leaky_sum_reference(x, **params)

    for axis in (0, 1, 2):  # axis 2 is the sequence axis of the stacked array
        got = jax.vmap(f, in_axes=axis)(xs)
        np.testing.assert_allclose(got, jax.vmap(reference, in_axes=axis)(xs), rtol=1e-6)
    nested = jax.vmap(jax.vmap(f))(xs)
    np.testing.assert_allclose(nested, reference(xs), rtol=1e-6)
    for batched in (*(jax.vmap(f, in_axes=axis) for axis in (0, 1, 2)), jax.vmap(jax.vmap(f))):
        eqns = jax.make_jaxpr(batched)(xs).eqns
        assert [e.primitive.name for e in eqns].count("leaky_sum") == 1


def make_scale(jvp_rule):
    """A fresh two-input primitive scale(a, x) = a * x, with impl, abstract eval, lowering and the
    given JVP rule."""
    prim = jax.extend.core.Primitive("scale")
    prim.def_impl(lambda a, x: a * x)
    prim.def_abstract_eval(lambda a, x: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(prim, mlir.lower_fun(lambda a, x: a * x, multiple_results=False))
    ad.primitive_jvps[prim] = partial(jvp_rule, prim)
    return prim


def test_a_jvp_rule_meets_symbolic_zeros():
    """⚠️ 陷阱 / trap: 只对部分输入求导时，其余输入的切向量不是一个全零数组，而是符号零
    ad.Zero：它不是数组，不能参与运算。把所有切向量都当数组用的 JVP 规则，在只对 x 求导时
    就失败了。
    When only some inputs are differentiated, the other inputs' tangents are not arrays of zeros
    but symbolic zeros, ad.Zero: not arrays, and no arithmetic works on them. A JVP rule that
    treats every tangent as an array fails as soon as only x is differentiated.
    """
    seen = []

    def naive_jvp(prim, primals, tangents):
        (a, x), (ta, tx) = primals, tangents
        seen.append((type(ta) is ad.Zero, type(tx) is ad.Zero))
        return prim.bind(a, x), ta * x + a * tx

    prim = make_scale(naive_jvp)
    a, x = jnp.float32(3.0), jnp.arange(3.0)
    with raises_exactly(__):
        jax.jvp(lambda x: prim.bind(a, x), (x,), (jnp.ones(3),))
    assert seen == __


def scale_jvp(prim, primals, tangents):
    """scale(a, x) = a * x 的 JVP 规则：切向输出 = ta * x + a * tx，但跳过符号零的那一项
    （type(t) is ad.Zero），不要把它变成真的零数组再去乘。两个都是零的情形 JAX 不会调用规则。
    大约 6 行。

    The JVP rule of scale(a, x) = a * x: the output tangent is ta * x + a * tx, but skip the term
    of a symbolic zero (type(t) is ad.Zero) instead of turning it into a real array of zeros and
    multiplying. JAX never calls the rule with both tangents zero. About 6 lines.
    """
    todo("scale_jvp: 跳过符号零 / skip the symbolic zeros")


def test_a_jvp_rule_skips_symbolic_zeros():
    """跳过符号零的 JVP 规则：对 x、对 a、对两者求 jvp 都等于 a * x 的导数，grad 对两个参数都
    对；只对 x 求导时，切向部分只有一个乘法（没有为零切向量做的乘法），jvp 的程序里除了原始输出
    和这一个乘法别无其他运算，只对 a 求导时也一样。
    A JVP rule that skips symbolic zeros: jvp with respect to x, to a, and to both equals the
    derivative of a * x, and grad is right for both arguments; differentiating x alone, the
    tangent part holds a single multiplication (none spent on the zero tangent), and the jvp's
    program holds nothing else than the primal and that product, differentiating a alone too.
    """
    prim = make_scale(scale_jvp)
    a, x = jnp.float32(3.0), jnp.arange(1.0, 4.0)
    ta, tx = jnp.float32(0.5), jnp.array([1.0, -1.0, 2.0])
    _, wrt_x = jax.jvp(lambda x: prim.bind(a, x), (x,), (tx,))
    _, wrt_a = jax.jvp(lambda a: prim.bind(a, x), (a,), (ta,))
    _, both = jax.jit(lambda a, x: jax.jvp(prim.bind, (a, x), (ta, tx)))(a, x)
    np.testing.assert_allclose(wrt_x, a * tx)
    np.testing.assert_allclose(wrt_a, ta * x)
    np.testing.assert_allclose(both, ta * x + a * tx)
    grads = jax.grad(lambda a, x: jnp.sum(prim.bind(a, x) ** 2), argnums=(0, 1))(a, x)
    np.testing.assert_allclose(grads[0], jnp.sum(2 * a * x * x), rtol=1e-6)
    np.testing.assert_allclose(grads[1], 2 * a * a * x, rtol=1e-6)
    jvp_jaxpr = jax.make_jaxpr(lambda x, t: jax.jvp(lambda x: prim.bind(a, x), (x,), (t,)))(x, tx)
    assert [e.primitive.name for e in jvp_jaxpr.eqns].count("mul") == 1
    assert len(jvp_jaxpr.eqns) == 2
    wrt_a_jaxpr = jax.make_jaxpr(lambda a, t: jax.jvp(lambda a: prim.bind(a, x), (a,), (t,)))(a, ta)
    assert len(wrt_a_jaxpr.eqns) == 2


def test_capstone_all_rules_compose():
    """综合 / capstone: 有了全部规则，jit、grad、vmap 可以任意组合，结果与纯 JAX 的参考实现
    一致。先预测：梯度的 jaxpr 里有几个 leaky_sum，各自的 reverse 是什么？
    With every rule in place jit, grad and vmap compose freely and agree with the plain-JAX
    reference. Predict first: how many leaky_sum equations does the gradient's jaxpr hold, and
    what is the reverse parameter of each?
    """
    prim = make_leaky_sum()

    def loss_with(leaky_sum):
        def loss(x):
            return jnp.sum(leaky_sum(x, decay=0.9, reverse=False) ** 2) / x.shape[-1]

        return loss

    mine, reference = loss_with(prim.bind), loss_with(leaky_sum_reference)
    xs = jnp.sin(jnp.arange(15.0)).reshape(3, 5)
    per_example = jax.jit(jax.vmap(jax.grad(mine)))(xs)
    np.testing.assert_allclose(per_example, jax.vmap(jax.grad(reference))(xs), rtol=1e-5)
    hessian = jax.jit(jax.hessian(mine))(xs[0])
    np.testing.assert_allclose(hessian, jax.hessian(reference)(xs[0]), rtol=1e-5, atol=1e-6)

    jaxpr = jax.make_jaxpr(jax.grad(mine))(xs[0])
    directions = [e.params["reverse"] for e in jaxpr.eqns if e.primitive is prim]
    assert directions == __
