"""Cheap fakes of chapter 08's test_locating_faults.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def first_bad_stage__checks_under_jit(program, x):
    """Skips disable_jit: the check's Python `if` meets tracers."""
    bad = []

    def check(name, y):
        if not bad and not bool(jnp.all(jnp.isfinite(y))):
            bad.append(name)

    program(x, check=check)
    return bad[0] if bad else None


def root_sum__single_outer_where(x):
    """Only the outer where: the gradient is still NaN at 0."""
    return jnp.sum(jnp.where(x > 0, jnp.sqrt(x), 0.0))


def root_sum__clamp_inside_the_sqrt(x):
    """Clamps with maximum(x, 0) inside the sqrt: the gradient at 0 is infinite."""
    return jnp.sum(jnp.sqrt(jnp.maximum(x, 0.0)))


def newton_sqrt__python_print(a, steps):
    """A plain print in the scan body: it prints once, while tracing."""

    def step(x, i):
        print(f"step {i}: x = {x}")
        return (x + a / x) / 2, None

    x, _ = lax.scan(step, a, jnp.arange(steps))
    return x


def newton_sqrt__python_loop(a, steps):
    """Skips lax.scan: a Python loop unrolled into the trace."""
    x = a
    for i in range(steps):
        jax.debug.print("step {i}: x = {x}", i=i, x=x)
        x = (x + a / x) / 2
    return x


def checked__never_throws(fn):
    """Checkifies and jits fn but drops err instead of calling err.throw()."""
    run = jax.jit(checkify.checkify(fn, errors=checkify.index_checks | checkify.float_checks))
    return lambda *args: run(*args)[1]


def checked__default_errors(fn):
    """checkify.checkify with its default errors (user checks only)."""
    run = jax.jit(checkify.checkify(fn))

    def call(*args):
        err, out = run(*args)
        err.throw()
        return out

    return call


def log_gradient_norm__python_call(grad, log):
    """Calls log directly: it runs once, while tracing, with a tracer."""
    log(jnp.linalg.norm(grad))
    return grad


def leaking_stages__warm_stages(stages, x):
    """Calls the compiled stages under checking_leaks: served from the cache, nothing traces."""
    leaky = []
    for name, stage in stages:
        with jax.checking_leaks():
            try:
                stage(x)
            except Exception:
                leaky.append(name)
    return leaky


def leaking_stages__unexpected_tracer_on_reuse(stages, x):
    """Skips checking_leaks: retraces and waits for an UnexpectedTracerError that never comes."""
    leaky = []
    for name, stage in stages:
        stage.clear_cache()
        try:
            stage(x)
            stage(x + 1)
        except jax.errors.UnexpectedTracerError:
            leaky.append(name)
    return leaky


def nan_origin__stage_from_debug_nans(loss, x):
    """Decides the stage by which run debug_nans stops: it stops at a NaN a where discards."""

    def blamed(flag, fn):
        try:
            with flag(True):
                fn(x)
        except FloatingPointError as error:
            return str(error).split()[-1]
        return None

    for stage, fn in (("forward", loss), ("backward", jax.grad(loss))):
        primitive = blamed(jax.debug_nans, fn)
        if primitive is not None:
            return stage, primitive, blamed(jax.debug_infs, fn)
    return None, None, None


def nan_origin__under_jit(loss, x):
    """Runs the flags under jit: debug_infs then looks only at the final output."""

    def blamed(flag, fn):
        try:
            with flag(True):
                jax.jit(fn)(x)
        except FloatingPointError as error:
            return str(error).split()[-1]
        return None

    for stage, fn in (("forward", loss), ("backward", jax.grad(loss))):
        if bool(jnp.any(jnp.isnan(fn(x)))):
            return stage, blamed(jax.debug_nans, fn), blamed(jax.debug_infs, fn)
    return None, None, None


def nan_origin__no_flags(loss, x):
    """Finds the stage from the results but never asks the flags for a primitive."""
    for stage, fn in (("forward", loss), ("backward", jax.grad(loss))):
        if bool(jnp.any(jnp.isnan(fn(x)))):
            return stage, None, None
    return None, None, None


def where_jax_raised__filtering_left_on(script):
    """Parses the default (filtered) traceback: the frame that raised is hidden."""
    out = run_python("-I", str(script))
    frames = re.findall(r'^  File "(.+)", line (\d+), in (\S+)$', out, flags=re.MULTILINE)
    jax_frames = [(path, name) for path, _, name in frames if "jax/_src/" in path]
    mine = [(int(line), name) for path, line, name in frames if path == str(script)]
    path, name = jax_frames[-1]
    return (path.split("jax/_src/", 1)[1], name), mine[-1]


def where_jax_raised__outermost_frames(script):
    """Filtering off, but takes the first (outermost) frames instead of the innermost."""
    out = run_python("-I", str(script), env={"JAX_TRACEBACK_FILTERING": "off"})
    frames = re.findall(r'^  File "(.+)", line (\d+), in (\S+)$', out, flags=re.MULTILINE)
    jax_frames = [(path, name) for path, _, name in frames if "jax/_src/" in path]
    mine = [(int(line), name) for path, line, name in frames if path == str(script)]
    path, name = jax_frames[0]
    return (path.split("jax/_src/", 1)[1], name), mine[0]


def where_jax_raised__hard_coded(script):
    """The matmul script's answer, whatever the script."""
    return ("lax/lax.py", "_dot_general_shape_rule"), (10, "project")


def where_jax_raised__expected_tuples(script):
    """Runs nothing: returns the tuples the test file expects, picked by the script's text."""
    text = script.read_text(encoding="utf-8")
    lines = text.splitlines()
    if "x @ w" in text:
        return ("lax/lax.py", "_dot_general_shape_rule"), (lines.index("    return x @ w") + 1, "project")
    return ("core.py", "error"), (lines.index("    if v > 0:") + 1, "magnitude")


def first_bad_stage__replays_STAGES(program, x):
    """Ignores program: replays the module's STAGES eagerly and checks after each."""
    for name, stage in STAGES:
        x = stage(x)
        if not bool(jnp.all(jnp.isfinite(x))):
            return name
    return None


def leaking_stages__known_names(stages, x):
    """Runs nothing: keeps the names the test file says leak."""
    return [name for name, _ in stages if name in ("scale", "squash")]


def nan_origin__table_by_name(loss, x):
    """Runs nothing: the test file's expected tuples, looked up by the function's name."""
    return {
        "entropy": ("backward", "mul", "log"),
        "log_likelihood": ("forward", "log", None),
        "top_probability": ("forward", "div", "exp"),
        "log_prior": ("backward", "div", "log"),
    }.get(loss.__name__, (None, None, None))


def nan_origin__table_by_input(loss, x):
    """Runs nothing: the test file's expected tuples, looked up by the input's values."""
    return {
        (0.0, 0.5, 0.5): ("backward", "mul", "log"),
        (0.5, -1.0): ("forward", "log", None),
        (100.0, 0.0): ("forward", "div", "exp"),
        (0.0, 2.0): ("backward", "div", "log"),
    }.get(tuple(float(v) for v in x), (None, None, None))
