"""Cheap fakes of chapter 01's test_control_flow.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def first_crossing__argmax_of_the_whole_array(xs, threshold):
    """Compares every element first, then takes the argmax: no early exit."""
    return jnp.argmax(jnp.append(xs > threshold, True))


def first_crossing__fori_loop_over_everything(xs, threshold):
    """Visits all n elements with a fixed-length loop."""
    n = xs.shape[0]
    return lax.fori_loop(
        0, n, lambda i, best: jnp.where((best == n) & (xs[i] > threshold), i, best), n
    )


def chunked_apply__vmap_all_at_once(f, xs, chunk):
    """The whole batch in one vmap: right values, no loop, every intermediate at once."""
    return jax.vmap(f)(xs)


def chunked_apply__row_by_row(f, xs, chunk):
    """lax.map without batch_size: a scan of n steps, one row each."""
    return lax.map(f, xs)


def chunked_apply__drops_the_partial_chunk(f, xs, chunk):
    """Reshape into whole chunks and scan: the last rows are lost when n % chunk != 0."""
    n = jax.tree.leaves(xs)[0].shape[0]
    full = jax.tree.map(lambda a: a[: n - n % chunk].reshape(n // chunk, chunk, *a.shape[1:]), xs)
    ys = lax.map(jax.vmap(f), full)
    return jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), ys)


def chunked_apply__python_loop_over_chunks(f, xs, chunk):
    """vmap per chunk in a Python loop: every chunk unrolled into the jaxpr, no scan."""
    n = jax.tree.leaves(xs)[0].shape[0]
    parts = [jax.vmap(f)(jax.tree.map(lambda a: a[i : i + chunk], xs)) for i in range(0, n, chunk)]
    return jax.tree.map(lambda *p: jnp.concatenate(p), *parts)


def chunked_apply__lax_map_batch_size(f, xs, chunk):
    """The library: lax.map's batch_size, which vmaps the remaining rows again outside the scan."""
    return lax.map(f, xs, batch_size=chunk)
