"""02 · 数值护栏：矩阵乘精度、严格的 dtype 提升、秩提升报错 / numeric guards: matmul
precision, strict dtype promotion, rank promotion that raises.

性能调优常常改动 dtype（bfloat16）和精度，而 jnp 的隐式规则会悄悄改写你的意图：bfloat16 碰上
一个 float32 数组就整个升成 float32（内存和带宽翻倍），(N,) 减 (N, 1) 广播成 (N, N)（损失对了
形状却错了）。jax.numpy_dtype_promotion("strict") 和 jax.numpy_rank_promotion("raise") 把这些
悄悄的改写变成错误；precision= / jax.default_matmul_precision 与 preferred_element_type 说清楚
矩阵乘要多精确、累加成什么类型，而程序里写下的请求后端可以不理会。

Performance work changes dtypes (bfloat16) and precision, and jnp's implicit rules quietly
rewrite what you meant: bfloat16 meeting one float32 array is promoted to float32 whole (twice
the memory and bandwidth), (N,) minus (N, 1) broadcasts to (N, N) (a loss of the right value
type but the wrong shape). jax.numpy_dtype_promotion("strict") and
jax.numpy_rank_promotion("raise") turn those quiet rewrites into errors; precision= /
jax.default_matmul_precision and preferred_element_type say how exact a matmul must be and
what it accumulates into, and a request written into the program is one a backend may ignore.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def dot_precision(fun, *args):
    """The precision attribute of the first dot_general in fun's StableHLO (its first operand's)."""
    text = jax.jit(fun).lower(*args).as_text()
    line = next(line for line in text.splitlines() if "stablehlo.dot_general" in line)
    return line.split("precision = [")[1].split(",")[0]


def test_strict_dtype_and_rank_promotion_turn_silent_rewrites_into_errors():
    """⚠️ 陷阱 / trap：bfloat16 的激活乘上一个 float32 的数组，结果是什么 dtype？乘上一个 Python
    浮点数呢（弱类型）？在 jax.numpy_dtype_promotion("strict") 里，前者报错（异常是哪一个？），
    后者照常。再看形状：y 是 (N,)，模型输出 pred 是 (N, 1)，mean((y - pred)²) 算出一个数，没有
    任何报错，可 y - pred 是什么形状？jax.numpy_rank_promotion("raise") 拒绝秩不同的隐式广播
    （异常是哪一个？）；秩相同、某轴为 1 的广播仍然允许。
    ⚠️ trap: bfloat16 activations times a float32 array: which dtype comes out? And times a
    Python float (weakly typed)? Under jax.numpy_dtype_promotion("strict") the first raises
    (which exception?) and the second goes through. Then shapes: y is (N,) and the model's pred
    is (N, 1); mean((y - pred)²) gives one number without any error, but what shape is
    y - pred? jax.numpy_rank_promotion("raise") refuses implicit broadcasting between different
    ranks (which exception?); broadcasting a size-1 axis between equal ranks is still allowed.
    """
    activations = jnp.ones(4, jnp.bfloat16)
    scale = jnp.float32(0.5)
    assert (activations * scale).dtype == __
    assert (activations * 0.5).dtype == __
    with jax.numpy_dtype_promotion("strict"):
        with raises_exactly(__):
            activations * scale
        assert (activations * 0.5).dtype == __

    y = jnp.arange(4.0)
    pred = y[:, None] + 0.5
    assert (y - pred).shape == __
    with jax.numpy_rank_promotion("raise"):
        with raises_exactly(__):
            y - pred
        assert float(jnp.mean((y - pred[:, 0]) ** 2)) == __
        assert (jnp.ones((2, 3)) + jnp.ones((1, 3))).shape == (2, 3)


def test_matmul_precision_is_a_request_written_into_the_program():
    """precision= 和 jax.default_matmul_precision 不直接改算法，它们在 StableHLO 的 dot_general 上
    写下一个请求（DEFAULT / HIGH / HIGHEST），由后端决定怎么兑现。预测："tensorfloat32" 写成哪一级？
    这台 CPU 的 float32 矩阵乘，DEFAULT 和 HIGHEST 的结果差多少？preferred_element_type 则改变
    输出（累加）的类型：bfloat16 的输入可以累加并输出成 float32。
    precision= and jax.default_matmul_precision do not change the algorithm directly: they write
    a request (DEFAULT / HIGH / HIGHEST) onto StableHLO's dot_general, and the backend decides how
    to honour it. Predict: which level does "tensorfloat32" become? On this CPU, how far apart
    are a float32 matmul at DEFAULT and at HIGHEST? preferred_element_type changes the output
    (accumulation) type instead: bfloat16 inputs may accumulate into and return float32.
    """
    a = jax.random.normal(jax.random.key(0), (64, 64))
    b = jax.random.normal(jax.random.key(1), (64, 64))
    assert dot_precision(lambda a, b: a @ b, a, b) == __
    assert (
        dot_precision(lambda a, b: jnp.matmul(a, b, precision=lax.Precision.HIGHEST), a, b)
        == "HIGHEST"
    )
    with jax.default_matmul_precision("tensorfloat32"):
        assert dot_precision(lambda a, b: a @ b, a, b) == __
    highest = jnp.matmul(a, b, precision=lax.Precision.HIGHEST)
    assert float(jnp.abs(highest - a @ b).max()) == __

    a16, b16 = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
    assert (a16 @ b16).dtype == __
    wide = jnp.matmul(a16, b16, preferred_element_type=jnp.float32)
    assert wide.dtype == jnp.float32
    exact = np.asarray(a16, np.float32) @ np.asarray(b16, np.float32)
    assert np.abs(np.asarray(wide) - exact).max() < 1e-4  # float32 accumulation
    assert np.abs(np.asarray(a16 @ b16, np.float32) - exact).max() > 1e-2  # rounded to bfloat16
