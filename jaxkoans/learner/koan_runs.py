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
from jaxkoans.learner import memory, runner, state
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
        self.nodeid = f"{self.path.as_posix()}::{self.name}"
        self.result = self.result or KoanResult(self.nodeid, KoanState.NOT_STARTED)

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
        """The course's next koan (`first_open`), with where it waits (found without a run)."""
        koan = first_open(self.koans, path, chapter, lambda k: k.state)
        if koan and not koan.recalled and self.checkout.is_shipped(koan.path.as_posix()):
            model = koan_model.read(self.checkout.root / koan.path)
            koan.line = model.first_blank_line(koan.name) or koan.line
        return koan


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
    """Every koan of the chosen chapters, in course order, before anything runs, with those the
    learner deleted (from the answer, else koans/.shipped.json); with `naming`, only the files
    whose text (or their answer's) has that word (a search parses no more)."""
    koans = []
    for chapter in chapters:
        directory = checkout.koans / chapter.number
        names = {p.name for p in directory.glob("test_*.py")} | set(chapter.files)
        for file_name in sorted(names, key=lambda n: (chapter.file_rank(n), n)):
            test_file = directory / file_name
            answer = checkout.answer_of(test_file)
            if naming and not any(_mentions(p, naming) for p in (test_file, answer)):
                continue
            relative = test_file.relative_to(checkout.root)
            present = listed_koans(test_file) if test_file.is_file() else []
            koans += [Koan(chapter, relative, name, line, doc=doc) for name, line, doc in present]
            if checkout.is_shipped(relative.as_posix()):  # as shipped: nothing deleted
                continue
            text = None if answer.is_file() else (checkout.shipped_text(relative.as_posix()) or "")
            listed = listed_koans(answer if text is None else test_file, text and text[1])
            note = DELETED if test_file.is_file() else FILE_DELETED
            for lost, _, doc in listed:  # failing until `progress.py reset`
                if lost not in {n for n, _, _ in present}:
                    result = KoanResult(
                        f"{relative.as_posix()}::{lost}", KoanState.MISSING, note=note
                    )
                    koans.append(Koan(chapter, relative, lost, 1, doc, result))
    return koans


def _mentions(path: Path, word: str) -> bool:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return word in path.read_text(encoding="utf-8")
    return False


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
        record, seen = Path(scratch) / "record.jsonl", [0]

        def tick() -> None:
            events = results.read(record) if on_result and record.exists() else []
            for event in events[seen[0] :]:
                if event.get("event") == "koan":
                    on_result(KoanResult.from_event(event))
            seen[0] = max(seen[0], len(events))

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
        return results.read(record) if record.exists() else [], problem, code is not None


def show_result(result: KoanResult) -> None:
    """One line on stderr per koan as the run reports it (stdout keeps the summary)."""
    said = say("超时（死循环？）", "timed out (an endless loop?)")
    late = f"  ⏱️ {said}" if result.cause == "timeout" else ""
    mark = RESULT_MARKS.get(result.state, "❌")
    print(f"   {mark} {result.nodeid}{late}", file=sys.stderr, flush=True)


def merge(checkout: Course, koans: list[Koan], events: list[dict], problem: str) -> Progress:
    progress = Progress(checkout, koans)
    record = results.RunRecord.of(events)

    def tell(path: str, message: str) -> None:
        progress.problems.append(message)
        known = progress.file_problems.get(path)
        progress.file_problems[path] = f"{known}\n{message}" if known else message

    for path, error in record.collect_errors:
        tell(path, f"{path}: 无法导入 / cannot be imported:\n{error}")
    if problem:
        running = [n for n in record.started if results.koan_id(n) not in record.koans]
        progress.problems.append(problem + (f" (still running: {running[-1]})" if running else ""))
    for koan in koans:
        result = record.result(koan.nodeid)
        koan.hold(
            replace(result, note="file does not import") if result.cause == "import" else result
        )
        if result.state == KoanState.CRASHED:
            tell(
                koan.path.as_posix(),
                f"{koan.nodeid}: 💥 崩溃或超时，没有结果 / crashed or hung, no result: "
                f"run `pytest {koan.nodeid}` to see why",
            )
    return progress


