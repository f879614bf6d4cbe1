"""Cheap fakes of chapter 08's test_capstone_jaxpr.py TODO (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def first_nan__debug_nans_on_the_whole_program(program, x):
    """debug_nans names a primitive but neither the layer nor the row; guesses layer0, row 0."""
    try:
        with jax.debug_nans(True):
            jax.extend.core.jaxpr_as_fun(program)(x)
    except FloatingPointError as error:
        return "layer0", str(error).split()[-1], 0
    return None


def first_nan__only_the_output(program, x):
    """Looks at the program's output only: misses the NaN a robust layer turned into 0."""
    out = np.asarray(jax.extend.core.jaxpr_as_fun(program)(x)[0])
    rows = np.isnan(out).any(axis=1)
    if not rows.any():
        return None
    last = program.jaxpr.eqns[-1]
    return str(last.source_info.name_stack), last.primitive.name, int(np.argmax(rows))


def first_nan__last_nan_equation(program, x):
    """Walks the equations but keeps the last NaN, not the first."""
    env = dict(zip(program.jaxpr.constvars, program.consts, strict=True))
    env.update(zip(program.jaxpr.invars, [x], strict=True))
    found = None
    for eqn in program.jaxpr.eqns:
        args = [v.val if isinstance(v, jax.extend.core.Literal) else env[v] for v in eqn.invars]
        outs = eqn.primitive.bind(*args, **eqn.params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        env.update(zip(eqn.outvars, outs, strict=True))
        for out in outs:
            bad = np.isnan(np.asarray(out))
            if bad.any():
                row = int(np.argmax(bad.reshape(len(x), -1).any(axis=1)))
                found = str(eqn.source_info.name_stack), eqn.primitive.name, row
    return found
