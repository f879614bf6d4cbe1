"""Where the learner stands: per chapter the three states with a bar, and the next koan."""

from __future__ import annotations

import argparse
import json

from jaxkoans import course
from jaxkoans.course import predictions, reading
from jaxkoans.learner import outside
from jaxkoans.learner.koan_runs import Koan, Progress, chosen_chapters, measure
from jaxkoans.learner.language import lines_of, say
from jaxkoans.plugin import results
from jaxkoans.plugin.classify import Cause
from jaxkoans.plugin.contracts import HEADLINE as CONTRACT_HEADLINE
from jaxkoans.plugin.results import KoanState, revealed

MARKS = {KoanState.PASSED: "█", KoanState.FAILING: "▒", KoanState.NOT_STARTED: "░"}
SKIPPED, ENVIRONMENT = KoanState.SKIPPED, KoanState.ENVIRONMENT
BAR_WIDTH = 24
IGNORED = "passed_with_ignored_edits"  # passes here only with an edit grade will not use
APART = (("⚠️", IGNORED), ("⏭️", SKIPPED), ("🛠️", ENVIRONMENT))  # each shown when not 0
CANNOT_RUN = (
    ("⏭️", SKIPPED, "个 koan 在这台机器上被跳过", "koans were skipped on this machine (they cannot run here)"),
    ("🛠️", ENVIRONMENT, "个 koan 因 C++ 编译失败而无法运行，不算尝试",
     "koans could not run because the C++ build failed (not counted as attempts)"),
)  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chapter", metavar="NN", help="only this chapter (e.g. 03)")
    parser.add_argument("--json", action="store_true", help="print the progress as JSON")
    parser.add_argument(
        "--all", action="store_true", help="re-run every koan, ignoring remembered results"
    )


def column(koan: Koan) -> KoanState:
    """The state a koan is counted under: a crash or a deleted koan is an open attempt (❌), and
    so is a pass with ignored edits in the bar."""
    flagged = koan.state == KoanState.PASSED and koan.ignored_edits
    return KoanState.FAILING if flagged or koan.state in results.FAILED_STATES else koan.state


def bar(koans: list[Koan]) -> str:
    if not koans:
        return "·" * BAR_WIDTH
    cells = [round(sum(column(k) == s for k in koans) / len(koans) * BAR_WIDTH) for s in MARKS]
    cells[-1] = BAR_WIDTH - sum(cells[:-1])  # passed, failing, then the rest
    return "".join(mark * n for mark, n in zip(MARKS.values(), cells, strict=True))


def counts(koans: list[Koan]) -> dict[str, int]:
    """Koans per state; "passed" counts only clean passes, those with an edit grade ignores
    are counted apart ("passed_with_ignored_edits")."""
    flagged = sum(k.state == KoanState.PASSED and bool(k.ignored_edits) for k in koans)
    found = {state: sum(column(k) == state for k in koans) for state in MARKS}
    found[KoanState.FAILING] -= flagged
    apart = {state: sum(k.state == state for k in koans) for state in (SKIPPED, ENVIRONMENT)}
    return {**found, **apart, IGNORED: flagged}


