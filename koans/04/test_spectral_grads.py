"""04 · 重复特征值处的导数 / derivatives at repeated eigenvalues.

jnp.linalg.eigh 和 svd 的导数规则里有一个矩阵 F，F_ij = 1/(λ_j − λ_i)。两个特征值（奇异值）相等时
这一格除以零；那里的特征向量本来就不唯一。这对哪些函数的梯度有影响、影响多大，第一个 koan 请你预测。
很多函数并不依赖于怎么选特征向量：特征值的函数，和谱函数 f(A) = V f(Λ) Vᵀ（矩阵指数、矩阵平方根……）。
谱函数的导数可以不经过特征向量的导数写出来：Daleckii–Krein 公式 df(A)[E] = V (L ∘ (Vᵀ E V)) Vᵀ，
L_ij 是 f 在 λ_i、λ_j 之间的差商，λ_i = λ_j 时取 f'(λ_i)。

The derivative rules of jnp.linalg.eigh and svd hold a matrix F with F_ij = 1/(λ_j − λ_i).
When two eigenvalues (singular values) are equal that entry divides by zero; the eigenvectors
are not unique there. Which gradients this touches, and how much, the first koan asks you to
predict. Many functions do not depend on how the eigenvectors are chosen: functions of the
eigenvalues, and spectral functions f(A) = V f(Λ) Vᵀ (the matrix exponential, the matrix square
root...). A spectral function's derivative can be written without the eigenvectors' derivative:
the Daleckii–Krein formula df(A)[E] = V (L ∘ (Vᵀ E V)) Vᵀ, where L_ij is f's divided difference
between λ_i and λ_j, and f'(λ_i) when λ_i = λ_j.
"""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)

N = 4


def repeated():
    """对角矩阵 diag(1, 2, 2, 3)：特征值 2 出现两次 / diag(1, 2, 2, 3): the eigenvalue 2 twice."""
    return jnp.diag(jnp.array([1.0, 2.0, 2.0, 3.0]))


def rotated():
    """同样的特征值，换一组随机的正交基：float32 算出的两个 2 相差不到 1e-6。
    The same eigenvalues in a random orthonormal basis: in float32 the two 2s differ by < 1e-6."""
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(N, N)))
    a = q @ np.diag([1.0, 2.0, 2.0, 3.0]) @ q.T
    return jnp.asarray((a + a.T) / 2, jnp.float32)


def one_step_apart():
    """diag(-2, -1, 0.25, 0.25⁺)：0.25⁺ 是 0.25 之后的下一个 float32（大 2^-25），两个特征值不相等，
    只差一步。对角矩阵的 eigh 把对角线原样还回来，所以这一步在任何 LAPACK 上都一样。
    diag(-2, -1, 0.25, 0.25⁺): 0.25⁺ is the next float32 after 0.25 (2^-25 above), two
    eigenvalues unequal by one step. eigh hands a diagonal matrix's diagonal back as it is, so
    that step is the same under any LAPACK."""
    after = np.nextafter(np.float32(0.25), np.float32(1.0))
    return jnp.diag(jnp.asarray(np.array([-2.0, -1.0, 0.25, after], np.float32)))


def distinct():
    """一个特征值互不相同的随机对称矩阵 / a random symmetric matrix with distinct eigenvalues."""
    m = np.random.default_rng(1).normal(size=(N, N))
    return jnp.asarray((m + m.T) / 2, jnp.float32)


def spread():
    """特征值相距很远（-9、-2、3、10）的对称矩阵：差商从 e^-9 跨到 e^10。
    A symmetric matrix whose eigenvalues lie far apart (-9, -2, 3, 10): its divided differences
    run from e^-9 to e^10."""
    q, _ = np.linalg.qr(np.random.default_rng(2).normal(size=(N, N)))
    a = q @ np.diag([-9.0, -2.0, 3.0, 10.0]) @ q.T
    return jnp.asarray((a + a.T) / 2, jnp.float32)


