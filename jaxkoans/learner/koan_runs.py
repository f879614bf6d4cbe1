"""Where a learner stands: the koans run in a child pytest under a timeout (an endless loop, a
C++ crash or a file that does not parse costs only that file's koans), its record is read and
summarised. Nothing here writes to a learner's files."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from jaxkoans import course
from jaxkoans.course import Course, koan_model
from jaxkoans.learner import memory, runner
from jaxkoans.learner.language import say
from jaxkoans.plugin import results
from jaxkoans.plugin.results import KoanResult, KoanState

# The notes that say why a koan is MISSING or CRASHED.
DELETED = "deleted from your file / 已从你的文件中删除"
FILE_DELETED = "file deleted / 文件已删除"
RUN_TIMEOUT_S = 900  # the whole run; each koan has pytest-timeout's own limit
RESULT_MARKS = {
    KoanState.PASSED: "✅",
    KoanState.NOT_STARTED: "✍️",
    KoanState.SKIPPED: "⏭️",
    KoanState.ENVIRONMENT: "🛠️",
    KoanState.CRASHED: "💥",
}


@dataclass
class Koan:
    """A koan of the learner's copy (where it is, what it says) and its latest `KoanResult`."""

    chapter: course.Chapter
    path: Path  # the koan's file, relative to the repository
    name: str
    line: int  # where to look: the blank, the TODO, the failure, else the def
    doc: str = ""
    result: KoanResult = None  # type: ignore[assignment]  # not started until measured
    recalled: bool = False  # the state was remembered, not measured in this run
    ignored_edits: list[str] = field(default_factory=list)  # "file:line: what" grade will not use

    def __post_init__(self) -> None:
        self.result = self.result or KoanResult(self.nodeid, KoanState.NOT_STARTED)

    @property
    def nodeid(self) -> str:
        return f"{self.path.as_posix()}::{self.name}"

    @property
    def state(self) -> KoanState:
        return self.result.state

    def hold(self, result: KoanResult) -> None:
        """Hold `result`; keep this koan's line where the result names none."""
        self.line = result.line or self.line
        self.result = replace(result, nodeid=self.nodeid, line=self.line)


@dataclass
class Progress:
    checkout: Course
    koans: list[Koan]
    problems: list[str] = field(default_factory=list)  # files that did not run, hangs
    file_problems: dict[str, str] = field(default_factory=dict)  # file -> why it did not run

    def of(self, chapter: course.Chapter) -> list[Koan]:
        return [k for k in self.koans if k.chapter.number == chapter.number]

    def next_koan(self, path: list[str], chapter: str | None = None) -> Koan | None:
        """The course's next koan (`first_open`), with where it waits."""
        following = first_open(self.koans, path, chapter, lambda k: k.state)
        if following is None:
            return None
        if not following.recalled and self.checkout.is_shipped(following.path.as_posix()):
            model = koan_model.read(self.checkout.root / following.path)
            blank = model.first_blank_line(following.name)
            following.line = blank or following.line  # where it waits, found without a run
        return following


def course_order(koans: list[Koan], path: list[str], chapter: str | None = None) -> list[Koan]:
    """`koans` (of `chapter`, or all) in the course's order: the chapters as the recommended
    `path` lists them (the others after), within a chapter as listed."""
    order = {number: i for i, number in enumerate(path)}
    chosen = [k for k in koans if chapter in (None, "", k.chapter.number)]
    return sorted(chosen, key=lambda k: order.get(k.chapter.number, len(order)))


def first_open(koans: list[Koan], path: list[str], chapter: str | None, state_of) -> Koan | None:
    """The course's next koan (for status and watch alike): the first in `course_order` whose
    state (`state_of(koan)`, None while unknown) is not settled."""
    ordered = course_order(koans, path, chapter)
    return next((k for k in ordered if state_of(k) not in results.SETTLED_STATES), None)


def listed_koans(test_file: Path, text: str | None = None) -> list[tuple[str, int, str]]:
    """(name, def line, docstring) of each koan in a file (or in `text`), without importing it."""
    model = koan_model.read(test_file) if text is None else koan_model.parse(text)
    return [(k.name, k.line, k.docstring) for k in model.koans]


def inventory(checkout: Course, chapters: list[course.Chapter], naming: str = "") -> list[Koan]:
    """Every koan of the chosen chapters, in course order, before anything runs; with `naming`,
    only the files whose text (or their answer's) has that word (a search parses no more)."""
    koans = []
    for chapter in chapters:
        directory = checkout.koans / chapter.number
        names = {p.name for p in directory.glob("test_*.py")} | set(chapter.files)
        files = [directory / n for n in sorted(names, key=lambda n: (chapter.file_rank(n), n))]
        for test_file in files:
            if naming and not _mentions(checkout, test_file, naming):
                continue
            relative = test_file.relative_to(checkout.root)
            present = listed_koans(test_file) if test_file.is_file() else []
            koans += [Koan(chapter, relative, name, line, doc=doc) for name, line, doc in present]
            if not checkout.is_shipped(relative.as_posix()):  # as shipped: nothing deleted
                koans += missing_koans(checkout, chapter, test_file, {n for n, _, _ in present})
    return koans


