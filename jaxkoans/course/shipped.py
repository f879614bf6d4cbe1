"""The course as shipped travels with the course: `koans/.shipped.json`, each koan file's shipped
text and the kind of each of its blanks, so a clone, a fork or a ZIP download (no `.git`) knows
the same shipped course. The authoring tools write it (`python -m jaxkoans.course.shipped`);
every tool reads it through `Course.shipped()` and its kin (course/__init__.py).

Each file's text is stored as a list of its lines, so an edit of a koan file changes about as
many lines of the manifest; the first format (one string per file) is still read.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from functools import cache
from pathlib import Path

MANIFEST_NAME = ".shipped.json"
FORMAT = 2  # 1: "text" one string per file; 2: "lines", a list of the lines
SOURCE = "koans/.shipped.json"  # how a tool names where the shipped text came from


def read_manifest(koans_dir: Path) -> dict[str, dict]:
    """{"koans/NN/test_x.py": {"blob", "text", "predictions"}} (text: one string, whatever the
    format); {} when the manifest is missing or damaged."""
    path = Path(koans_dir) / MANIFEST_NAME
    try:
        stat = path.stat()
    except OSError:
        return {}
    return _read(str(path), stat.st_mtime_ns, stat.st_size)


@cache
def _read(path: str, mtime_ns: int, size: int) -> dict[str, dict]:
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    files = document.get("files") if isinstance(document, dict) and document.get("format") in (1, 2) else None
    if not isinstance(files, dict):
        return {}
    for entry in files.values():
        lines = entry.get("lines") if isinstance(entry, dict) else None
        if isinstance(lines, list) and all(isinstance(line, str) for line in lines):
            entry["text"] = "".join(lines)
    return files


def kinds_of(entry: dict) -> dict[tuple[int, int], str]:
    kinds = entry.get("predictions", {}) if isinstance(entry, dict) else {}
    pairs = ((key.partition(":"), kind) for key, kind in (kinds if isinstance(kinds, dict) else {}).items())
    return {(int(line), int(column)): kind for (line, _, column), kind in pairs if line.isdigit() and column.isdigit()}


def blob_id(data: bytes) -> str:
    """git's id of a file with content `data`: the same id `git hash-object` gives."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


# ---- writing it (authors) ------------------------------------------------------------------


def kinds_code() -> str:
    """A digest of the code that decides a blank's kind: a change there reads every answer again."""
    hashed = hashlib.sha256()
    for name in ("predictions.py", "file_context.py"):  # Context resolves an answer's names
        hashed.update((Path(__file__).parent / name).read_bytes())
    return hashed.hexdigest()


def build(root: Path, previous: dict | None = None) -> dict:
    """The manifest of the course at `root`: its koans/ as they are, each blank's kind read
    from its answers/ twin where there is one. From `previous` (the manifest as written), a
    file whose koan, answer and the kinds' code are unchanged keeps its kinds unread."""
    from jaxkoans.course import predictions as kinds

    code = kinds_code()
    known = previous.get("files", {}) if previous and previous.get("kinds_code") == code else {}
    files = {}
    for path in sorted((root / "koans").rglob("test_*.py")):
        if "__pycache__" in path.parts:
            continue
        relative, data = path.relative_to(root).as_posix(), path.read_bytes()
        answer = root / "answers" / path.relative_to(root / "koans")
        answer_blob = blob_id(answer.read_bytes()) if answer.is_file() else None
        before, text = known.get(relative, {}), data.decode("utf-8")
        if before.get("blob") == blob_id(data) and before.get("answer") == answer_blob:
            found = before.get("predictions", {})
        else:
            found = kinds.of_file(text, answer) if answer.is_file() else {}
        files[relative] = {"blob": blob_id(data), "answer": answer_blob,
                           "lines": text.splitlines(keepends=True), "predictions": found}  # fmt: skip
    return {"format": FORMAT, "kinds_code": code, "files": files}


def render(document: dict) -> str:
    return json.dumps(document, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def _written(path: Path) -> tuple[str, dict | None]:
    try:
        text = path.read_text(encoding="utf-8")
        return text, json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError):
        return "", None


def write(root: Path) -> Path:
    path = root / "koans" / MANIFEST_NAME
    path.write_text(render(build(root, _written(path)[1])), encoding="utf-8")
    return path


def stale(root: Path) -> bool:
    text, previous = _written(root / "koans" / MANIFEST_NAME)
    return not text or text != render(build(root, previous))


def main() -> int:
    """`python -m jaxkoans.course.shipped`: write koans/.shipped.json."""
    if sys.argv[1:]:  # `--help`, an old `--check`: writing nothing is the safe answer
        print("usage: python -m jaxkoans.course.shipped (writes koans/.shipped.json)")
        return 2
    # Course.here()'s root, read without importing the package that imports this module
    root = Path(os.environ.get("JAXKOANS_ROOT") or Path(__file__).resolve().parents[2]).resolve()
    path = write(root)
    print(f"wrote {path.relative_to(root)} ({len(read_manifest(path.parent))} koan files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
