"""The tool's own memory in .jaxkoans/ (ignored by git), never the learner's files. Writes are
atomic (Ctrl-C leaves no half file); a damaged file is moved aside, and damage of any shape or a
read-only checkout costs only the memory, with one message."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

_warned: set[str] = set()
FORGOTTEN = "进度不会被记住 / progress is not remembered"


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        print(f"⚠️  {message}", file=sys.stderr)


def load(directory: Path, name: str) -> dict:
    """The JSON object stored as `name` in `directory`, or {} when there is none or it is damaged."""
    path = directory / name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        data = None
    if isinstance(data, dict):
        return data
    if not path.is_file():  # .jaxkoans is a file, or `name` is a directory: nothing to move
        _warn_once(str(path), f"{path} 无法读取 / cannot be read: {FORGOTTEN}")
        return {}
    aside = path.with_suffix(path.suffix + ".damaged")
    try:
        os.replace(path, aside)
        note = f"已移到 / moved to {aside.name}"
    except OSError as error:  # the name is taken by a directory, or the checkout is read-only
        note = f"无法移开 / could not be moved aside ({error.strerror})"
    _warn_once(str(path), f"{path} 已损坏 / was damaged, {note}")
    return {}


def save(directory: Path, name: str, data: dict) -> bool:
    """Store `data` as `name` in `directory`; False (with one message) when it cannot."""
    target, temporary = directory / name, None
    try:
        target.parent.mkdir(exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{name}.")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, ensure_ascii=False, indent=1)
        os.replace(temporary, target)
        return True
    except OSError as error:
        where = target if temporary else target.parent
        _warn_once("save", f"{where} 不可写 / cannot be written ({error.strerror}): {FORGOTTEN}")
        return False
    finally:
        if temporary:
            Path(temporary).unlink(missing_ok=True)  # gone once replaced; else half written
