"""pytest --tpu (or JAXKOANS_TPU=1): each kernel koan also runs the learner's kernel compiled on
a TPU, at the koan's own inputs, against what the interpreter computed (which the koan's asserts
have just checked): each call of a TODO kernel taking `interpret` is recorded (a call made while
tracing by its shapes, run on fresh normal inputs), then compiled with interpret=False on the chip
and compared at jaxkoans.api.tpu's tolerance. A call the chip cannot take for a reason not the
learner's (a block shape Mosaic refuses, a GPU kernel, CORE_PARALLEL on one core) is skipped,
saying why. Without a TPU, one line says so and the CPU course runs.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os

import pytest

from jaxkoans.api import tpu
from jaxkoans.plugin.report import TODOS

ATTACHED = pytest.StashKey[tpu.Attached]()
NOTES = pytest.StashKey[list[str]]()  # what neutralise() set aside before JAX was imported
MAX_CALLS = 2  # distinct argument signatures checked per kernel and koan
PROPERTY = "koan_tpu"  # report.user_properties: one line per kernel call checked or skipped
ONE_PROCESS = (
    "一个进程打开 TPU / one process opens the TPU: under -n only worker gw0's koans are compiled "
    "on the chip (run without -n to check them all)"
)


class DiffersOnChip(AssertionError):
    """The learner's kernel, compiled on the TPU, failed or differs from the interpreter."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("jax-koans").addoption(
        "--tpu", action="store_true",
        help="also run each kernel koan's kernel compiled on a TPU (JAXKOANS_TPU=1 does the same)",
    )  # fmt: skip


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Before anything imports JAX (the harness's configure does): --tpu into the environment
    (xdist workers and a koan's own subprocesses see it too), a shadowing libtpu set aside."""
    if config.getoption("tpu", False):
        os.environ[tpu.ENV] = "1"
    if tpu.requested():
        config.stash[NOTES] = tpu.neutralise()


def pytest_configure(config: pytest.Config) -> None:
    """After the harness set JAX to the CPU (its tryfirst configure): add the TPU if asked."""
    if config.getoption("tpu", False):
        os.environ[tpu.ENV] = "1"  # also when pytest_cmdline_main did not run (pytester)
    workers = config.getoption("dist", "no") != "no" and config.getoption("tx", None)
    if not tpu.requested() or (workers and not hasattr(config, "workerinput")):
        return  # the xdist controller of `-n 2`: its workers run the koans and attach the TPU
    worker = getattr(config, "workerinput", {}).get("workerid", "gw0")
    if worker != "gw0":  # one process opens the TPU: the first xdist worker
        config.stash[ATTACHED] = tpu.Attached(None, f"{worker}: {ONE_PROCESS}")
        return
    attached = tpu.attach()
    notes = [attached.line, *config.stash.get(NOTES, [])]
    config.stash[ATTACHED] = tpu.Attached(attached.device, "; ".join(notes))


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item):
    """Record the kernel calls of a koan (innermost, so the contracts see the learner's own
    functions); once it passes, compare each on the chip."""
    attached = item.config.stash.get(ATTACHED, None)
    module = getattr(item, "module", None)
    if attached is None or attached.device is None or module is None:
        return (yield)
    kernels = _kernels(item, module)
    calls: dict[str, list] = {name: [] for name in kernels}
    watched = {name: _watched(function, calls[name]) for name, function in kernels.items()}
    for name, function in watched.items():
        setattr(module, name, function)
    tables = _swap_partials(module, {id(f): watched[n] for n, f in kernels.items()})
    try:
        outcome = yield
    finally:
        for name, function in kernels.items():
            setattr(module, name, function)
        for table, saved in tables:
            table.update(saved)
    checked = [_check(n, kernels[n], r, attached.device) for n, rs in calls.items() for r in rs]
    item.user_properties += [(PROPERTY, line) for line, _ in checked]
    failures = [line for line, failed in checked if failed]
    if failures:
        raise DiffersOnChip(
            f"在 TPU 上编译后不对 / compiled on the TPU ({attached.device.device_kind}) your kernel "
            "does not match what it computed in the interpreter:\n"
            + "\n".join(f"  - {line}" for line in failures)
        )
    return outcome


def _kernels(item: pytest.Item, module) -> dict[str, object]:
    """The koan file's TODO functions (as shipped: hooks) that take `interpret`."""
    found = {}
    for name in item.stash.get(TODOS, []):
        function = getattr(module, name, None)
        with contextlib.suppress(TypeError, ValueError):
            if callable(function) and "interpret" in inspect.signature(function).parameters:
                found[name] = function
    return found


def _swap_partials(module, watched: dict[int, object]) -> list[tuple[dict, dict]]:
    """A module-level table of cases (`{name: (functools.partial(kernel, bm=8), shapes, …)}`)
    holds the kernel it captured at import: point its partials at the watched kernel too.
    Returns (table, its entries as they were) to put back."""

    def swapped(value):
        if isinstance(value, functools.partial) and id(value.func) in watched:
            return functools.partial(watched[id(value.func)], *value.args, **value.keywords)
        if type(value) in (tuple, list):
            new = [swapped(v) for v in value]
            if any(a is not b for a, b in zip(new, value, strict=True)):
                return type(value)(new)
        return value

    saved = []
    for table in vars(module).values():
        if not isinstance(table, dict) or table is vars(module):
            continue
        changed = {k: v for k, v in table.items() if swapped(v) is not v}
        if changed:
            saved.append((table, changed))
            table.update({k: swapped(v) for k, v in changed.items()})
    return saved


def _watched(function, calls: list):
    """`function`, keeping (args, kwargs, result) of its first MAX_CALLS distinct signatures, or
    (shapes, kwargs, None) for a call made while tracing."""
    import jax
    import jax.numpy as jnp

    def signature(args, kwargs) -> str:
        def spec(leaf):
            return (tuple(leaf.shape), str(leaf.dtype)) if hasattr(leaf, "dtype") else leaf

        return repr(jax.tree.map(spec, (args, {k: v for k, v in kwargs.items() if k != "interpret"})))  # fmt: skip

    def watched(*args, **kwargs):
        result = function(*args, **kwargs)
        if len(calls) >= MAX_CALLS or kwargs.get("interpret", True) is False:
            return result
        record = (args, kwargs, result)
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(record)):
            arrays = [x for x in jax.tree.leaves((args, kwargs)) if hasattr(x, "dtype")]
            if any(not jnp.issubdtype(x.dtype, jnp.floating) for x in arrays):
                return result  # integer inputs (indices, a page table) cannot be invented
            shape = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype) if hasattr(x, "dtype") else x  # noqa: E731
            record = (*jax.tree.map(shape, (args, kwargs)), None)
        if all(signature(a, k) != signature(*record[:2]) for a, k, _ in calls):
            calls.append(record)
        return result

    watched.__name__, watched.__doc__ = getattr(function, "__name__", "kernel"), function.__doc__
    return watched


