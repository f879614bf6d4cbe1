"""Cheap fakes of chapter 08's test_diagnose_with_tools.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def recompiling_arguments__arguments_whose_values_change(fn, calls):
    """Skips the tool: blames every argument whose value differs between calls."""
    import inspect

    names = list(inspect.signature(fn).parameters)
    first = calls[0]
    return sorted(
        {
            n
            for args in calls
            for n, a, b in zip(names, args, first, strict=True)
            if not np.array_equal(a, b)
        }
    )


def recompiling_arguments__shapes_and_dtypes_change(fn, calls):
    """Skips the tool: blames every argument whose shape or dtype differs between calls."""
    import inspect

    names = list(inspect.signature(fn).parameters)
    key = [[(jnp.shape(a), jnp.asarray(a).dtype) for a in args] for args in calls]
    return sorted({n for k in key for n, a, b in zip(names, k, key[0], strict=True) if a != b})


def recompiling_arguments__the_learning_rate(fn, calls):
    """Guesses the usual suspect instead of asking explain_cache_misses."""
    return ["lr"]


def leaked_shapes__every_live_array_after(run):
    """Looks only after run(): counts arrays that were alive before too."""
    run()
    return sorted(a.shape for a in jax.live_arrays())


def leaked_shapes__what_run_returns(run):
    """Skips live_arrays: reports the shape of run()'s result."""
    return [jnp.shape(run())]


def leaked_shapes__new_shapes_only(run):
    """Compares shapes, not objects: an already-alive array of a leaked shape hides the leak."""
    before = {a.shape for a in jax.live_arrays()}
    run()
    return sorted(a.shape for a in jax.live_arrays() if a.shape not in before)


def recompiling_arguments__delegates_to_the_test_helper(fn, calls):
    """Skips explain_cache_misses: asks the test's own compiles_when_only about ARGUMENTS."""
    return [n for n in sorted(ARGUMENTS) if compiles_when_only(n, calls) > 1]


def recompiling_arguments__python_types_change(fn, calls):
    """Skips the tool: blames every parameter whose Python type or dtype ever changes."""
    import inspect

    names = list(inspect.signature(fn).parameters)
    kinds = [{(type(a), np.asarray(a).dtype) for a in column} for column in zip(*calls)]
    return sorted(n for n, k in zip(names, kinds) if len(k) > 1)