WEIGHTS = np.add.outer(np.arange(N), np.arange(N)).astype(np.float32)  # a symmetric cotangent


def naive_expm_sym(a):
    """对称矩阵的指数，经由 eigh，求导交给 eigh 自己的规则（给定）。
    The exponential of a symmetric matrix through eigh, differentiated by eigh's own rule (given)."""
    w, v = jnp.linalg.eigh(a)
    return (v * jnp.exp(w)) @ v.T


def loss(f):
    return lambda a: jnp.sum(f(a) * WEIGHTS)


def exact(a, direction):
    """参考值：SciPy 在 float64 里算的 expm 在 a 处沿 direction 的导数（Fréchet 导数）。对称的 a 上，
    loss(expm) 的梯度就是沿 WEIGHTS 的导数。
    The reference: SciPy's float64 derivative of expm at a along direction (the Fréchet
    derivative). For a symmetric a, the gradient of loss(expm) is the derivative along WEIGHTS."""
    a = np.asarray(a, np.float64)
    return scipy.linalg.expm_frechet(a, np.asarray(direction, np.float64), compute_expm=False)


def test_eigenvector_gradients_break_at_a_repeated_eigenvalue():
    """⚠️ 陷阱 / trap：在 diag(1, 2, 2, 3) 处，对特征值的函数求导、对第 0 列特征向量（属于不重复的
    特征值 1）的函数求导、对把 2 拉开成 2.5 的矩阵求同样的导数，各得到什么？svd 在 2·I 处也一样问。
    最后，两个特征值在 float32 里只差一步（one_step_apart）：naive_expm_sym 的梯度会是 NaN 吗？
    和 SciPy 在 float64 里算的准确梯度差多少？先预测。（exp(0.25) 和 exp(0.25⁺) 在 float32 里是同一个
    数。）
    ⚠️ trap: at diag(1, 2, 2, 3), what does the gradient of a function of the eigenvalues give,
    that of a function of eigenvector column 0 (whose eigenvalue 1 is simple), and the same for
    the matrix with one 2 moved to 2.5? Ask the same of svd at 2·I. Last, two eigenvalues one
    float32 step apart (one_step_apart): is naive_expm_sym's gradient NaN? How far is it from the
    exact gradient SciPy computes in float64? Predict first. (exp(0.25) and exp(0.25⁺) are the
    same float32.)
    """
    a = repeated()
    values = jax.jit(jax.grad(lambda a: jnp.sum(jnp.linalg.eigvalsh(a) ** 2)))(a)
    of_column = jax.jit(jax.grad(lambda a: jnp.sum(jnp.linalg.eigh(a)[1][:, 0] ** 4)))
    column, apart = of_column(a), of_column(a.at[2, 2].set(2.5))
    assert bool(jnp.isfinite(values).all()) is __
    assert int(jnp.isnan(column).sum()) == __
    assert bool(jnp.isfinite(apart).all()) is __
    b = 2.0 * jnp.eye(3)
    singular = jax.jit(jax.grad(lambda b: jnp.sum(jnp.linalg.svd(b, compute_uv=False))))(b)
    left = jax.jit(jax.grad(lambda b: jnp.sum(jnp.linalg.svd(b)[0][:, 0] ** 3)))(b)
    np.testing.assert_array_equal(singular, np.eye(3))
    assert int(jnp.isnan(left).sum()) == __
    near = jax.jit(jax.grad(loss(naive_expm_sym)))(one_step_apart())
    want = exact(one_step_apart(), WEIGHTS)
    assert bool(jnp.isnan(near).any()) is __
    assert np.max(np.abs(near - want)) > 0.5 * np.max(np.abs(want))


@jax.custom_jvp
def expm_sym(a):
    """对称矩阵的指数：V exp(Λ) Vᵀ（前向给定）/ a symmetric matrix's exponential (forward given)."""
    w, v = jnp.linalg.eigh(a)
    return (v * jnp.exp(w)) @ v.T