def _check(name: str, function, record, device) -> tuple[str, bool]:
    """(one line saying what happened, whether the kernel failed on the chip)."""
    import jax

    args, kwargs, reference = record
    if reference is None:  # shapes only: fresh normal inputs, the interpreter's result
        keys = iter(jax.random.split(jax.random.key(0), 64))

        def fresh(leaf):
            if isinstance(leaf, jax.ShapeDtypeStruct):
                return jax.random.normal(next(keys), leaf.shape).astype(leaf.dtype)
            return leaf

        args, kwargs = jax.tree.map(fresh, (args, kwargs))
        reference = function(*args, **{**kwargs, "interpret": True})
    shapes = [f"{x.dtype}{list(x.shape)}" for x in jax.tree.leaves(args) if hasattr(x, "dtype")]
    what = f"{name}({', '.join(shapes)})"
    try:
        why = tpu.why_not_on_chip(function, args, kwargs, device)
    except Exception as error:  # the kernel does not even trace with interpret=False
        return f"{what}: interpret=False 无法追踪 / does not trace: {_first_line(error)}", True
    if why:
        return f"{what}: 在芯片上跳过 / skipped on the chip: {why}", False
    try:
        got = tpu.on_chip(function, args, kwargs, device)
    except Exception as error:
        return f"{what}: 编译或运行失败 / failed to compile or run: {_first_line(error)}", True
    dtypes = [x.dtype for x in jax.tree.leaves((args, kwargs, reference)) if hasattr(x, "dtype")]
    error, limit = tpu.relative_error(got, reference), tpu.tolerance(dtypes)
    verdict = "✗" if error > limit else "✓"
    return f"{what}: {verdict} relative error {error:.2e} (tolerance {limit:.0e})", error > limit


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}"


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """One line without a TPU; with one, the chip and each kernel call checked on it."""
    if not tpu.requested():
        return
    attached = config.stash.get(ATTACHED, None)
    headline = f"TPU: {ONE_PROCESS}" if tpu.chips_on_this_machine() else tpu.NO_TPU
    headline = attached.line if attached is not None else headline
    reports = [r for rs in terminalreporter.stats.values() for r in rs if getattr(r, "when", "") == "call"]  # fmt: skip
    lines = [
        f"{r.nodeid.split('::')[-1]}: {line}"
        for r in reports  # xdist workers' reports too
        for key, line in r.user_properties
        if key == PROPERTY
    ]
    if not lines:
        terminalreporter.write_line(f"jax-koans --tpu: {headline}")
        return
    terminalreporter.section("jax-koans --tpu")
    for line in (headline, *lines):
        terminalreporter.write_line(line)
