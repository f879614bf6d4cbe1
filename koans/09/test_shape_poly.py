"""09 · 形状多态 / shape polymorphism.

导出的产物不能重新追踪：没有 Python 源码。要让一个产物服务于各种批大小，就在导出时用
`jax.export.symbolic_shape` 写出符号维度；模块只追踪、降级一次，调用时每个具体形状仍会各自编译，
并在调用时检查形状是否符合规格。
An exported artifact cannot be retraced: there is no Python source. To serve every batch size
with one artifact, export with symbolic dimensions from `jax.export.symbolic_shape`; the module
is traced and lowered once, each concrete shape is still compiled on its own, and every call is
checked against the specification.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def _ones(*shape):
    return np.ones(shape, np.float32)


def test_one_symbolic_batch_dim_serves_every_batch_size():
    """符号维度参与形状运算：输出形状是关于 b 的表达式。同一个产物可以用任何 b 调用；
    而常量维度必须完全一致，不然调用时报错。
    A symbolic dimension takes part in shape arithmetic: the output shape is an expression in
    b. The same artifact takes any b, while a constant dimension must match exactly or the
    call fails.
    """

    def with_mirror(x):
        return jnp.concatenate([x, x[::-1]], axis=0)

    (b,) = export.symbolic_shape("b")
    exp = export.export(jax.jit(with_mirror))(jax.ShapeDtypeStruct((b, 3), jnp.float32))

    assert str(exp.in_avals[0]) == "float32[b,3]"
    assert str(exp.out_avals[0]) == __
    assert [exp.call(_ones(n, 3)).shape for n in (1, 4)] == __
    with raises_exactly(__) as info:
        exp.call(_ones(4, 5))
    assert "args[0].shape[1]" in str(info.value)


def test_dimension_expressions_in_the_specification():
    """规格里可以写维度表达式和多个变量："2*h, w" 表示第 0 维必须是偶数。调用时 JAX 从实际形状
    解出 h 和 w；解不出来（奇数）时，这个检查在调用时失败。
    A specification may hold dimension expressions and several variables: "2*h, w" says axis 0
    is even. At call time JAX solves h and w from the actual shape; when it cannot (an odd
    size) the check fails at the call.
    """

    def fold_halves(x):
        h = x.shape[0] // 2
        return x[:h] + x[h:]

    spec = jax.ShapeDtypeStruct(export.symbolic_shape("2*h, w"), jnp.float32)
    exp = export.export(jax.jit(fold_halves))(spec)

    assert str(exp.out_avals[0]) == __
    x = np.arange(30, dtype=np.float32).reshape(6, 5)
    np.testing.assert_array_equal(exp.call(x), x[:3] + x[3:])
    with raises_exactly(__) as info:
        exp.call(_ones(5, 5))
    assert "remainder" in str(info.value)


def test_an_inconclusive_comparison_needs_a_constraint():
    """⚠️ 陷阱 / trap：Python 代码里的 `if x.shape[0] >= 2` 在符号形状下没有确定答案
    （默认只知道 b ≥ 1），导出失败。给 symbolic_shape 加上约束就能判定；约束会在调用时被检查。
    约束是一个字符串，比较符只能是 >=、<= 或 ==（例如 "a <= 8"）。只加判定所需的约束：导出的
    程序仍要服务 if 那一支要的所有批大小，不能把 b 钉死在一个值上。
    ⚠️ trap: `if x.shape[0] >= 2` in Python has no definite answer for a symbolic shape (by
    default only b >= 1 is known), so the export fails. A constraint on symbolic_shape decides
    it, and the constraint is checked when the artifact is called. A constraint is a string
    whose comparison is one of >=, <= or == (say "a <= 8"). Add only what decides the
    comparison: the artifact must still serve every batch size that branch of the if was
    written for, not pin b to one value.
    """

    def first_two_rows(x):
        if x.shape[0] >= 2:
            return x[:2]
        return jnp.concatenate([x, x])

    with pytest.raises(jax.errors.InconclusiveDimensionOperation) as info:  # a private subclass
        export.export(jax.jit(first_two_rows))(
            jax.ShapeDtypeStruct(export.symbolic_shape("b, 3"), jnp.float32)
        )
    assert "inconclusive" in str(info.value)

    shape = export.symbolic_shape("b, 3", constraints=(__,))
    exp = export.export(jax.jit(first_two_rows))(jax.ShapeDtypeStruct(shape, jnp.float32))
    assert str(exp.out_avals[0]) == __
    assert [exp.call(_ones(n, 3)).shape for n in (2, 64)] == [(2, 3), (2, 3)]  # not one size only
    with raises_exactly(__) as info:
        exp.call(_ones(1, 3))
    assert "constraint" in str(info.value)


def test_each_symbolic_shape_call_opens_its_own_scope():
    """⚠️ 陷阱 / trap：每次调用 symbolic_shape 都新建一个符号作用域；两次分别写出的 "b"
    不是同一个变量，放进同一次导出会报错。共享的维度要从同一次调用里取，
    之后每次调用它都必须取同一个值。
    ⚠️ trap: every call of symbolic_shape opens a new symbolic scope; two separately written
    "b"s are not the same variable and cannot meet in one export. Take shared dimensions from
    one call; each later call must then give them one value.
    """

    def add(x, y):
        return x + y

    x_spec = jax.ShapeDtypeStruct(export.symbolic_shape("b"), jnp.float32)
    y_spec = jax.ShapeDtypeStruct(export.symbolic_shape("b"), jnp.float32)
    with raises_exactly(__) as info:
        export.export(jax.jit(add))(x_spec, y_spec)
    assert "scope" in str(info.value)

    (b,) = export.symbolic_shape("b")
    spec = jax.ShapeDtypeStruct((b,), jnp.float32)
    exp = export.export(jax.jit(add))(spec, spec)
    np.testing.assert_array_equal(exp.call(_ones(4), _ones(4)), np.full(4, 2.0))
    with raises_exactly(__) as info:
        exp.call(_ones(3), _ones(4))
    assert "inconsistency" in str(info.value)
