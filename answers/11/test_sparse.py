"""11 · BCOO 稀疏矩阵：组装、乘法、对数值求导 / BCOO sparse matrices: assembly, products,
gradients with respect to the stored values.

jax.experimental.sparse.BCOO((data, indices), shape=...) 存 nse 个非零元：data 形状 [nse]，
indices 形状 [nse, 2]（行、列）。它支持 @、jit、vmap 和求导；重复的下标表示“相加”，
这正是有限元逐单元组装的方式。

jax.experimental.sparse.BCOO((data, indices), shape=...) stores nse entries: data shaped
[nse], indices shaped [nse, 2] (row, column). It supports @, jit, vmap and differentiation;
repeated indices mean "add up", which is exactly how finite elements are assembled element by
element.
"""

import tracemalloc

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------


def neg_laplacian(u, h):
    """无矩阵的五点差分 -Δu（见 test_poisson.py）。/ The matrix-free stencil (test_poisson.py)."""
    p = jnp.pad(u, 1)
    return (4 * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]) / h**2


def numpy_peak_bytes(fn, *args):
    """fn(*args) 运行期间 tracemalloc 记下的内存峰值（NumPy 的数组缓冲区也登记在内）。
    The peak memory tracemalloc records while fn(*args) runs (NumPy's array buffers included)."""
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    start = tracemalloc.get_traced_memory()[0]
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        if not tracing:
            tracemalloc.stop()


# ---- 你来实现 / your code ---------------------------------------------------------------


def assemble_neg_laplacian(n, h):
    """把五点差分组装成 n²×n² 的 BCOO（行优先展平：点 (i, j) 的编号是 i·n + j）。
    每个点：对角元 4/h²，每个存在的邻居 -1/h²；不存在的邻居（边界外）不存。
    用 NumPy 建 data 和 indices（n 是 Python int），不要先建稠密矩阵。大约 10 行。

    Assemble the stencil as an n²×n² BCOO (row-major: point (i, j) is number i·n + j). Each
    point: 4/h² on the diagonal, -1/h² for every neighbour that exists; store nothing for a
    neighbour outside the boundary. Build data and indices with NumPy (n is a Python int);
    never build the dense matrix. About 10 lines.
    """
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    rows, cols, vals = [i * n + j], [i * n + j], [np.full((n, n), 4.0)]
    for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        inside = (0 <= i + di) & (i + di < n) & (0 <= j + dj) & (j + dj < n)
        rows.append((i * n + j)[inside])
        cols.append(((i + di) * n + j + dj)[inside])
        vals.append(np.full(inside.sum(), -1.0))
    rows, cols = (
        np.concatenate([r.ravel() for r in rows]),
        np.concatenate([c.ravel() for c in cols]),
    )
    data = np.concatenate([v.ravel() for v in vals]) / h**2
    return sparse.BCOO(
        (jnp.asarray(data), jnp.asarray(np.stack([rows, cols], 1))), shape=(n * n, n * n)
    )


# ---- 检查 / checks ----------------------------------------------------------------------


def test_bcoo_assembly_matches_the_stencil():
    """写 assemble_neg_laplacian：BCOO @ 向量 与无矩阵的差分逐项相同；只存真正的非零元
    （内部 5 个、边上 4 个、角上 3 个），矩阵对称。组装用了多少内存也被量出来：NumPy 把它的
    数组登记给 tracemalloc，n = 48 时稠密矩阵要 42 MB，组装过程中 NumPy 的峰值必须不到它的
    1/16，所以先用 NumPy 造稠密矩阵再 BCOO.fromdense 的写法在这里就过不去。下一个 koan 在
    稠密矩阵根本放不下的规模上再跑一次（那里任何造稠密矩阵的写法都过不去，包括用 jnp 造的）。
    Write assemble_neg_laplacian: BCOO @ vector equals the matrix-free stencil; only true
    nonzeros are stored (5 inside, 4 on an edge, 3 at a corner); the matrix is symmetric. The
    assembly's memory is measured too: NumPy reports its arrays to tracemalloc, and for n = 48,
    where the dense matrix takes 42 MB, NumPy's peak while assembling must stay under a sixteenth
    of that, so building the dense matrix with NumPy and calling BCOO.fromdense fails here
    already. The next koan runs it at a size where a dense matrix cannot exist (there any dense
    route fails, one built with jnp included).
    """
    for n in (3, 8):
        h = 1.0 / (n + 1)
        a = assemble_neg_laplacian(n, h)
        assert isinstance(a, sparse.BCOO) and a.shape == (n * n, n * n)
        u = jnp.asarray(np.random.default_rng(n).normal(size=(n, n)))
        got = jax.jit(lambda a, u: a @ u.ravel())(a, u)
        np.testing.assert_allclose(got.reshape(n, n), neg_laplacian(u, h), rtol=1e-12)
        dense = np.asarray(a.todense())
        assert a.nse == np.count_nonzero(dense) == 5 * n * n - 4 * n
        np.testing.assert_array_equal(dense, dense.T)

    n = 48
    dense_bytes = (n * n) ** 2 * 8
    peak = numpy_peak_bytes(assemble_neg_laplacian, n, 1.0 / (n + 1))
    print(f"n = {n}: NumPy peak {peak} bytes while assembling, dense matrix {dense_bytes} bytes")
    assert peak < dense_bytes / 16


