"""Cheap fakes of chapter 02's test_other_platforms.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def gelu__exact_everywhere(x):
    """Right on this CPU, but the TPU program gets the erf form too."""
    return jax.nn.gelu(x, approximate=False)


def gelu__python_decides_while_tracing(x):
    """Asks this machine's backend while tracing, which is always "cpu" here."""
    if jax.default_backend() == "tpu":
        return jax.nn.gelu(x, approximate=True)
    return jax.nn.gelu(x, approximate=False)


def export_for_cpu_and_nvidia__this_machine_only(f, *args):
    """The default: exported for the platform JAX runs on here, the CPU alone."""
    return export.export(jax.jit(f))(*args)


def export_for_cpu_and_nvidia__gpu_only(f, *args):
    """An artifact for GPUs alone: it refuses to run on this CPU."""
    return export.export(jax.jit(f), platforms=("cuda",))(*args)


def export_for_cpu_and_nvidia__amd_gpus(f, *args):
    """"rocm" is AMD's platform: hipSOLVER calls, no cuSOLVER."""
    return export.export(jax.jit(f), platforms=("cpu", "rocm"))(*args)


def export_for_cpu_and_nvidia__lowered_not_exported(f, *args):
    """The right program, but a Lowered: nothing to serialize, no platforms to read."""
    return jax.jit(f).trace(*args).lower(lowering_platforms=("cpu", "cuda"))
