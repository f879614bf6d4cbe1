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
