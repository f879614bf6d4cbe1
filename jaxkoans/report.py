"""How a koan's failure reads: short for a blank or TODO, the assertion and lesson otherwise."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

from jaxkoans.classify import Attribution, Cause, has_blank
from jaxkoans.course import Chapter

HEADLINES = {
    Cause.BLANK: "✍️ 填空 / fill in the blank",
    Cause.TODO: "✍️ 待实现 / write the TODO",
    Cause.REGION: "✍️ 待修复 / fix the marked code",
    Cause.TIMEOUT: "⏱️ 超时 / timed out",
    Cause.WRONG: "❌ 还不对 / not yet",
}

TIMEOUT_ADVICE = (
    "可能是死循环（while_loop 的条件永远为真）或巨大的编译（Python 循环被展开进 trace）。\n"
    "Probably an endless loop (a while_loop whose condition never turns False) or a huge\n"
    "compile (a Python loop unrolled into the trace)."
)


REGION_ADVICE = (
    "这里的代码有错：读测试的断言找出症状，再修改 # ✍️ BEGIN 与 # ✍️ END 之间的代码。\n"
    "The code here has bugs: read the tests' asserts for the symptoms, then edit the code\n"
    "between # ✍️ BEGIN and # ✍️ END."
)


def docstring(item) -> str:
    return (
        inspect.cleandoc(getattr(item, "obj", None).__doc__ or "") if hasattr(item, "obj") else ""
    )


def open_blanks(item) -> list[tuple[int, str]]:
    """(line, source) of each line of the koan's function that still contains `__`."""
    try:
        lines, start = inspect.getsourcelines(item.obj)
    except (OSError, TypeError, AttributeError):
        return []
    return [(start + i, line.strip()) for i, line in enumerate(lines) if has_blank(line)]


def _where(found: Attribution, item, start: Path) -> str:
    path = found.path or Path(item.path)
    lineno = found.lineno or (item.reportinfo()[1] or 0) + 1
    return f"{os.path.relpath(path, start)}:{lineno}"


def render_failure(chapter: Chapter, item, found: Attribution, details: str, start: Path) -> str:
    """The text pytest shows for a failed koan."""
    lines = [
        f"{HEADLINES[found.cause]}  ·  {chapter.title}",
        f"   koan: {item.name}",
        f"   {_where(found, item, start)}",
    ]
    if found.source and found.cause is not Cause.WRONG:  # pytest shows the wrong line itself
        lines += ["   > " + line for line in found.source.splitlines()]
    if found.cause is Cause.BLANK and not has_blank(found.source):
        # JAX used the blank after the function holding it had returned (a scan step, say):
        # point at the blanks still open instead.
        lines += [f"   > {number}: {text}" for number, text in open_blanks(item)]
    if found.cause is Cause.REGION:
        lines += ["", REGION_ADVICE]
    if found.cause is Cause.TIMEOUT:
        lines += ["", TIMEOUT_ADVICE]
    if found.cause is Cause.WRONG:
        lesson = docstring(item)
        if lesson:
            lines += ["", *("   │ " + line for line in lesson.splitlines())]
        lines += ["", details]
    lines += [f"   💡 python progress.py hint {item.name}"]
    return "\n".join(lines)
