"""01 · lax.scan 详解 / lax.scan in detail."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __  # noqa: F401  (the koans' blanks)


def test_scan_returns_final_carry_and_stacked_outputs():
    """scan 返回 (最终 carry, 每一步输出沿第 0 轴堆叠)：carry 只留最后一个，ys 留下全部。
    scan returns (final carry, per-step outputs stacked on axis 0): the carry keeps only the
    last value, ys keeps every step.
    """

    def step(total, x):
        total = total + x
        return total, total * 10

    carry, ys = lax.scan(step, 0, jnp.arange(1, 5))
    assert int(carry) == __
    np.testing.assert_array_equal(ys, __)
