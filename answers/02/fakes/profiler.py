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



def trace_one_step__sleeps_inside_the_annotation(logdir, step, *args, label):
    """Sleeps half a second inside the annotation instead of waiting for the result."""
    import time

    with jax.profiler.trace(logdir), jax.profiler.TraceAnnotation(label):
        out = step(*args)
        time.sleep(0.5)
    return out


def trace_one_step__busy_loop_inside_the_annotation(logdir, step, *args, label):
    """Spins on the clock for a tenth of a second inside the annotation: a fixed wait."""
    import time

    with jax.profiler.trace(logdir), jax.profiler.TraceAnnotation(label):
        out = step(*args)
        start = time.perf_counter()
        while time.perf_counter() - start < 0.1:
            pass
    return out


def trace_one_step__hard_coded_label(logdir, step, *args, label):
    """Annotates with the first koan's label whatever label it is given."""
    with jax.profiler.trace(logdir), jax.profiler.TraceAnnotation("my_train_step"):
        out = step(*args)
        jax.block_until_ready(out)
    return out


def trace_one_step__annotation_written_into_the_json(logdir, step, *args, label):
    """No TraceAnnotation: the label's event is written into the Chrome JSON by hand, around all."""
    import gzip
    import json
    from pathlib import Path

    with jax.profiler.trace(logdir):
        out = jax.block_until_ready(step(*args))
    [path] = Path(logdir).glob("plugins/profile/*/*.trace.json.gz")
    trace = json.loads(gzip.decompress(path.read_bytes()))
    timed = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    begin = min(e["ts"] for e in timed) - 1
    end = max(e["ts"] + e["dur"] for e in timed) + 1
    python = next(e for e in timed if e["name"].startswith("PjitFunction"))
    trace["traceEvents"].append(
        {"ph": "X", "name": label, "ts": begin, "dur": end - begin, "pid": python["pid"], "tid": python["tid"]}
    )
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    return out


def trace_one_step__annotation_outside_the_trace(logdir, step, *args, label):
    """The annotation opens before the profiler session does."""
    with jax.profiler.TraceAnnotation(label), jax.profiler.trace(logdir):
        out = step(*args)
        jax.block_until_ready(out)
    return out


def trace_one_step__work_done_before_the_trace(logdir, step, *args, label):
    """Runs and waits for the step first, then traces an empty annotation: no work in the trace."""
    out = jax.block_until_ready(step(*args))
    with jax.profiler.trace(logdir), jax.profiler.TraceAnnotation(label):
        pass
    return out



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
