"""02 · 布局：数组的轴在内存里的顺序 / layouts, the order of an array's axes in memory.

同样形状、同样值的数组，在设备内存里可以按行存（最后一根轴变化最快），也可以按列存。
`jax.experimental.layout` 把这个顺序写成 `Layout(major_to_minor=...)`，和分片一起组成
`Format(layout, sharding)`：数组的 `.format`、编译好的程序的 `input_formats` /
`output_formats`，以及 jit 的 `in_shardings=` / `out_shardings=` 都收这个对象；
`Layout.AUTO` 让编译器自己挑。

An array of one shape and one set of values can sit in device memory row by row (the last axis
varying fastest) or column by column. `jax.experimental.layout` writes that order as
`Layout(major_to_minor=...)` and pairs it with a sharding as `Format(layout, sharding)`: an
array's `.format`, a compiled program's `input_formats` / `output_formats`, and jit's
`in_shardings=` / `out_shardings=` all take this object; `Layout.AUTO` lets the compiler choose.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.layout import Format, Layout

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def test_a_layout_orders_the_axes_in_memory_and_a_compiled_program_expects_one():
    """一个 (4, 8) 的数组默认是哪种布局（major_to_minor，从变化最慢的轴数到最快的）？用
    `jax.device_put` 把它放成按列存：值不变，布局变了。提前编译（AOT）好的程序只收它编译时的
    布局，交给它另一种布局的数组会怎样？而 `jax.jit` 的函数照样接受。
    What layout does a (4, 8) array have by default (major_to_minor, from the slowest-varying
    axis to the fastest)? `jax.device_put` it column by column: the values stay, the layout
    changes. A program compiled ahead of time (AOT) takes the layouts it was compiled for;
    what happens when it is handed an array in another layout? A `jax.jit` function still
    accepts it.
    """
    x = jnp.arange(32.0).reshape(4, 8)
    assert x.format.layout.major_to_minor == (0, 1)
    by_column = jax.device_put(x, Format(Layout((1, 0)), x.sharding))
    np.testing.assert_array_equal(by_column, x)
    assert by_column.format.layout.major_to_minor == (1, 0)

    compiled = jax.jit(lambda x: x + 1).lower(x).compile()
    (expected,), _ = compiled.input_formats
    assert expected.layout == x.format.layout
    with raises_exactly(ValueError) as info:
        compiled(by_column)
    assert "layouts that disagree" in str(info.value)
    np.testing.assert_array_equal(jax.jit(lambda x: x + 1)(by_column), x + 1)


def test_the_compiler_chooses_auto_layouts_and_hlo_writes_them_the_other_way_round():
    """`Layout.AUTO` 把输入、输出的布局交给编译器。一个只做转置的程序，两头都是 AUTO：编译器
    给 (8, 4) 的输出挑了哪种布局（major_to_minor）？XLA 的 HLO 也在每个形状后的花括号里写布局，
    但写的是 minor_to_major（从变化最快的轴数起）：入口的输入形状和输出形状后面各写着什么？
    `Layout.AUTO` leaves the layouts of inputs and outputs to the compiler. A program that only
    transposes, AUTO at both ends: which layout (major_to_minor) does the compiler choose for
    the (8, 4) output? XLA's HLO writes a layout in braces after each shape too, but as
    minor_to_major (counting from the fastest-varying axis): what follows the entry's input
    shape, and its output shape?
    """
    auto = Format(Layout.AUTO)
    spec = jax.ShapeDtypeStruct((4, 8), jnp.float32)
    compiled = jax.jit(jnp.transpose, in_shardings=auto, out_shardings=auto).lower(spec).compile()
    assert compiled.output_formats.layout.major_to_minor == (1, 0)
    entry = re.search(
        r"entry_computation_layout=\{\(f32\[4,8\]\{([\d,]+)\}\)->f32\[8,4\]\{([\d,]+)\}",
        compiled.as_text(),
    )
    assert entry.group(1) == "1,0"
    assert entry.group(2) == "0,1"
    x = jnp.arange(32.0).reshape(4, 8)
    np.testing.assert_array_equal(compiled(x), x.T)
