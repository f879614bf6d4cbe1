"""`progress.py release DIR [--grader]`: the course a student gets, or the one grade runs
against, both without any answer (docs/grading.md); and a copy's harness files digested in their
released form (a copy of a release is no change).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

from jaxkoans import course
from jaxkoans.course import shipped as as_shipped
from jaxkoans.grader import tamper

LEFT_OUT = ("answers", "tests", ".ci")  # the answers, and what only authors run
NO_ANSWERS = "答案不随学生版发布；问你的老师 / the answers are not part of the student release: ask your instructor"
FLAGS = ".grading/answer_flags.json"
FLAGS_FORMAT = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("target", metavar="DIR", help="a new directory for the release")
    add("--answers", default=NO_ANSWERS, metavar="TEXT", help="what `diff` says of the answers")
    add("--grader", action="store_true", help="plus what grade reads from answers/, precomputed")


def course_files(root: Path) -> list[Path]:
    """The course's files: tracked by git where there is a repository, else all on disk."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, timeout=60, check=False
    )
    if listed.returncode == 0 and listed.stdout:
        names = [n for n in listed.stdout.decode("utf-8").split("\0") if n]
        return [root / n for n in names if (root / n).is_file()]
    skipped = {".git", ".venv", ".jaxkoans", "__pycache__", ".pytest_cache", ".ruff_cache"}
    files = [p for p in root.rglob("*") if p.is_file()]
    return [p for p in files if not skipped & set(p.relative_to(root).parts)]


def release(
    root: Path, target: Path, answers: str = NO_ANSWERS, grader: bool = False
) -> list[Path]:
    """Write the student release (with `grader`, the grading course) of `root` into `target`."""
    target.mkdir(parents=True)
    written = []
    for path in course_files(root):
        relative = path.relative_to(root)
        if relative.parts[0] in LEFT_OUT or relative.name.endswith(".egg-info"):
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        rel = relative.as_posix()
        if changed_by_release(rel):
            text = path.read_text(encoding="utf-8")
            destination.write_text(released_text(rel, text, answers), encoding="utf-8")
            shutil.copystat(path, destination)
        else:
            shutil.copy2(path, destination)
        written.append(destination)
    manifest = target / "koans" / "course.toml"
    if not manifest.is_file():
        manifest.write_text(course_toml("", answers), encoding="utf-8")
        written.append(manifest)
    if grader:
        written.append(write_flags(root, target))
    return written


def write_flags(root: Path, target: Path) -> Path:
    """`.grading/answer_flags.json` of the course at `root`, written under `target`."""
    files = {}
    for koan in sorted((root / "koans").glob("*/test_*.py")):
        rel = koan.relative_to(root).as_posix()
        answer = root / "answers" / koan.relative_to(root / "koans")
        flags = tamper.answer_flags(koan, answer) if answer.is_file() else {}
        files[rel] = {
            "koan": as_shipped.blob_id(koan.read_bytes()),
            "flags": {owner: sorted(found) for owner, found in sorted(flags.items())},
        }
    path = target / FLAGS
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"format": FLAGS_FORMAT, "files": files}
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def read_flags(root: Path) -> dict[str, dict] | None:
    """The grading course's precomputed answer flags by koan file (None: none it can use)."""
    try:
        document = json.loads((root / FLAGS).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("format") != FLAGS_FORMAT:
        return None
    return document.get("files") or {}


def run(args) -> int:
    target, root = Path(args.target), args.checkout.root
    if target.exists():
        return _refuse(
            f"已经存在 / already exists: {target} (a release goes into a new directory)", 2
        )
    if as_shipped.stale(root):
        return _refuse("koans/.shipped.json 过期 / is stale: run python -m jaxkoans.course.shipped")
    if args.grader and not (root / "answers").is_dir():
        return _refuse("--grader: 这里没有 answers/ / no answers/ here to precompute from")
    written = release(root, target, args.answers, grader=args.grader)
    kind = "评分课程 / grading course" if args.grader else "学生版 / student release"
    print(f"✅ {kind}: {target} ({len(written)} files, without {', '.join(LEFT_OUT)})")
    return 0


def _refuse(message: str, code: int = 1) -> int:
    print(message, file=sys.stderr)
    return code


AUTHORS_TABLES = ("shortcuts", "giveaways")
ANSWERS_LINE = re.compile(r'^answers = ".*"\n?', re.MULTILINE)
_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_\-\"]+)[^\]]*\]\]?\s*(#.*)?$")


