"""The course as shipped, from git: which koan files a learner has not touched yet.

A koan file identical to its shipped version fails because of its blanks (the course's own
checks make sure of it), so progress.py counts its koans as not started without running them:
a fresh clone's summary costs one `git ls-tree`, not a run of every koan.
"""

from __future__ import annotations

import hashlib
import subprocess
from functools import cache

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
    try:
        stat = (course.REPO / relative).stat()
    except OSError:
        return False
    return wanted is not None and _blob_of(relative, stat.st_mtime_ns, stat.st_size) == wanted


@cache
def _blob_of(relative: str, mtime_ns: int, size: int) -> str | None:
    try:
        return blob_id((course.REPO / relative).read_bytes())
    except OSError:
        return None
