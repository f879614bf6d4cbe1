"""What the harness reads for a koan before it runs, read once in a process that forks koans.

grade runs each koan in a process forked from its xdist worker (grader/run_guard.py). What the
harness computes from files for a koan (the reading of the learner's fills against the shipped
text, the koan file's model, the shipped manifest, which code objects hold the learner's lines,
the boundary's fingerprint of the modules the koan files imported) is cached per process, so a
fork computed all of it again for each koan: about half a second of CPU a koan. `prepare(item)`
computes it in the worker, before the fork: every koan's process forked after inherits it.

Only files are read and parsed here, as `hooks.pytest_runtest_call` reads them; no koan code
runs and JAX computes nothing (the worker must stay safe to fork). Each koan's process still
makes every check itself: a cache only saves it the reading, never a verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxkoans import course
from jaxkoans.course import koan_model
from jaxkoans.plugin import contracts
from jaxkoans.plugin.classify import computed_fills, reading_refusals, shipped_text


def prepare(item: pytest.Item) -> None:
    """Read, in this process, what the harness reads for `item` before and after its call."""
    from jaxkoans.plugin.hooks import BOUNDARY
    from jaxkoans.plugin.report import COURSE

    checkout = item.config.stash.get(COURSE, None)
    watch = item.config.stash.get(BOUNDARY, None)
    path = Path(item.path)
    chapter = checkout.chapter_for(path) if checkout is not None else None
    if chapter is None or watch is None:
        return
    watch.catch_up()  # the modules the koan files imported: fingerprinted once, here
    koan = getattr(item, "originalname", None) or item.name
    twin = checkout.koans / chapter.number / course.twin_name(path)
    computed_fills(checkout, path, koan)
    reading_refusals(checkout, path, koan, chapter.contracts, twin)
    shipped = shipped_text(checkout, twin)
    if shipped:
        contracts.to_read(chapter, twin.name, [t.name for t in koan_model.parse(shipped).todos])
    module = getattr(item, "module", None)
    if module is not None:
        watch.learner_codes(module)  # which code objects hold the learner's lines
