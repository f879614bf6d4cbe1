"""Cheap fakes of chapter 08's test_compile_and_memory.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def compiled_bytes__arguments_and_outputs_only(fn, *specs):
    """Reads memory_analysis() but forgets the temporaries."""
    stats = jax.jit(fn).lower(*specs).compile().memory_analysis()
    return stats.argument_size_in_bytes + stats.output_size_in_bytes


def compiled_bytes__input_sizes_from_the_specs(fn, *specs):
    """Skips compiling: adds up the input specs' sizes."""
    return sum(spec.size * spec.dtype.itemsize for spec in specs)


def compiled_bytes__jaxpr_sizes(fn, *specs):
    """Skips compiling: the specs plus every intermediate the jaxpr names (nothing fused)."""
    jaxpr = jax.make_jaxpr(fn)(*specs)
    sizes = [spec.size * spec.dtype.itemsize for spec in specs]
    for eqn in jaxpr.eqns:
        sizes += [v.aval.size * v.aval.dtype.itemsize for v in eqn.outvars]
    return sum(sizes)