def show(
    progress: Progress,
    chapters: list[course.Chapter],
    following: Koan | None,
    found: list[outside.Outside],
) -> None:
    print(say("JAX 进阶 Koans · 学习进度", "Advanced JAX Koans · progress") + "\n")
    for chapter in chapters:
        own = progress.of(chapter)
        c = counts(own)
        print(f"  {chapter.number} {say(chapter.title_zh, chapter.title_en)}")
        seen = passed_revealed(progress, own)  # passed after a reveal: learned, not predicted
        print(
            f"     {bar(own)}  {c['passed']:>3}/{len(own):<3}"
            f"  ✅ {c['passed']}  ❌ {c['failing']}  ✍️ {c['not_started']}"
            + "".join(f"  {m} {c[k]}" for m, k in APART if c[k])
            + (f"  (👁 {seen} {say('揭晓后通过', 'passed (revealed)')})" if seen else "")
        )
    total, n = counts(progress.koans), len(progress.koans)
    percent = 100 * total["passed"] // (n or 1)
    print(f"\n  {say('总计', 'total')}  {bar(progress.koans)}  {total['passed']}/{n} ({percent} %)")
    marks = f"✅ {say('通过', 'passed')}   ❌ {say('尝试中', 'attempted')}"
    print(f"  {marks}   ✍️ {say('未开始', 'not started')}")
    for problem in progress.problems:
        print(f"\n⚠️  {problem}")
    warned = outside.warnings(progress.checkout, found)  # edits grade will not use
    if warned:
        print("\n⚠️  " + "\n".join(warned))
    for mark, state, zh, en in CANNOT_RUN:
        if total[state]:
            print(f"\n{mark}  {total[state]} {say(zh, en)}: python progress.py doctor")
    if following is None:
        done = ("全部通过！", "every koan passes!")
        if total[SKIPPED] or total[ENVIRONMENT]:
            done = ("能在这里运行的都通过了", "every koan that can run here passes")
        print("\n🎉 " + say(*done))
        return
    named = f"{following.chapter.number} · {following.path.name}::{following.name}"
    print(f"\n{say('下一个 koan', 'next koan')}:  {named}")
    note = f"  ({following.result.note})" if following.result.note else ""
    print(f"  {following.path.as_posix()}:{following.line}{note}")
    refused = {Cause.COMPUTED: predictions.MESSAGE, Cause.READS_TEST: reading.MESSAGE}
    refused[Cause.CONTRACT] = CONTRACT_HEADLINE  # refused, not run: say why here too
    for line in refused.get(following.result.cause, "").splitlines():
        print(f"  ❌ {line}")
    if following.result.cause == "timeout":  # pytest-timeout stopped it
        print("  ⏱️ " + say("超时，已停止（死循环？）", "timed out and stopped (an endless loop?)"))
    for line in lines_of(following.doc):
        print(f"  │ {line}")
    print(f"  {say('运行', 'run')}:   pytest {following.nodeid}")
    print(f"  {say('提示', 'hint')}:  python progress.py hint {following.name}")


def passed_revealed(progress: Progress, koans: list[Koan]) -> int:
    """How many of `koans` passed (cleanly) after the learner asked to see a hidden value."""
    seen = revealed(progress.checkout.root)
    return sum(column(k) == KoanState.PASSED and k.nodeid in seen for k in koans)


def as_json(progress: Progress, chapters: list[course.Chapter], following: Koan | None) -> dict:
    seen = revealed(progress.checkout.root)

    def koan(k: Koan) -> dict:
        return {
            "chapter": k.chapter.number, "nodeid": k.nodeid, "file": k.path.as_posix(),
            "name": k.name, "line": k.line, "state": k.state, "cause": k.result.cause,
            "note": k.result.note,
            # passed after `progress.py reveal` / --koans-reveal showed what a wrong answer hid
            "revealed": k.state == KoanState.PASSED and k.nodeid in seen,
            # edits in its lines that grade ignores ("file:line: what"): a pass grade may not give
            "ignored_edits": k.ignored_edits,
        }  # fmt: skip

    def tally(koans: list[Koan]) -> dict:
        return {"total": len(koans), **counts(koans)}

    def chapter(c: course.Chapter) -> dict:
        titles = {"number": c.number, "title_zh": c.title_zh, "title_en": c.title_en}
        own = progress.of(c)
        return {**titles, **tally(own), "passed_revealed": passed_revealed(progress, own)}

    return {
        "schema": 1,
        "chapters": [chapter(c) for c in chapters],
        "total": tally(progress.koans),
        "passed_revealed": passed_revealed(progress, progress.koans),
        "next": koan(following) if following else None,
        "koans": [koan(k) for k in progress.koans],
        "problems": progress.problems,
    }


def run(args) -> int:
    chapters, wanted = chosen_chapters(args)
    progress = measure(args.checkout, wanted, reuse=not args.all)
    found = outside.edits(args.checkout, chapters)  # read once: the marks and the warnings
    outside.mark(args.checkout, progress.koans, found)
    following = progress.next_koan(args.checkout.recommended_path(), wanted)
    if args.json:
        print(json.dumps(as_json(progress, chapters, following), ensure_ascii=False, indent=2))
    else:
        show(progress, chapters, following, found)
    return 0
