"""A real TPU beside the course's CPU: found, described, and a kernel compared on it.

The course computes on the CPU. With `pytest --tpu` (or JAXKOANS_TPU=1, which watch and
progress pass on to their pytest runs) the harness adds the TPU as a second platform: the CPU
stays JAX's default device, so every koan computes as in the CPU course, and the chip is used
only where a check puts arrays on it (`on_chip`).

Precision on the chip: a TPU float32 dot runs in bfloat16 passes by default, so a float32
kernel is compiled under `jax.default_matmul_precision("highest")` (each in-kernel dot lowers
with `#tpu.contract_precision<fp32>`) and held to F32_TOLERANCE; a kernel with a 16-bit float
input or output runs as written and is held to BF16_TOLERANCE. Both are relative to the
largest magnitude of the reference: `max|chip - reference| / max|reference|`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ENV = "JAXKOANS_TPU"  # "1": check chapter 07's kernels on a TPU too (pytest --tpu sets it)
F32_TOLERANCE = 2e-4  # float32 kernels, dots at Precision.HIGHEST
BF16_TOLERANCE = 2e-2  # a 16-bit float input or output: about two bfloat16 roundings (2**-7 each)
MEGACORE = ("TPU v4", "TPU v5p")  # two TensorCores per device; v5e and v6e have one
LIBTPU_DISTRIBUTIONS = ("libtpu", "libtpu-nightly")
NO_TPU = "没有 TPU / no TPU on this machine: the CPU course runs (--tpu ignored)"


def requested() -> bool:
    """Whether this run asked for the TPU (JAXKOANS_TPU=1, or pytest --tpu)."""
    return os.environ.get(ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def chips_on_this_machine() -> int:
    """TPU chips on this machine's PCI bus, read without starting a JAX backend (0 when none)."""
    try:
        from jax._src import hardware_utils  # no public reader in 0.12

        return int(hardware_utils.num_available_tpu_chips_and_device_id()[0])
    except Exception:  # not Linux, an unreadable /sys: no TPU we can use
        return 0


def libtpu_version() -> str | None:
    """The installed libtpu's version (the venv's, or whichever Python imports first)."""
    for name in LIBTPU_DISTRIBUTIONS:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _inside_venv(path: str) -> bool:
    return Path(path).resolve().is_relative_to(Path(sys.prefix).resolve())


def neutralise() -> list[str]:
    """Keep a libtpu of the machine's own (a directory on PYTHONPATH, TPU_LIBRARY_PATH) from
    shadowing the one `bash setup.sh --tpu` installed into this venv, in this process and its
    children; one note per thing set aside. Nothing changes when the venv has no libtpu."""
    own = Path(sysconfig.get_paths()["purelib"]) / "libtpu"
    if not own.is_dir():
        return []
    notes = []
    # `import jax` sets it to the venv's own libtpu (libtpu's configure_library_path): no note
    named = os.environ.pop("TPU_LIBRARY_PATH", None)
    if named is not None and not _inside_venv(named):
        notes.append("TPU_LIBRARY_PATH ignored: the venv's libtpu is used")
    shadows = [p for p in sys.path if p and not _inside_venv(p) and (Path(p) / "libtpu").is_dir()]
    for entry in shadows:
        sys.path.remove(entry)
        notes.append(f"libtpu in {entry} (PYTHONPATH) ignored: the venv's libtpu is used")
    if shadows and os.environ.get("PYTHONPATH"):
        kept = [p for p in os.environ["PYTHONPATH"].split(os.pathsep) if p not in shadows]
        os.environ["PYTHONPATH"] = os.pathsep.join(kept)
    loaded = sys.modules.get("libtpu")
    if loaded is not None and not _inside_venv(getattr(loaded, "__file__", "") or "/"):
        for name in [n for n in sys.modules if n == "libtpu" or n.startswith("libtpu.")]:
            del sys.modules[name]  # imported from the shadow at `import jax`: import it again
    return notes


def libtpu_older_than(version: str | None, least: tuple[int, ...] = (0, 0, 46)) -> bool:
    """Pallas TPU in JAX 0.12 refuses a libtpu older than 0.0.46 (its own message)."""
    if not version:
        return False
    numbers = []
    for part in version.split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        numbers.append(int(digits or 0))
    return tuple(numbers) < least


@dataclass(frozen=True)
class Attached:
    device: object | None  # the first TPU device, or None
    line: str  # one line for the learner: the chip, or why there is none


def attach() -> Attached:
    """Add the TPU after the CPU as JAX's platforms (the CPU stays the default device) and start
    it. Call after the harness configured JAX and before anything computed. No TPU: one line
    saying so, and JAX keeps the CPU alone."""
    import jax

    if not chips_on_this_machine():
        return Attached(None, NO_TPU)
    notes = neutralise()
    jax.config.update("jax_platforms", "cpu,tpu")  # the first platform is the default backend
    try:
        device = jax.devices("tpu")[0]
    except RuntimeError as error:  # JAX keeps the CPU backend it started before the failure
        why = str(error).splitlines()[0][:200]
        return Attached(None, f"TPU 无法启动 / the TPU did not start ({why}): the CPU course runs")
    return Attached(device, "; ".join(["TPU: " + describe(device), *notes]))


