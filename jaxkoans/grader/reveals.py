"""Which koans the student says they revealed: the learner's tools log each reveal in the
copy's `.jaxkoans/reveals.jsonl` (jaxkoans/learner/commands/reveal.py), and grade reads it.

It is a self-report, never evidence: the student can delete or edit the file, so a koan
missing from it may still have been revealed. Grade uses it only to mark a pass "passed
(revealed)" beside the unaided ones; it never changes a status or a score. Only a regular
file (not a link) of reasonable size is read, and only nodeids of the graded koans are kept.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from jaxkoans.plugin.reveal_log import LOG, nodeids

SOURCE = f".jaxkoans/{LOG}"  # relative to the student's copy
MAX_BYTES = 1 << 20  # a learner reveals a few hundred koans at most


@dataclass
class Reveals:
    koans: set[str] = field(default_factory=set)  # nodeids, as progress.py names them
    found: bool = False  # the copy has a readable log
    problem: str = ""  # why the log was not read ("" when it was, or there is none)

    def summary(self) -> dict:
        return {
            "source": SOURCE,
            "self_report": True,
            "found": self.found,
            "koans": len(self.koans),
            "problem": self.problem,
        }


def read(student_dir: Path, graded: set[str]) -> Reveals:
    """The graded koans (nodeids in `graded`) that the copy's reveal log names."""
    path = Path(student_dir) / SOURCE
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return Reveals()
    except OSError as error:
        return Reveals(problem=f"{SOURCE}: {error.strerror}")
    if not stat.S_ISREG(info.st_mode):
        return Reveals(problem=f"{SOURCE}: not a regular file, not read")
    if info.st_size > MAX_BYTES:
        return Reveals(problem=f"{SOURCE}: larger than {MAX_BYTES} bytes, not read")
    try:
        with open(path, "rb") as file:
            text = file.read(MAX_BYTES).decode("utf-8", errors="replace")
    except OSError as error:
        return Reveals(problem=f"{SOURCE}: {error.strerror}")
    return Reveals(nodeids(text) & graded, found=True)
