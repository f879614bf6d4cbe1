"""`boundary.Watch.catch_up`, which hooks.prewarm calls in grade's worker before it forks each
koan's process: the modules the koan files imported join the fingerprint once, there, and a
koan's process forked after still finds one of them replaced. (That a prewarmed grade judges
as before: tests/test_grade.py's guard tests and the graded answer key.)"""

from __future__ import annotations

import sys
import types

import pytest

from jaxkoans.plugin import boundary

PROBE = "jaxkoans._catch_up_probe"  # a module of a watched package, imported after the fingerprint


def _probe_module() -> types.ModuleType:
    module = types.ModuleType(PROBE)

    def answer() -> int:
        return 42

    module.answer = answer
    return module


@pytest.fixture
def watch():
    """A Watch's fingerprint without its audit hook (which cannot be removed from a process)."""
    found = boundary.Watch.__new__(boundary.Watch)
    found.fingerprint, found.known = boundary.Fingerprint(), len(sys.modules)
    yield found
    sys.modules.pop(PROBE, None)


def test_catch_up_fingerprints_a_module_imported_since_and_then_sees_it_replaced(watch):
    sys.modules[PROBE] = module = _probe_module()
    assert PROBE not in watch.fingerprint.modules
    watch.catch_up()
    assert watch.fingerprint.modules[PROBE] is module
    assert watch.known == len(sys.modules)
    honest = module.answer
    module.answer = lambda: 0  # what a koan's process forked after the catch-up might do
    assert not watch.fingerprint.intact()
    assert watch.fingerprint.restore() == [f"{PROBE}.answer"]
    assert module.answer is honest


def test_catch_up_leaves_a_fingerprint_alone_when_nothing_was_imported(watch):
    before = dict(watch.fingerprint.modules)
    watch.catch_up()
    assert watch.fingerprint.modules == before