def test_bcoo_assembly_never_builds_the_dense_matrix():
    """“不要先建稠密矩阵”在这里被检查：n = 600 时 n²×n² 的 float64 稠密矩阵要 1 TB 左右
    （np.eye、np.kron 立刻 MemoryError，jnp 报 RESOURCE_EXHAUSTED），而五点格式只有
    5n² - 4n ≈ 180 万个非零元，几十 MB。先建稠密矩阵再 BCOO.fromdense 的写法在这里过不去。
    "Never build the dense matrix" is checked here: for n = 600 the dense n²×n² float64 matrix
    needs about 1 TB (np.eye and np.kron raise MemoryError at once, jnp RESOURCE_EXHAUSTED),
    while the stencil has only 5n² - 4n ≈ 1.8 million nonzeros, tens of MB. Building the dense
    matrix and calling BCOO.fromdense cannot pass.
    """
    n = 600
    h = 1.0 / (n + 1)
    assert (n * n) ** 2 * 8 > 10**12  # the dense matrix's bytes / 稠密矩阵的字节数
    a = assemble_neg_laplacian(n, h)
    assert isinstance(a, sparse.BCOO) and a.shape == (n * n, n * n)
    assert a.nse == 5 * n * n - 4 * n
    u = jnp.asarray(np.random.default_rng(n).normal(size=(n, n)))
    got = jax.jit(lambda a, u: a @ u.ravel())(a, u)
    np.testing.assert_allclose(got.reshape(n, n), neg_laplacian(u, h), rtol=1e-10, atol=1e-6)


def test_repeated_indices_add_up():
    """⚠️ 陷阱 / trap：有限元逐单元组装——每个单元把 2×2 的刚度矩阵 [[1, -1], [-1, 1]] 写到
    自己两个节点的位置上。相邻单元共享节点，所以 BCOO 里有重复下标：todense 和 @ 会把它们
    相加，但 nse 仍然数着每一份，直到 sum_duplicates() 合并。在 jit 里合并后的个数必须
    事先给出：输出的形状不能依赖数值。
    Finite-element assembly: each element writes its 2×2 stiffness [[1, -1], [-1, 1]] at its two
    nodes. Neighbouring elements share a node, so the BCOO has repeated indices: todense and @
    add them up, but nse still counts every copy until sum_duplicates() merges them. Under jit
    the merged size must be given: an output's shape cannot depend on the values.
    """
    elements = np.array([[0, 1], [1, 2], [2, 3]])  # 3 elements, 4 nodes / 3 个单元，4 个节点
    local = np.array([[1.0, -1.0], [-1.0, 1.0]])
    indices = np.array([[e[a], e[b]] for e in elements for a in range(2) for b in range(2)])
    data = np.tile(local.ravel(), len(elements))
    k = sparse.BCOO((jnp.asarray(data), jnp.asarray(indices)), shape=(4, 4))

    assert k.nse == 12
    np.testing.assert_array_equal(np.diag(k.todense()), [1, 2, 2, 1])
    with raises_exactly(ValueError) as info:  # the output's size depends on the values
        jax.jit(lambda k: k.sum_duplicates())(k)
    assert "nse must be specified" in str(info.value)
    merged = jax.jit(lambda k: k.sum_duplicates(nse=10))(k)
    assert merged.nse == len(np.unique(indices, axis=0))  # one entry per distinct index
    np.testing.assert_array_equal(merged.todense(), k.todense())
    np.testing.assert_allclose(k @ jnp.ones(4), np.zeros(4))  # constants are in the kernel


def test_gradient_lives_on_the_stored_entries():
    """对 BCOO 的 data 求导，梯度形状是 [nse]：只有存下来的元素有梯度。对
    L(data) = wᵀ A(data) x，∂L/∂data[k] = w[行k]·x[列k]。sparse.grad 对整个 BCOO 求导，
    返回的仍是同一稀疏结构的 BCOO；对稠密矩阵求导则每个位置（包括 0）都有梯度。
    Differentiating with respect to a BCOO's data gives a gradient shaped [nse]: only stored
    entries get one. For L(data) = wᵀ A(data) x, ∂L/∂data[k] = w[row k]·x[col k]. sparse.grad
    differentiates the whole BCOO and returns a BCOO with the same pattern; the gradient of a
    dense matrix has an entry everywhere, zeros included.
    """
    rng = np.random.default_rng(0)
    rows, cols = np.array([0, 1, 2, 2]), np.array([1, 1, 0, 2])
    indices = jnp.asarray(np.stack([rows, cols], 1))
    data = jnp.asarray(rng.normal(size=4))
    w, x = jnp.asarray(rng.normal(size=3)), jnp.asarray(rng.normal(size=3))

    def loss(data):
        return w @ (sparse.BCOO((data, indices), shape=(3, 3)) @ x)

    g = jax.grad(loss)(data)
    assert g.shape == (4,)
    np.testing.assert_allclose(g, w[rows] * x[cols], rtol=1e-12)

    a = sparse.BCOO((data, indices), shape=(3, 3))
    g_sparse = sparse.grad(lambda a: w @ (a @ x))(a)
    g_dense = jax.grad(lambda a: w @ (a @ x))(a.todense())
    assert isinstance(g_sparse, sparse.BCOO) and g_sparse.nse == 4
    np.testing.assert_allclose(g_dense, np.outer(w, x), rtol=1e-12)
    np.testing.assert_allclose(g_sparse.todense(), np.where(a.todense() != 0, g_dense, 0))
