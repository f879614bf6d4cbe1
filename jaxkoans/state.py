"""The tool's own memory in .jaxkoans/ (ignored by git): hint levels seen, remembered results.

Never the learner's files. Every write is atomic (a temporary file, then rename), so Ctrl-C
cannot leave half a file; a file that does not parse is moved aside and started afresh.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from jaxkoans import course


def directory() -> Path:
    return course.REPO / ".jaxkoans"


def load(name: str) -> dict:
    """The JSON object stored as `name`, or {} when there is none or it is damaged."""
    path = directory() / name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        data = None
    if not isinstance(data, dict):
        aside = path.with_suffix(path.suffix + ".damaged")
        os.replace(path, aside)
        print(f"⚠️  {path} 已损坏，已移到 / was damaged, moved to {aside.name}", file=sys.stderr)
        return {}
    return data


def save(name: str, data: dict) -> None:
    target = directory() / name
    target.parent.mkdir(exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, ensure_ascii=False, indent=1)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
