"""Cheap fakes of chapter 02's test_compiler_options.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def without_fusion__plain_jit(fn):
    """No option at all: XLA fuses as usual."""
    return jax.jit(fn)


def without_fusion__every_pass_off(fn):
    """Switches off every pass: the simplifier does not run either."""
    return jax.jit(fn, compiler_options={"xla_disable_all_hlo_passes": True})


def without_fusion__optimisation_level_zero(fn):
    """Lowers the backend's optimisation level: the HLO fusion pass still runs."""
    return jax.jit(fn, compiler_options={"xla_backend_optimization_level": 0})


def hlo_before_fusion__lowered_text(fn, x, dump_dir):
    """The HLO XLA receives: before every pass, not just before fusion."""
    return jax.jit(fn).lower(x).as_text(dialect="hlo")


def hlo_before_fusion__compiled_text(fn, x, dump_dir):
    """The module after every pass: already fused."""
    return jax.jit(fn).lower(x).compile().as_text()


def hlo_before_fusion__compiled_without_fusion(fn, x, dump_dir):
    """Compiles with the fusion pass off and reads the final module: every op wrapped alone."""
    return without_fusion(fn).lower(x).compile().as_text()


def hlo_before_fusion__before_optimizations(fn, x, dump_dir):
    """Dumps, but reads the module before all optimisations."""
    jax.jit(fn, compiler_options={"xla_dump_to": str(dump_dir)}).lower(x).compile()
    (name,) = [n for n in os.listdir(dump_dir) if n.endswith(".before_optimizations.txt")]
    with open(os.path.join(dump_dir, name)) as file:
        return file.read()
