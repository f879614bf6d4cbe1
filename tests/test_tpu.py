"""The TPU opt-in (issue 57), checked on the CPU: setup.sh --tpu's pip command, doctor's TPU line,
the chip check of pytest --tpu with the CPU interpreter standing in for the chip, the precision
a float32 kernel is compiled with, and progress.py bench's code path."""

from __future__ import annotations

import base64
import functools
import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from jaxkoans.api import tpu

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "answers" / "07"


def _answer(file: str):
    spec = importlib.util.spec_from_file_location(f"tpu_test_{Path(file).stem}", ANSWERS / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _device(kind: str = "TPU v5 lite", cores: int = 1):
    return types.SimpleNamespace(device_kind=kind, num_cores=cores, platform="tpu")


# ---- setup.sh --------------------------------------------------------------------------------


def _setup(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "setup.sh"), *args], capture_output=True, text=True, timeout=60
    )


def test_setup_dry_run_installs_only_the_course_without_tpu():
    run = _setup("--dry-run")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        ".venv/bin/python -m pip install --quiet --disable-pip-version-check -e ."
    ]


def test_setup_tpu_installs_jax_tpu_at_the_pin_without_the_machines_libtpu():
    run = _setup("--tpu", "--dry-run")
    assert run.returncode == 0, run.stderr
    *_, tpu_line = run.stdout.splitlines()
    assert tpu_line.startswith("env -u PYTHONPATH -u TPU_LIBRARY_PATH .venv/bin/python -m pip")
    assert tpu_line.endswith(" jax[tpu]==0.12.0.1")


def test_setup_refuses_an_unknown_option():
    run = _setup("--tpuu")
    assert run.returncode == 2 and "--tpuu" in run.stderr and not run.stdout


# ---- jaxkoans.api.tpu ------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "asked"), [("1", True), ("yes", True), ("0", False), ("", False)])
def test_the_environment_variable_asks_for_the_tpu(monkeypatch, value, asked):
    monkeypatch.setenv(tpu.ENV, value)
    assert tpu.requested() is asked


def test_pallas_tpu_needs_libtpu_0_0_46():
    assert tpu.libtpu_older_than("0.0.42")
    assert not tpu.libtpu_older_than("0.0.46")
    assert not tpu.libtpu_older_than("0.0.50.1")
    assert not tpu.libtpu_older_than(None)


def test_one_core_chips_have_no_megacore():
    assert "TPU v4" in tpu.megacore_reason(_device("TPU v5 lite", 1))
    assert tpu.megacore_reason(_device("TPU v4", 2)) is None


def test_tolerances_follow_the_dtypes():
    import jax.numpy as jnp

    assert tpu.tolerance([jnp.float32]) == tpu.F32_TOLERANCE
    assert tpu.tolerance([jnp.float32, jnp.bfloat16]) == tpu.BF16_TOLERANCE
    assert tpu.relative_error([jnp.array([2.0, 4.0])], [jnp.array([2.0, 4.2])]) == pytest.approx(
        0.2 / 4.2
    )


def test_neutralise_sets_aside_a_shadowing_libtpu(monkeypatch, tmp_path):
    venv_lib = Path(tpu.sys.prefix) / "lib"
    own = tmp_path / "venv-site"
    (own / "libtpu").mkdir(parents=True)
    shadow = tmp_path / "shadow"
    (shadow / "libtpu").mkdir(parents=True)
    monkeypatch.setattr(tpu.sysconfig, "get_paths", lambda: {"purelib": str(own)})
    monkeypatch.setattr(tpu.sys, "path", [str(venv_lib), str(shadow)])
    monkeypatch.setenv("TPU_LIBRARY_PATH", "/opt/old/libtpu.so")
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    notes = tpu.neutralise()
    assert len(notes) == 2
    assert "TPU_LIBRARY_PATH" not in os.environ and os.environ["PYTHONPATH"] == ""
    assert tpu.sys.path == [str(venv_lib)]


