"""Cheap fakes of chapter 08's test_capstone_jaxpr.py TODO (parsed, never imported).

Each is a route a learner tries instead of interpreting the jaxpr down into its sub-programs."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def first_nan__only_the_output(program, x):
    """Looks at the program's output only: misses the NaN a robust layer turned into 0."""
    out = np.asarray(jax.extend.core.jaxpr_as_fun(program)(x)[0])
    rows = np.isnan(out).any(axis=1)
    if not rows.any():
        return None
    last = program.jaxpr.eqns[-1]
    return str(last.source_info.name_stack), last.primitive.name, int(np.argmax(rows))


def first_nan__every_intermediate_an_output(program, x):
    """Makes every top-level intermediate an output of the program and finds the first NaN."""
    eqns = program.jaxpr.eqns
    every = program.jaxpr.replace(outvars=[v for eqn in eqns for v in eqn.outvars])
    outs = jax.extend.core.jaxpr_as_fun(program.replace(jaxpr=every))(x)
    for eqn, out in zip(eqns, outs, strict=True):
        rows = np.isnan(np.asarray(out)).reshape(len(x), -1).any(axis=1)
        if rows.any():
            return str(eqn.source_info.name_stack), eqn.primitive.name, int(np.argmax(rows))
    return None


def first_nan__debug_nans_per_equation(program, x):
    """Binds the top-level equations under debug_nans; the one that raises names the layer."""
    env = dict(zip(program.jaxpr.constvars, program.consts, strict=True))
    env.update(zip(program.jaxpr.invars, [x], strict=True))
    with jax.debug_nans(True):
        for eqn in program.jaxpr.eqns:
            args = [v.val if isinstance(v, jax.extend.core.Literal) else env[v] for v in eqn.invars]
            try:
                outs = eqn.primitive.bind(*args, **eqn.params)
            except Exception as error:  # noqa: BLE001  (debug_nans' own error class is internal)
                words = re.findall(r"\b(log|sqrt|asin)\b", str(error))
                return str(eqn.source_info.name_stack), words[0] if words else "log", 0
            outs = outs if eqn.primitive.multiple_results else [outs]
            env.update(zip(eqn.outvars, outs, strict=True))
    return None


def first_nan__seed_recovered(program, x):
    """Finds the seed whose generator prints the same program, then asks the generator."""
    text = str(program)
    for seed in range(64):
        if str(make_model(seed)) == text:
            return known_answer(seed)[0]
    return None


def first_nan__top_level_interpreter(program, x):
    """Interprets the top level only: a layer's jit is one equation, its inside never seen."""
    env = dict(zip(program.jaxpr.constvars, program.consts, strict=True))
    env.update(zip(program.jaxpr.invars, [x], strict=True))
    for eqn in program.jaxpr.eqns:
        args = [v.val if isinstance(v, jax.extend.core.Literal) else env[v] for v in eqn.invars]
        outs = eqn.primitive.bind(*args, **eqn.params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        env.update(zip(eqn.outvars, outs, strict=True))
        for out in outs:
            bad = np.isnan(np.asarray(out))
            if bad.any():
                row = int(np.argmax(bad.reshape(len(x), -1).any(axis=1)))
                return str(eqn.source_info.name_stack), eqn.primitive.name, row
    return None


def first_nan__inner_name_stack(program, x):
    """Steps into each jit but names the layer by the inner equation's own name stack."""

    def run(closed, args):
        env = dict(zip(closed.jaxpr.constvars, closed.consts, strict=True))
        env.update(zip(closed.jaxpr.invars, args, strict=True))
        for eqn in closed.jaxpr.eqns:
            vals = [v.val if isinstance(v, jax.extend.core.Literal) else env[v] for v in eqn.invars]
            if eqn.primitive.name == "jit":
                outs, found = run(eqn.params["jaxpr"], vals)
                if found is not None:
                    return None, found
            else:
                outs = eqn.primitive.bind(*vals, **eqn.params)
                outs = outs if eqn.primitive.multiple_results else [outs]
                for out in outs:
                    bad = np.isnan(np.asarray(out)).reshape(len(x), -1).any(axis=1)
                    if bad.any():
                        where = str(eqn.source_info.name_stack)
                        return None, (where, eqn.primitive.name, int(np.argmax(bad)))
            env.update(zip(eqn.outvars, outs, strict=True))
        return [env[v] for v in closed.jaxpr.outvars], None

    return run(program, [x])[1]


def first_nan__last_nan_equation(program, x):
    """Steps into each jit but keeps the last NaN, not the first."""
    found = []

    def run(closed, args, layer):
        env = dict(zip(closed.jaxpr.constvars, closed.consts, strict=True))
        env.update(zip(closed.jaxpr.invars, args, strict=True))
        for eqn in closed.jaxpr.eqns:
            where = layer or str(eqn.source_info.name_stack)
            vals = [v.val if isinstance(v, jax.extend.core.Literal) else env[v] for v in eqn.invars]
            if eqn.primitive.name == "jit":
                outs = run(eqn.params["jaxpr"], vals, where)
            else:
                outs = eqn.primitive.bind(*vals, **eqn.params)
                outs = outs if eqn.primitive.multiple_results else [outs]
                for out in outs:
                    bad = np.isnan(np.asarray(out)).reshape(len(x), -1).any(axis=1)
                    if bad.any():
                        found.append((where, eqn.primitive.name, int(np.argmax(bad))))
            env.update(zip(eqn.outvars, outs, strict=True))
        return [env[v] for v in closed.jaxpr.outvars]

    run(program, [x], "")
    return found[-1] if found else None
