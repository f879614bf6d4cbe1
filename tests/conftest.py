"""Fixtures of the suite's own checks: one recorded run of answers/ and one of koans/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jaxkoans import course, results

RUN_TIMEOUT_S = 900


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
