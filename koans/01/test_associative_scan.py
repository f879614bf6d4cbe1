"""01 · lax.associative_scan 并行前缀扫描 / parallel prefix scans with lax.associative_scan."""

import functools
import operator

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)


def test_associative_scan_with_add_is_cumsum():
    """associative_scan(fn, xs) 求出所有前缀 x0∘x1∘…∘xt；fn 满足结合律时能以 O(log n)
    的深度并行计算。fn=加法就是 cumsum，fn=maximum 就是前缀最大值。
    associative_scan(fn, xs) computes every prefix x0∘x1∘…∘xt; when fn is associative this runs
    in O(log n) depth, in parallel. fn=add gives cumsum, fn=maximum gives the running maximum.
    """

    @jax.jit  # one compilation, instead of one per little op inside associative_scan
    def prefixes(xs):
        return lax.associative_scan(__, xs), lax.associative_scan(jnp.maximum, xs)

    xs = jnp.array([3, 1, 4, 1, 5, 9, 2, 6])
    running_sum, running_max = prefixes(xs)
    np.testing.assert_array_equal(running_sum, jnp.cumsum(xs))
    np.testing.assert_array_equal(running_max, __)
    np.testing.assert_array_equal(running_max, np.maximum.accumulate(np.asarray(xs)))


def test_associative_scan_reverse_gives_suffixes():
    """打开一个开关，associative_scan 就求后缀：结果[i] 组合 xs[i:] 的全部元素；fn 的左参数是更靠后的元素
    （与 scan(reverse=True) 的访问顺序一致）。
    One switch makes associative_scan compute suffixes: result[i] combines all of xs[i:]; fn's left argument is the
    element nearer the end (the order scan(reverse=True) visits them in).
    """

    def append_digits(left, right):
        # (number of digits, value): right's digits go after left's. Associative, not commutative.
        (n_left, left_value), (n_right, right_value) = left, right
        return n_left + n_right, left_value * 10**n_right + right_value

    @jax.jit
    def suffixes(xs):
        suffix = lax.associative_scan(jnp.add, xs, reverse=__)
        _, joined = lax.associative_scan(append_digits, (jnp.ones_like(xs), xs), reverse=True)
        return suffix, joined

    xs = jnp.array([1, 2, 3, 4])
    suffix, joined = suffixes(xs)
    np.testing.assert_array_equal(suffix, [10, 9, 7, 4])
    np.testing.assert_array_equal(suffix, lax.cumsum(xs, reverse=True))
    np.testing.assert_array_equal(joined, __)


def test_associative_scan_along_an_axis():
    """axis= 选择扫描的轴（默认 0）；其余轴都是互不相关的独立序列。
    axis= picks the axis to scan along (default 0); the other axes hold independent sequences.
    """

    @jax.jit
    def along_axes(m):
        row_sums = lax.associative_scan(jnp.add, m, axis=__)
        return row_sums, lax.associative_scan(jnp.maximum, m, axis=0)

    m = jnp.array([[1, 5, 2], [4, 0, 6]])
    row_sums, column_max = along_axes(m)
    np.testing.assert_array_equal(row_sums, np.cumsum(m, axis=1))
    np.testing.assert_array_equal(column_max, __)


def test_associative_scan_solves_a_linear_recurrence():
    """h_t = a_t·h_{t-1} + b_t：每一步是仿射映射 h ↦ a·h + b，映射的复合满足结合律，
    所以整条递推可以用 associative_scan 并行求出（线性 RNN / SSM 的并行训练就靠它）。
    fn(earlier, later) 的左参数是更早的一步。
    h_t = a_t·h_{t-1} + b_t: every step is an affine map h ↦ a·h + b, and composing maps is
    associative, so associative_scan solves the whole recurrence in parallel (how linear RNNs /
    SSMs train in parallel). fn(earlier, later) gets the earlier step on the left.
    """

    def compose(earlier, later):
        a1, b1 = earlier
        a2, b2 = later
        # later after earlier: h ↦ a2·(a1·h + b1) + b2
        return a1 * a2, __

    a = jnp.array([0.5, 2.0, -1.0, 0.25, 3.0, 1.5])
    b = jnp.array([1.0, -2.0, 0.5, 4.0, -1.0, 2.0])
    h0 = 1.5
    prefix_a, prefix_b = jax.jit(lax.associative_scan, static_argnums=0)(compose, (a, b))
    h_parallel = __  # the prefix map t applied to h0 gives h_t

    def step(h, ab):
        h = ab[0] * h + ab[1]
        return h, h

    _, h_sequential = lax.scan(step, h0, (a, b))
    np.testing.assert_allclose(h_parallel, h_sequential, rtol=1e-6)


def test_associative_scan_needs_an_associative_fn():
    """⚠️ 陷阱 / trap: associative_scan 会重新分组（例如 (x0∘x1)∘(x2∘x3)），所以 fn 必须满足结合律。
    减法不满足：结果悄悄出错，不会报任何错误。
    associative_scan regroups the work (e.g. (x0∘x1)∘(x2∘x3)), so fn must be associative.
    Subtraction is not: the result is silently wrong, no error is raised.
    """
    xs = jnp.array([10.0, 1.0, 2.0, 3.0])
    parallel = jax.jit(lax.associative_scan, static_argnums=0)(jnp.subtract, xs)
    xs_np = np.asarray(xs)
    # one after the other: ((x0 - x1) - x2) - x3
    sequential = [functools.reduce(operator.sub, xs_np[: t + 1]) for t in range(4)]
    np.testing.assert_array_equal(parallel[:3], sequential[:3])  # short prefixes still agree
    assert sequential[3] == __
    assert float(parallel[3]) == __