def test_the_venvs_own_libtpu_named_by_import_jax_is_no_note(monkeypatch, tmp_path):
    """`import jax` sets TPU_LIBRARY_PATH to the venv's own libtpu (on the TPU v5e, doctor and
    `--tpu` said it was ignored): that is no libtpu of the machine's set aside."""
    own = tmp_path / "venv-site"
    (own / "libtpu").mkdir(parents=True)
    monkeypatch.setattr(tpu.sysconfig, "get_paths", lambda: {"purelib": str(own)})
    monkeypatch.setattr(tpu.sys, "path", [])
    monkeypatch.setenv("TPU_LIBRARY_PATH", str(Path(tpu.sys.prefix) / "lib" / "libtpu.so"))
    assert tpu.neutralise() == []


def test_no_tpu_on_this_machine_in_one_line(monkeypatch):
    monkeypatch.setattr(tpu, "chips_on_this_machine", lambda: 0)
    attached = tpu.attach()
    assert attached.device is None and attached.line == tpu.NO_TPU and "\n" not in tpu.NO_TPU


# ---- what the chip check skips, and the precision it compiles with -----------------------------


def test_why_not_on_chip():
    import jax
    import jax.numpy as jnp

    kernels, hardware, memory = _answer("test_kernels.py"), _answer("test_hardware.py"), _answer(
        "test_tpu_memory.py"
    )
    x = jnp.ones((8, 16), jnp.float32)
    refused = tpu.why_not_on_chip(kernels.matmul, (x, x.T), {"bm": 4, "bn": 4, "bk": 4}, _device())
    assert "not a TPU block" in refused
    b = jnp.ones((16, 256), jnp.bfloat16)
    legal = {"bm": 8, "bn": 128, "bk": 128}
    assert tpu.why_not_on_chip(hardware.matmul_bf16, (b, b.T), legal, _device()) is None
    y = jnp.ones((64, 128), jnp.float32)
    one_core = tpu.why_not_on_chip(memory.double_on_both_cores, (y,), {}, _device("TPU v5 lite", 1))
    assert "megacore" in one_core
    assert tpu.why_not_on_chip(memory.double_on_both_cores, (y,), {}, _device("TPU v4", 2)) is None
    gpu = _answer("test_gpu_flash_attention.py")
    q = jax.ShapeDtypeStruct((64, 32), jnp.float32)
    assert "GPU kernel" in tpu.why_not_on_chip(
        gpu.gpu_flash_attention_forward, (q, q, q), {"bq": 16, "bk": 16}, _device()
    )


def _mosaic_text(lowered) -> str:
    from jax.extend.mlir import ir

    module = lowered.compiler_ir("stablehlo")
    calls = [
        op
        for func in module.body.operations
        for region in func.regions
        for block in region.blocks
        for op in block.operations
        if op.operation.name == "stablehlo.custom_call"
    ]
    config = json.loads(ir.StringAttr(calls[0].attributes["backend_config"]).value_bytes)
    body = base64.b64decode(config["custom_call_config"]["body"])
    with module.context as context:
        context.allow_unregistered_dialects = True
        return str(ir.Module.parse(body))


@pytest.mark.parametrize(("dtype", "fp32"), [("float32", True), ("bfloat16", False)])
def test_a_float32_kernel_compiles_its_dots_at_full_precision(dtype, fp32):
    import jax
    from jax.sharding import AbstractDevice, AbstractMesh

    hardware = _answer("test_hardware.py")
    specs = [jax.ShapeDtypeStruct(s, dtype) for s in ((16, 256), (256, 128))]
    kernel = functools.partial(hardware.matmul_bf16, bm=8, bn=128, bk=128, interpret=False)
    device = AbstractDevice(device_kind="TPU v5 lite", num_cores=1, platform="tpu")
    with (
        tpu.precision([s.dtype for s in specs]),
        jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=device)),
    ):
        lowered = jax.jit(kernel).trace(*specs).lower(lowering_platforms=("tpu",))
    assert ("contract_precision<fp32>" in _mosaic_text(lowered)) is fp32


# ---- pytest --tpu, with the CPU interpreter standing in for the chip ----------------------------

FAKE_CHIP = '''
import os, types, jax
from jaxkoans.api import tpu
tpu.chips_on_this_machine = lambda: 1
tpu.attach = lambda: tpu.Attached(
    types.SimpleNamespace(device_kind="TPU v5 lite", num_cores=1), "TPU: a stand-in")
def on_chip(function, args, kwargs, device):
    out = function(*args, **{**kwargs, "interpret": True})
    return jax.tree.map(lambda x: x * (1 + float(os.environ.get("FAKE_DRIFT", "0"))), out)
tpu.on_chip = on_chip
'''


