"""`progress.py release DIR [--grader]`: the course a student gets, or the one grade runs
against, both without any answer (docs/grading.md)."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

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
        shutil.copy2(path, destination)
        text = released_text(relative.as_posix(), path, answers)
        if text is not None:
            destination.write_text(text, encoding="utf-8")
            shutil.copystat(path, destination)
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


def released_text(rel: str, path: Path, answers: str) -> str | None:
    """The release's form of the course's file `rel` (None: the file as it is)."""
    if rel == "koans/course.toml":
        return course_toml(path.read_text(encoding="utf-8"), answers)
    if rel == "koans/.shipped.json":
        return strip_manifest(path.read_text(encoding="utf-8"))
    if rel.startswith("koans/") and rel.endswith("/chapter.toml"):
        return strip_chapter(path.read_text(encoding="utf-8"))
    return None
