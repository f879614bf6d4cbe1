"""Fixtures of the suite's own checks: one recorded run of answers/ and one of koans/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jaxkoans import course, results

RUN_TIMEOUT_S = 900
# The course's `timeout = 60` is a koan's limit. The suite's own tests wait on child processes
# that have their own timeouts; their limit only guards against a hang of the test itself, so
# it is far above what a loaded machine needs, and never the reason a test fails.
HANG_GUARD_S = 3600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(item.path).is_relative_to(Path(__file__).parent) and not item.get_closest_marker(
            "timeout"
        ):
            item.add_marker(pytest.mark.timeout(HANG_GUARD_S))


def record_run(tmp_path_factory, tree: str) -> list[dict]:
    """Run `pytest <tree> -n 2` in a child process and return its record's koan events."""
    record = tmp_path_factory.mktemp(tree) / "record.jsonl"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            tree,
            "-n",
            "2",
            "-q",
            "--tb=short",
            "-p",
            "no:cacheprovider",
            f"--koans-record={record}",
        ],
        cwd=course.REPO,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    return [e for e in results.read(record) if e["event"] in ("koan", "collect-error")]


@pytest.fixture(scope="session")
def answers_run(tmp_path_factory) -> list[dict]:
    return record_run(tmp_path_factory, "answers")


@pytest.fixture(scope="session")
def koans_run(tmp_path_factory) -> list[dict]:
    return record_run(tmp_path_factory, "koans")


def koan_files(tree: Path) -> list[Path]:
    return sorted(tree.glob("*/test_*.py"))
