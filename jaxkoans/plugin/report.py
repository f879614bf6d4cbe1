"""How a koan's failure reads: short for a blank or TODO, the assertion and lesson otherwise.

Predict, then see: a wrong prediction's report shows the learner's answer, the lesson and where
to look, not what JAX computed nor captured output (`progress.py reveal` shows it). A TODO or a
fix region keeps actual against expected: that is debugging."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from jaxkoans import course
from jaxkoans.course import Chapter, Course, koan_model, predictions, reading
from jaxkoans.plugin import results
from jaxkoans.plugin.classify import Attribution, Cause, entries_in, has_blank, origins, taken

COURSE = pytest.StashKey[Course]()  # the course this pytest runs, made once at configure (hooks)
TODOS = pytest.StashKey[list[str]]()  # a koan file's TODO functions as shipped (hooks; chip)


def koan_name(item) -> str:
    """The koan a test item runs (a parametrized case's function): what `hint` takes."""
    return getattr(item, "originalname", None) or item.name


HEADLINES = {
    Cause.BLANK: "✍️ 填空 / fill in the blank",
    Cause.TODO: "✍️ 待实现 / write the TODO",
    Cause.REGION: "✍️ 待修复 / fix the marked code",
    Cause.TIMEOUT: "⏱️ 超时 / timed out",
    Cause.WRONG: "❌ 还不对 / not yet",
    Cause.ENVIRONMENT: "🛠️ 环境 / environment",
    Cause.COMPUTED: "❌ 要预测，不要计算 / a prediction, not a computation",
    Cause.READS_TEST: "❌ 读了测试，没有解题 / reads the test instead of solving the problem",
    Cause.CONTRACT: "❌ 结果对，技术不对 / right numbers, not the lesson's technique",
}
ADVICE = {
    Cause.TIMEOUT: (
        "可能是死循环（while_loop 的条件永远为真）或巨大的编译（Python 循环被展开进 trace）。\n"
        "Probably an endless loop (a while_loop whose condition never turns False) or a huge\n"
        "compile (a Python loop unrolled into the trace)."
    ),
    Cause.REGION: (
        "这里的代码有错：读测试的断言找出症状，再修改 # ✍️ BEGIN 与 # ✍️ END 之间的代码。\n"
        "The code here has bugs: read the tests' asserts for the symptoms, then edit the code\n"
        "between # ✍️ BEGIN and # ✍️ END."
    ),
    Cause.ENVIRONMENT: (
        "C++ 编译失败：这是这台机器的问题，不是你的答案，也不算一次尝试。运行 `python progress.py doctor`。\n"
        "The C++ build failed: a problem of this machine, not of your answer (it does not count as\n"
        "an attempt). Run `python progress.py doctor`."
    ),
}
BUILD_OUTPUT_LINES = 12  # the compiler's last lines: enough to see why, not a screenful
HIDDEN_ADVICE = (
    "🙈 JAX 算出的值先不显示：先预测，再验证。想看就运行下面一行（通过后记为“揭晓后通过”）。\n"
    "   What JAX computed stays hidden: predict, then check. To see it, run the line below\n"
    "   (the koan then counts as passed (revealed))."
)
MIXED_ADVICE = (
    "这里检查的值既来自你的代码（{code}），也来自你的预测：两者至少有一个不对。\n"
    "JAX 算出的值先不显示（它会说出预测的答案）。先确认代码：前面只检查代码的断言都通过了吗？\n"
    "What is checked here comes from your code ({code}) and from your prediction: at least\n"
    "one of them is wrong. What JAX computed stays hidden (it would tell the prediction).\n"
    "Check your code first: did the asserts before it, on your code alone, pass?"
)


def _indented(text: str, prefix: str = "   ") -> list[str]:
    return [prefix + line for line in text.splitlines()]


def _header(chapter: Chapter, item, found: Attribution, start: Path) -> tuple[list[str], object]:
    """The report's first lines, and the koan's model (None for an unknown koan)."""
    path = found.path or Path(item.path)
    lineno = found.lineno or (item.reportinfo()[1] or 0) + 1
    koan = koan_model.read(Path(item.path)).koan(koan_name(item))
    where = f"   {os.path.relpath(path, start)}:{lineno}"
    return [f"{HEADLINES[found.cause]}  ·  {chapter.title}", f"   koan: {item.name}", where], koan


def _lesson_and_hint(koan, item, *between: str) -> list[str]:
    """The koan's docstring as the report quotes it, `between`, and the hint's command."""
    lesson = ["", *_indented(koan.docstring, "   │ ")] if koan and koan.docstring else []
    return [*lesson, *between, f"   💡 python progress.py hint {koan_name(item)}"]


def hidden_answer(item, found: Attribution, excinfo) -> tuple[list[str], tuple[str, ...]] | None:
    """(the learner's fills a wrong answer is about, the learner's code the same failing values
    came from) when its failure must not show JAX's value: where a prediction fill (or a call's
    made for its effect before) fed the failing values (classify.origins). Shown where the
    learner's code alone computed them or raised, for a spelling error, or with no fills known."""
    error = excinfo.value
    spelling = isinstance(error, ImportError | SyntaxError) or (
        isinstance(error, NameError | AttributeError) and getattr(error, "name", None) is not None
    )  # JAX raises NameError for an unbound axis name too, without Python's `name`
    if found.cause is not Cause.WRONG or spelling:
        return None
    path = Path(item.path)
    learner = taken(item.config.stash[COURSE], path)
    blanks = list(learner.blanks) if learner is not None else []
    passed = [entry.lineno + 1 for entry in entries_in(excinfo, path.resolve())]
    if not blanks or set(passed) & learner.code_lines():
        return None  # debugging the learner's own code: actual against expected
    came_from = origins(learner, koan_name(item), passed)
    if came_from is not None:
        if came_from.fills:  # a fill the values read, or a call made for its effect before them
            return [fill.text for fill in came_from.fills], came_from.code
        if came_from.code:
            return None  # the learner's code alone computed the failing values: show them

    def through(lines: set[int]) -> list[str]:
        return [b.text for b in blanks if any(b.statement[0] <= n <= b.statement[1] for n in lines)]

    answers = through({found.lineno} if found.lineno else set())
    if not answers:  # the failing line holds no fill: those of the koan and its frames
        koan = koan_model.read(path).koan(koan_name(item))
        span = set(range(koan.span[0], koan.span[1] + 1)) if koan else set()
        answers = through(span | set(passed))
    return (answers, ()) if answers else None


def _learner_traceback(item, excinfo) -> str:
    """pytest's report of the failure with only the learner's frames (the koan's file)."""

    def own_frames(info):
        own = set(map(id, entries_in(info, Path(item.path).resolve())))
        kept = info.traceback.filter(lambda entry: id(entry) in own)
        return kept if len(kept) else info.traceback

    style = item.config.getoption("tbstyle", "auto")
    return str(
        excinfo.getrepr(
            funcargs=True,
            showlocals=item.config.getoption("showlocals", False),
            style="long" if style == "auto" else style,
            tbfilter=own_frames,
            truncate_locals=True,
        )
    )


def render_failure(chapter: Chapter, item, found: Attribution, excinfo, start: Path) -> str:
    """The text pytest shows for a failed koan."""
    lines, koan = _header(chapter, item, found, start)
    cause, refused = found.cause, getattr(excinfo.value, "refused", ())
    if found.source and cause is not Cause.WRONG:  # pytest shows the wrong line itself
        lines += ["   > " + line for line in found.source.splitlines()]
    if cause is Cause.BLANK and not has_blank(found.source) and koan is not None:
        # JAX used the blank after the function holding it had returned (a scan step, say):
        # point at the blanks still open instead.
        model, (begin, end) = koan_model.read(Path(item.path)), koan.span
        open_ = [n for n in sorted(model.blank_lines) if begin <= n <= end]
        lines += [f"   > {n}: {model.lines[n - 1].strip()}" for n in open_]
    if cause is Cause.COMPUTED:  # refused before the koan ran: what the refusal holds
        lines += [
            f"   你的答案 / your answer:  `{fill.text}`  (line {fill.statement[0]})  →  "
            f"{predictions.WHAT_IT_TAKES[kind]}"
            for fill, kind in refused
        ]
        lines += ["", *_indented(predictions.MESSAGE)]
    if cause is Cause.READS_TEST:
        lines += [f"   {r.describe()}  ·  {r.owner}" for r in refused]
        lines += ["", *_indented(reading.MESSAGE)]
    if cause is Cause.CONTRACT:
        lines += ["", *_indented(found.message)]
    if cause in (Cause.TODO, Cause.CONTRACT):
        lines += judged_lines(chapter, item, found)
    if cause in ADVICE:
        lines += ["", ADVICE[cause]]
    if cause is Cause.ENVIRONMENT:  # the compiler's last lines; a hint cannot fix a compiler
        return "\n".join([*lines, "", *("   │ " + line for line in found.message.splitlines()[-BUILD_OUTPUT_LINES:])])  # fmt: skip
    if cause is Cause.WRONG:
        return "\n".join(lines + _lesson_and_hint(koan, item, "", _learner_traceback(item, excinfo)))  # fmt: skip
    return "\n".join(lines + _lesson_and_hint(None, item))


def judged_lines(chapter: Chapter, item, found: Attribution) -> list[str]:
    """What the TODO this failure points at is judged by (plugin/judged.py), from its contract
    and its answer's profiles: the same ones the judge holds it to."""
    from jaxkoans.plugin import costs, judged

    path = Path(item.path)
    model = koan_model.read(path)
    if found.cause is Cause.CONTRACT:
        name = found.message.splitlines()[0].rpartition(": ")[2]
    else:
        spans, line = model.definitions, found.lineno or 0
        inside = [t.name for t in model.todos if spans[t.name][0] <= line <= spans[t.name][1]]
        name = inside[0] if inside and found.path == path else ""
    filename = course.twin_name(path)
    contract = chapter.contracts.get(f"{filename}::{name}")
    if not name or contract is None:
        return []
    checkout, node = item.config.stash[COURSE], model.top_level.get(name)
    solution = judged.solution_names(checkout, checkout.koans / chapter.number / filename, name)
    if not solution:  # no answer to keep out of an untraced TODO's reasons (a student release)
        contract = {k: v for k, v in contract.items() if k != "why"}
    said = judged.sentence(
        contract,
        costs.profiles_for(checkout.koans / chapter.number, filename).get(name),
        (ast.get_docstring(node) or "") if node is not None else "",
        solution,
    )
    return ["", *judged.wrapped(said, "   ")]


def predict_then_see(chapter: Chapter, item, found: Attribution, excinfo, report, start) -> bool:
    """Apply "predict, then see" to a failed koan's `report`: no captured output for an open
    blank or a hidden value; the hidden report for a wrong prediction (True: longrepr is set).
    Under --koans-reveal nothing is hidden, and the reveal is remembered."""
    from jaxkoans.api.expect import WrongException, revealing

    hidden = hidden_answer(item, found, excinfo)
    if hidden is not None and revealing():
        checkout = item.config.stash[COURSE]
        relative = os.path.relpath(Path(item.path).resolve(), checkout.root).replace(os.sep, "/")
        results.record_reveal(checkout, f"{relative}::{results.koan_id(item.name)}")
        return False
    if hidden is None and found.cause is not Cause.BLANK:
        return False
    # pytest's "Captured stdout/stderr/log" sections may print the answer (a compile log).
    report.sections = [(title, text) for title, text in report.sections if "Captured" not in title]
    if hidden is None:
        return False
    (answers, code), error = hidden, excinfo.value
    lines, koan = _header(chapter, item, found, start)
    lines += [
        *_indented(found.source, "   > "),
        "   你的答案 / your answer:  " + "  ·  ".join(f"`{text}`" for text in answers),
    ]
    name = type(error).__name__
    if isinstance(error, WrongException):  # raises_exactly's words never name it
        lines += ["", *_indented(str(error))] if str(error) else []
    elif not isinstance(error, AssertionError):
        lines += ["", *_indented(
            f"你的答案在这一行引发了 {name}（它的消息先不显示）。\n"
            f"Your answer makes this line raise {name} (its message stays hidden)."
        )]  # fmt: skip
    if code:
        lines += ["", *_indented(MIXED_ADVICE.format(code=", ".join(f"`{c}`" for c in code)))]
    lines += _lesson_and_hint(
        koan, item, "", "   " + HIDDEN_ADVICE, f"   👁 python progress.py reveal {koan_name(item)}"
    )
    report.longrepr = "\n".join(lines)
    return True
