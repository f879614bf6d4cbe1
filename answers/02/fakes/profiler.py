"""Cheap fakes of chapter 02's test_profiler.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def trace_one_step__no_annotation(logdir, step, *args, label):
    """Writes the trace but leaves no named event in it."""
    with jax.profiler.trace(logdir):
        out = step(*args)
        jax.block_until_ready(out)
    return out


def trace_one_step__annotation_closes_before_the_work(logdir, step, *args, label):
    """Annotates the call but waits only after the annotation (and the trace) closed."""
    with jax.profiler.trace(logdir), jax.profiler.TraceAnnotation(label):
        out = step(*args)
    return jax.block_until_ready(out)



def bytes_held_by__every_live_array(function):
    """The bytes of every live array, whoever created it."""
    return sum(a.nbytes for a in jax.live_arrays())


def bytes_held_by__allocations_not_bytes(function):
    """The right samples, but their allocation count added up instead of their bytes."""
    frame = (function.__name__, function.__code__.co_filename)
    _, samples = read_pprof(jax.profiler.device_memory_profile())
    return sum(s["values"]["allocations"] for s in samples if s["labels"]["kind"] == "buffer" and frame in s["stack"])


def bytes_held_by__name_only(function):
    """Matches the function's name alone: another file's function of the same name counts too."""
    _, samples = read_pprof(jax.profiler.device_memory_profile())
    mine = [s for s in samples if s["labels"]["kind"] == "buffer" and function.__name__ in [n for n, _ in s["stack"]]]
    return sum(s["values"]["space"] for s in mine)


def bytes_held_by__innermost_frame_only(function):
    """Only samples whose innermost call is the function: JAX's own frames come first."""
    frame = (function.__name__, function.__code__.co_filename)
    _, samples = read_pprof(jax.profiler.device_memory_profile())
    return sum(s["values"]["space"] for s in samples if s["labels"]["kind"] == "buffer" and s["stack"][0] == frame)


def bytes_held_by__every_buffer(function):
    """Every live buffer in the profile, whichever function created it."""
    _, samples = read_pprof(jax.profiler.device_memory_profile())
    return sum(s["values"]["space"] for s in samples if s["labels"]["kind"] == "buffer")


def bytes_held_by__first_sample_only(function):
    """The first matching sample only, as if one function made one buffer."""
    frame = (function.__name__, function.__code__.co_filename)
    _, samples = read_pprof(jax.profiler.device_memory_profile())
    found = [s["values"]["space"] for s in samples if s["labels"]["kind"] == "buffer" and frame in s["stack"]]
    return found[0] if found else 0
