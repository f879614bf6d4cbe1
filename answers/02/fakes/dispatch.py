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


def make_train_steps__loop_inside_jit():
    """The Python loop traced into one program: one dispatch, but the program grows with STEPS."""

    def unrolled(w, xs, ys):
        for i in range(STEPS):
            w = sgd_step(w, xs[i], ys[i])
        return w

    return jax.jit(unrolled, donate_argnums=0)


def make_train_steps__scan_without_donation():
    """One scan in one program, but w's buffer is kept and a new one allocated."""

    def scanned(w, xs, ys):
        w, _ = jax.lax.scan(lambda w, xy: (sgd_step(w, *xy), None), w, (xs, ys))
        return w

    return jax.jit(scanned)


def make_train_steps__the_given_loop():
    """The given loop, jitted around: a program per step nested in the outer one."""
    return jax.jit(python_loop, donate_argnums=0)


def make_train_steps__scan_outside_jit():
    """lax.scan called eagerly: no jit of the whole, nothing donated."""

    def scanned(w, xs, ys):
        w, _ = jax.lax.scan(lambda w, xy: (jitted_step(w, *xy), None), w, (xs, ys))
        return w

    return scanned


def honest_time__sleeps_instead_of_waiting(f, *args, clock=time.perf_counter):
    """Warms up, then sleeps a fixed half second instead of waiting for the timed result."""
    jax.block_until_ready(f(*args))
    begin = clock()
    out = f(*args)
    time.sleep(0.5)
    return clock() - begin, out


def honest_time__busy_loop_on_the_clock(f, *args, clock=time.perf_counter):
    """Spins on time.perf_counter until half a second has passed: a fixed wait, not the result's."""
    jax.block_until_ready(f(*args))
    begin = clock()
    out = f(*args)
    start = time.perf_counter()
    while time.perf_counter() - start < 0.5:
        pass
    return clock() - begin, out


def honest_time__hard_coded_spin(f, *args, clock=time.perf_counter):
    """Burns a fixed number of Python iterations, long enough for the test's work on this machine."""
    jax.block_until_ready(f(*args))
    begin = clock()
    out = f(*args)
    for _ in range(5_000_000):
        pass
    return clock() - begin, out


def honest_time__event_wait_with_a_timeout(f, *args, clock=time.perf_counter):
    """A threading wait that nothing sets: it ends after its timeout, a fixed time again."""
    import threading

    jax.block_until_ready(f(*args))
    begin = clock()
    out = f(*args)
    threading.Event().wait(0.5)
    return clock() - begin, out


def honest_time__waits_on_the_warm_up_again(f, *args, clock=time.perf_counter):
    """Blocks on the warm-up result a second time instead of on the timed one."""
    first = f(*args)
    jax.block_until_ready(first)
    begin = clock()
    out = f(*args)
    jax.block_until_ready(first)
    return clock() - begin, out
