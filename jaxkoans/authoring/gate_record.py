"""The harness code every gate's verdict depends on (`harness_digest`).

The gates' record itself is tests/gate_record.toml (jaxkoans/authoring/gates.py): a digest of
what each gate reads, per koan for the mutation gate and per koan file for the others, and per
chapter the digest of this harness code when its verdicts were last confirmed (by every gate,
or by the canary after a harness edit).
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path

from jaxkoans import course

# The harness code every gate's verdict depends on: what a koan imports (api), what decides how
# it fails (plugin, and the course's readers of what the learner wrote), the runner that starts
# pytest, the files that configure pytest (course.HARNESS_FILES, the one list of them; of
# pyproject.toml only its pytest table), and this record. A gate adds its own module.
HARNESS = (
    *(name for name in course.HARNESS_FILES if name != "pyproject.toml"), "jaxkoans/__init__.py",
    "jaxkoans/api", "jaxkoans/plugin", "jaxkoans/course", "jaxkoans/learner/runner.py",
    "jaxkoans/authoring/gate_record.py",
)  # fmt: skip


def harness_digest(checkout: course.Course, *gate_modules: str) -> str:
    """A digest of `checkout`'s harness code (HARNESS) and of `gate_modules` (paths under its root)."""
    root = checkout.root
    files: set[Path] = set()
    for entry in (*HARNESS, *gate_modules):
        path = root / entry
        files |= set(path.rglob("*.py")) if path.is_dir() else {path} if path.is_file() else set()
    hashed = hashlib.sha256()
    for path in sorted(files):
        hashed.update(f"{path.relative_to(root).as_posix()}\0".encode())
        hashed.update(path.read_bytes() + b"\0")
    with (root / "pyproject.toml").open("rb") as config:
        pytest_options = tomllib.load(config).get("tool", {}).get("pytest", {})
    hashed.update(json.dumps(pytest_options, sort_keys=True).encode())
    return hashed.hexdigest()


MUTATE = "jaxkoans/authoring/mutate.py"  # the mutation gate and the fakes check
