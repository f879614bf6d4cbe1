"""06 · 混合精度与损失缩放 / mixed precision and loss scaling."""

import math

import jax
import jax.numpy as jnp
import jmp
import numpy as np
import optax
from flax import nnx

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import counting_compiles, primitives


def _loss(w32, x, compute_dtype):
    """fp32 master weights, cast to the compute dtype for the forward pass."""
    w = w32.astype(compute_dtype)
    y = jnp.tanh(x.astype(compute_dtype) @ w)
    return jnp.mean(y**2).astype(jnp.float32)


def test_the_gradient_dtype_under_bf16_compute():
    """⚠️ 陷阱 / trap：前向在 bf16 里算，fp32 参数的梯度是什么 dtype？（astype 的转置决定余切
    变回什么 dtype。）优化器更新的是 fp32 主权重，但梯度的精度只有 bf16 那么多。
    ⚠️ trap: the forward pass runs in bf16: which dtype is the gradient of fp32 parameters? (The
    transpose of astype decides what dtype the cotangent is cast back to.) The optimizer updates
    fp32 master weights, but the gradient only carries bf16's precision.
    """
    w = 0.1 * jax.random.normal(jax.random.key(0), (16, 8))
    x = jax.random.normal(jax.random.key(1), (32, 16))
    grad = jax.jit(jax.grad(_loss), static_argnums=2)
    g_bf16 = grad(w, x, jnp.bfloat16)
    g_fp32 = grad(w, x, w.dtype)  # computed in the parameters' own dtype
    assert g_bf16.dtype == jnp.float32
    # The jaxpr shows the forward dot in bf16.
    jaxpr = str(jax.make_jaxpr(_loss, static_argnums=2)(w, x, jnp.bfloat16))
    assert "bf16[32,8] = dot_general" in jaxpr
    # Close to the fp32 gradient, but only to bf16's ~3 significant digits.
    rel = float(jnp.linalg.norm(g_bf16 - g_fp32) / jnp.linalg.norm(g_fp32))
    assert 1e-4 < rel < 5e-2


def _tiny_loss(w32, x, dtype, scale=1.0):
    """Activations ~1e-4 in the compute dtype, the loss reduced in fp32 as practitioners do
    (the cast back to fp32 comes before the sum); its gradients are ~1e-8, too small for fp16."""
    h = w32.astype(dtype) * x.astype(dtype)
    loss = jnp.sum(h.astype(jnp.float32)) * 1e-4
    return loss * scale


def test_fp16_gradients_underflow_to_zero():
    """⚠️ 陷阱 / trap：fp16 的最小次正规数约 6e-8，量级 1e-8 的梯度在反向传播里直接变成 0；
    bf16 的指数范围与 fp32 相同，不会下溢（只是精度低）。
    ⚠️ trap: fp16's smallest subnormal is about 6e-8, so gradients around 1e-8 flush to zero in
    the backward pass; bf16 has fp32's exponent range and does not underflow (it is only less
    precise).
    """
    w = jnp.ones(64)
    x = jnp.full(64, 1e-4)
    grad = jax.jit(jax.grad(_tiny_loss), static_argnums=2)
    g32 = grad(w, x, jnp.float32)
    g16 = grad(w, x, jnp.float16)
    gbf = grad(w, x, jnp.bfloat16)
    assert float(jnp.finfo(jnp.float16).smallest_subnormal) > float(g32[0])
    assert int(jnp.count_nonzero(g16)) == 0
    assert int(jnp.count_nonzero(gbf)) == 64


def test_static_loss_scaling_rescues_fp16_gradients():
    """静态损失缩放：反向前把损失乘以 S，fp16 里的梯度放大 S 倍；转回 fp32 后再除以 S。
    落进次正规数区间的梯度只剩几位有效数字，所以 S 要把它们抬进 fp16 的正规数范围
    （finfo.tiny 以上）。找出做到这一点的最小的 2 的幂（2 的幂除回去没有舍入误差）。
    Static loss scaling: multiply the loss by S before the backward pass so the fp16 gradients
    are S times larger; back in fp32, divide by S. A gradient left among the subnormals keeps
    only a few significant bits, so S must lift the gradients into fp16's normal range (at or
    above finfo.tiny). Find the smallest power of two that does (dividing by a power of two is
    exact).
    """
    w = jnp.ones(64)
    x = jnp.full(64, 1e-4)
    grad = jax.jit(jax.grad(_tiny_loss), static_argnums=2)
    g32 = grad(w, x, jnp.float32)
    normal = float(jnp.finfo(jnp.float16).tiny)
    scale = 2.0**13
    assert math.frexp(scale)[0] == 0.5  # a power of two
    assert float(jnp.min(grad(w, x, jnp.float16, scale))) >= normal
    assert float(jnp.max(grad(w, x, jnp.float16, scale / 2))) < normal  # the smallest such
    g16 = grad(w, x, jnp.float16, scale) / scale
    assert g16.dtype == jnp.float32
    np.testing.assert_allclose(g16, g32, rtol=1e-3)


