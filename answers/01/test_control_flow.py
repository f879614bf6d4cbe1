"""01 · 结构化控制流 / structured control flow: cond, switch, fori_loop, while_loop."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)


def _prims(closed_jaxpr):
    """顶层方程的原语名 / primitive names of the top-level equations."""
    return [eqn.primitive.name for eqn in closed_jaxpr.eqns]


def test_python_if_on_tracer_fails_use_lax_cond():
    """❌ 旧写法 / ✅ 推荐写法：jit 里对被追踪的值写 Python `if` 会报错；
    用 lax.cond 把两个分支都放进计算图。
    ❌ old way / ✅ recommended: a Python `if` on a traced value under jit raises; lax.cond puts
    both branches into the computation and picks one at run time.
    """

    @jax.jit
    def relu_old(x):
        if x > 0:  # bool(tracer): the value is unknown while tracing
            return x
        return jnp.zeros_like(x)

    with raises_exactly(jax.errors.TracerBoolConversionError) as info:
        relu_old(2.0)
    assert "boolean conversion of traced" in str(info.value)

    @jax.jit
    def relu_new(x):
        return lax.cond(x > 0, lambda x: x, jnp.zeros_like, x)

    xs = [-1.5, 0.0, 2.0]
    np.testing.assert_allclose([relu_new(x) for x in xs], np.maximum(xs, 0.0))


def test_cond_traces_both_branches_and_indexes_them_by_the_predicate():
    """lax.cond 在选择之前把两个分支都追踪成 jaxpr，即使谓词是具体的 Python bool。
    jaxpr 里谓词先被转换成整数索引，branches 按这个索引排列（不一定是参数的顺序）。
    lax.cond traces both branches into jaxprs before it chooses, even with a concrete Python
    bool as predicate. In the jaxpr the predicate is converted to an integer index and
    `branches` is ordered by that index (not necessarily in argument order).
    """
    traced = []

    def on_true(x):
        traced.append("true")
        return jnp.sin(x)

    def on_false(x):
        traced.append("false")
        return jnp.cos(x)

    out = lax.cond(True, on_true, on_false, 1.0)
    np.testing.assert_allclose(out, np.sin(1.0), rtol=1e-6)
    assert traced == ["true", "false"]

    jaxpr = jax.make_jaxpr(lambda x: lax.cond(x > 0, on_true, on_false, x))(1.0)
    (cond_eqn,) = [e for e in jaxpr.eqns if e.primitive.name == "cond"]
    branches = cond_eqn.params["branches"]
    assert [_prims(b) for b in branches] == [["cos"], ["sin"]]


def test_cond_branches_must_return_same_types():
    """两个分支必须返回相同的形状和 dtype：一个分支返回 float32，另一个返回 Python 字面量 0 就不行。
    Both branches must return the same shapes and dtypes: one branch returning float32 and the
    other the Python literal 0 does not pass.
    """

    def clipped(x):
        return lax.cond(x > 0, lambda v: v * 2, lambda v: 0, x)

    with raises_exactly(TypeError) as info:
        clipped(1.0)
    assert "so the dtypes do not match" in str(info.value)

    def fixed(x):
        return lax.cond(x > 0, lambda v: v * 2, lambda v: 0.0, x)

    assert jnp.result_type(fixed(1.0)) == jnp.float32
    assert float(fixed(-1.0)) == 0.0


def test_switch_clamps_out_of_range_index():
    """lax.switch 不会因越界索引报错：索引先被 clamp 到 [0, len(branches)-1]。
    lax.switch does not fail on an out-of-range index: the index is first clamped into
    [0, len(branches) - 1].
    """
    branches = [lambda v: v + 0.0, lambda v: v + 10.0, lambda v: v + 20.0]
    pick = jax.jit(lambda i: lax.switch(i, branches, 1.0))

    out = [float(pick(i)) for i in (-5, 1, 100)]
    np.testing.assert_array_equal(out, [1.0, 11.0, 21.0])
    assert "clamp" in _prims(jax.make_jaxpr(lambda i: lax.switch(i, branches, 1.0))(1))


def test_while_loop_rejects_reverse_mode():
    """⚠️ 陷阱 / trap：jax.grad 穿不过 lax.while_loop（反向模式要存下未知步数的中间值），
    前向模式 jvp 可以。
    ⚠️ trap: jax.grad cannot go through lax.while_loop (reverse mode would need to store an
    unknown number of steps); forward mode (jvp) works.
    """

    def cube(x):
        # c = x**3 by three multiplications in a while_loop
        def body(carry):
            i, c = carry
            return i + 1, c * x

        return lax.while_loop(lambda carry: carry[0] < 3, body, (0, 1.0))[1]

    with raises_exactly(ValueError) as info:
        jax.grad(cube)(2.0)
    assert "Reverse-mode differentiation does not work" in str(info.value)

    value, tangent = jax.jvp(cube, (2.0,), (1.0,))
    assert float(value) == 8.0
    assert float(tangent) == 12.0


def test_fori_loop_with_static_bounds_is_a_scan():
    """fori_loop 的界是 Python int 时，步数在追踪时已知，它降级为一个固定长度的循环原语（可反向求导）；
    界被追踪时步数未知，只能降级为带条件的循环原语。
    With Python-int bounds fori_loop knows its trip count at trace time and lowers to a
    fixed-length loop primitive (reverse-mode differentiable); with traced bounds the count is
    unknown and it lowers to the conditional loop primitive.
    """

    def power(x, n):
        return lax.fori_loop(0, n, lambda i, c: c * x, 1.0)

    static = jax.make_jaxpr(lambda x: power(x, 3))(2.0)
    dynamic = jax.make_jaxpr(power)(2.0, 3)
    assert _prims(static) == ["scan"]
    assert _prims(dynamic) == ["while"]

    x = 1.5
    np.testing.assert_allclose(jax.grad(lambda x: power(x, 3))(x), 3 * x**2, rtol=1e-6)


def test_a_ref_is_written_in_a_loop_without_being_carried():
    """`jax.new_ref` 造一个可变的引用（`jax.Ref`）：循环体用 `ref[...]` 读它、写它，写入在
    迭代之间保留，而它不必经过循环的 carry。比较两种累加：一个写进 Ref，一个放在 carry 里。
    预测：两个 scan 方程各有几个输出，写进 Ref 的那个 scan 的第一个输入是什么类型？一个 Ref
    能不能自己当 carry？
    `jax.new_ref` makes a mutable reference (a `jax.Ref`): a loop body reads and writes it with
    `ref[...]`, the writes persist from one iteration to the next, and it need not pass through
    the loop's carry. Compare two sums: one written into a Ref, one kept in the carry. Predict
    how many outputs each scan equation has and the type of the first input of the scan that
    writes the Ref. Can a Ref be a carry itself?
    """
    xs = jnp.arange(5.0)

    def into_ref(xs):
        total = jax.new_ref(jnp.zeros(()))

        def body(i, carry):
            total[...] += xs[i]
            return carry

        lax.fori_loop(0, xs.shape[0], body, None)
        return total[...]

    def in_carry(xs):
        return lax.fori_loop(0, xs.shape[0], lambda i, total: total + xs[i], 0.0)

    assert float(jax.jit(into_ref)(xs)) == float(jax.jit(in_carry)(xs)) == 10.0
    (written,) = [e for e in jax.make_jaxpr(into_ref)(xs).eqns if e.primitive.name == "scan"]
    (carried,) = [e for e in jax.make_jaxpr(in_carry)(xs).eqns if e.primitive.name == "scan"]
    assert (len(written.outvars), len(carried.outvars)) == (1, 2)
    assert str(written.invars[0].aval) == "Ref{float32[]}"
    with raises_exactly(ValueError) as info:
        lax.fori_loop(0, 3, lambda i, ref: ref, jax.new_ref(jnp.zeros(())))
    assert "cannot be returned" in str(info.value)


def chunked_apply(f, xs, chunk):
    """对 xs 的每一行（沿第 0 轴）应用 f，一次 chunk 行：块内向量化，块与块之间顺序执行，
    所以同一时刻只有一块的中间值。
    - xs 可以是 pytree（所有叶子的第 0 轴长度都是 n）；f 接收一行、返回一个 pytree，
      结果与 jax.vmap(f)(xs) 相同。
    - n 不一定能被 chunk 整除：最后不满的一块先补齐成整块（比如补 0，补出来的行算完就丢掉）。
    - 一个循环原语承担所有块（jaxpr 里一个 scan，步数是 ⌈n / chunk⌉），f 只在它的循环体里出现：
      循环外没有第二份 f 去算余下的行（lax.map 的 batch_size 正是那样做的，这里不行）。
      不许用 Python 循环；大约 6 行。
    Apply f to every row of xs (along axis 0), chunk rows at a time: vectorised within a chunk,
    sequential across chunks, so only one chunk's intermediates exist at a time.
    - xs may be a pytree (every leaf's axis 0 has length n); f takes one row and returns a
      pytree; the result equals jax.vmap(f)(xs).
    - n need not divide by chunk: pad the last, partial chunk to a whole one (with zeros, say;
      the padded rows' results are dropped).
    - One loop primitive runs every chunk (one scan in the jaxpr, its length ⌈n / chunk⌉), and f
      appears only in its body: no second copy of f outside the loop for the remaining rows
      (what lax.map's batch_size does, which will not do here). No Python loop; about 6 lines.
    """
    n = jax.tree.leaves(xs)[0].shape[0]
    steps = -(-n // chunk)  # ⌈n / chunk⌉

    def to_chunks(a):  # pad to steps·chunk rows, then [steps, chunk, ...]
        padded = jnp.pad(a, [(0, steps * chunk - n)] + [(0, 0)] * (a.ndim - 1))
        return padded.reshape(steps, chunk, *a.shape[1:])

    ys = lax.map(jax.vmap(f), jax.tree.map(to_chunks, xs))
    return jax.tree.map(lambda a: a.reshape(steps * chunk, *a.shape[2:])[:n], ys)


def test_write_a_chunked_map():
    """✍️ 实现 chunked_apply：vmap 一次算完整批，中间值的内存随批大小增长；lax.map（一个 scan）
    逐行算，内存小却一步只处理一行。两者之间是按块循环：块内 vmap，块间 scan——推理时内存放不下整批，
    就靠它。看 jaxpr：scan 的步数、每一步处理的形状、以及不满一块的余下几行去了哪里。
    Write chunked_apply: vmap computes the whole batch at once, with intermediates growing with
    the batch; lax.map (a scan) goes row by row, small in memory but one row per step. In
    between is a loop over chunks, vmap within a chunk and scan across chunks: what inference
    uses when the whole batch does not fit. Read the jaxpr: the scan's length, the shape each
    step handles, and where the rows of a partial chunk go (into the loop, padded: f's
    primitives appear nowhere outside the scan).
    """

    def stats(row):  # one row in, a pytree out
        return {"norm": jnp.sqrt(jnp.sum(row["x"] ** 2)), "top": jnp.max(row["x"] * row["w"])}

    n, d = 10, 3
    xs = {
        "x": jnp.arange(n * d, dtype=jnp.float32).reshape(n, d) / 7.0,
        "w": jnp.cos(jnp.arange(n * d, dtype=jnp.float32)).reshape(n, d),
    }
    expected = jax.vmap(stats)(xs)
    for chunk in (5, 4, 3, 10):
        got = jax.jit(chunked_apply, static_argnums=(0, 2))(stats, xs, chunk)
        for key in ("norm", "top"):
            np.testing.assert_allclose(got[key], expected[key], rtol=1e-6, err_msg=f"{chunk=}")

        jaxpr = jax.make_jaxpr(chunked_apply, static_argnums=(0, 2))(stats, xs, chunk)
        (scan,) = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
        assert scan.params["length"] == -(-n // chunk), chunk  # ⌈n / chunk⌉ steps
        step_inputs = scan.params["jaxpr"].in_avals
        assert [a.shape for a in step_inputs] == [(chunk, d), (chunk, d)], chunk  # a whole chunk
        outside = {e.primitive.name for e in jaxpr.eqns}
        assert not outside & {"sqrt", "reduce_max"}, f"{chunk=}: f traced again outside the scan"


def first_crossing(xs, threshold):
    """第一个大于 threshold 的元素的下标；没有这样的元素时返回 len(xs)。
    - xs 是一维数组（长度 n ≥ 1），threshold 是标量；两者都可能被追踪（jit、vmap）。
    - 用 lax.while_loop 从下标 0 往后找，找到就停：不许先把整个数组比较一遍再取 argmax，
      也不许用 Python 循环。注意别读越界（最后一次条件判断时下标可能等于 n）。大约 5 行。
    The index of the first element greater than threshold, or len(xs) if there is none.
    - xs is 1-D (length n >= 1), threshold a scalar; both may be traced (jit, vmap).
    - Search from index 0 with lax.while_loop and stop at the first hit: no comparison of the
      whole array followed by argmax, no Python loop. Mind the bounds (the last test of the
      condition may see the index n). About 5 lines.
    """
    n = xs.shape[0]

    def not_found_yet(i):
        return (i < n) & (xs[jnp.minimum(i, n - 1)] <= threshold)  # clamp: i may reach n

    return lax.while_loop(not_found_yet, lambda i: i + 1, 0)


def test_write_an_early_exit_search_with_while_loop():
    """✍️ 实现 first_crossing：while_loop 的步数取决于数据，这是 scan 和 fori_loop 做不到的。
    在 vmap 下每一行的谓词不同，循环一直跑到所有行都结束，已经结束的行保持不变——结果仍然逐行正确。
    Write first_crossing: the number of steps of a while_loop depends on the data, which scan
    and fori_loop cannot do. Under vmap every row has its own predicate; the loop runs until
    every row is done, and rows already done stay as they are, so the result is right row by row.
    """
    xs = jnp.array([0.1, 0.5, 0.3, 0.9, 0.2])
    cases = {0.4: 1, 0.05: 0, 0.6: 3, 0.95: 5, 0.2: 1}
    for threshold, expected in cases.items():
        assert int(jax.jit(first_crossing)(xs, threshold)) == expected, threshold

    rows = jnp.stack([xs, xs[::-1], jnp.zeros(5), jnp.ones(5)])
    expected_rows = [int(np.argmax(np.append(np.asarray(r) > 0.4, True))) for r in rows]
    np.testing.assert_array_equal(jax.vmap(first_crossing, (0, None))(rows, 0.4), expected_rows)
    thresholds = jnp.array([0.05, 0.4, 0.6, 0.95])
    np.testing.assert_array_equal(jax.vmap(first_crossing, (None, 0))(xs, thresholds), [0, 1, 3, 5])

    jaxpr = jax.make_jaxpr(first_crossing)(xs, 0.4)
    assert "while" in _prims(jaxpr)
    whole_array_reductions = {"argmax", "argmin", "reduce_or", "reduce_max"}
    assert not whole_array_reductions & set(_prims(jaxpr))  # the loop reads one element a step


def test_vmap_of_cond_with_batched_predicate_becomes_select():
    """vmap 下，每个批元素有自己的谓词时，一个 cond 无法让整批只走一个分支；JAX 会改写它。
    谓词不被批处理时，整批走同一个分支。
    Under vmap, when every batch element has its own predicate, one cond cannot send the whole
    batch down one branch, so JAX rewrites it. With an unbatched predicate the whole batch takes
    the same branch.
    """

    def f(p, x):
        return lax.cond(p, jnp.sin, jnp.cos, x)

    xs = jnp.arange(3.0)
    batched = _prims(jax.make_jaxpr(jax.vmap(f))(xs > 0, xs))
    unbatched = _prims(jax.make_jaxpr(jax.vmap(f, in_axes=(None, 0)))(True, xs))

    assert ("cond" in batched, "select_n" in batched) == (False, True)
    assert ("sin" in batched, "cos" in batched) == (True, True)
    assert ("cond" in unbatched, "select_n" in unbatched) == (True, False)
    np.testing.assert_allclose(jax.vmap(f)(xs > 0, xs), np.where(xs > 0, np.sin(xs), np.cos(xs)))
