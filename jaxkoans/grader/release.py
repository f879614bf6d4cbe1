"""`progress.py release DIR [--grader]`: the course a student gets, or the course a grader
runs against, both without any answer (instructors).

A Classroom template made from the course itself would hand every student `answers/`, and a
copy of them is full marks that nothing can tell apart. The release is the course's tracked
files (git's list where there is a repository, else the files on disk) without `answers/`,
the authors' `tests/` and `.ci/`, and with the changes of `released.py`: no `[shortcuts]` or
`[giveaways]` in any chapter.toml, no answer blob id in `koans/.shipped.json`, `koans/course.toml`
saying where the answers are (`diff` tells the learner).

`--grader` writes the same files plus `.grading/answer_flags.json`: what `grade` reads from
`answers/` (the unusual constructs each answer uses, per koan, `tamper.answer_flags`),
precomputed, keyed by the koan file's blob id. A Classroom workflow checks out only that
grading course, so a token that reaches it reaches no answer. The release is a new
directory: nothing of the course changes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from jaxkoans.course import shipped as as_shipped
from jaxkoans.grader import released, tamper

LEFT_OUT = ("answers", "tests", ".ci")  # the answers, and what only authors run
NO_ANSWERS = "答案不随学生版发布；问你的老师 / the answers are not part of the student release: ask your instructor"
FLAGS = ".grading/answer_flags.json"
FLAGS_FORMAT = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="DIR", help="a new directory for the release")
    parser.add_argument(
        "--answers",
        default=NO_ANSWERS,
        metavar="TEXT",
        help="what `diff` tells a student about the answers (where they are, when they come)",
    )
    parser.add_argument(
        "--grader",
        action="store_true",
        help="a grading course: the release plus what grade reads from answers/, precomputed"
        " (`grade --course DIR`; the Classroom workflow checks out only this)",
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


def release(
    root: Path, target: Path, answers: str = NO_ANSWERS, grader: bool = False
) -> list[Path]:
    """Write the student release of the course at `root` into `target` (which must not
    exist); with `grader`, the grading course."""
    target.mkdir(parents=True)
    written = []
    for path in course_files(root):
        relative = path.relative_to(root)
        if relative.parts[0] in LEFT_OUT or relative.name.endswith(".egg-info"):
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        rel = relative.as_posix()
        if released.changed_by_release(rel):
            text = path.read_text(encoding="utf-8")
            destination.write_text(released.released_text(rel, text, answers), encoding="utf-8")
            shutil.copystat(path, destination)
        else:
            shutil.copy2(path, destination)
        written.append(destination)
    manifest = target / "koans" / "course.toml"
    if not manifest.is_file():
        manifest.write_text(released.course_toml("", answers), encoding="utf-8")
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
    """The grading course's precomputed answer flags, by koan file (None: not a grading
    course, or a flags file it cannot use)."""
    try:
        document = json.loads((root / FLAGS).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("format") != FLAGS_FORMAT:
        return None
    return document.get("files") or {}


def run(args) -> int:
    target = Path(args.target)
    if target.exists():
        print(
            f"已经存在 / already exists: {target} (the release goes into a new directory)",
            file=sys.stderr,
        )
        return 2
    root = args.checkout.root
    if as_shipped.stale(root):
        print(
            "koans/.shipped.json 过期 / is stale: run python -m jaxkoans.course.shipped first",
            file=sys.stderr,
        )
        return 1
    if getattr(args, "grader", False) and not (root / "answers").is_dir():
        print("--grader: 这里没有 answers/ / no answers/ here to precompute from", file=sys.stderr)
        return 1
    written = release(root, target, args.answers, grader=getattr(args, "grader", False))
    kind = (
        "评分课程 / grading course"
        if getattr(args, "grader", False)
        else "学生版 / student release"
    )
    print(f"✅ {kind}: {target} ({len(written)} files, without {', '.join(LEFT_OUT)})")
    return 0
