"""The grader's watch inside the grading run: which harness runs, and what a koan changed.

`grade` copies this file next to the pristine course as `_jaxkoans_grade_guard.py` and loads
it with `-p`, so it works with any version of the course. Standalone: only the standard
library and pytest. It writes JSON lines to `$JAXKOANS_GRADE_GUARD/guard-<pid>.jsonl`:

- `harness`: where `jaxkoans` was imported from; a copy outside `$JAXKOANS_ROOT` (the
  instructor's editable install, the student's own harness) stops the run before any koan;
- `collecting`, `collected`: a koan file's import begins and ends (names a file whose import
  crashed the interpreter);
- `patched`: after a koan's teardown (or a file's import), a function of numpy, JAX, pytest,
  builtins or the harness is not what it was, e.g. `np.testing.assert_allclose = lambda *a,
  **k: None`. The originals are put back at once, so the other koans run on the real ones;
  grading marks the koan tampered. (A koan's own `monkeypatch` is undone before the check.)
- `message`: the text of a failed or skipped report, as the controller received it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from pathlib import Path

import pytest

MESSAGE_LIMIT = 4000
WATCHED_MODULES = (
    "builtins",
    "math",
    "operator",
    "functools",
    "numpy",
    "numpy.testing",
    "jax",
    "jax.numpy",
    "jax.lax",
    "jax.random",
    "jax.tree",
    "jax.tree_util",
    "jax.nn",
    "pytest",
    "_pytest.python_api",
    "_pytest.outcomes",
    "_pytest.runner",
    "_pytest.reports",
    "_pytest.skipping",
    "xdist.remote",
    "jaxkoans",
    "jaxkoans.blanks",
    "jaxkoans.classify",
    "jaxkoans.plugin",
    "jaxkoans.results",
    "jaxkoans.watchdog",
    "jaxkoans.runtime",
    "jaxkoans.course",
    "jaxkoans.report",
)
WATCHED_CLASSES = (
    ("jax._src.array", "ArrayImpl"),
    ("jaxkoans.blanks", "_Blank"),
    ("_pytest.reports", "TestReport"),
    ("_pytest.runner", "CallInfo"),
    ("_pytest.python_api", "ApproxScalar"),
    ("_pytest.python_api", "ApproxNumpy"),
    ("xdist.remote", "WorkerInteractor"),
)
IGNORED = {"__warningregistry__"}  # `warnings` writes it into modules by itself
_MISSING = object()
_state: dict = {}


def _emit(record: dict) -> None:
    out = os.environ.get("JAXKOANS_GRADE_GUARD")
    if out:
        with open(Path(out) / f"guard-{os.getpid()}.jsonl", "a", encoding="utf-8") as file:
            file.write(json.dumps(record, ensure_ascii=False) + "\n")


class Snapshot:
    """The objects that watched modules and classes hold, to find and undo replacements."""

    def __init__(self) -> None:
        self.namespaces: dict[str, tuple[object, dict]] = {}
        self.modules: dict[str, object] = {}
        for name in WATCHED_MODULES:
            try:
                module = importlib.import_module(name)
            except Exception:  # not installed here: nothing to watch
                continue
            self.modules[name] = module
            self.namespaces[name] = (module, dict(vars(module)))
        for module_name, class_name in WATCHED_CLASSES:
            owner = sys.modules.get(module_name)
            cls = getattr(owner, class_name, None) if owner else None
            if isinstance(cls, type):
                self.namespaces[f"{module_name}.{class_name}"] = (cls, dict(vars(cls)))
        self.trace = (sys.gettrace(), sys.getprofile())

    def restore(self) -> list[str]:
        """Names whose value changed since the snapshot; each is put back."""
        changed = []
        for label, (owner, saved) in self.namespaces.items():
            current = vars(owner)
            for key, value in saved.items():
                if key in IGNORED or current.get(key, _MISSING) is value:
                    continue
                changed.append(f"{label}.{key}")
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(owner, key, value)
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                changed.append(f"sys.modules[{name!r}]")
                sys.modules[name] = module
        if (sys.gettrace(), sys.getprofile()) != self.trace:
            changed.append("sys.settrace/setprofile")
            sys.settrace(self.trace[0])
            sys.setprofile(self.trace[1])
        return changed


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Stop before any koan runs when `jaxkoans` is not the pristine course's copy."""
    import jaxkoans

    root = Path(os.environ.get("JAXKOANS_ROOT", "")).resolve()
    where = Path(jaxkoans.__file__).resolve()
    ok = root in where.parents
    worker = getattr(config, "workerinput", {}).get("workerid", "controller")
    _state["controller"] = worker == "controller"
    _emit({"event": "harness", "worker": worker, "jaxkoans": str(where), "ok": ok})
    if not ok:
        raise pytest.UsageError(
            f"grade: jaxkoans was imported from {where}, not from the pristine course at {root}"
        )


def pytest_sessionstart(session: pytest.Session) -> None:
    """Remember the watched objects before any koan file is imported."""
    _state["snapshot"] = Snapshot()


def _check(**where) -> None:
    snapshot = _state.get("snapshot")
    changed = snapshot.restore() if snapshot else []
    if changed:
        _emit({"event": "patched", **where, "names": changed[:20]})


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """Name the file being imported; catch replacements made by a file's module-level code."""
    if not isinstance(collector, pytest.Module):
        return (yield)
    _emit({"event": "collecting", "file": collector.nodeid})
    try:
        return (yield)
    finally:
        _emit({"event": "collected", "file": collector.nodeid})
        _check(file=collector.nodeid)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """After a koan's teardown (its fixtures, `monkeypatch` included, are undone by then):
    undo and report whatever it replaced."""
    try:
        return (yield)
    finally:
        if call.when == "teardown":
            _check(nodeid=item.nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """The controller keeps the text of each failed or skipped report (crashes included)."""
    if _state.get("controller") and (report.failed or report.skipped):
        text = report.longreprtext or ""
        _emit(
            {
                "event": "message",
                "nodeid": report.nodeid,
                "when": report.when,
                "outcome": report.outcome,
                "text": text[:MESSAGE_LIMIT],
            }
        )
