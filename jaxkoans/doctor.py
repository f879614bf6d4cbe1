"""Is this machine ready for the course? Python, the pinned packages, JAX's devices, a compiler."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass

from jaxkoans import cbuild, course

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(.+)$")
DEVICE_PROBE = """
from jaxkoans import runtime
runtime.configure({devices})
import jax, jax.numpy as jnp
runtime.set_x64(True)
assert jnp.ones(1).dtype == jnp.float64, "float64 cannot be switched on"
print(jax.device_count())
"""
REINSTALL = "bash setup.sh  (reinstalls the pinned versions into .venv)"


@dataclass(frozen=True)
class Check:
    ok: bool
    line: str  # what was checked and found
    fix: str = ""  # what to do when it failed


def pinned_versions() -> dict[str, str]:
    project = tomllib.loads((course.REPO / "pyproject.toml").read_text(encoding="utf-8"))
    pins = (PIN.match(d) for d in project["project"]["dependencies"])
    return {m.group(1): m.group(2) for m in pins if m}


def _python() -> Check:
    version = sys.version.split()[0]
    return Check(
        sys.version_info >= (3, 12),
        f"Python {version} (需要 / needs ≥ 3.12)",
        "install Python 3.12 or newer (e.g. `pyenv install 3.12`), then rm -rf .venv && bash setup.sh",
    )


def _package(name: str, wanted: str) -> Check:
    try:
        have = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return Check(False, f"{name} 未安装 / not installed (pin {wanted})", REINSTALL)
    same = have == wanted
    return Check(same, f"{name} {have}" + ("" if same else f" ≠ pin {wanted}"), REINSTALL)


def _devices() -> Check:
    devices = max((c.devices for c in course.all_chapters()), default=1)
    line = f"JAX: {devices} CPU 设备 / CPU devices, float64 per chapter"
    try:
        probe = subprocess.run(
            [sys.executable, "-c", DEVICE_PROBE.format(devices=devices)],
            cwd=course.REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Check(False, line + " (timed out)", "run `python -c 'import jax'` to see what hangs")
    if probe.returncode == 0 and probe.stdout.strip() == str(devices):
        return Check(True, line)
    why = (probe.stderr.strip().splitlines() or [probe.stdout.strip()])[-1]
    return Check(False, f"{line}: {why}", "unset JAX_PLATFORMS and XLA_FLAGS, then " + REINSTALL)


def _compiler() -> Check:
    try:
        compiler = cbuild.find_compiler()  # the one chapter 05's kernels are built with
    except cbuild.CompilerNotFoundError:
        compiler = None
    return Check(
        compiler is not None,
        f"C++ 编译器 / compiler for jax.ffi (ch. 05): {compiler or 'missing'}",
        "install g++ (Debian/Ubuntu: apt install g++) or clang++ (macOS: xcode-select --install)",
    )


def checks() -> list[Check]:
    """Every requirement of the course, in the order a fix should happen."""
    found = [_python()]
    found += [_package(name, wanted) for name, wanted in pinned_versions().items()]
    return [*found, _devices(), _compiler()]
