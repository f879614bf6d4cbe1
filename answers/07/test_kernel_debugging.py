"""07 · 在内核里打印 / printing from inside a kernel.

内核函数只被 trace 一次：里面的 Python `print` 在 trace 时运行，打印的是 tracer，不是数值。
Pallas 有自己的打印原语：它在每个程序实例运行时执行，用 `{}` 占位符格式化 program_id、
Ref 里读出的值等被追踪的标量。用它从内核内部看每个实例实际读到了哪一块。

A kernel function is traced once: a Python `print` inside it runs at trace time and shows
tracers, not numbers. Pallas has a print primitive of its own: it runs in every program
instance and formats traced scalars (the program id, a value read from a Ref) into `{}`
placeholders. Use it to see, from inside the kernel, which block each instance really read.

Docs: https://docs.jax.dev/en/latest/pallas/index.html
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from jaxkoans import __  # noqa: F401  (the koans' blanks)

ROWS, COLS, BLOCK_ROWS = 16, 128, 8


def copy_by_blocks(x):
    """应当逐块复制 x，但它的输入 index map 有 bug。/ Should copy x block by block; its input
    index map has a bug."""

    def kernel(x_ref, o_ref):
        pl.debug_print("program {} first {}", pl.program_id(0), x_ref[0, 0])
        o_ref[...] = x_ref[...]

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(ROWS // BLOCK_ROWS,),
        in_specs=[pl.BlockSpec((BLOCK_ROWS, COLS), lambda i: ((i + 1) % 2, 0))],
        out_specs=pl.BlockSpec((BLOCK_ROWS, COLS), lambda i: (i, 0)),
        interpret=True,
    )(x)


def test_a_kernel_prints_once_per_program_instance(capfd):
    """在 copy_by_blocks 的内核里写出那一行打印，格式为
    "program <program_id> first <块的第一个元素>"。复制的结果不对；每个程序实例各打印一行，
    读出的第一个元素说明它读的是哪一块——bug 就在那里。Python 的 print 只在 trace 时打印 tracer。

    Write the print line in copy_by_blocks's kernel, in the format
    "program <program id> first <the block's first element>". The copy comes out wrong; each
    program instance prints one line, and the first element it read tells which block it
    read: that is where the bug is. Python's print would show tracers, once, at trace time."""
    x = jnp.arange(ROWS * COLS, dtype=jnp.float32).reshape(ROWS, COLS)
    y = jax.block_until_ready(copy_by_blocks(x))
    assert not np.array_equal(y, x)  # the symptom: the copy is not a copy
    printed = [line.split() for line in capfd.readouterr().out.splitlines()]
    printed = [words for words in printed if words[:1] == ["program"]]
    assert len(printed) == ROWS // BLOCK_ROWS, "one line per program instance"
    first_read = {int(words[1]): float(words[3]) for words in printed}
    # Each instance's first element, as the (buggy) index map places its block.
    expected = {i: float(x[BLOCK_ROWS * ((i + 1) % 2), 0]) for i in range(ROWS // BLOCK_ROWS)}
    assert first_read == expected