def _mentions(checkout: Course, test_file: Path, word: str) -> bool:
    for path in (test_file, checkout.answer_of(test_file)):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            if word in path.read_text(encoding="utf-8"):
                return True
    return False


def missing_koans(
    checkout: Course, chapter: course.Chapter, test_file: Path, present: set[str] = frozenset()
) -> list[Koan]:
    """The shipped koans (from the answer, else koans/.shipped.json in a student release) the
    learner's file lost (all: the file was deleted); failing until `progress.py reset`."""
    relative = test_file.relative_to(checkout.root)
    note = DELETED if test_file.is_file() else FILE_DELETED
    answer, shipped = checkout.answer_of(test_file), checkout.shipped_text(relative.as_posix())
    if answer.is_file():
        listed = listed_koans(answer)
    else:
        listed = listed_koans(test_file, shipped[1]) if shipped else []
    koans = []
    for name, _, doc in listed:
        if name not in present:
            lost = KoanResult(f"{relative.as_posix()}::{name}", KoanState.MISSING, note=note)
            koans.append(Koan(chapter, relative, name, 1, doc, lost))
    return koans


def pytest_command(targets: list[str], record: Path, workers: int) -> list[str]:
    """status's run: quiet, every file collected, always through xdist (a worker that crashes or
    is stopped by the watchdog is replaced, and the other koans still run)."""
    options = ("-q", "--tb=no", "--continue-on-collection-errors")
    return runner.pytest_command(targets, record=record, workers=workers, options=options)


def run_koans(
    checkout: Course,
    targets: list[str],
    workers: int,
    timeout_s: int = RUN_TIMEOUT_S,
    on_result: Callable[[KoanResult], None] | None = None,
) -> tuple[list[dict], str, bool]:
    """Run pytest on `targets` in a child; (its record's events, any problem, whether the run
    finished). `on_result` sees each koan result as the run writes it."""
    with tempfile.TemporaryDirectory(prefix="jaxkoans-") as scratch:
        record = Path(scratch) / "record.jsonl"
        seen = [0]

        def tick() -> None:
            if on_result is None or not record.exists():
                return
            events = results.read(record)
            for event in events[seen[0] :]:
                if event.get("event") == "koan":
                    on_result(KoanResult.from_event(event))
            seen[0] = len(events)

        command = pytest_command(targets, record, workers)
        code, stderr = runner.run_in_group(
            command, timeout_s, tick, cwd=checkout.root, env=checkout.env()
        )
        problem = ""
        if code is None:
            problem = f"the koans did not finish within {timeout_s} s"
        elif code not in (0, 1):  # 0: all passed, 1: some failed
            tail = "\n".join(stderr.strip().splitlines()[-5:])
            problem = f"pytest stopped with exit code {code}: {tail}"
        events = results.read(record) if record.exists() else []
        return events, problem, code is not None


def show_result(result: KoanResult) -> None:
    """One line on stderr per koan as the run reports it (stdout keeps the summary)."""
    mark = RESULT_MARKS.get(result.state, "❌")
    said = say("超时（死循环？）", "timed out (an endless loop?)")
    late = f"  ⏱️ {said}" if result.cause == "timeout" else ""
    print(f"   {mark} {result.nodeid}{late}", file=sys.stderr, flush=True)


def merge(checkout: Course, koans: list[Koan], events: list[dict], problem: str) -> Progress:
    progress = Progress(checkout, koans)
    record = results.RunRecord.of(events)
    for path, error in record.collect_errors:
        message = f"{path}: 无法导入 / cannot be imported:\n{error}"
        progress.problems.append(message)
        progress.file_problems[path] = message
    if problem:
        running = [n for n in record.started if results.koan_id(n) not in record.koans]
        where = f" (still running: {running[-1]})" if running else ""
        progress.problems.append(problem + where)
    for koan in koans:
        result = record.result(koan.nodeid)
        if result.cause == "import":
            result = replace(result, note="file does not import")
        koan.hold(result)
        if result.state == KoanState.CRASHED:
            path = koan.path.as_posix()
            message = (
                f"{koan.nodeid}: 💥 崩溃或超时，没有结果 / crashed or hung, no result: "
                f"run `pytest {koan.nodeid}` to see why"
            )
            progress.problems.append(message)
            known = progress.file_problems.get(path)
            progress.file_problems[path] = f"{known}\n{message}" if known else message
    return progress


