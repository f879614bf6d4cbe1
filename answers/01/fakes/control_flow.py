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
