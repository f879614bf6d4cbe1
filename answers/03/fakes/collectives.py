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


def matmul_reduce_scatter__psum_scatter(x_block, w_block):
    """The direct way: one local matmul, then psum_scatter: a reduce-scatter, no ring."""
    return lax.psum_scatter(x_block @ w_block, "i", scatter_dimension=0, tiled=True)


def matmul_reduce_scatter__psum_then_slice(x_block, w_block):
    """An all-reduce of the whole partial product, then each device keeps its rows."""
    n, k = lax.axis_size("i"), lax.axis_index("i")
    rows = x_block.shape[0] // n
    return lax.dynamic_slice_in_dim(lax.psum(x_block @ w_block, "i"), k * rows, rows, 0)


def matmul_reduce_scatter__one_matmul_then_ring(x_block, w_block):
    """The whole partial product first (one big dot), then its segments sent around the ring."""
    n, k = lax.axis_size("i"), lax.axis_index("i")
    ring = [(j, (j + 1) % n) for j in range(n)]
    rows = x_block.shape[0] // n
    partial = x_block @ w_block
    acc = None
    for step in range(n):
        share = lax.dynamic_slice_in_dim(partial, ((k - step - 1) % n) * rows, rows, 0)
        acc = share if acc is None else lax.ppermute(acc, "i", ring) + share
    return acc


def matmul_reduce_scatter__segments_the_wrong_way_round(x_block, w_block):
    """The ring, but device k starts on segment k + 1 going up: the sums land on the wrong devices."""
    n, k = lax.axis_size("i"), lax.axis_index("i")
    ring = [(j, (j + 1) % n) for j in range(n)]
    rows = x_block.shape[0] // n
    acc = None
    for step in range(n):
        share = lax.dynamic_slice_in_dim(x_block, ((k + step + 1) % n) * rows, rows, 0) @ w_block
        acc = share if acc is None else lax.ppermute(acc, "i", ring) + share
    return acc


def matmul_reduce_scatter__gather_the_inputs(x_block, w_block):
    """Gathers x's columns and w's rows, then every device multiplies its rows in full."""
    n, k = lax.axis_size("i"), lax.axis_index("i")
    rows = x_block.shape[0] // n
    x = lax.all_gather(x_block, "i", axis=1, tiled=True)
    w = lax.all_gather(w_block, "i", axis=0, tiled=True)
    return lax.dynamic_slice_in_dim(x, k * rows, rows, 0) @ w