def prefix_scan(fn, elems):
    """并行前缀扫描（Hillis–Steele）：沿第 0 轴计算与 lax.associative_scan(fn, elems) 相同的结果。
    - elems：一个数组，或数组组成的 pytree（如 tuple），所有叶子第 0 轴长度相同，n ≥ 1 任意。
    - fn(x, y) 满足结合律，逐元素处理一批：x、y 与 elems 结构相同（第 0 轴长度相同），
      x 是更早的元素。
    - 只用 jnp / jax.tree 运算，不许用 lax.associative_scan（它是另一种分组方式）。
      Hillis–Steele：偏移 d = 1, 2, 4, …（d < n），每轮调用 fn 一次，对所有 i ≥ d 同时做
      r[i] ← fn(r[i-d], r[i])：第 d 轮的 fn 拿到 n - d 个元素，一共 ⌈log2 n⌉ 次调用。
    - 大约 8 行。
    Parallel prefix scan (Hillis–Steele): the same result as lax.associative_scan(fn, elems),
    along axis 0.
    - elems: an array or a pytree (e.g. a tuple) of arrays whose leaves share a leading length
      n ≥ 1 (any n).
    - fn(x, y) is associative and works on batches elementwise: x and y are pytrees like elems
      (same leading length), x holds the earlier elements.
    - Use only jnp / jax.tree ops, not lax.associative_scan (it groups the work another way).
      Hillis–Steele: offsets d = 1, 2, 4, … (d < n), one call of fn per round, setting
      r[i] ← fn(r[i-d], r[i]) for all i ≥ d at once: round d hands fn n - d elements, ⌈log2 n⌉
      calls in all.
    - About 8 lines.
    """
    todo("prefix_scan: log2(n) doubling rounds / 倍增的并行前缀扫描")


def test_write_a_parallel_prefix_scan(monkeypatch):
    """✍️ 实现 prefix_scan：用 log2(n) 轮倍增的并行前缀扫描，对加法、max、仿射映射复合（矩阵乘）、
    数字拼接（tuple 元素）都要与 lax.associative_scan 一致。检查记下 fn 每次拿到的元素个数：
    倍增的每一轮是 n - d 个（d = 1, 2, 4, …），lax.associative_scan 的递归分组不是这样。
    Write prefix_scan: a parallel prefix scan in log2(n) doubling rounds that matches
    lax.associative_scan for add, max, affine composition (matrix products) and digit joining
    (tuple elements). The check records how many elements fn gets at each call: n - d in the
    round of offset d (d = 1, 2, 4, …), which lax.associative_scan's recursive grouping is not.
    """
    rng = np.random.default_rng(0)
    # h ↦ a·h + b as the matrix [[a, b], [0, 1]]; "earlier, then later" is later @ earlier.
    affine = np.zeros((8, 2, 2), np.float32)
    affine[:, 0, 0] = rng.uniform(-1.5, 1.5, 8)
    affine[:, 0, 1] = rng.normal(size=8)
    affine[:, 1, 1] = 1.0

    def then(earlier, later):
        return later @ earlier

    def append_digits(left, right):
        (n_left, left_value), (n_right, right_value) = left, right
        return n_left + n_right, left_value * 10**n_right + right_value

    digits = np.array([3, 1, 4, 1, 5, 9], np.int32)
    fns = [jnp.add, jnp.add, jnp.maximum, then, append_digits]
    elems = [
        np.arange(1.0, 14.0, dtype=np.float32),  # n = 13, not a power of two
        np.array([7.0], np.float32),  # n = 1
        np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3], np.int32),
        affine,  # each element is a 2×2 matrix
        (np.ones_like(digits), digits),  # a tuple of arrays
    ]
    # One compilation for all cases (eager mode would compile every little op).
    expected = jax.jit(
        lambda es: [lax.associative_scan(f, e) for f, e in zip(fns, es, strict=True)]
    )(elems)

    def forbidden(*args, **kwargs):
        raise AssertionError("write the scan yourself / 请自己实现，不要调用 lax.associative_scan")

    monkeypatch.setattr(lax, "associative_scan", forbidden)
    calls = [[] for _ in fns]  # the leading length fn gets, call by call / fn 每次拿到的长度

    def counted(i):
        def fn(x, y):
            calls[i].append(jax.tree.leaves(x)[0].shape[0])
            return fns[i](x, y)

        return fn

    got = jax.jit(lambda es: [prefix_scan(counted(i), e) for i, e in enumerate(es)])(elems)

    def close(g, w):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)

    for i, e in enumerate(elems):
        jax.tree.map(close, got[i], expected[i])
        n = jax.tree.leaves(e)[0].shape[0]
        rounds = [n - 2**r for r in range((n - 1).bit_length())]  # offsets d = 1, 2, 4, … < n
        assert calls[i] == rounds, f"n={n}: fn got {calls[i]} elements, doubling rounds: {rounds}"
