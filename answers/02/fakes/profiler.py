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
