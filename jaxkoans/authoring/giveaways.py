"""No answer stands next to its blank: where a blank's answer is already written for the learner.

A blank is no prediction when its answer can be copied: from its koan's docstring, its first
hint level, the lines around it, or another koan of the same file; an exception blank is none
when the docstring names the class. Answers too short or too common to give anything away
(`True`, `0`, `x`, a two-digit number) are not looked for, nor a dtype beside the data it
types. Where the koan asks something else of an answer that stands nearby (the whole shape a
replicated spec keeps), chapter.toml's `[giveaways]` keeps it with its reason:

    [giveaways]
    "test_meshes.py::test_x" = [{ answer = "(8, 4)", why = "the replicated shard is the whole array" }]

    python -m jaxkoans.authoring.giveaways [--chapter NN]
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from jaxkoans import course
from jaxkoans.course import fills, koan_model, predictions

AROUND = 2  # lines above and below the blank's statement
MIN_NEAR = 4  # characters an answer needs before the lines around it or a docstring count
MIN_OTHER_KOAN = 8  # … before another koan's code counts (shorter ones recur by chance)


@dataclass(frozen=True)
class Finding:
    file: Path
    line: int
    koan: str
    answer: str
    where: str

    def __str__(self) -> str:
        return f"{self.file.relative_to(course.REPO)}:{self.line} ({self.koan}): `{self.answer}` {self.where}"


def appears(answer: str, text: str) -> bool:
    """`answer` written whole in `text`: not inside a longer name, and not the start of a
    longer expression (`lambda x: x` is not written in `lambda x: x * 2`)."""
    continues = r"(?![\w.(\[])(?!\s*(?:[-+*/%@&|^<>]|==|!=|\bif\b|\band\b|\bor\b))"
    return re.search(rf"(?<![\w.]){re.escape(answer)}{continues}", text) is not None


def _too_common(answer: str, kind: str) -> bool:
    if answer in ("True", "False", "None") or len(answer) < 3:
        return True
    return kind in (predictions.LITERAL, predictions.ARITHMETIC) and bool(
        re.fullmatch(r"-?\d{1,2}(\.\d)?", answer)
    )


def _a_local_name(node, tree) -> bool:
    """A blank that asks which of the koan's own variables to pass: the variable is written
    where it is made, which is no answer."""
    import ast

    return isinstance(node, ast.Name) and any(
        (isinstance(n, ast.Name) and n.id == node.id and isinstance(n.ctx, ast.Store))
        or (isinstance(n, ast.arg) and n.arg == node.id)
        for n in ast.walk(tree)
    )


def findings(koan_file: Path, answer_file: Path | None = None) -> list[Finding]:
    from jaxkoans.course.file_context import Context

    answer_file = answer_file or course.ANSWERS / koan_file.relative_to(course.KOANS)
    koan_text, answer_text = (
        koan_file.read_text(encoding="utf-8"),
        answer_file.read_text(encoding="utf-8"),
    )
    taken = fills.take(koan_text, answer_text)
    model = koan_model.read(koan_file)
    chapter = course.chapter_for(koan_file)
    context = Context.of(answer_text)
    lines = model.lines
    found = []
    for fill in taken.blanks:
        koan = model.koan(fill.owner)
        if koan is None:
            continue
        answer = " ".join(fill.text.split())
        kind = predictions.kind_of_answer(fill.node, context)
        line = fill.blank[0]

        def say(where: str, fill=fill, answer=answer, line=line) -> None:
            found.append(Finding(koan_file, line, fill.owner, answer, where))

        if kind == predictions.EXCEPTION:
            if appears(answer.split(".")[-1], koan.docstring):
                say("is named by the koan's docstring")
            continue
        if _too_common(answer, kind) or _a_local_name(fill.node, taken.tree):
            continue
        if len(answer) >= MIN_NEAR and appears(answer, koan.docstring):
            say("is in the koan's docstring")
        hint = chapter.hint(koan_file.name, fill.owner) if chapter else None
        first = " ".join(level[0] for level in (hint.zh, hint.en) if level) if hint else ""
        if appears(answer, first):
            say("is in the first hint level")
        near = lines[max(0, line - 1 - AROUND) : line - 1] + lines[line : line + AROUND]
        if (
            len(answer) >= MIN_NEAR
            and kind != predictions.DTYPE
            and appears(answer, "\n".join(near))
        ):
            say(f"is written within {AROUND} lines of the blank")
        if len(answer) >= MIN_OTHER_KOAN and kind != predictions.DTYPE:  # a dtype recurs by nature
            for other in model.koans:
                if other.name != fill.owner and appears(
                    answer, "\n".join(lines[other.span[0] - 1 : other.span[1]])
                ):
                    say(f"is written in another koan of the file ({other.name})")
                    break
    recorded = _recorded(chapter, koan_file.name) if chapter else set()
    return [f for f in found if (f.koan, f.answer) not in recorded]


def _recorded(chapter: course.Chapter, file: str) -> set[tuple[str, str]]:
    """(koan, answer) of the findings chapter.toml's [giveaways] keeps, each with its reason."""
    kept = set()
    for key, entries in chapter.giveaways.items():
        name, _, koan = key.partition("::")
        if name == file:
            kept |= {(koan, e["answer"]) for e in entries if e.get("why") and "answer" in e}
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jaxkoans.authoring.giveaways")
    parser.add_argument("--chapter", action="append", default=[])
    args = parser.parse_args(argv)
    wanted = {n.zfill(2) for n in args.chapter}
    found = [
        finding
        for chapter in course.all_chapters()
        if not wanted or chapter.number in wanted
        for path in sorted((course.KOANS / chapter.number).glob("test_*.py"))
        for finding in findings(path)
    ]
    for finding in found:
        print(finding)
    print(f"{len(found)} answers stand next to their blanks", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
