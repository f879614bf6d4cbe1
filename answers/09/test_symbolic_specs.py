"""09 · 一整棵参数树的符号规格 / symbolic specifications for a whole pytree.

真实的导出函数有一整棵参数树和几个输入：`jax.export.symbolic_args_specs` 从示例参数一次写出
所有规格，只把指定的维度换成符号；`SymbolicScope` 让几处写出的符号共用同一个变量和同一组约束；
`symbolic_dim_bounds` 说出 JAX 能证明的范围。符号维度还要和分片相容：被切成 8 份的那一维
必须能被 8 整除，而且要在规格里写明。

A real exported function takes a whole pytree of parameters and a few inputs:
`jax.export.symbolic_args_specs` writes every specification from example arguments at once,
replacing only the dimensions named; a `SymbolicScope` lets symbols written in several places
share one variable and one set of constraints; `symbolic_dim_bounds` says what range JAX can
prove. A symbolic dimension must also agree with sharding: an axis split 8 ways must be
divisible by 8, and the specification has to say so.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def dense(params, x):
    return x @ params["kernel"] + params["bias"]


def example_arguments():
    """示例参数：形状就是服务时的形状，只有批大小会变。/ Example arguments: the serving shapes,
    except the batch size."""
    params = {"kernel": jnp.ones((3, 4)), "bias": jnp.zeros(4)}
    return params, jnp.ones((5, 3))


def test_symbolic_args_specs_writes_a_pytree_of_specs_in_one_scope():
    """symbolic_args_specs(args, shapes_specs)：shapes_specs 与 args 的前缀对齐，None 表示保留示例
    的形状，字符串里的 "_" 取示例在那一维的大小。约束写在 SymbolicScope 里，再用同一个作用域写出的
    "b" 就是同一个变量。symbolic_dim_bounds 返回 JAX 能证明的闭区间，约束和表达式都算进去。
    symbolic_args_specs(args, shapes_specs): shapes_specs matches a prefix of args, None keeps
    the example's shapes, and a "_" in a string takes the example's size on that axis. The
    constraints live in a SymbolicScope, and a "b" written later in the same scope is the same
    variable. symbolic_dim_bounds returns the closed range JAX can prove, constraints and
    expression included.
    """
    scope = export.SymbolicScope(("b <= 64",))
    params_spec, x_spec = export.symbolic_args_specs(
        example_arguments(), (None, "b, _"), scope=scope
    )
    assert params_spec["kernel"].shape == (3, 4)
    assert x_spec.shape[1] == 3

    exp = export.export(jax.jit(dense))(params_spec, x_spec)
    (b,) = export.symbolic_shape("b", scope=scope)
    assert exp.out_avals[0].shape == (b, 4)  # the same variable: one scope
    assert export.symbolic_dim_bounds(b) == (1, 64)
    assert export.symbolic_dim_bounds(2 * b + 1) == (3, 129)

    params, _ = example_arguments()
    assert exp.call(params, np.ones((64, 3), np.float32)).shape == (64, 4)
    with raises_exactly(ValueError) as info:  # the constraint is checked at every call
        exp.call(params, np.ones((65, 3), np.float32))
    assert "b <= 64" in str(info.value)


def test_a_sharded_symbolic_axis_must_divide_by_the_mesh():
    """⚠️ 陷阱 / trap：把符号批维切成 8 份，导出时 JAX 要证明 b 能被 8 整除，而 b 只知道 ≥ 1，
    导出失败。把批维写成 8 的倍数的表达式就能导出；调用时从实际大小解出变量，解不出整数就拒绝。
    产物记下了分片：out_shardings_jax(mesh) 在服务端的网格上给出输出的分片。
    ⚠️ trap: split a symbolic batch axis 8 ways and the export must prove that b divides by 8,
    while all it knows is b >= 1: the export fails. Write the batch axis as an expression that
    is a multiple of 8 and it exports; each call solves for the variable from the real size and
    refuses a size with no integer solution. The artifact records the shardings:
    out_shardings_jax(mesh) gives the output's sharding on the serving mesh.
    """
    mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Explicit,))
    rows = NamedSharding(mesh, P("data"))
    row_sums = jax.jit(lambda x: jnp.sin(x).sum(axis=1), in_shardings=rows, out_shardings=rows)

    (b,) = export.symbolic_shape("b")
    with raises_exactly(ValueError) as info:
        export.export(row_sums)(jax.ShapeDtypeStruct((b, 4), jnp.float32, sharding=rows))
    assert "evenly divide" in str(info.value)

    shape = export.symbolic_shape("8*k, 4")
    exp = export.export(row_sums)(jax.ShapeDtypeStruct(shape, jnp.float32, sharding=rows))
    low, _ = export.symbolic_dim_bounds(exp.in_avals[0].shape[0])
    assert low == 8
    (out,) = exp.out_shardings_jax(mesh)
    assert out.spec == P("data")

    y = exp.call(jax.device_put(np.ones((24, 4), np.float32), rows))
    assert y.shape == (24,) and y.sharding.spec == P("data")
    with raises_exactly(ValueError) as info:
        exp.call(np.ones((12, 4), np.float32))
    assert "remainder" in str(info.value)
