"""Cheap fakes of chapter 03's test_collectives.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def ring_all_reduce__psum(v):
    """One psum: the right sum, but an all-reduce instead of a ring of ppermutes."""
    return lax.psum(v, "i")


def ring_all_reduce__whole_block_around_the_ring(v):
    """The naive ring: the whole block passed on N - 1 times, N - 1 blocks sent instead of 2(N-1)/N."""
    n = lax.axis_size("i")
    ring = [(j, (j + 1) % n) for j in range(n)]
    total, passing = v, v
    for _ in range(n - 1):
        passing = lax.ppermute(passing, "i", ring)
        total = total + passing
    return total


def collective_matmul__all_gather(x_block, w_block):
    """The direct way: gather all of x, then one matmul that waits for every block."""
    return lax.all_gather(x_block, "i", tiled=True) @ w_block


def collective_matmul__ring_gather_then_one_matmul(x_block, w_block):
    """An all-gather written with the ring's ppermutes, then a single matmul on the whole x."""
    n, k = lax.axis_size("i"), lax.axis_index("i")
    ring = [(j, (j + 1) % n) for j in range(n)]
    rows = x_block.shape[0]
    whole = jnp.zeros((n * rows, x_block.shape[1]), x_block.dtype)
    for step in range(n):
        whole = lax.dynamic_update_slice_in_dim(whole, x_block, ((k - step) % n) * rows, 0)
        if step < n - 1:
            x_block = lax.ppermute(x_block, "i", ring)
    return whole @ w_block


def collective_matmul__psum_of_placed_rows(x_block, w_block):
    """Each device places its rows in zeros and a psum assembles x: an all-reduce, no ring."""
    n, k = lax.axis_size("i"), lax.axis_index("i")
    rows = x_block.shape[0]
    placed = jnp.zeros((n * rows, x_block.shape[1]), x_block.dtype)
    placed = lax.dynamic_update_slice_in_dim(placed, x_block, k * rows, 0)
    return lax.psum(placed, "i") @ w_block
