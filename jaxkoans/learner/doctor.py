"""Is this machine ready for the course? Python, the pinned packages, JAX's devices, a compiler,
and a TPU where the machine has one."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass

from packaging.markers import Marker  # pytest's own dependency

from jaxkoans.api import cbuild, tpu
from jaxkoans.course import Course

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(.+)$")
DEVICE_PROBE = """
from jaxkoans.plugin import runtime
runtime.configure({devices})
import jax, jax.numpy as jnp
runtime.set_x64(True)
assert jnp.ones(1).dtype == jnp.float64, "float64 cannot be switched on"
print(jax.device_count())
"""
REINSTALL = "bash setup.sh  (reinstalls the pinned versions into .venv)"
# The chip, its libtpu, and one trivial kernel compiled by Mosaic (interpret=False) and run.
TPU_PROBE = """
import json
from jaxkoans.api import tpu
notes = tpu.neutralise()  # before JAX imports libtpu
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
jax.config.update("jax_platforms", "tpu")
device = jax.devices("tpu")[0]
found = {"chip": tpu.describe(device), "libtpu": tpu.libtpu_version(), "notes": notes}
def add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0
try:
    x = jnp.zeros((8, 128), jnp.float32)
    y = pl.pallas_call(add_one, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=False)(x)
    found["pallas"] = bool((jax.device_get(y) == 1.0).all())
except Exception as error:
    found["pallas_error"] = (str(error).strip().splitlines() or [type(error).__name__])[-1][:300]
print(json.dumps(found))
"""
TPU_FIX = "bash setup.sh --tpu  (jax[tpu] with its libtpu into .venv)"


@dataclass(frozen=True)
class Check:
    ok: bool
    line: str  # what was checked and found
    fix: str = ""  # what to do when it failed


def _packages(checkout: Course) -> list[Check]:
    """Each pinned dependency that applies to this machine (a pin with an environment marker,
    `; sys_platform == 'linux'`, only where the marker holds: pip's rules) against its install."""
    project = tomllib.loads((checkout.root / "pyproject.toml").read_text(encoding="utf-8"))
    found = []
    for dependency in project.get("project", {}).get("dependencies", []):
        requirement, _, marker = dependency.partition(";")
        match = PIN.match(requirement.strip())
        if not match or (marker.strip() and not Marker(marker.strip()).evaluate()):
            continue
        name, wanted = match.group(1), match.group(2).strip()
        try:
            have = importlib.metadata.version(name)
            line = f"{name} {have}" + ("" if have == wanted else f" ≠ pin {wanted}")
        except importlib.metadata.PackageNotFoundError:
            have, line = None, f"{name} 未安装 / not installed (pin {wanted})"
        found.append(Check(have == wanted, line, REINSTALL))
    return found


def _probe(checkout: Course, code: str, timeout_s: int) -> subprocess.CompletedProcess | None:
    """`code` run by this Python in the course; None when it did not end in `timeout_s`."""
    try:
        return subprocess.run(
            [sys.executable, "-c", code], cwd=checkout.root, capture_output=True, text=True,
            timeout=timeout_s, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None


def _devices(checkout: Course) -> Check:
    devices = max((c.devices for c in checkout.chapters()), default=1)
    line = f"JAX: {devices} CPU 设备 / CPU devices, float64 per chapter"
    probe = _probe(checkout, DEVICE_PROBE.format(devices=devices), 120)
    if probe is None:
        return Check(False, line + " (timed out)", "run `python -c 'import jax'` to see what hangs")
    if probe.returncode == 0 and probe.stdout.strip() == str(devices):
        return Check(True, line)
    why = (probe.stderr.strip().splitlines() or [probe.stdout.strip()])[-1]
    return Check(False, f"{line}: {why}", "unset JAX_PLATFORMS and XLA_FLAGS, then " + REINSTALL)


def _compiler(checkout: Course) -> Check:
    """A compiler on PATH that really builds chapter 05's kernels (a broken one would read as
    the learner's wrong answer); the library it builds is kept for the koans."""
    install = (
        "install g++ (Debian/Ubuntu: apt install g++) or clang++ (macOS: xcode-select --install)"
    )
    line = "C++ 编译器 / compiler for jax.ffi (ch. 05)"
    try:
        compiler = cbuild.find_compiler()  # the one chapter 05's kernels are built with
    except cbuild.CompilerNotFoundError:
        return Check(False, f"{line}: missing", install)
    sources = sorted((checkout.root / "csrc").glob("*.cc"))
    built = checkout.root / "build" / "ffi"  # where the koans look first; a read-only course: /tmp
    built = built if os.access(checkout.root, os.W_OK) else cbuild.fallback_dir()
    try:
        for source in sources[:1]:
            cbuild.build(source, build_dir=built)
    except (cbuild.BuildError, OSError, subprocess.TimeoutExpired) as error:
        why = (str(error).strip().splitlines() or [""])[-1]
        line += f": {compiler} 无法编译 / cannot build {sources[0].name}: {why}"
        return Check(False, line, "repair or reinstall the compiler, or " + install)
    return Check(True, f"{line}: {compiler}" + (" (test build ✓)" if sources else ""))


def _tpu(checkout: Course) -> Check:
    """The TPU, where this machine has one: the chip, the libtpu, whether Pallas compiles."""
    if not tpu.chips_on_this_machine():
        return Check(True, "TPU: 没有 / none on this machine (the course runs on the CPU)")
    probe = _probe(checkout, TPU_PROBE, 300)
    if probe is None:
        return Check(False, "TPU: 启动超时 / did not start in 300 s", TPU_FIX)
    try:
        found = json.loads(probe.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        why = (probe.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return Check(False, f"TPU: 无法启动 / JAX cannot start it: {why}", TPU_FIX)
    line = f"TPU: {found['chip']}" + "".join(f"; {note}" for note in found.get("notes", []))
    if tpu.libtpu_older_than(found.get("libtpu")):
        return Check(False, f"{line}: Pallas needs libtpu >= 0.0.46", TPU_FIX)
    if found.get("pallas"):
        return Check(True, f"{line}; pallas_call 编译运行 / compiles and runs (interpret=False)")
    why = found.get("pallas_error", "a wrong result")
    return Check(False, f"{line}; pallas_call 不能编译 / does not compile: {why}", TPU_FIX)


def add_arguments(parser) -> None:  # no options
    pass


def run(args) -> int:
    """Every requirement of the course, in the order a fix should happen."""
    checkout = args.checkout  # progress.py itself refuses a Python older than 3.12: named only
    found = [Check(True, f"Python {sys.version.split()[0]} (需要 / needs ≥ 3.12)")]
    found += [*_packages(checkout), _devices(checkout), _compiler(checkout), _tpu(checkout)]
    for check in found:
        print(("✅ " if check.ok else "❌ ") + check.line)
        if not check.ok and check.fix:
            print(f"   → {check.fix}")
    return 0 if all(c.ok for c in found) else 1