def test_dynamic_loss_scaling_backs_off_on_overflow():
    """动态损失缩放：从很大的 S 开始；梯度出现 inf/NaN 就跳过这一步、把 S 减半，直到梯度有限。
    S 本身是一个 fp32 数，不必在 fp16 里可表示；必须放得下的是反向传播里每个乘上了 S 的 fp16
    余切。这里损失在 fp32 里求和，最大的 fp16 余切是流回激活 h 的那个（1e-4 × S）。
    Dynamic loss scaling: start with a large S; when the gradients hold inf/NaN, skip the step
    and halve S until they are finite. S itself is an fp32 number and need not be representable
    in fp16; what must fit is every S-scaled fp16 cotangent of the backward pass. Here the loss
    is summed in fp32 and the largest fp16 cotangent is the one flowing back into the activation
    h (1e-4 × S).
    """
    w = jnp.ones(64)
    x = jnp.full(64, 1e-4)
    grad_fn = jax.jit(jax.grad(_tiny_loss), static_argnums=2)
    g32 = grad_fn(w, x, jnp.float32)

    scale, skipped = 2.0**40, 0
    while True:
        g = grad_fn(w, x, jnp.float16, scale)
        if bool(jnp.all(jnp.isfinite(g))):
            break
        scale, skipped = scale / 2, skipped + 1
    assert scale == 2.0**29
    assert skipped == 11
    assert scale > float(jnp.finfo(jnp.float16).max)  # S lives in fp32
    np.testing.assert_allclose(g / scale, g32, rtol=1e-3)


OPT = optax.adam(1e-2)


def _fp16_loss(w, x, y):
    """A least-squares loss whose forward pass runs in fp16, reduced in fp32."""
    pred = x.astype(jnp.float16) @ w.astype(jnp.float16)
    return jnp.mean((pred.astype(jnp.float32) - y) ** 2)


def _fp32_step(w, opt_state, x, y):
    """The reference: the same Adam step with the loss in fp32 and no scaling."""
    grads = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    updates, opt_state = OPT.update(grads, opt_state, w)
    return optax.apply_updates(w, updates), opt_state


def loss_scaled_step(w, opt_state, loss_scale, x, y):
    """一步动态损失缩放的训练（会被 jax.jit 编译一次，之后每步一次调用）：用 loss_scale
    （jmp.DynamicLossScale）放大 _fp16_loss 再求梯度，除回去；梯度全部有限时用 OPT 更新 w 和
    opt_state，否则两者原样保留；再让 loss_scale 按这一步是否有限调整自己。不许有 Python 的
    if、回调或把值取回主机。返回 (w, opt_state, loss_scale, finite)，finite 是一个布尔标量。
    约 8 行。
    One training step with dynamic loss scaling (compiled once by jax.jit, one call per step):
    scale _fp16_loss with loss_scale (a jmp.DynamicLossScale) before taking the gradient, unscale
    it; if every gradient is finite, update w and opt_state with OPT, otherwise keep both as they
    were; then let loss_scale adjust itself by whether this step was finite. No Python if, no
    callback, nothing fetched to the host. Return (w, opt_state, loss_scale, finite), finite a
    boolean scalar. About 8 lines.
    """
    grads = jax.grad(lambda w: loss_scale.scale(_fp16_loss(w, x, y)))(w)
    grads = loss_scale.unscale(grads)
    finite = jmp.all_finite(grads)
    updates, new_opt_state = OPT.update(grads, opt_state, w)
    new_w = optax.apply_updates(w, updates)
    w, opt_state = jmp.select_tree(finite, (new_w, new_opt_state), (w, opt_state))
    return w, opt_state, loss_scale.adjust(finite), finite


