"""Is this machine ready for the course? Python, the pinned packages, JAX's devices, a compiler."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib

from jaxkoans import course

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(.+)$")
DEVICE_PROBE = """
from jaxkoans import runtime
runtime.configure({devices})
import jax, jax.numpy as jnp
runtime.set_x64(True)
assert jnp.ones(1).dtype == jnp.float64
print(jax.device_count())
"""


def pinned_versions() -> dict[str, str]:
    project = tomllib.loads((course.REPO / "pyproject.toml").read_text(encoding="utf-8"))
    pins = (PIN.match(d) for d in project["project"]["dependencies"])
    return {m.group(1): m.group(2) for m in pins if m}


def checks() -> list[tuple[bool, str]]:
    """(ok, bilingual line) for each requirement of the course."""
    found = []
    python_ok = sys.version_info >= (3, 12)
    found.append((python_ok, f"Python {sys.version.split()[0]} (≥ 3.12 需要 / needed)"))
    for name, wanted in pinned_versions().items():
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found.append(
                (False, f"{name} 未安装 / not installed (pin {wanted}): run bash setup.sh")
            )
            continue
        found.append(
            (have == wanted, f"{name} {have}" + ("" if have == wanted else f" ≠ pin {wanted}"))
        )
    devices = max((c.devices for c in course.all_chapters()), default=1)
    try:
        probe = subprocess.run(
            [sys.executable, "-c", DEVICE_PROBE.format(devices=devices)],
            cwd=course.REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        ok = probe.returncode == 0 and probe.stdout.strip() == str(devices)
        detail = probe.stdout.strip() or probe.stderr.strip().splitlines()[-1:]
    except subprocess.TimeoutExpired:
        ok, detail = False, "timed out"
    found.append((ok, f"JAX: {devices} CPU 设备 / CPU devices and float64 per chapter ({detail})"))
    compiler = shutil.which("g++") or shutil.which("clang++")
    found.append(
        (
            compiler is not None,
            f"C++ 编译器 / compiler for jax.ffi (ch. 05): {compiler or 'missing'}",
        )
    )
    return found
