"""Cheap fakes of chapter 03's test_unreduced.py TODO (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def sum_of_products__reduce_each_then_add(a, b, c, d):
    """Each product reduced on its own: XLA merges them into one tuple all-reduce, twice the bytes."""
    return reshard(partial_matmul(a, b), P()) + reshard(partial_matmul(c, d), P())


def sum_of_products__replicated_einsums(a, b, c, d):
    """Ask each einsum for a replicated result directly."""
    return jnp.einsum("ij,jk->ik", a, b, out_sharding=P()) + jnp.einsum("ij,jk->ik", c, d, out_sharding=P())


def sum_of_products__gather_the_operands(a, b, c, d):
    """Gather every operand first, then multiply locally: all-gathers, not one reduction."""
    a, b, c, d = (reshard(x, P()) for x in (a, b, c, d))
    return a @ b + c @ d


def sum_of_products__concatenate(a, b, c, d):
    """One matmul of the concatenations [a c] @ [b; d]: the same value, the operands reshuffled."""
    return reshard(partial_matmul(jnp.concatenate([a, c], axis=1), jnp.concatenate([b, d], axis=0)), P())


def sum_of_products__left_unreduced(a, b, c, d):
    """Left unreduced: the partial sums never added."""
    return partial_matmul(a, b) + partial_matmul(c, d)
