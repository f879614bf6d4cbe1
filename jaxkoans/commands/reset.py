"""Start a koan file over: the pristine file comes back, yours is kept beside it."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

from jaxkoans import course
from jaxkoans.commands.diff import resolve

NAME, HELP = "reset", "restore a koan file as shipped; your version is saved beside it"
PRISTINE_REFS = ("origin/HEAD", "origin/main", "HEAD")  # where the course as shipped is found


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="a koan (test name) or a koan file")
    parser.add_argument("--yes", action="store_true", help="do not ask first")
    parser.add_argument("--from", dest="ref", help="the git ref of the pristine course")


def pristine(koan_file: Path, refs: tuple[str, ...]) -> tuple[str, str] | None:
    """(ref, text) of the first ref in `refs` that has the file."""
    relative = koan_file.relative_to(course.REPO).as_posix()
    for ref in refs:
        shown = subprocess.run(
            ["git", "-C", str(course.REPO), "show", f"{ref}:{relative}"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        if shown.returncode == 0:
            return ref, shown.stdout
    return None


def confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        print(question + " — 需要 --yes / needs --yes when not run in a terminal")
        return False
    return input(question + " [y/N] ").strip().lower() in ("y", "yes", "是")


def run(args) -> int:
    koan_file, _ = resolve(args.target)
    if koan_file is None or course.KOANS not in koan_file.parents:
        print(f"找不到 koan 或文件 / no such koan or koan file: {args.target}", file=sys.stderr)
        return 2
    found = pristine(koan_file, (args.ref,) if args.ref else PRISTINE_REFS)
    if found is None:
        print(
            f"找不到原始文件 / no pristine copy of {koan_file.name} in git ({', '.join(PRISTINE_REFS)}); use --from REF"
        )
        return 1
    ref, text = found
    current = koan_file.read_text(encoding="utf-8", errors="replace")
    relative = koan_file.relative_to(course.REPO).as_posix()
    if current == text:
        print(f"{relative} 已是原始版本 / is already as shipped ({ref})")
        return 0
    backup = koan_file.with_name(f"{koan_file.name}.{time.strftime('%Y%m%d-%H%M%S')}.bak")
    question = f"重置 / reset {relative} to {ref}? 你的版本保存为 / yours is saved as {backup.name}"
    if not args.yes and not confirm(question):
        print("没有改动 / nothing changed")
        return 1
    shutil.copy2(koan_file, backup)
    koan_file.write_text(text, encoding="utf-8")
    print(f"✅ {relative} ← {ref};  你的版本 / yours: {backup.relative_to(course.REPO).as_posix()}")
    return 0
