"""Cheap fakes of chapter 02's test_dispatch.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def honest_time__no_warm_up(f, *args, clock=time.perf_counter):
    """Times the first call: compilation lands inside the measurement."""
    begin = clock()
    out = jax.block_until_ready(f(*args))
    return clock() - begin, out