def expm_sym_jvp(primals, tangents):
    """expm_sym 的 JVP 规则：返回 (exp(A), dA 方向的导数)，用 Daleckii–Krein 公式
    V (L ∘ (Vᵀ dA V)) Vᵀ，L_ij = (e^{λ_i} − e^{λ_j}) / (λ_i − λ_j)，λ_i = λ_j 时是 e^{λ_i}。
    - 不要对特征向量求导（那正是 eigh 自己的规则在做的事）。
    - 差商要在两个特征值只差一点点时也准：e^{λ_j}·expm1(λ_i − λ_j)/(λ_i − λ_j) 不会相消；
      除以零的那一格先换成安全的值再用 jnp.where 选（where 两边都会被求值）。
    - 大约 8 行。
    The JVP rule of expm_sym: return (exp(A), the derivative along dA) by the Daleckii–Krein
    formula V (L ∘ (Vᵀ dA V)) Vᵀ, with L_ij = (e^{λ_i} − e^{λ_j}) / (λ_i − λ_j), and e^{λ_i}
    where λ_i = λ_j.
    - Do not differentiate the eigenvectors (that is what eigh's own rule does).
    - The divided difference must stay accurate when two eigenvalues are a hair apart:
      e^{λ_j}·expm1(λ_i − λ_j)/(λ_i − λ_j) does not cancel; make the division by zero safe before
      jnp.where picks (both sides of a where are evaluated).
    - About 8 lines.
    """
    todo("expm_sym_jvp: Daleckii–Krein, L ∘ (Vᵀ dA V) / 用差商矩阵，不对特征向量求导")


def test_a_spectral_function_differentiates_through_repeated_eigenvalues():
    """✍️ 实现 expm_sym_jvp：谱函数的导数只需要特征值和特征向量本身，不需要特征向量的导数，所以在
    重复特征值处也有限。你的规则在四个矩阵上（恰好重复、差一点点、互不相同、相距很远）都要和
    SciPy 的 float64 参考值一致，在 jit 下也一样；整条规则只做几次矩阵乘法（数 jaxpr 里的
    dot_general），不是一个级数。
    Write expm_sym_jvp: a spectral function's derivative needs the eigenvalues and eigenvectors
    only, never the eigenvectors' derivative, so it stays finite at repeated eigenvalues. On four
    matrices (exactly repeated, a hair apart, distinct, far apart) your rule must agree with
    SciPy's float64 reference, under jit as well; the whole rule takes a handful of matrix
    products (count the dot_general in its jaxpr), not a series.
    """
    expm_sym.defjvp(expm_sym_jvp)
    gradient = jax.jit(jax.grad(loss(expm_sym)))
    direction = np.triu(WEIGHTS) / 10.0  # not symmetric: the rule holds for any dA
    for a in (repeated(), rotated(), distinct(), spread()):
        want = exact(a, WEIGHTS)
        scale = np.max(np.abs(want))
        np.testing.assert_allclose(
            expm_sym(a), scipy.linalg.expm(np.asarray(a, np.float64)), rtol=1e-4
        )
        np.testing.assert_allclose(jax.grad(loss(expm_sym))(a), want, rtol=1e-4, atol=1e-5 * scale)
        np.testing.assert_allclose(gradient(a), want, rtol=1e-4, atol=1e-5 * scale)
        _, got = jax.jvp(expm_sym, (a,), (jnp.asarray(direction, jnp.float32),))
        np.testing.assert_allclose(got, exact(a, direction), rtol=1e-4, atol=1e-5 * scale)
    program = str(jax.make_jaxpr(lambda a, e: jax.jvp(expm_sym, (a,), (e,)))(a, direction))
    assert program.count("dot_general") <= 8, "a handful of matrix products, not a series"