def measure(
    checkout: Course,
    chapter: str | None = None,
    workers: int | None = None,
    reuse: bool = True,
    run: bool = True,
    only: str | None = None,
) -> Progress:
    """Every koan's state: remembered for files unchanged since their last run, not started for
    files as shipped, run otherwise (`run=False`: left not started, all `hint` needs).
    `reuse=False` runs every file again; `only` (a koan file's path or a koan's nodeid): that
    file's or that koan's alone (`diff` needs no more)."""
    chapters = [c for c in checkout.chapters() if chapter in (None, c.number)]
    inventoried = inventory(checkout, chapters)
    koans = [k for k in inventoried if only in (None, k.path.as_posix(), k.nodeid)]
    remembered = memory.load(checkout)
    present = [k for k in koans if k.state != KoanState.MISSING]
    stale = []
    for koan in present:
        if reuse and remembered.recall(koan) and koan.state != KoanState.ENVIRONMENT:
            continue  # remembered (a failed build runs again: the machine may be fixed since)
        koan.recalled = False
        if reuse and checkout.is_shipped(koan.path.as_posix()):  # as shipped: not started
            koan.hold(KoanResult(koan.nodeid, KoanState.NOT_STARTED))
        else:
            stale.append(koan)
    problems = remembered.problems_of([k for k in koans if k.recalled])
    problems += [
        f"{k.nodeid} 不见了 / is missing: python progress.py reset {k.path}"
        for k in koans
        if k.result.note == DELETED
    ]
    listed = [checkout.koans / c.number / name for c in chapters for name in c.files]
    problems += [
        file_missing(p.relative_to(checkout.root).as_posix()) for p in listed if not p.exists()
    ]
    files = sorted({k.path.as_posix() for k in stale})
    if files and run:
        workers = workers if workers is not None else min(2, os.cpu_count() or 1, len(files))
        targets = run_targets(stale, [k for k in inventoried if k.state != KoanState.MISSING])
        count = f"{len(stale)} koan(s) of {len(files)} file(s)"
        rest = say("其余的结果记得", "the rest are remembered")
        print(f"⏳ {say('运行', 'running')} {count}; {rest}", file=sys.stderr, flush=True)
        events, problem, complete = run_koans(checkout, targets, workers, on_result=show_result)
        fresh = merge(checkout, stale, events, problem)
        problems += fresh.problems
        passed = remembered.newly_passed(stale)
        if passed:
            memory.note_passed(checkout, passed[-1].nodeid)
        ran = [k for k in present if k.path.as_posix() in files]  # recalled ones keep theirs
        if only is not None and "::" in only:  # one koan ran: its file's others stay known
            kept = [k for k in ran if complete or k.state != KoanState.CRASHED]
            remembered.learn(only.partition("::")[0], {k.name: k.result for k in kept})
        else:
            remembered.remember(ran, fresh.file_problems, complete)
        memory.save(checkout, remembered)
    return Progress(checkout, koans, problems)


def run_targets(stale: list[Koan], present: list[Koan]) -> list[str]:
    """What pytest runs: a file whose every koan is stale by its path, else its stale koans."""
    targets = []
    for path in dict.fromkeys(k.path.as_posix() for k in stale):
        own = [k for k in stale if k.path.as_posix() == path]
        everything = [k for k in present if k.path.as_posix() == path]
        targets += [path] if len(own) == len(everything) else [k.nodeid for k in own]
    return targets


def file_missing(relative: str) -> str:
    """What a command says of a koan file the learner deleted, and how to bring it back."""
    return f"{relative} {say('文件不见了', 'the file is missing')}: python progress.py reset {relative}"


def find_koan(checkout: Course, wanted: str | None, chapter: str | None = None) -> Koan | None:
    """A koan by name (test name, file.py::name or nodeid, a case's `[...]` ignored), else the
    next one on the path, from what is known without running anything."""
    if not wanted:
        progress = measure(checkout, chapter, run=False)
        return progress.next_koan(checkout.recommended_path(), chapter)
    wanted = results.koan_id(wanted)
    chapters = [c for c in checkout.chapters() if chapter in (None, c.number)]
    for koan in inventory(checkout, chapters, naming=wanted.rpartition("::")[2]):
        if wanted in (koan.name, koan.nodeid, f"{koan.path.name}::{koan.name}"):
            return koan
    return None


def chosen_chapters(args) -> tuple[list[course.Chapter], str | None]:
    """The chapters `--chapter` selects (all without it), and the one chosen; exits 2 on an
    unknown chapter."""
    wanted = args.chapter.zfill(2) if getattr(args, "chapter", None) else None
    chapters = [c for c in args.checkout.chapters() if wanted in (None, c.number)]
    if not chapters:
        print(f"{say('没有这一章', 'no such chapter')}: {args.chapter}", file=sys.stderr)
        raise SystemExit(2)
    return chapters, wanted
