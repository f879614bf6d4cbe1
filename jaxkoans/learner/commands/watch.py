"""Watch mode: the koan you work on runs again at every save; ✅ moves on to the next one. Each
run is a pytest child (watch_run.py); saves come from watcher.py, keys from keys.py (h hint,
n next, r rerun, v reveal, q quit). Nothing here writes the learner's files."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import linecache
import os
import re
import select
import signal
import sys
import tempfile
import time
from collections.abc import Generator
from pathlib import Path

from jaxkoans import course
from jaxkoans.course import Course
from jaxkoans.learner import language, memory
from jaxkoans.learner.commands.hint import reveal
from jaxkoans.learner.commands.reveal import WHOLE, open_blanks, shorten_values
from jaxkoans.learner.keys import Keys
from jaxkoans.learner.koan_runs import (
    Koan,
    course_order,
    file_missing,
    first_open,
    inventory,
    listed_koans,
    locate,
)
from jaxkoans.learner.runner import stop_signals_leave
from jaxkoans.learner.watch_run import Run, RunResult
from jaxkoans.learner.watcher import Watcher, digest
from jaxkoans.plugin import results
from jaxkoans.plugin.results import KoanState

PASSED, SKIPPED = KoanState.PASSED, KoanState.SKIPPED
say = language.say
KEYS = (("h", "提示", "hint"), ("n", "下一个", "next"), ("r", "重跑", "rerun"))
KEYS += (("v", "揭晓", "reveal"), ("q", "退出", "quit"))

# A job yields the koans to run (and pytest options), receives the run's outcome, and prints.
Request = tuple[list[Koan], tuple[str, ...]]
Job = Generator[Request, RunResult, None]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("koan", nargs="?", help="start here (a koan, a koan file, or a chapter number)")
    add("--chapter", metavar="NN", help="only this chapter's koans")
    add("--poll", action="store_true", help="poll files every 0.2 s (when saves go unnoticed)")
    add("--timeout", type=float, default=120.0, metavar="S", help="stop a run after S seconds")


def label(koan: Koan) -> str:
    return f"{koan.chapter.number} · {koan.path.name}::{koan.name}"


def passed(koan: Koan) -> str:
    return f"✅ {say('通过', 'passed')}  ·  {label(koan)}"


def _tail(text: str, count: int = 20, width: int = 300) -> str:
    """The last `count` lines of `text`, each cut at `width` characters."""
    lines = text.rstrip().splitlines()[-count:]
    return "\n".join(line if len(line) <= width else line[:width] + " …" for line in lines)


# faulthandler's dump of a crashed interpreter: `  File "PATH", line N in NAME`.
FAULT_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<name>\S+)')


def crash_site(checkout: Course, output: str, koan: Koan) -> str:
    """Where in the learner's file the interpreter died (faulthandler lists the innermost
    frame first), with that line of source; "" when the dump names no frame of it."""
    koan_file = (checkout.root / koan.path).resolve()
    for found in filter(None, map(FAULT_FRAME.match, output.splitlines())):
        if Path(found["path"]).resolve() == koan_file:
            linecache.checkcache(str(koan_file))
            source = linecache.getline(str(koan_file), int(found["line"])).strip()
            where = f"{koan.path.as_posix()}:{found['line']} (in {found['name']})"
            return f"   {where}\n   > {source}"
    return ""


def verdict(
    checkout: Course, koan: Koan, outcome: RunResult, timeout_s: float
) -> tuple[KoanState, str]:
    """(state, the text to show) for `koan` after `outcome` (`RunRecord.result`'s reading)."""
    path = koan.path.as_posix()
    result = outcome.record.result(koan.nodeid, timed_out=outcome.timed_out)
    state = result.state
    if state == PASSED:
        return state, ""
    if state == SKIPPED:
        return (
            state,
            f"⏭️ {say('被跳过', 'skipped')}: {koan.name} {say('没有运行', 'did not run')} (a skip mark?)",
        )
    if koan.nodeid in outcome.record.koans:  # its own report
        return state, outcome.report(koan.nodeid) or f"❌ {state}"
    if not (checkout.root / path).is_file():  # deleted (or renamed) since the watch began
        return state, f"🗑️ {file_missing(path)}"
    if result.cause == "import":
        return state, outcome.report(
            path
        ) or f"🛠️ {path}: {say('无法导入', 'cannot be imported')}\n{result.note}"
    if result.cause == "timeout":
        zh, en = (
            f"{koan.name} 运行超过 {timeout_s:.0f} s，已停止（死循环？）",
            f"{koan.name} was stopped after {timeout_s:.0f} s (an endless loop?)",
        )
        text = f"⏱️ {say('超时', 'timed out')}: {say(zh, en)}\n{_tail(outcome.output)}"
    elif outcome.signal:
        site = crash_site(checkout, outcome.output, koan) or _tail(outcome.output)
        text = f"💥 {say('崩溃', 'crashed')}: {signal.Signals(outcome.signal).name}\n{site}"
    else:
        said = say(f"没有结果：{koan.nodeid}", f"no result for {koan.nodeid}")
        text = f"❓ {said} (pytest exit code {outcome.exit_code})\n{_tail(outcome.output)}"
    return state, text.rstrip()  # fmt: skip


# Home, clear the screen, then clear the scrollback too: terminals (tmux's scroll-on-clear,
# VTE) push a cleared screen into the scrollback, where each note would then read twice.
CLEAR = "\x1b[H\x1b[2J\x1b[3J"


class Console:
    """Output that reaches a pipe at once; on a terminal each verdict gets a fresh screen, which
    repeats the notes said since the last one (and only there: the scrollback is cleared)."""

    def __init__(self) -> None:
        self.tty, self.notes = sys.stdout.isatty(), []

    def say(self, *lines: str) -> None:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()

    def note(self, line: str) -> None:
        """A line that the next screen repeats."""
        self.notes.append(line)
        self.say(line)

    def screen(self, *lines: str) -> None:
        if self.tty:
            sys.stdout.write(CLEAR)
            self.say(*self.notes)
        self.notes = []
        self.say(*lines)


class Session:
    """The watch loop: runs, file changes and keys, all from one select."""

    def __init__(self, args, koans: list[Koan], scratch: Path, watcher: Watcher) -> None:
        self.args, self.koans, self.scratch, self.watcher = args, koans, scratch, watcher
        self.checkout: Course = getattr(args, "checkout", None) or Course.here()
        self.keys, self.console = Keys(), Console()
        self.focus: Koan | None = None
        self.known: dict[str, tuple[str, str | None]] = {}  # nodeid -> (state, file digest)
        self.announced: set[str] = set()  # koans whose pass was shown in this session
        self.skipped: set[str] = set()  # koans that cannot run on this machine
        self.job: Job | None = None
        self.run: Run | None = None
        self.digests: dict[str, str | None] = {}  # files of the running request, at its start
        self.ran_digest: str | None = None  # the focus file's content at its last run
        self.why = watcher.why  # how files are watched, as last told
        self.exit_code: int | None = None

    # ---- jobs -----------------------------------------------------------------------------

    def start(self, job: Job) -> None:
        """Replace whatever is running by `job`."""
        self.stop()
        self.job = job
        self._advance(None)

    def stop(self) -> None:
        if self.run is not None:
            self.run.stop()
            self.run = None
        if self.job is not None:
            self.job.close()
            self.job = None

    def _advance(self, outcome: RunResult | None) -> None:
        assert self.job is not None
        try:
            koans, extra = self.job.send(outcome) if outcome else next(self.job)
        except StopIteration:
            self.job = None
            return
        self.digests = {k.path.as_posix(): digest(self.checkout.root / k.path) for k in koans}
        nodeids = [k.nodeid for k in koans]
        self.run = Run(self.checkout, nodeids, self.scratch, self.args.timeout, extra)

    def _learn(self, outcome: RunResult) -> None:
        """Keep each verdict for this session and in progress.py's memory (so that `hint`,
        `diff` and the summary after a watch run nothing), for files unchanged since."""
        remembered, verdicts = memory.load(self.checkout), {}
        for nodeid, result in results.by_koan(outcome.events).items():
            path = result.path
            self.known[nodeid] = (result.state, self.digests.get(path))
            unchanged = self.digests.get(path) == digest(self.checkout.root / path)
            if unchanged and result.state in (PASSED, KoanState.FAILING, KoanState.NOT_STARTED):
                verdicts.setdefault(path, {})[result.name] = result
            if result.state == PASSED:
                memory.note_passed(self.checkout, nodeid)
        for path, found in verdicts.items():
            remembered.learn(path, found)
        if verdicts:
            memory.save(self.checkout, remembered)

    def _state(self, koan: Koan, remembered: memory.Memory) -> KoanState | None:
        """What this session or progress.py knows of `koan` in its file's present content:
        passed, cannot run here (skipped), or None (not known, or not passing)."""
        if koan.nodeid in self.skipped:
            return SKIPPED
        if koan.nodeid in self.known:
            state, seen = self.known[koan.nodeid]
            if seen == digest(self.checkout.root / koan.path):
                return PASSED if state == PASSED else None
        copy = dataclasses.replace(koan)
        return PASSED if remembered.recall(copy) and copy.state == PASSED else None

    def check(self, koan: Koan) -> Job:
        """Run `koan`; show its verdict; when it passes, go on to the next koan. The koans of
        its file that passed before and whose code changed since run too (broken again?)."""
        self.ran_digest = digest(self.checkout.root / koan.path)
        outcome = yield [koan], ()
        self._learn(outcome)
        state, text = verdict(self.checkout, koan, outcome, self.args.timeout)
        if state != PASSED:
            self.show(koan, text, outcome)
            yield from self.recheck(koan)
            return
        self.announced.add(koan.nodeid)
        self.console.note(f"{passed(koan)}  ({outcome.seconds:.1f} s)")
        broken = yield from self.recheck(koan)
        if broken:
            self.show(*broken)
            return
        self.after(koan)  # the koans of its file as it is now
        own = [i for i, k in enumerate(self.koans) if k.chapter.number == koan.chapter.number]
        yield from self.search(own[0] if own else 0)  # its chapter's next open koan, then on

    def recheck(self, koan: Koan) -> Generator[Request, RunResult, tuple | None]:
        """Run the other koans of `koan`'s file that passed before and are not known to pass
        as the file is now; note each that fails. Returns the first (koan, text, outcome)."""
        remembered, path = memory.load(self.checkout), koan.path.as_posix()
        known = {n: state == PASSED for n, (state, _) in self.known.items()}
        others = [
            k
            for k in self.koans
            if k.path == koan.path and k.nodeid != koan.nodeid
            and known.get(k.nodeid, remembered.passed_before(path, k.name))
            and self._state(k, remembered) != PASSED
        ]  # fmt: skip
        if not others or digest(self.checkout.root / koan.path) is None:  # none, or deleted
            return None
        outcome = yield others, ()
        self._learn(outcome)
        first = None
        for each in others:
            state, text = verdict(self.checkout, each, outcome, self.args.timeout)
            if state not in (PASSED, SKIPPED):
                again = say("又坏了", "broken again")
                self.console.note(f"⚠️ {again}: {label(each)} {say('以前通过', 'passed before')}")
                first = first or (each, text, outcome)
        return first

    def uncover(self, koan: Koan) -> Job:
        """Run `koan` showing what a wrong prediction hides, and the answers of its blanks not
        filled yet; it then counts as revealed."""
        outcome = yield [koan], ("--koans-reveal", *WHOLE)
        self._learn(outcome)
        _, text = verdict(self.checkout, koan, outcome, self.args.timeout)
        text = "\n\n".join(filter(None, [shorten_values(text), open_blanks(self.checkout, koan)]))
        self.show(koan, text or passed(koan), outcome)

    def after(self, koan: Koan) -> int:
        """Where the koans after `koan` start, in its file as it is now: the learner may have
        added, renamed or moved koans since the watch began."""
        own = [i for i, k in enumerate(self.koans) if k.path == koan.path]
        if own:
            listed = listed_koans(self.checkout.root / koan.path)
            fresh = [Koan(koan.chapter, koan.path, n, line, doc=d) for n, line, d in listed]
            self.koans[own[0] : own[-1] + 1] = fresh
        for i, each in enumerate(self.koans):
            if each.nodeid == koan.nodeid or (each.path == koan.path and each.line > koan.line):
                return i + (each.nodeid == koan.nodeid)
        return own[0] if own else 0  # its file was deleted: the next file's koans start there

    def search(self, start: int) -> Job:
        """Focus on the course's next open koan (`first_open`, as status) from `start` on,
        wrapping around. What is known is trusted; the rest runs, a file's koans together,
        stopping at the first that does not pass (-x)."""
        ordered = self.koans[start:] + self.koans[:start]  # self.koans is in course order
        note = self.console.note
        while True:
            remembered = memory.load(self.checkout)
            koan = first_open(
                ordered, [], None, functools.partial(self._state, remembered=remembered)
            )
            if koan is None:
                break
            batch = [koan]
            # the rest of its file, no wrapping: pytest runs a batch in file order (-x)
            for following in ordered[ordered.index(koan) + 1 :]:
                if following.path != koan.path or following.line < koan.line:
                    break
                if self._state(following, remembered) is None:
                    batch.append(following)
            if len(batch) > 1 or self.focus is None:
                self.console.say(f"⏳ {say('检查', 'checking')} {koan.path.as_posix()} …")
            outcome = yield batch, ("-x",)
            self._learn(outcome)
            for each in batch:
                state, text = verdict(self.checkout, each, outcome, self.args.timeout)
                if state == SKIPPED:  # cannot run here (no compiler, …): not the learner's
                    self.skipped.add(each.nodeid)
                    note(f"⏭️ {say('无法在这里运行', 'cannot run here')}  ·  {label(each)}")
                    continue
                if state != PASSED:
                    focus = self.focus
                    if focus is not None and each.nodeid == focus.nodeid:
                        note("↩️ " + say("只剩这一个", "this is the only koan left to do"))
                    elif focus is not None and each.chapter.number != focus.chapter.number:
                        note(self.next_chapter(each.chapter))
                    self.show(each, text, outcome)
                    return
                if each.nodeid not in self.announced:  # said once, not again after a re-check
                    self.announced.add(each.nodeid)
                    note(f"✅ {say('已通过', 'already passes')}  ·  {label(each)}")
        self.console.screen(self.finished())
        self.exit_code = 0

    def next_chapter(self, chapter: course.Chapter) -> str:
        """Where the watch goes next, and why there: the course's recommended path."""
        path, number = " → ".join(self.checkout.recommended_path()), chapter.number
        title, order = say(chapter.title_zh, chapter.title_en), say("课程顺序", "the course's path")
        return f"➡️ {say(f'第 {number} 章', f'on to chapter {number}')}: {title}  ({order}: {path})"

    def finished(self) -> str:
        """The last word: what passes is all this watch looked at (a chapter, or the course)."""
        count, chapter = len(self.skipped), self.args.chapter
        skipped = (
            f"（{say(f'{count} 个无法在这里运行', f'{count} cannot run here')}）" if count else ""
        )
        if not chapter:
            return f"🎉 {say('全部通过！', 'every koan passes!')}{skipped}"
        chapter, path = chapter.zfill(2), self.checkout.recommended_path()
        later = path[path.index(chapter) + 1 :] if chapter in path else []
        following = (
            f"  {say('下一章', 'next')}: python progress.py watch --chapter {later[0]}"
            if later
            else ""
        )
        every = say(f"第 {chapter} 章全部通过", f"every koan of chapter {chapter} passes")
        return f"🎉 {every}{skipped}{following}"

    # ---- output and events ----------------------------------------------------------------

    def show(self, koan: Koan, text: str, outcome: RunResult) -> None:
        header, new = [], self.focus is None or koan.nodeid != self.focus.nodeid
        if new or self.console.tty:
            header = [f"━━━ 👀 {label(koan)} ━━━  {koan.path.as_posix()}:{koan.line}"]
            header += [f"  │ {line}" for line in language.lines_of(koan.doc)]
        if new:
            self.focus = koan
            self.ran_digest = self.digests.get(koan.path.as_posix())
            self.watcher.watch_closely(self.checkout.root / koan.path)
        keys = " · ".join(f"{key} {say(zh, en).replace(' / ', '/')}" for key, zh, en in KEYS)
        keys += "" if self.keys.tty else "  (one per line)"
        stamp = f"⌚ {outcome.seconds:.1f} s · {time.strftime('%H:%M:%S')}"
        self.console.screen(*header, text, f"{stamp}    {keys}")

    def command(self, key: str) -> None:
        if key == "q":
            self.exit_code = 0
        elif self.focus is None:
            return
        elif key == "h":
            course.load_chapter.cache_clear()  # hints edited since: read them again
            found = self.checkout.chapter_for(self.checkout.root / self.focus.path)
            koan = dataclasses.replace(self.focus, chapter=found or self.focus.chapter)
            again = "  " + say("再按 h 看下一层", "press h for the next level")
            self.console.say(*reveal(self.checkout, koan, again=again))
        elif key == "n":
            self.console.note(f"⏭️ {say('跳过', 'skipped')}  ·  {label(self.focus)}")
            self.start(self.search(self.after(self.focus)))
        elif key in "rv":
            self.start((self.check if key == "r" else self.uncover)(self.focus))

    def changed(self, changes: set[Path]) -> None:
        """A batch of changes (the watcher gathers a save's events): run the focus again,
        unless nothing really changed."""
        if self.watcher.why != self.why:  # it fell back to polling: said once
            self.why = self.watcher.why
            self.console.note(f"👀 {say('监视', 'watching')}: {self.why}")
        if any(p.name == course.MANIFEST for p in changes):
            course.load_chapter.cache_clear()
        if self.focus is None:
            return
        own = self.checkout.root / self.focus.path
        paths = {
            p
            for p in changes
            if p == own  # the focus, its chapter.toml, a helper or conftest (not another koan)
            or (p.name == course.MANIFEST and p.parent.name == self.focus.chapter.number)
            or (p.suffix == ".py" and not p.name.startswith("test_"))
        }
        if not paths:
            return
        if (
            paths != {own} or digest(own) != self.ran_digest
        ):  # else saved unchanged, or still deleted
            self.start(self.check(self.focus))

    def loop(self) -> int:
        watcher, keys = self.watcher, self.keys
        while self.exit_code is None:
            fds = [fd for fd in (keys.fileno(), watcher.fileno()) if fd is not None]
            waits = [1.0, watcher.wait_s()]
            if self.run is not None:
                fds += self.run.fds()
                waits.append(self.run.wait_s())
            ready, _, _ = select.select(fds, [], [], min(waits))
            outcome = self.run.poll() if self.run is not None else None
            if outcome is not None:
                self.run = None
                self._advance(outcome)
            self.changed(watcher.changes())
            if keys.fileno() is not None and keys.fileno() in ready:
                for key in keys.read():
                    self.command(key)
                    if self.exit_code is not None:
                        break
        return self.exit_code


def starting_place(checkout: Course, koans: list[Koan], target: str) -> int | Koan | None:
    """Where `watch TARGET` starts: the koan it names, else the index in `koans` of the first
    koan of the chapter (03) or koan file (test_x.py, 03/test_x.py, a path) it names."""
    if target.isdigit():
        return next((i for i, k in enumerate(koans) if k.chapter.number == target.zfill(2)), None)
    koan_file, koan = locate(checkout, target)
    if koan is not None:
        return next((k for k in koans if k.nodeid == koan.nodeid), None)
    own = (i for i, k in enumerate(koans) if (checkout.root / k.path).resolve() == koan_file)
    return next(own, None)


def run(args) -> int:
    def refuse(message: str, code: int = 2) -> int:
        print(message, file=sys.stderr)
        return code

    if os.name != "posix":
        return refuse(say("watch 需要 Linux、macOS 或 WSL", "watch needs Linux, macOS or WSL"), 1)
    chapter = args.chapter.zfill(2) if args.chapter else None
    chapters = [c for c in args.checkout.chapters() if chapter in (None, c.number)]
    koans = course_order(inventory(args.checkout, chapters), args.checkout.recommended_path())
    if not koans:
        return refuse(say("没有 koan", "no koans") + (f" (chapter {chapter})" if chapter else ""))
    start = starting_place(args.checkout, koans, args.koan) if args.koan else 0
    if start is None:
        return refuse(f"{say('找不到 koan', 'no such koan')}: {args.koan}")
    with contextlib.ExitStack() as stack:
        watcher = stack.enter_context(Watcher(args.checkout.koans, poll=args.poll))
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="jaxkoans-watch-")))
        session = Session(args, koans, scratch, watcher)
        stack.enter_context(session.keys)
        stack.enter_context(stop_signals_leave())  # ends the watch like q
        stack.callback(session.stop)
        console = session.console
        tell = console.note if watcher.mode == "poll" else console.say  # polling: kept on screen
        where = f"{args.checkout.koans.name}/ ({watcher.why})"
        tell(f"👀 {say('监视', 'watching')} {where}; Ctrl-C {say('退出', 'quits')}")
        try:
            first = session.search(start) if isinstance(start, int) else session.check(start)
            session.start(first)
            return session.loop()
        except KeyboardInterrupt:
            console.say("", "👋 " + say("再见", "bye"))
            return 0
