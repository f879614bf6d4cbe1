"""JAX as the course needs it: the CPU platform, enough devices, float64 per chapter.

The harness owns these settings. Values a learner's environment sets for them
(JAX_PLATFORMS, JAX_ENABLE_X64, JAX_DISABLE_JIT, JAX_NUM_CPU_DEVICES, a device count in
XLA_FLAGS) are overridden and named in pytest's header, so they can never change a result.
"""

from __future__ import annotations

import os
import re

_DEVICE_FLAG = re.compile(r"--xla_force_host_platform_device_count=(\d+)")


class SetupError(RuntimeError):
    """JAX cannot be configured as the course needs; the message says why and what to do."""


def environment_overrides(devices: int) -> list[str]:
    """One line for each setting of the learner's environment that the harness overrides."""
    notes = []
    for name in ("JAX_PLATFORMS", "JAX_ENABLE_X64", "JAX_DISABLE_JIT", "JAX_NUM_CPU_DEVICES"):
        if os.environ.get(name):
            notes.append(f"{name}={os.environ[name]} ignored (the course sets it per chapter)")
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
    """Before JAX's first computation: CPU only, `devices` CPU devices, jit on, float32."""
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
    jax.config.update("jax_disable_jit", False)
    jax.config.update("jax_enable_x64", False)


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
