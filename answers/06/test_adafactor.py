"""06 · Adafactor 的优化器状态内存 / Adafactor's optimizer-state memory."""

import jax
import jax.numpy as jnp
import optax

from jaxkoans import __  # noqa: F401  (the koans' blanks)


def _state_bytes(state):
    return sum(leaf.nbytes for leaf in jax.tree.leaves(state) if hasattr(leaf, "nbytes"))


def test_adafactor_keeps_row_and_column_statistics_instead_of_full_moments():
    """Adam 为每个参数保存两个同形状的矩（mu、nu），状态是参数的 2 倍；Adafactor 对矩阵只保存
    二阶矩的行均值和列均值（分解），且默认不保存一阶矩，状态小了两个数量级。
    Adam keeps two moments shaped like every parameter (mu, nu): twice the parameters.
    Adafactor keeps only row and column averages of the second moment for a matrix (factored)
    and by default no first moment: two orders of magnitude less state.
    """
    params = {"w": jnp.zeros((1024, 512)), "b": jnp.zeros(512)}
    param_bytes = _state_bytes(params)
    adam = _state_bytes(optax.adam(1e-3).init(params))
    ada_state = optax.adafactor(1e-3).init(params)
    ada = _state_bytes(ada_state)
    print(f"params {param_bytes} B, Adam state {adam} B, Adafactor state {ada} B")
    assert adam // param_bytes == 2
    assert param_bytes // ada > 100

    factored = next(
        s
        for s in jax.tree.leaves(ada_state, is_leaf=lambda x: hasattr(x, "v_row"))
        if hasattr(s, "v_row")
    )
    # The matrix keeps one value per row plus one per column (optax names the shorter one
    # v_row); a vector cannot be factored and keeps its full second moment in v.
    assert factored.v_row["w"].size + factored.v_col["w"].size == 1024 + 512
    assert factored.v["b"].shape == (512,)
