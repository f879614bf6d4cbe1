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
