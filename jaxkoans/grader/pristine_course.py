"""The pristine course a student's copy is graded against (a git ref or a directory), built once."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from jaxkoans import course
from jaxkoans.course import koan_model
from jaxkoans.course import shipped as as_shipped
from jaxkoans.grader import release, tamper

COURSE_IGNORED = (".git", ".venv", "venv", "__pycache__", "*.pyc", ".pytest_cache")
COURSE_IGNORED += (".ruff_cache", ".mypy_cache", ".jaxkoans", "*.egg-info", "build", "dist")


class UsageProblem(Exception):
    """The command was given something it cannot use (exit code 2)."""


class CouldNotGrade(Exception):
    """Grading itself failed: the course, the environment, the run (exit code 3)."""


@dataclass
class PristineCourse:
    root: Path  # the extracted pristine course
    source: str  # the ref or the directory it came from
    commit: str | None
    dirty: bool | None  # a directory with uncommitted changes
    chapters: list[course.Chapter]
    files: list[str]  # koans/NN/test_x.py, in course order
    koans: dict[str, list[str]]  # file -> its koans, in order
    allowed: Mapping[str, dict[str, set[str]]]  # file -> tamper.answer_flags
    partial: set[str] = field(default_factory=set)  # files of which only some koans are graded

    def chapter_of(self, rel: str) -> str:
        return rel.split("/")[1]


class AnswerFlags(dict):
    """`tamper.answer_flags` of each koan file, worked out when first asked for: an assignment
    of one chapter reads only that chapter's answers."""

    def __init__(self, root: Path, files: tuple[str, ...]) -> None:
        super().__init__()
        self.root, self.files = root, files

    def __missing__(self, rel: str) -> dict[str, set[str]]:
        if rel not in self.files:
            raise KeyError(rel)
        answer, koan = self.root / "answers" / Path(rel).relative_to("koans"), self.root / rel
        if answer.is_file():
            self[rel] = tamper.answer_flags(koan, answer)
        else:  # a grading course (`release --grader`): the flags, precomputed
            entry = (release.read_flags(self.root) or {}).get(rel) or {}
            same = entry.get("koan") == as_shipped.blob_id(koan.read_bytes())
            self[rel] = {owner: set(f) for owner, f in entry.get("flags", {}).items() if same}
        return self[rel]


def _git(repo: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    command = ["git", "-C", str(repo), *args]
    return subprocess.run(command, capture_output=True, check=False, timeout=300, **kwargs)


def prepare_course(source: str | None, into: Path, repo: Path | None = None) -> PristineCourse:
    """Build the pristine course under `into` from a directory or a git ref of `repo`."""
    repo = repo or course.Course.here().root  # grade passes its own checkout
    root = into / "pristine"
    if source and Path(source).is_dir():
        directory = Path(source).resolve()
        shutil.copytree(directory, root, ignore=shutil.ignore_patterns(*COURSE_IGNORED))
        commit, dirty = _directory_commit(directory)
        label = str(directory)
    else:
        ref = source or "HEAD"
        try:
            found = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", text=True)
        except (OSError, subprocess.SubprocessError) as error:
            raise CouldNotGrade(f"git is needed for --course {ref}: {error}") from None
        if found.returncode != 0:
            raise UsageProblem(
                f"--course {ref}: 既不是目录也不是 {repo} 的 git 引用 / neither a directory "
                f"nor a git ref of {repo}"
            )
        commit, dirty, label = found.stdout.strip(), None, ref
        archive = _git(repo, "archive", "--format=tar", commit)
        if archive.returncode != 0:
            raise CouldNotGrade(f"git archive {ref} failed: {archive.stderr.decode()[-500:]}")
        root.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(root, filter="data")
    return _read_course(root, label, commit, dirty)


def _directory_commit(directory: Path) -> tuple[str | None, bool | None]:
    try:
        head = _git(directory, "rev-parse", "HEAD", text=True)
        if head.returncode != 0:
            return None, None
        status = _git(directory, "status", "--porcelain", "--untracked-files=no", text=True)
    except (OSError, subprocess.SubprocessError):
        return None, None
    return head.stdout.strip(), bool(status.stdout.strip())


def _read_course(root: Path, label: str, commit: str | None, dirty: bool | None) -> PristineCourse:
    chapters = course.Course(root).chapters()
    if not chapters:
        raise UsageProblem(
            f"--course {label}: 不是 jax-koans 课程 / not a jax-koans course (no koans/NN/chapter.toml)"
        )
    files, koans = [], {}
    for chapter in chapters:
        paths = (root / "koans" / chapter.number).glob("test_*.py")
        for path in sorted(paths, key=lambda p: (chapter.file_rank(p.name), p.name)):
            rel = path.relative_to(root).as_posix()
            files.append(rel)
            koans[rel] = [koan.name for koan in koan_model.read(path).koans]
    allowed = AnswerFlags(root, tuple(files))
    return PristineCourse(root, label, commit, dirty, chapters, files, koans, allowed)


def select(
    pristine: PristineCourse, chapters: list[str] | None, koans: list[str] | None
) -> PristineCourse:
    """The part of the course an assignment grades: some chapters (`01`, `1`), some koans
    (`test_name`, `test_file.py::test_name`, `koans/NN/…`) within them; unknown: UsageProblem."""
    files, by_file = list(pristine.files), dict(pristine.koans)
    if chapters:
        known = {c.number for c in pristine.chapters}
        wanted = {c.strip().zfill(2) for c in chapters if c.strip()}
        unknown = sorted(wanted - known)
        if unknown:
            raise UsageProblem(
                f"--chapter: 没有这一章 / no such chapter: {', '.join(unknown)} "
                f"(the course has {', '.join(sorted(known))})"
            )
        files = [rel for rel in files if pristine.chapter_of(rel) in wanted]
    partial: set[str] = set()
    if koans:
        chosen: dict[str, set[str]] = {}
        for wanted_koan in (k.strip() for k in koans if k.strip()):
            path, _, name = wanted_koan.rpartition("::")
            places = [rel for rel in files if not path or rel == path or rel.endswith("/" + path)]
            hits = [rel for rel in places if name in by_file[rel]]
            if not hits:
                raise UsageProblem(f"--koans: 没有这个 koan / no such koan: {wanted_koan}")
            for rel in hits:
                chosen.setdefault(rel, set()).add(name)
        files = [rel for rel in files if rel in chosen]
        partial = {rel for rel in files if len(chosen[rel]) < len(by_file[rel])}
        by_file = {rel: [k for k in by_file[rel] if k in chosen[rel]] for rel in files}
    numbers = {pristine.chapter_of(rel) for rel in files}
    chapters = [c for c in pristine.chapters if c.number in numbers]
    allowed = {rel: pristine.allowed[rel] for rel in files}  # worked out now, before any run
    koans = {rel: by_file[rel] for rel in files}
    return replace(
        pristine, chapters=chapters, files=files, koans=koans, allowed=allowed, partial=partial
    )
