"""04 · 综合练习：深度平衡（DEQ）隐式层 / capstone: a deep-equilibrium (DEQ) implicit layer.

DEQ 层的输出不是“算 L 层”，而是方程 z* = f(z*, x) 的解：前向用不动点迭代（while_loop，收敛
即停），反向用隐函数定理，只需要 z*，不存任何迭代步：
    u = v̄ + (∂f/∂z)ᵀ u        （伴随方程，同样是一个不动点问题，用 vjp 求解，不建雅可比矩阵）
    θ̄ = (∂f/∂θ)ᵀ u,  x̄ = (∂f/∂x)ᵀ u
测试在 float64 下用中心差分检查你的梯度，并与展开迭代的梯度比较。

A DEQ layer's output is not "run L layers" but the solution of z* = f(z*, x): the forward pass
iterates to the fixed point (a while_loop that stops when converged) and the backward pass uses
the implicit function theorem, which needs z* only and stores no iteration:
    u = v̄ + (∂f/∂z)ᵀ u        (the adjoint equation, another fixed point, solved with vjp and
                               without building the Jacobian)
    θ̄ = (∂f/∂θ)ᵀ u,  x̄ = (∂f/∂x)ᵀ u
The tests check your gradient against central finite differences in float64 and against the
gradient of the unrolled iteration.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------

HIDDEN, INPUTS = 12, 3


def deq_layer(z, params, x):
    """f(z, x) = tanh(W z + U x + b)。/ The layer whose fixed point is the output."""
    return jnp.tanh(params["W"] @ z + params["U"] @ x + params["b"])


def fixed_point(fun, z0, max_iter=500):
    """迭代 z ← fun(z) 直到 ‖fun(z) - z‖ ≤ 50·eps·(1 + ‖z‖)（或 max_iter 步）。
    Iterate z ← fun(z) until ‖fun(z) - z‖ ≤ 50·eps·(1 + ‖z‖) (or max_iter steps).
    """
    tol = 50 * jnp.finfo(z0.dtype).eps

    def keep_going(carry):
        i, z, z_next = carry
        return (i < max_iter) & (jnp.linalg.norm(z_next - z) > tol * (1 + jnp.linalg.norm(z)))

    def step(carry):
        i, _, z_next = carry
        return i + 1, z_next, fun(z_next)

    return lax.while_loop(keep_going, step, (0, z0, fun(z0)))[2]


def init_params(seed, contraction, dtype=np.float32):
    """随机参数（NumPy）；W 被缩放到谱范数 = contraction。
    Random parameters (NumPy); W scaled to spectral norm = contraction."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(HIDDEN, HIDDEN))
    params = {
        "W": contraction * w / np.linalg.svd(w, compute_uv=False)[0],
        "U": rng.normal(size=(HIDDEN, INPUTS)),
        "b": 0.1 * rng.normal(size=HIDDEN),
    }
    return {name: p.astype(dtype) for name, p in params.items()}


@jax.custom_vjp
def deq(params, x):
    """DEQ 层：z* = deq_layer(z*, params, x)。/ The DEQ layer."""
    return fixed_point(lambda z: deq_layer(z, params, x), jnp.zeros(HIDDEN, x.dtype))


def deq_fwd(params, x):
    z = deq(params, x)
    return z, (params, x, z)


def unrolled(params, x, iters=200):
    """参照：展开 iters 步（fori_loop 静态步数，可反向求导）。
    Reference: iters unrolled steps (a static fori_loop, reverse-differentiable)."""
    return lax.fori_loop(0, iters, lambda i, z: deq_layer(z, params, x), jnp.zeros(HIDDEN, x.dtype))


# ---- 你来实现 / your code ---------------------------------------------------------------


def deq_bwd(res, v):
    """DEQ 的反向：res = (params, x, z*)，v 是 z* 的余切。用给定的 fixed_point 解伴随方程
    u = v + (∂f/∂z)ᵀ u（用 jax.vjp 得到 (∂f/∂z)ᵀ，不要建雅可比矩阵），再返回
    (params 的余切, x 的余切) = (∂f/∂(params, x))ᵀ u。不要展开前向迭代。大约 5 行。

    The DEQ's backward pass: res = (params, x, z*), v is z*'s cotangent. Solve the adjoint
    equation u = v + (∂f/∂z)ᵀ u with the given fixed_point ((∂f/∂z)ᵀ from jax.vjp, no Jacobian
    matrix), then return (params' cotangent, x's cotangent) = (∂f/∂(params, x))ᵀ u. Do not unroll
    the forward iteration. About 5 lines.
    """
    todo("deq_bwd: 伴随不动点 + vjp / the adjoint fixed point, then vjp")


deq.defvjp(deq_fwd, deq_bwd)


# ---- 检查 / checks ----------------------------------------------------------------------


