"""Cheap fakes of chapter 02's test_dispatch.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def honest_time__no_warm_up(f, *args, clock=time.perf_counter):
    """Times the first call: compilation lands inside the measurement."""
    begin = clock()
    out = jax.block_until_ready(f(*args))
    return clock() - begin, out


def honest_time__stops_before_the_result_is_ready(f, *args, clock=time.perf_counter):
    """Warms up, then reads the clock around the dispatch only: the result is not waited for."""
    jax.block_until_ready(f(*args))
    begin = clock()
    out = f(*args)
    seconds = clock() - begin
    return seconds, jax.block_until_ready(out)
