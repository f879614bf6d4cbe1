"""The course as shipped, from git: which koan files a learner has not touched yet.

A koan file identical to its shipped version fails because of its blanks (the course's own
checks make sure of it), so progress.py counts its koans as not started without running them:
a fresh clone's summary costs one `git ls-tree`, not a run of every koan.
"""

from __future__ import annotations

import hashlib
import subprocess
from functools import cache
from pathlib import Path

from jaxkoans import course

REFS = ("origin/HEAD", "origin/main", "HEAD")  # where the course as shipped is found
GIT_TIMEOUT_S = 30


def _git(*args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(
            ["git", "-C", str(course.REPO), *args],
            capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):  # no git, or a hung one: nothing is known
        return None


def shipped_text(relative: str, refs: tuple[str, ...] = REFS) -> tuple[str, str] | None:
    """(ref, text) of `relative` (a path in the repository) in the first of `refs` that has it."""
    for ref in refs:
        shown = _git("show", f"{ref}:{relative}")
        if shown is not None and shown.returncode == 0:
            return ref, shown.stdout
    return None


@cache
def shipped_blobs() -> dict[str, str]:
    """{path under koans/: git blob id} of the first ref in REFS that exists; {} without git."""
    for ref in REFS:
        listing = _git("ls-tree", "-r", ref, "--", "koans")
        if listing is None or listing.returncode != 0:
            continue
        blobs = {}
        for line in listing.stdout.splitlines():
            meta, _, path = line.partition("\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == "blob":
                blobs[path] = parts[2]
        return blobs
    return {}


def blob_id(data: bytes) -> str:
    """git's id of a file with content `data` (SHA-1 repositories)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def is_shipped(relative: str) -> bool:
    """True when the file at `relative` (under the repository) is exactly as shipped."""
    wanted = shipped_blobs().get(relative)
    if wanted is None:
        return False
    try:
        return blob_id((course.REPO / relative).read_bytes()) == wanted
    except OSError:
        return False


def first_blank_line(path: Path, name: str) -> int | None:
    """Where koan `name` of `path` waits for the learner: its first `__`, or the first `todo()`
    of a function it calls, or its fix region; None when not found."""
    import ast

    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return None
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}

    def blank_in(node: ast.AST) -> int | None:
        lines = [
            n.lineno
            for n in ast.walk(node)
            if (isinstance(n, ast.Name) and n.id == "__")
            or (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "todo")
        ]
        return min(lines, default=None)

    koan = functions.get(name)
    if koan is None:
        return None
    found = blank_in(koan)
    if found is not None:
        return found
    called = [n.id for n in ast.walk(koan) if isinstance(n, ast.Name) and n.id in functions]
    for helper in dict.fromkeys(called):
        found = blank_in(functions[helper])
        if found is not None:
            return found
    regions = [i for i, line in enumerate(text.splitlines(), 1) if line.strip() == "# ✍️ BEGIN"]
    return regions[0] if regions else None