def test_contraction_makes_the_fixed_point_unique():
    """tanh 是 1-Lipschitz，所以当 W 的谱范数 < 1 时 f 是压缩映射：从任何起点迭代都收敛到
    同一个 z*。把 W 缩放到谱范数 0.9；随便挑的 W 做不到。
    tanh is 1-Lipschitz, so f is a contraction when W's spectral norm is below 1: iterating
    from any start reaches the same z*. Scale W to spectral norm 0.9; an arbitrary W won't do.
    """
    params = init_params(0, contraction=1.0)
    raw_w = np.random.default_rng(0).normal(size=(HIDDEN, HIDDEN)).astype(np.float32)
    assert np.abs(np.linalg.eigvals(raw_w)).max() > 2  # an eigenvalue beyond 1: no contraction
    params["W"] = 0.9 * raw_w / np.linalg.norm(raw_w, __)
    x = np.array([0.5, -1.0, 2.0], np.float32)

    def layer(z):
        return deq_layer(z, params, x)

    @jax.jit
    def solve_and_check(z0):
        z = fixed_point(layer, z0)
        return z, layer(z)

    starts = [np.zeros(HIDDEN, np.float32), np.linspace(-5.0, 5.0, HIDDEN, dtype=np.float32)]
    (z_a, layer_z_a), (z_b, _) = [solve_and_check(z0) for z0 in starts]
    np.testing.assert_allclose(z_a, z_b, atol=1e-5)
    np.testing.assert_allclose(layer_z_a, z_a, atol=1e-5)
    spectral_norm = np.linalg.svd(params["W"], compute_uv=False)[0]  # the largest singular value
    np.testing.assert_allclose(spectral_norm, 0.9, rtol=1e-5)  # below 1: a contraction


def test_deq_gradient_matches_finite_differences():
    """综合：float64 下，损失对 params 和 x 沿随机方向的方向导数与中心差分一致，
    三组不同的参数和输入。
    Capstone: in float64 the loss's directional derivative along random directions, for params
    and for x, matches central differences, for three sets of parameters and inputs.
    """
    target = np.linspace(-0.5, 0.5, HIDDEN)

    def loss(params, x):
        return jnp.sum((deq(params, x) - target) ** 2)

    def directional(params, x, d_params, d_x):
        """<∇L, d> from your gradient, and the central difference along d / 中心差分."""
        g_params, g_x = jax.grad(loss, argnums=(0, 1))(params, x)
        analytic = jnp.vdot(g_x, d_x) + sum(
            jnp.vdot(g, d)
            for g, d in zip(jax.tree.leaves(g_params), jax.tree.leaves(d_params), strict=True)
        )
        eps = 1e-6
        plus = loss(jax.tree.map(lambda p, d: p + eps * d, params, d_params), x + eps * d_x)
        minus = loss(jax.tree.map(lambda p, d: p - eps * d, params, d_params), x - eps * d_x)
        return analytic, (plus - minus) / (2 * eps)

    with jax.enable_x64(True):
        check = jax.jit(directional)
        for seed in range(3):
            rng = np.random.default_rng(100 + seed)
            params = init_params(seed, contraction=0.7, dtype=np.float64)
            x = rng.normal(size=INPUTS)
            d_params = {name: rng.normal(size=p.shape) / p.size for name, p in params.items()}
            d_x = rng.normal(size=INPUTS)
            analytic, numeric = check(params, x, d_params, d_x)
            assert analytic.dtype == jnp.float64
            np.testing.assert_allclose(analytic, numeric, rtol=1e-6)


def test_deq_gradient_equals_unrolled_under_jit_and_vmap():
    """综合：对一个批次（vmap）在 jit 下求梯度，与展开 200 步的梯度一致；前向用的是
    while_loop，所以只有你的 custom_vjp 能让 grad 通过。编译后的临时内存不到展开版本的 1/10。
    deq_bwd 的 jaxpr（连同 while_loop 的循环体）里没有雅可比矩阵：除了 W 的余切，没有任何中间值
    含有 HIDDEN² 个或更多的数。
    Capstone: the gradient over a batch (vmap) under jit equals the gradient of 200 unrolled
    steps; the forward pass is a while_loop, so only your custom_vjp lets grad through. Its
    compiled temporary memory is under a tenth of the unrolled version's. deq_bwd's jaxpr
    (while_loop bodies included) holds no Jacobian: apart from W's cotangent, no intermediate
    has HIDDEN² numbers or more.
    """
    params = init_params(7, contraction=0.8)
    xs = np.random.default_rng(8).normal(size=(5, INPUTS)).astype(np.float32)

    def batch_loss(solve):
        def loss(params, xs):
            zs = jax.vmap(solve, in_axes=(None, 0))(params, xs)
            return jnp.sum(jnp.sin(zs) * jnp.arange(HIDDEN))

        return jax.jit(jax.grad(loss, argnums=(0, 1)))

    compiled = {
        name: batch_loss(solve).lower(params, xs).compile()
        for name, solve in (("deq", deq), ("unrolled", unrolled))
    }
    for got, want in zip(
        jax.tree.leaves(compiled["deq"](params, xs)),
        jax.tree.leaves(compiled["unrolled"](params, xs)),
        strict=True,
    ):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)

    # no unrolling hidden in bwd: far less temporary memory / bwd 里没有偷偷展开
    temp = {name: c.memory_analysis().temp_size_in_bytes for name, c in compiled.items()}
    assert 10 * temp["deq"] < temp["unrolled"], temp

    def sizes(jaxpr):  # the size of every intermediate, nested jaxprs included
        for eqn in jaxpr.eqns:
            yield from (var.aval.size for var in eqn.outvars)
            for param in eqn.params.values():
                for sub in param if isinstance(param, tuple | list) else (param,):
                    if hasattr(inner := getattr(sub, "jaxpr", sub), "eqns"):
                        yield from sizes(inner)

    res = deq_fwd(params, xs[0])[1]
    bwd = jax.make_jaxpr(deq_bwd)(res, jnp.ones(HIDDEN))
    big = [size for size in sizes(bwd.jaxpr) if size >= HIDDEN * HIDDEN]
    assert big == [HIDDEN * HIDDEN], f"{len(big)} intermediates of n² numbers or more: a Jacobian"
