"""Cheap fakes of chapter 09's test_export_refusals.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def export_trusting_own_kernels__every_target_in_the_module(fn, *specs):
    """Switches the check off for every custom call found, JAX's guaranteed LAPACK one too."""
    module = jax.jit(fn).lower(*specs).as_text()
    targets = sorted(set(re.findall(r"stablehlo\.custom_call @(\w+)\(", module)))
    checks = [export.DisabledSafetyCheck.custom_call(t) for t in targets]
    return export.export(jax.jit(fn), disabled_checks=checks)(*specs)


def export_trusting_own_kernels__platform_check(fn, *specs):
    """The wrong check: switches off the platform check, which export does not complain about."""
    checks = [export.DisabledSafetyCheck.platform()]
    return export.export(jax.jit(fn), disabled_checks=checks)(*specs)


def export_trusting_own_kernels__first_refused_only(fn, *specs):
    """Lets only the first refused target through."""
    try:
        return export.export(jax.jit(fn))(*specs)
    except ValueError as refusal:
        target = re.search(r"stablehlo\.custom_call @(\w+)\(", str(refusal))[1]
    checks = [export.DisabledSafetyCheck.custom_call(target)]
    return export.export(jax.jit(fn), disabled_checks=checks)(*specs)


def export_trusting_own_kernels__the_kernels_of_the_first_model(fn, *specs):
    """Hard-codes the targets of with_two_kernels."""
    checks = [export.DisabledSafetyCheck.custom_call(t) for t in ("fused_scale", "fused_shift")]
    return export.export(jax.jit(fn), disabled_checks=checks)(*specs)


def register_shipped_kernels__one_known_name(exp, library):
    """Registers the first team's name from memory instead of reading the artifact's."""
    import jax

    if not exp.disabled_safety_checks:
        return []
    capsule = jax.ffi.pycapsule(library.LeakySum)
    jax.ffi.register_ffi_target("acme_leaky_sum", capsule, platform="cpu")
    return ["acme_leaky_sum"]


def register_shipped_kernels__every_check(exp, library):
    """Registers a name for every switched-off check, the platform check included."""
    import jax

    names = [str(c).split(":")[-1] for c in exp.disabled_safety_checks]
    for name in names:
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(library.LeakySum), platform="cpu")
    return names


def register_shipped_kernels__names_only(exp, library):
    """Reads the names but registers nothing: the consumer's call still finds no handler."""
    return [c.is_custom_call() for c in exp.disabled_safety_checks if c.is_custom_call()]
