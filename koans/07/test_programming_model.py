"""07 · Pallas 编程模型 / the Pallas programming model.

内核函数收到的不是数组而是 Ref（可读写的内存块）：读 `x_ref[...]`，写 `o_ref[...] = v`，
不返回任何值。`pallas_call` 用 `out_shape` 声明输出，用 `grid` 决定内核运行几次，用
`BlockSpec` 的 index map 决定每次运行看到数组的哪一块，`program_id` 告诉内核它是第几次。
本章全部在 CPU 上用 interpret=True 运行，并且总是套上 jit（即时解释模式很慢）。

A kernel receives Refs (mutable blocks of memory), not arrays: read `x_ref[...]`, write
`o_ref[...] = v`, return nothing. `pallas_call` declares the outputs with `out_shape`, runs the
kernel once per point of `grid`, and a `BlockSpec`'s index map chooses which block of the array
each run sees; `program_id` tells the kernel which run it is. The chapter runs on CPU with
interpret=True, always under jit (eager interpret mode is slow).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def _pallas_eqn(fn, *args):
    """jaxpr 里的 pallas_call 方程。/ The pallas_call equation of fn's jaxpr."""
    (eqn,) = [e for e in jax.make_jaxpr(fn)(*args).eqns if e.primitive.name == "pallas_call"]
    return eqn


def test_cpu_runs_pallas_only_in_interpret_mode():
    """CPU 没有 Pallas 编译后端：不加 interpret=True 就报错；加上后内核被解释成普通 JAX 运算。
    The CPU has no compiled Pallas backend: without interpret=True the call fails; with it the
    kernel is interpreted as ordinary JAX operations.
    """

    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    x = jnp.arange(8.0)
    out_shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
    with raises_exactly(__) as info:
        pl.pallas_call(add_kernel, out_shape=out_shape)(x, x)
    assert "interpret" in str(info.value)

    add = jax.jit(pl.pallas_call(add_kernel, out_shape=out_shape, interpret=True))
    np.testing.assert_array_equal(add(x, x), 2 * x)


def test_kernel_writes_its_outputs_through_refs():
    """内核的参数依次是输入 Ref、输出 Ref；它不返回值，输出只能写进输出 Ref。
    The kernel's parameters are the input Refs, then the output Refs; it returns nothing and
    can only produce output by writing into its output Refs.
    """

    def axpy_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = 3.0 * x_ref[...] + y_ref[...]

    x, y = jnp.arange(4.0), jnp.ones(4)
    axpy = pl.pallas_call(
        axpy_kernel, out_shape=jax.ShapeDtypeStruct((4,), jnp.float32), interpret=True
    )
    np.testing.assert_array_equal(jax.jit(axpy)(x, y), [1.0, 4.0, 7.0, 10.0])

    kernel_jaxpr = _pallas_eqn(axpy, x, y).params["jaxpr"]
    assert len(kernel_jaxpr.invars) == __  # every input and output is a Ref parameter
    assert len(kernel_jaxpr.outvars) == 0  # and the kernel returns nothing


def test_grid_runs_the_kernel_once_per_program_id():
    """grid=(4,) 让内核运行 4 次；每次 program_id(0) 不同，out_specs 把它的 2 个元素的块放到第 i 块。
    grid=(4,) runs the kernel 4 times; each run has its own program_id(0), and out_specs puts
    its 2-element block at block i of the output.
    """

    def who_am_i(o_ref):
        o_ref[...] = jnp.full(o_ref.shape, pl.program_id(0), jnp.int32)

    ids = pl.pallas_call(
        who_am_i,
        out_shape=jax.ShapeDtypeStruct((8,), jnp.int32),
        grid=(4,),
        out_specs=pl.BlockSpec((2,), lambda i: (i,)),
        interpret=True,
    )
    np.testing.assert_array_equal(jax.jit(ids)(), __)


def test_index_map_returns_block_indices_not_element_offsets():
    """index map 返回的是“第几块”，不是元素偏移：块大小为 2 时，块号 1 指元素 2..3。
    让输出的第 i 块读取输入的倒数第 i 块，把 4 个块的顺序倒过来（块内顺序不变）。
    An index map returns block indices, not element offsets: with blocks of 2, block 1 means
    elements 2..3. Make output block i read input block i counted from the end, reversing the
    order of the four blocks (each block keeps its inner order).
    """

    def copy_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    reverse_blocks = pl.pallas_call(
        copy_kernel,
        out_shape=jax.ShapeDtypeStruct((8,), jnp.float32),
        grid=(4,),
        in_specs=[pl.BlockSpec((2,), lambda i: (__,))],
        out_specs=pl.BlockSpec((2,), lambda i: (i,)),
        interpret=True,
    )
    out = jax.jit(reverse_blocks)(jnp.arange(8.0))
    np.testing.assert_array_equal(out, [6, 7, 4, 5, 2, 3, 0, 1])


def test_two_dimensional_grid_has_one_program_id_per_axis():
    """二维 grid=(2, 3)：program_id(0) 是行块号，program_id(1) 是列块号，num_programs(1) 是列块数。
    A 2-D grid=(2, 3): program_id(0) is the row block, program_id(1) the column block and
    num_programs(1) the number of column blocks.
    """

    def linear_id(o_ref):
        i, j = pl.program_id(0), pl.program_id(1)
        o_ref[...] = jnp.full(o_ref.shape, i * pl.num_programs(1) + j, jnp.int32)

    ids = pl.pallas_call(
        linear_id,
        out_shape=jax.ShapeDtypeStruct((4, 6), jnp.int32),
        grid=(2, 3),
        out_specs=pl.BlockSpec((2, 2), lambda i, j: (i, j)),
        interpret=True,
    )
    out = jax.jit(ids)()
    np.testing.assert_array_equal(out[::2, ::2], __)  # one entry per block
    assert _pallas_eqn(ids).params["grid_mapping"].grid == (2, 3)


def test_none_in_block_shape_squeezes_that_dimension():
    """块形状里的 None 表示这一维取 1 并在内核里去掉：块 (None, 5) 让内核每次看到一行，形状是什么？
    None in a block shape means size 1, squeezed away inside the kernel: a (None, 5) block shows
    the kernel one row at a time. Which shape does the kernel see?
    """
    seen = []

    def row_kernel(x_ref, o_ref):
        seen.append(x_ref.shape)  # runs while tracing
        o_ref[...] = x_ref[...] * 2.0

    rows = pl.pallas_call(
        row_kernel,
        out_shape=jax.ShapeDtypeStruct((3, 5), jnp.float32),
        grid=(3,),
        in_specs=[pl.BlockSpec((None, 5), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((None, 5), lambda i: (i, 0)),
        interpret=True,
    )
    x = jnp.arange(15.0).reshape(3, 5)
    np.testing.assert_array_equal(jax.jit(rows)(x), 2 * x)
    assert seen[0] == __