def _pytest_with_stand_in(tmp_path, drift: str, *args: str) -> str:
    (tmp_path / "fake_chip.py").write_text(FAKE_CHIP)
    env = os.environ | {"PYTHONPATH": str(tmp_path), "FAKE_DRIFT": drift}
    env.pop(tpu.ENV, None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "fake_chip", "-p", "no:randomly", "-q", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return run.stdout + run.stderr


def test_tpu_option_checks_each_kernel_call_on_the_chip(tmp_path):
    koan = "answers/07/test_kernels.py::test_the_kernels_run_in_the_tpu_interpreter_and_lower_for_tpu"
    same = _pytest_with_stand_in(tmp_path, "0", f"{koan}[row_softmax-float32]", "--tpu")
    assert "TPU: a stand-in" in same
    assert "row_softmax(float32[16, 128]): ✓ relative error 0.00e+00 (tolerance 2e-04)" in same
    drifted = _pytest_with_stand_in(tmp_path, "0.001", f"{koan}[row_softmax-float32]", "--tpu")
    assert "DiffersOnChip" in drifted and "✗ relative error 1.00e-03" in drifted


def test_the_megacore_koan_is_skipped_on_the_chip_of_one_core(tmp_path):
    koan = "answers/07/test_tpu_memory.py::test_megacore_splits_the_core_parallel_axis"
    out = _pytest_with_stand_in(tmp_path, "0", koan, "-k", "float32", "--tpu")
    assert "double_on_both_cores(float32[64, 128]): 在芯片上跳过 / skipped on the chip" in out
    assert "CORE_PARALLEL over two cores needs a megacore chip (TPU v4, TPU v5p)" in out


def test_tpu_option_without_a_tpu_says_so_in_one_line():
    env = os.environ.copy()
    env.pop(tpu.ENV, None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "--tpu",
         "answers/07/test_programming_model.py::test_kernel_writes_its_outputs_through_refs"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.stdout.count("no TPU on this machine") == 1, run.stdout


# ---- doctor and bench --------------------------------------------------------------------------


def _doctor_with(monkeypatch, found: dict):
    from jaxkoans.course import Course
    from jaxkoans.learner import doctor

    monkeypatch.setattr(tpu, "chips_on_this_machine", lambda: 1)
    answer = subprocess.CompletedProcess([], 0, stdout=json.dumps(found) + "\n", stderr="")
    monkeypatch.setattr(doctor.subprocess, "run", lambda *a, **k: answer)
    return doctor._tpu(Course.here())


def test_doctor_names_the_chip_the_libtpu_and_pallas(monkeypatch):
    chip = "TPU v5 lite, 1 TensorCore per device, libtpu 0.0.50.1"
    good = _doctor_with(monkeypatch, {"chip": chip, "libtpu": "0.0.50.1", "pallas": True})
    assert good.ok and chip in good.line and "compiles" in good.line
    old = _doctor_with(monkeypatch, {"chip": chip, "libtpu": "0.0.42", "pallas_error": "x"})
    assert not old.ok and "0.0.46" in old.line and "setup.sh --tpu" in old.fix


def test_doctor_without_a_tpu_says_so(monkeypatch):
    from jaxkoans.course import Course
    from jaxkoans.learner import doctor

    monkeypatch.setattr(tpu, "chips_on_this_machine", lambda: 0)
    check = doctor._tpu(Course.here())
    assert check.ok and "none on this machine" in check.line


def test_bench_without_a_tpu_exits_0_and_the_cpu_path_runs():
    env = {k: v for k, v in os.environ.items() if k != tpu.ENV}
    none = subprocess.run(
        [sys.executable, "progress.py", "bench", "07"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert none.returncode == 0 and "no TPU on this machine" in none.stdout
    run = subprocess.run(
        [sys.executable, "progress.py", "bench", "07", "--cpu-interpret", "--answers",
         "--repeats", "1", "--only", "row_softmax", "--only", "matmul_bf16"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == "| kernel | dtype | shape | compiles | error | kernel ms | XLA ms |"
    assert [r.split(" | ")[0:4] for r in rows[1:]] == [
        ["| matmul_bf16", "bfloat16", "256x256 256x256", "yes"],
        ["| row_softmax", "float32", "16x128", "yes"],
    ]
