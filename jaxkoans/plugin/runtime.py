"""JAX as the course needs it: the CPU platform, enough devices, float64 per chapter, and every
process-wide flag at the value the answers were run with. The learner's environment cannot change
these (what it sets is overridden and named in pytest's header); what a koan changes with
`jax.config.update` is put back after it, so one koan's `jax_debug_nans` cannot fail the next.
"""

from __future__ import annotations

import os
import re

_DEVICE_FLAG = re.compile(r"--xla_force_host_platform_device_count=(\d+)")

# Process-wide flags that change what a koan computes, raises or prints, at the values every
# answer was run with (JAX 0.12's defaults, except colour: jaxpr text must not depend on
# whether stdout is a terminal). tests/test_harness.py checks them against a clean process.
COURSE_FLAGS: dict[str, object] = {
    "jax_enable_x64": False,  # then per chapter (chapter.toml's x64)
    **dict.fromkeys(("jax_disable_jit", "jax_debug_nans", "jax_debug_infs", "jax_log_compiles",
                     "jax_explain_cache_misses", "jax_check_tracer_leaks", "jax_enable_checks",
                     "jax_debug_key_reuse", "jax_enable_custom_prng", "jax_softmax_custom_jvp",
                     "jax_disable_most_optimizations", "jax_log_checkpoint_residuals",
                     "jax_pprint_use_color"), False),
    **dict.fromkeys(("jax_default_matmul_precision", "jax_transfer_guard"), None),
    "jax_numpy_rank_promotion": "allow", "jax_numpy_dtype_promotion": "standard",
    "jax_default_prng_impl": "threefry2x32", "jax_threefry_partitionable": True,
    "jax_legacy_prng_key": "allow", "jax_random_seed_offset": 0, "jax_traceback_filtering": "auto",
}  # fmt: skip
COLOUR_DEFAULT = True  # JAX's own default for jax_pprint_use_color (colour on a terminal)
# Set once before the backend starts; a koan cannot change them, so they are never restored.
STARTUP_ONLY = frozenset({"jax_platforms", "jax_platform_name", "jax_num_cpu_devices"})
# Compiling is most of a koan's time, and LLVM's optimisation most of that: the course compiles
# at LLVM level 0 (XLA's HLO passes, hence every jaxpr, HLO text, cost and memory analysis a koan
# reads, are unchanged; only machine code is less tuned). A learner's own XLA_FLAGS come after it
# and win. Set in the environment, so the koans' own subprocesses compile the same way.
FAST_COMPILE = "--xla_backend_optimization_level=0"


class SetupError(RuntimeError):
    """JAX cannot be configured as the course needs; the message says why and what to do."""


def environment_overrides(devices: int) -> list[str]:
    """One line for each setting of the learner's environment that the harness overrides."""
    notes = []
    for name in ("JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES"):
        if os.environ.get(name):
            notes.append(f"{name}={os.environ[name]} ignored (the course sets it)")
    for flag, value in COURSE_FLAGS.items():
        variable = flag.upper()
        if os.environ.get(variable):
            why = "per chapter" if flag == "jax_enable_x64" else f"to {value!r} for every koan"
            notes.append(f"{variable}={os.environ[variable]} ignored (the course sets it {why})")
    match = _DEVICE_FLAG.search(os.environ.get("XLA_FLAGS", ""))
    if match and int(match.group(1)) != devices:
        notes.append(f"XLA_FLAGS device count {match.group(1)} ignored: the course uses {devices}")
    rest = _DEVICE_FLAG.sub("", os.environ.get("XLA_FLAGS", "")).strip()
    if rest:
        notes.append(
            f"XLA_FLAGS={rest!r} is in effect: HLO and timings may differ from the answers"
        )
    return notes


def configure(devices: int) -> None:
    """Before JAX's first computation: CPU only, `devices` CPU devices, COURSE_FLAGS."""
    import jax

    try:
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", devices)
    except RuntimeError as error:  # a backend was initialised before the harness ran
        raise SetupError(
            "JAX 在课程设置之前已经初始化 / JAX was initialised before the koans harness could "
            f"configure {devices} CPU devices (something computed with JAX at import time or in "
            f"another plugin). Original error: {error}"
        ) from error
    for flag, value in COURSE_FLAGS.items():
        jax.config.update(flag, value)
    theirs = os.environ.get("XLA_FLAGS", "")  # before XLA reads them (its first backend)
    if FAST_COMPILE not in theirs.split():
        os.environ["XLA_FLAGS"] = f"{FAST_COMPILE} {theirs}".strip()


def snapshot() -> dict[str, object]:
    import jax

    return dict(jax.config.values)  # every JAX config value as it is now, for `restore`


def restore(saved: dict[str, object]) -> list[str]:
    """Put back every JAX config value that changed since `saved`; returns their names."""
    import jax

    changed = []
    for name, value in jax.config.values.items():
        before = saved.get(name, value)
        try:
            equal = before is value or bool(before == value)
        except Exception:  # an object whose == is elementwise or raises: treat as changed
            equal = False
        if name not in STARTUP_ONLY and not equal:
            jax.config.update(name, before)
            changed.append(name)
    return changed


def require_devices(needed: int) -> None:
    """Fail clearly, never compute wrongly, when fewer than `needed` devices exist."""
    import jax

    have = jax.device_count()
    if have < needed:
        raise SetupError(
            f"本章需要 {needed} 个 CPU 设备，当前只有 {have} 个 / this chapter needs {needed} CPU "
            f"devices but JAX has {have}: JAX was initialised before the harness configured it."
        )


def set_x64(enabled: bool) -> None:
    import jax

    jax.config.update("jax_enable_x64", enabled)