def test_dynamic_loss_scaling_inside_jit():
    """上一个 koan 的动态损失缩放是一个 Python 循环：每一步都把梯度是否有限取回主机再决定，
    训练循环因此每步同步一次。真实训练把它放进编译好的一步里：跳过这一步、调整缩放因子都是
    程序里的 select，缩放因子是状态的一部分。第 2 步的输入被放大 300 倍，使它的 fp16 梯度溢出；
    period=2 表示连续两步有限之后缩放因子翻倍（别的 period、factor 按它自己的来）。
    对照 fp32 的参考：只走有限的那几步。
    The previous koan's dynamic loss scaling is a Python loop: every step fetches whether the
    gradients are finite to the host before deciding, so the training loop syncs once per step.
    Real training puts it in the compiled step: skipping the step and adjusting the scale are
    selects in the program, and the scale is part of the state. Step 2's input is scaled up 300
    times so that its fp16 gradients overflow; period=2 doubles the scale after two finite steps
    in a row (a scale of another period and factor follows its own). The reference is fp32
    training that takes only the finite steps.
    """
    w = 0.1 * jax.random.normal(jax.random.key(0), (8, 4))
    x = jax.random.normal(jax.random.key(1), (5, 16, 8)).at[2].multiply(300.0)
    y = jax.random.normal(jax.random.key(2), (5, 16, 4))
    loss_scale = jmp.DynamicLossScale(jnp.float32(2.0**10), period=2)
    opt_state = OPT.init(w)
    ref_w, ref_state = w, OPT.init(w)
    step = jax.jit(loss_scaled_step)
    scales, flags = [], []
    with counting_compiles() as compiled:
        for i in range(5):
            w, opt_state, loss_scale, finite = step(w, opt_state, loss_scale, x[i], y[i])
            scales.append(float(loss_scale.loss_scale))
            flags.append(bool(finite))
            if i != 2:
                ref_w, ref_state = _fp32_step(ref_w, ref_state, x[i], y[i])
    assert compiled.count("jit(loss_scaled_step)") == 1
    assert flags == [True, True, False, True, True]
    assert scales == [2.0**10, 2.0**11, 2.0**10, 2.0**10, 2.0**11]
    assert int(opt_state[0].count) == 4  # the skipped step left Adam's state alone
    # The scale's own period and factor decide, whatever they are: period 3, factor 4.
    other = jmp.DynamicLossScale(jnp.float32(2.0**10), jnp.int32(2), period=3, factor=4)
    _, _, other, finite = step(w, opt_state, other, x[0], y[0])
    assert (bool(finite), float(other.loss_scale), int(other.counter)) == (True, 2.0**12, 0)
    assert bool(jnp.all(jnp.isfinite(w)))
    np.testing.assert_allclose(opt_state[0].mu, ref_state[0].mu, rtol=2e-2, atol=1e-3)
    # Close, not equal: the updates were made from the fp16 gradients, not from fp32 ones.
    assert float(jnp.max(jnp.abs(opt_state[0].mu - ref_state[0].mu))) > 1e-6
    np.testing.assert_allclose(w, ref_w, rtol=2e-3, atol=2e-4)
    # One program: the skip and the scale update are selects, nothing leaves the device.
    used = primitives(jax.make_jaxpr(loss_scaled_step)(w, opt_state, loss_scale, x[0], y[0]).jaxpr)
    assert "select_n" in used or "cond" in used
    assert not used & {"pure_callback", "io_callback", "debug_callback"}


def mixed_precision_layer(rngs):
    """一个 nnx.Linear(16, 8)：参数以 fp32 保存（优化器更新的主权重），前向在 bf16 里计算。
    用 Flax 自己的两个 dtype 参数，不要手写 astype。约 1 行。
    An nnx.Linear(16, 8) whose parameters are stored in fp32 (the master weights the optimizer
    updates) and whose forward pass computes in bf16. Use Flax's own two dtype arguments, no
    hand-written astype. About 1 line.
    """
    return nnx.Linear(16, 8, dtype=jnp.bfloat16, param_dtype=jnp.float32, rngs=rngs)


def test_flax_dtype_and_param_dtype():
    """Flax 的层有两个 dtype：param_dtype 决定参数怎么存，dtype 决定计算用什么精度。和本文件第一个
    koan 手写的 astype 一样，梯度跟着参数走，是 fp32。
    Flax layers take two dtypes: param_dtype decides how the parameters are stored, dtype the
    precision of the computation. As with the hand-written astype of this file's first koan, the
    gradients follow the parameters and are fp32.
    """
    layer = mixed_precision_layer(nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(1), (32, 16))
    assert layer.kernel[...].dtype == jnp.float32 and layer.bias[...].dtype == jnp.float32
    assert layer(x).dtype == jnp.bfloat16
    jaxpr = str(jax.make_jaxpr(lambda x: layer(x))(x))
    assert "bf16[32,8] = dot_general" in jaxpr
    grads = nnx.grad(lambda m: jnp.mean(m(x).astype(jnp.float32) ** 2))(layer)
    assert grads["kernel"][...].dtype == jnp.float32
    reference = nnx.Linear(16, 8, rngs=nnx.Rngs(0))  # same fp32 parameters, fp32 compute
    np.testing.assert_array_equal(layer.kernel[...], reference.kernel[...])
    np.testing.assert_allclose(layer(x).astype(jnp.float32), reference(x), rtol=5e-2, atol=5e-2)
