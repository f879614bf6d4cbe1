"""`progress.py release DIR`: the course a student gets, without its answers (instructors).

A Classroom template made from the course itself would hand every student `answers/`, and a
copy of them is full marks that nothing can tell apart. The release is the course's tracked
files (git's list where there is a repository, else the files on disk) without `answers/`,
the authors' `tests/` and `.ci/`; the learner's tools know the course as shipped from
`koans/.shipped.json` (which holds no answer), and `koans/course.toml` says where the answers
are (`diff` tells the learner). The release is a new directory: nothing of the course changes.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from jaxkoans.course import pristine

LEFT_OUT = ("answers", "tests", ".ci")  # the answers, and what only authors run
NO_ANSWERS = "答案不随学生版发布；问你的老师 / the answers are not part of the student release: ask your instructor"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="DIR", help="a new directory for the student release")
    parser.add_argument(
        "--answers",
        default=NO_ANSWERS,
        metavar="TEXT",
        help="what `diff` tells a student about the answers (where they are, when they come)",
    )


def course_files(root: Path) -> list[Path]:
    """The course's files: tracked by git where there is a repository, else all on disk."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, timeout=60, check=False
    )
    if listed.returncode == 0 and listed.stdout:
        names = [n for n in listed.stdout.decode("utf-8").split("\0") if n]
        return [root / n for n in names if (root / n).is_file()]
    skipped = {".git", ".venv", ".jaxkoans", "__pycache__", ".pytest_cache", ".ruff_cache"}
    return [
        p for p in root.rglob("*") if p.is_file() and not skipped & set(p.relative_to(root).parts)
    ]


def release(root: Path, target: Path, answers: str = NO_ANSWERS) -> list[Path]:
    """Write the student release of the course at `root` into `target` (which must not exist)."""
    target.mkdir(parents=True)
    written = []
    for path in course_files(root):
        relative = path.relative_to(root)
        if relative.parts[0] in LEFT_OUT or relative.name.endswith(".egg-info"):
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)
        written.append(destination)
    manifest = target / "koans" / "course.toml"
    text = manifest.read_text(encoding="utf-8") if manifest.is_file() else ""
    escaped = answers.replace("\\", "\\\\").replace('"', '\\"')
    manifest.write_text(text.rstrip("\n") + f'\nanswers = "{escaped}"\n', encoding="utf-8")
    return written


def run(args) -> int:
    target = Path(args.target)
    if target.exists():
        print(
            f"已经存在 / already exists: {target} (the release goes into a new directory)",
            file=sys.stderr,
        )
        return 2
    root = args.checkout.root
    if pristine.stale(root):
        print(
            "koans/.shipped.json 过期 / is stale: run python -m jaxkoans.course.pristine first",
            file=sys.stderr,
        )
        return 1
    written = release(root, target, args.answers)
    print(
        f"✅ 学生版 / student release: {target} ({len(written)} files, without {', '.join(LEFT_OUT)})"
    )
    return 0