def strip_chapter(text: str) -> str:
    """chapter.toml without its [shortcuts] and [giveaways] tables (sub-tables included); the
    rest byte for byte. Raises ValueError where the text cut by lines parses otherwise."""
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        header = _HEADER.match(line)
        if header:
            skipping = header.group(1).strip('"') in AUTHORS_TABLES
        if not skipping:
            kept.append(line)
    out = "".join(kept)
    if out == text:
        return text
    want = {k: v for k, v in tomllib.loads(text).items() if k not in AUTHORS_TABLES}
    if tomllib.loads(out) != want:
        raise ValueError("chapter.toml: [shortcuts]/[giveaways] are not whole tables by lines")
    return out


def strip_manifest(text: str) -> str:
    """koans/.shipped.json with every answer blob id null (the blanks' kinds stay)."""
    document = json.loads(text)
    for entry in document.get("files", {}).values():
        if "answer" in entry:
            entry["answer"] = None
    return json.dumps(document, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def course_toml(text: str, answers: str) -> str:
    escaped = answers.replace("\\", "\\\\").replace('"', '\\"')
    return ANSWERS_LINE.sub("", text).rstrip("\n") + f'\nanswers = "{escaped}"\n'


def released_text(rel: str, text: str, answers: str | None = None) -> str:
    """The release's form of the course's file `rel`; with `answers` None, course.toml loses
    any `answers` line (to compare a release with the course)."""
    if rel.startswith("koans/") and rel.endswith("/chapter.toml"):
        return strip_chapter(text)
    if rel == "koans/.shipped.json":
        return strip_manifest(text)
    if rel == "koans/course.toml":
        return ANSWERS_LINE.sub("", text) if answers is None else course_toml(text, answers)
    return text


RELEASED = ("koans/course.toml", "koans/.shipped.json")


def changed_by_release(rel: str) -> bool:
    return rel in RELEASED or (rel.startswith("koans/") and rel.endswith("/chapter.toml"))


HARNESS_DIRS = ("jaxkoans", "csrc", "koans")
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}
IGNORED_SUFFIXES = (".pyc", ".md")
# Under koans/ only what a pytest run loads counts (a notes.txt beside the koans does not).
LOADED_SUFFIXES = (".py", ".toml", ".ini", ".cfg", ".pth", ".json")
MAX_ENTRIES = 5000
TEST_FILE = re.compile(r"koans/[^/]+/test_[^/]*\.py")


def harness_entries(root: Path, koan_files: set[str]) -> dict[str, str]:
    """Relative path -> digest of each harness file under `root` (the koan files excepted)."""
    candidates = [root / name for name in course.HARNESS_FILES]
    for directory in HARNESS_DIRS:
        base = root / directory
        if base.is_symlink() or not base.is_dir():
            candidates.append(base)
            continue
        for current, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
            candidates += [Path(current) / f for f in sorted(files)]
            if len(candidates) > MAX_ENTRIES:
                break
    found: dict[str, str] = {}
    for path in candidates[:MAX_ENTRIES]:
        rel = path.relative_to(root).as_posix()
        if rel in koan_files or path.name.endswith(IGNORED_SUFFIXES):
            continue
        loaded = path.is_dir() or path.name.endswith(LOADED_SUFFIXES)
        digest = _digest(path, rel) if loaded or not rel.startswith("koans/") else None
        if digest is not None:
            found[rel] = digest
    return found


def _digest(path: Path, rel: str) -> str | None:
    """A file's digest, where release rewrites it in its released form (a copy of a release
    matches the course it came from)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "link:" + os.readlink(path)
    if stat.S_ISDIR(info.st_mode):
        return None
    if not stat.S_ISREG(info.st_mode):
        return "special file"
    if changed_by_release(rel):
        with contextlib.suppress(OSError, UnicodeDecodeError, ValueError, RecursionError):
            text = path.read_bytes().decode("utf-8").replace("\r\n", "\n")
            return hashlib.sha256(released_text(rel, text).encode("utf-8")).hexdigest()
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as file:
            while chunk := file.read(1 << 16):
                digest.update(chunk.replace(b"\r\n", b"\n"))
    except OSError:
        return "unreadable"
    return digest.hexdigest()


ADDED_TEST = "课程里没有的测试文件（不运行） / a test file the course does not have (not run)"
ADDED = "添加的课程工具文件（不使用） / an added harness file (not used)"
CHANGED = "改动的课程工具文件（不使用） / a changed harness file (not used)"


def harness_notes(pristine: dict[str, str], student: dict[str, str]) -> list[tamper.Finding]:
    """The student's harness files that were added or changed: never used, always named (a
    copy without one grades the same: the course's is used)."""
    notes = []
    for rel in sorted(student):
        if rel in pristine:
            kind, text = "harness_file", CHANGED
        elif TEST_FILE.fullmatch(rel):
            kind, text = "added_file", ADDED_TEST
        else:
            kind, text = "harness_file", ADDED
        if pristine.get(rel) != student[rel]:
            notes.append(tamper.Finding(kind, rel, None, (), f"{text}: {rel}"))
    return notes
