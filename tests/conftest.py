"""Fixtures of the suite's own checks: one recorded run of answers/ and one of koans/.

`pytest tests --koans-chapter 03` (repeatable) checks chapter 03 only: the recorded runs cover
its koans and answers, the per-file and per-chapter tests are deselected for the others, and so
are the few checks that only make sense for the whole course (named in the header).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxkoans import course
from jaxkoans.learner import koan_runs
from jaxkoans.plugin import results

WORKERS = 2
KOAN_LIMIT_S = 60  # pyproject.toml's `timeout`: pytest-timeout stops any koan after it
STARTUP_S = 300  # a pytest process importing JAX, flax and optax on a loaded machine
# The course's `timeout = 60` is a koan's limit. The suite's own tests wait on child processes
# that have their own timeouts; their limit only guards against a hang of the test itself, so
# it is far above what a loaded machine needs, and never the reason a test fails.
HANG_GUARD_S = 3600
WHOLE_COURSE_ONLY = (  # checks that compare the whole of koans/ with the whole of answers/
    "test_course.py::test_koans_and_answers_collect_together_without_collisions",
)

CHOSEN: set[str] = set()  # --koans-chapter: the chapters checked (empty: all)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("jax-koans").addoption(
        "--koans-chapter",
        action="append",
        default=[],
        metavar="NN",
        help="check only this chapter's koans and answers (repeatable)",
    )


def pytest_configure(config: pytest.Config) -> None:
    CHOSEN.clear()
    CHOSEN.update(c.zfill(2) for c in config.getoption("koans_chapter", []) or [])
    unknown = CHOSEN - {c.number for c in course.all_chapters()}
    if unknown:
        raise pytest.UsageError(f"--koans-chapter: no such chapter {', '.join(sorted(unknown))}")


def chosen(number: str) -> bool:
    return not CHOSEN or number in CHOSEN


def koan_files(tree: Path) -> list[Path]:
    """The koan (or answer) files of the chapters being checked."""
    return [p for p in sorted(tree.glob("*/test_*.py")) if chosen(p.parent.name)]


def _chapter_of(item: pytest.Item) -> str | None:
    """The chapter a parametrized check is about (a Chapter or a koan file parameter)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    for value in params.values():
        if isinstance(value, course.Chapter):
            return value.number
        if isinstance(value, Path) and course.KOANS in value.parents:
            return value.parent.name
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    keep, drop = [], []
    for item in items:
        if not Path(item.path).is_relative_to(here):
            keep.append(item)
            continue
        # A prepended marker wins over a test's own: no fixed limit may fail a slow machine.
        item.add_marker(pytest.mark.timeout(HANG_GUARD_S), append=False)
        chapter = _chapter_of(item)
        whole = any(item.nodeid.endswith(name) for name in WHOLE_COURSE_ONLY)
        (drop if CHOSEN and (whole or (chapter and not chosen(chapter))) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config: pytest.Config) -> list[str]:
    if not CHOSEN:
        return []
    return [
        f"jax-koans tests: chapters {', '.join(sorted(CHOSEN))} only; whole-course checks "
        f"deselected: {', '.join(WHOLE_COURSE_ONLY)}"
    ]


def run_timeout(targets: list[Path]) -> float:
    """A hang guard for one recorded run, from its work: every koan may take pytest-timeout's
    whole limit, shared by the workers, plus the start of the processes."""
    koans = sum(len(koan_runs.listed_koans(f)) for f in targets)
    return STARTUP_S + KOAN_LIMIT_S * koans / WORKERS


def record_run(tmp_path_factory, tree: str) -> list[dict]:
    """Run `pytest <tree's chosen chapters> -n 2` through koan_runs.py's runner (its own process
    group, ended whatever happens) and return its record's koan events."""
    root = course.REPO / tree
    targets = [root / c.number for c in course.all_chapters() if chosen(c.number)]
    targets = [t for t in targets if t.is_dir()]
    record = tmp_path_factory.mktemp(tree) / "record.jsonl"
    command = [
        *koan_runs.pytest_command(
            [str(t.relative_to(course.REPO)) for t in targets], record, WORKERS
        )
    ]
    koan_runs.run_in_group(command, run_timeout(koan_files(root)))
    events = results.read(record) if record.exists() else []
    return [e for e in events if e["event"] in ("koan", "collect-error")]


@pytest.fixture(scope="session")
def answers_run(tmp_path_factory) -> list[dict]:
    return record_run(tmp_path_factory, "answers")


@pytest.fixture(scope="session")
def koans_run(tmp_path_factory) -> list[dict]:
    return record_run(tmp_path_factory, "koans")
