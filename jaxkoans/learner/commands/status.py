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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chapter", metavar="NN", help="only this chapter (e.g. 03)")
    parser.add_argument("--json", action="store_true", help="print the progress as JSON")
    parser.add_argument(
        "--all", action="store_true", help="re-run every koan, ignoring remembered results"
    )


def mark_ignored_edits(progress: Progress, found: list[outside.Outside]) -> None:
    """Note on each passed koan the edits grade ignores in its lines: it passes here with them,
    grade runs it without them, so progress does not call it a plain pass."""
    for koan in progress.koans:
        if koan.state == KoanState.PASSED:
            checkout = progress.checkout
            touched = outside.touching(checkout, found, koan.path, koan.name)
            koan.ignored_edits = [f"{outside.where(checkout, e)}: {e.what}" for e in touched]


def counted_as(koan: Koan) -> KoanState:
    """The state a koan is counted under: a crash or a deleted koan is an open attempt (❌)."""
    return KoanState.FAILING if koan.state in results.FAILED_STATES else koan.state


def column(koan: Koan) -> KoanState:
    """The bar's column: a pass with ignored edits is drawn as attempted."""
    flagged = koan.state == KoanState.PASSED and koan.ignored_edits
    return KoanState.FAILING if flagged else counted_as(koan)


def bar(koans: list[Koan]) -> str:
    if not koans:
        return "·" * BAR_WIDTH
    cells = [round(sum(column(k) == s for k in koans) / len(koans) * BAR_WIDTH) for s in MARKS]
    cells[-1] = BAR_WIDTH - sum(cells[:-1])  # passed, failing, then the rest
    return "".join(mark * n for mark, n in zip(MARKS.values(), cells, strict=True))


def counts(koans: list[Koan]) -> dict[str, int]:
    """Koans per state; "passed" counts only clean passes, those with an edit grade ignores
    are counted apart ("passed_with_ignored_edits")."""
    found = {state: sum(counted_as(k) == state for k in koans) for state in MARKS}
    flagged = sum(k.state == KoanState.PASSED and bool(k.ignored_edits) for k in koans)
    found[KoanState.PASSED] -= flagged
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
            + (f"  ⚠️ {c[IGNORED]}" if c[IGNORED] else "")
            + (f"  ⏭️ {c[SKIPPED]}" if c[SKIPPED] else "")
            + (f"  🛠️ {c[ENVIRONMENT]}" if c[ENVIRONMENT] else "")
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
    if total[SKIPPED]:
        zh = "个 koan 在这台机器上被跳过"
        en = "koans were skipped on this machine (they cannot run here)"
        print(f"\n⏭️  {total[SKIPPED]} {say(zh, en)}: python progress.py doctor")
    if total[ENVIRONMENT]:
        zh = "个 koan 因 C++ 编译失败而无法运行，不算尝试"
        en = "koans could not run because the C++ build failed (not counted as attempts)"
        print(f"\n🛠️  {total[ENVIRONMENT]} {say(zh, en)}: python progress.py doctor")
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
    refused = {Cause.COMPUTED.value: predictions.MESSAGE, Cause.READS_TEST.value: reading.MESSAGE}
    if following.result.cause in refused:  # refused, not run: say why here too
        for line in refused[following.result.cause].splitlines():
            print(f"  ❌ {line}")
    if following.result.cause == Cause.CONTRACT.value:
        print(f"  ❌ {CONTRACT_HEADLINE}")
    if following.result.cause == "timeout":  # pytest-timeout stopped it
        print("  ⏱️ " + say("超时，已停止（死循环？）", "timed out and stopped (an endless loop?)"))
    for line in lines_of(following.doc):
        print(f"  │ {line}")
    print(f"  {say('运行', 'run')}:   pytest {following.nodeid}")
    print(f"  {say('提示', 'hint')}:  python progress.py hint {following.name}")


def passed_revealed(progress: Progress, koans: list[Koan]) -> int:
    """How many of `koans` passed after the learner asked to see a hidden value."""
    seen = revealed(progress.checkout.root)
    return sum(
        k.state == KoanState.PASSED and not k.ignored_edits and k.nodeid in seen for k in koans
    )


def koan_dict(k: Koan, seen: set[str]) -> dict:
    return {
        "chapter": k.chapter.number,
        "nodeid": k.nodeid,
        "file": k.path.as_posix(),
        "name": k.name,
        "line": k.line,
        "state": k.state,
        "cause": k.result.cause,
        "note": k.result.note,
        # passed after `progress.py reveal` / --koans-reveal showed what a wrong answer hid
        "revealed": k.state == KoanState.PASSED and k.nodeid in seen,
        # edits in its lines that grade ignores ("file:line: what"): a pass grade may not give
        "ignored_edits": k.ignored_edits,
    }


def as_json(progress: Progress, chapters: list[course.Chapter], following: Koan | None) -> dict:
    seen = revealed(progress.checkout.root)
    return {
        "schema": 1,
        "chapters": [
            {
                "number": c.number,
                "title_zh": c.title_zh,
                "title_en": c.title_en,
                "total": len(progress.of(c)),
                **counts(progress.of(c)),
                "passed_revealed": passed_revealed(progress, progress.of(c)),
            }
            for c in chapters
        ],
        "total": {"total": len(progress.koans), **counts(progress.koans)},
        "passed_revealed": passed_revealed(progress, progress.koans),
        "next": koan_dict(following, seen) if following else None,
        "koans": [koan_dict(k, seen) for k in progress.koans],
        "problems": progress.problems,
    }


def run(args) -> int:
    chapters, wanted = chosen_chapters(args)
    progress = measure(args.checkout, wanted, reuse=not args.all)
    found = outside.edits(args.checkout, chapters)  # read once: the marks and the warnings
    mark_ignored_edits(progress, found)
    following = progress.next_koan(args.checkout.recommended_path(), wanted)
    if args.json:
        print(json.dumps(as_json(progress, chapters, following), ensure_ascii=False, indent=2))
    else:
        show(progress, chapters, following, found)
    return 0