def describe(device) -> str:
    """'TPU v5 lite, 1 TensorCore per device, libtpu 0.0.50.1'."""
    cores = getattr(device, "num_cores", None)
    parts = [str(device.device_kind)]
    if cores:
        parts.append(f"{cores} TensorCore{'s' if cores != 1 else ''} per device")
    parts.append(f"libtpu {libtpu_version() or '?'}")
    return ", ".join(parts)


def megacore_reason(device) -> str | None:
    """Why a CORE_PARALLEL axis of 2 cannot run on `device`, or None when it can."""
    cores = getattr(device, "num_cores", 1) or 1
    if cores >= 2:
        return None
    return (
        f"{device.device_kind} 每个设备只有 {cores} 个 TensorCore / has {cores} TensorCore per "
        f"device: CORE_PARALLEL over two cores needs a megacore chip ({', '.join(MEGACORE)})"
    )


def is_low_precision(dtype) -> bool:
    import jax.numpy as jnp

    return jnp.issubdtype(dtype, jnp.floating) and jnp.dtype(dtype).itemsize < 4


def tolerance(dtypes) -> float:
    """The tolerance of a kernel whose inputs and outputs have `dtypes` (module docstring)."""
    return BF16_TOLERANCE if any(is_low_precision(d) for d in dtypes) else F32_TOLERANCE


def precision(dtypes):
    """The matmul precision a kernel is compiled with on the chip (module docstring)."""
    import jax

    if any(is_low_precision(d) for d in dtypes):
        return contextlib.nullcontext()
    return jax.default_matmul_precision("highest")


def relative_error(result, reference) -> float:
    """max|result - reference| / max|reference| over every leaf, in float64 on the host."""
    import jax
    import numpy as np

    worst = 0.0
    for got, want in zip(jax.tree.leaves(result), jax.tree.leaves(reference), strict=True):
        got = np.asarray(got, dtype=np.float64)
        want = np.asarray(want, dtype=np.float64)
        if got.shape != want.shape:
            return float("inf")
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        error = float(np.max(np.abs(got - want))) if want.size else 0.0
        worst = max(worst, error / scale if scale else error)
    return worst


def on_chip(function, args: tuple, kwargs: dict, device):
    """function(*args, **kwargs, interpret=False) compiled on `device` (arrays moved there),
    at the precision its dtypes call for; the result is waited for."""
    import jax

    def place(leaf):
        return jax.device_put(leaf, device) if hasattr(leaf, "dtype") else leaf

    args, kwargs = jax.tree.map(place, (args, kwargs))
    dtypes = [leaf.dtype for leaf in jax.tree.leaves((args, kwargs)) if hasattr(leaf, "dtype")]
    with jax.default_device(device), precision(dtypes):
        return jax.block_until_ready(function(*args, **{**kwargs, "interpret": False}))


def _illegal_block(block_mapping) -> str | None:
    """Mosaic's rule for a block in VMEM: each of its last two dimensions is divisible by
    (8, 128) or equals the array's dimension; None when it holds (or the block is not in VMEM)."""
    space = str(getattr(block_mapping.transformed_block_aval, "memory_space", "") or "")
    if any(name in space.lower() for name in ("any", "smem", "hbm", "semaphore")):
        return None
    sizes = [getattr(d, "block_size", d) for d in block_mapping.block_shape]
    sizes = [1 if d is None else d for d in sizes]
    array = tuple(block_mapping.array_aval.shape)
    for position, unit in ((-1, 128), (-2, 8)):
        if len(sizes) < -position:
            continue
        size, whole = sizes[position], array[position]
        if not isinstance(size, int) or (size % unit and size != whole):
            return f"block {tuple(sizes)} of an array {array}"
    return None


def why_not_on_chip(function, args: tuple, kwargs: dict, device) -> str | None:
    """Why this kernel call is not one to compile on `device` (None: compile it): a GPU
    kernel, a block shape Mosaic refuses (the koan's shape, not the learner's choice), or
    a CORE_PARALLEL axis on a one-core chip."""
    import functools

    from jaxkoans.api import program

    unmoved = functools.partial(function, **{**kwargs, "interpret": False})
    calls = program.equations("pallas_call", unmoved, *args)
    if not calls:
        return "没有 pallas_call / no pallas_call"
    for call in calls:
        params = call.params.get("compiler_params")
        module = type(params).__module__ if params is not None else ""
        if params is not None and not module.startswith("jax._src.pallas.mosaic."):
            return f"GPU 内核 / a GPU kernel ({module})"
        for mapping in call.params["grid_mapping"].block_mappings:
            illegal = _illegal_block(mapping)
            if illegal:
                return f"TPU 不接受这个块 / not a TPU block: {illegal}"
        semantics = getattr(params, "dimension_semantics", None) or ()
        semantics = [getattr(s, "value", s) for s in semantics]
        if "core_parallel" in semantics:
            reason = megacore_reason(device)
            if reason:
                return reason
    return None