def measure(
    checkout: Course,
    chapter: str | None = None,
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
    present = [k for k in inventoried if k.state != KoanState.MISSING]
    koans = [k for k in inventoried if only in (None, k.path.as_posix(), k.nodeid)]
    remembered, stale = memory.load(checkout), []
    for koan in (k for k in koans if k.state != KoanState.MISSING):
        if reuse and remembered.recall(koan) and koan.state != KoanState.ENVIRONMENT:
            continue  # remembered (a failed build runs again: the machine may be fixed since)
        koan.recalled = False
        if reuse and checkout.is_shipped(koan.path.as_posix()):  # as shipped: not started
            koan.hold(KoanResult(koan.nodeid, KoanState.NOT_STARTED))
        else:
            stale.append(koan)
    recalled = dict.fromkeys(k.path.as_posix() for k in koans if k.recalled)
    problems = [
        remembered.files[p]["problem"] for p in recalled if remembered.files[p].get("problem")
    ]
    problems += [
        f"{k.nodeid} 不见了 / is missing: python progress.py reset {k.path}"
        for k in koans
        if k.result.note == DELETED
    ]
    listed = [checkout.koans / c.number / name for c in chapters for name in c.files]
    problems += [
        file_missing(p.relative_to(checkout.root).as_posix()) for p in listed if not p.exists()
    ]
    files = list(dict.fromkeys(k.path.as_posix() for k in stale))
    if files and run:
        workers = min(2, os.cpu_count() or 1, len(files))
        targets = []  # a file whose every koan is stale by its path, else its stale koans
        for path in files:
            own = [k for k in stale if k.path.as_posix() == path]
            whole = len(own) == sum(k.path.as_posix() == path for k in present)
            targets += [path] if whole else [k.nodeid for k in own]
        count = f"{len(stale)} koan(s) of {len(files)} file(s)"
        rest = say("其余的结果记得", "the rest are remembered")
        print(f"⏳ {say('运行', 'running')} {count}; {rest}", file=sys.stderr, flush=True)
        events, problem, complete = run_koans(checkout, targets, workers, on_result=show_result)
        fresh = merge(checkout, stale, events, problem)
        problems += fresh.problems
        passed = [
            k
            for k in stale
            if k.state == KoanState.PASSED
            and not remembered.passed_before(k.path.as_posix(), k.name)
        ]
        if passed:
            memory.note_passed(checkout, passed[-1].nodeid)
        ran = [k for k in koans if k.path.as_posix() in files and k.state != KoanState.MISSING]
        if only is not None and "::" in only:  # one koan ran: its file's others stay known
            kept = [k for k in ran if complete or k.state != KoanState.CRASHED]
            remembered.learn(only.partition("::")[0], {k.name: k.result for k in kept})
        else:
            remembered.remember(ran, fresh.file_problems, complete)
        memory.save(checkout, remembered)
    return Progress(checkout, koans, problems)


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


def locate(checkout: Course, target: str | None) -> tuple[Path | None, Koan | None]:
    """(koan file, koan) `target` names: a koan file (a path, or test_x.py, 04/test_x.py under
    koans/, also one deleted) with no koan, else a koan; without a target, the koan that passed
    last, else the next one."""
    if target and Path(target).is_file():
        return Path(target).resolve(), None
    if target and target.endswith(".py"):
        named = sorted(checkout.koans.glob(target if "/" in target else f"*/{target}"))
        if len(named) == 1:
            return named[0].resolve(), None
    just_passed = None if target else state.load(checkout.state, memory.LAST).get("passed")
    just_passed = just_passed if isinstance(just_passed, str) else None
    koan = find_koan(checkout, target or just_passed)
    if koan is None and just_passed:  # the koan that passed last is gone: the next one
        koan = find_koan(checkout, None)
    if koan is not None:
        return checkout.root / koan.path, koan
    for base in (Path.cwd(), checkout.root) if target else ():  # a deleted koan file
        candidate = (base / target).resolve()
        if checkout.koans in candidate.parents and candidate.name.startswith("test_"):
            return candidate, None
    return None, None


def chosen_chapters(args) -> tuple[list[course.Chapter], str | None]:
    """The chapters `--chapter` selects (all without it), and the one chosen; exits 2 on an
    unknown chapter."""
    wanted = args.chapter.zfill(2) if getattr(args, "chapter", None) else None
    chapters = [c for c in args.checkout.chapters() if wanted in (None, c.number)]
    if not chapters:
        print(f"{say('没有这一章', 'no such chapter')}: {args.chapter}", file=sys.stderr)
        raise SystemExit(2)
    return chapters, wanted
