"""No answer stands next to its blank: a blank's answer (in any spelling of its value) copied from
its koan's docstring or name, its first hint level, the lines around it, elsewhere in its file or
the chapter's README.md. A finding the koan means is kept, with its reason, in chapter.toml:

    [giveaways]
    "test_meshes.py::test_x" = [{ answer = "(8, 4)", why = "the replicated shard is the whole array" }]
"""

from __future__ import annotations

import ast
import io
import math
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from jaxkoans import course
from jaxkoans.course import fills, koan_model, predictions
from jaxkoans.course.file_context import Context

AROUND = 2  # lines above and below the blank's statement
MIN_NEAR = 4  # characters an answer needs before the lines around it or a docstring count
MIN_OTHER_KOAN = 8  # … before another koan's code counts (shorter ones recur by chance)


@dataclass(frozen=True)
class Finding:
    file: Path  # under the course's root: koans/NN/test_x.py
    line: int
    koan: str
    answer: str
    where: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} ({self.koan}): `{self.answer}` {self.where}"


def appears(answer: str, text: str) -> bool:
    """`answer` written whole in `text`: not inside a longer name, and not the start of a
    longer expression (`lambda x: x` is not written in `lambda x: x * 2`)."""
    continues = r"(?![\w.(\[])(?!\s*(?:[-+*/%@&|^<>]|==|!=|\bif\b|\band\b|\bor\b))"
    return re.search(rf"(?<![\w.]){re.escape(answer)}{continues}", text) is not None


def _too_common(answer: str, kind: str) -> bool:
    return answer in ("True", "False", "None") or len(answer) < 3 or (
        kind in (predictions.LITERAL, predictions.ARITHMETIC) and bool(re.fullmatch(r"-?\d{1,2}(\.\d)?", answer)))  # fmt: skip


# ---- the same value in any spelling ----------------------------------------------------


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value.strip() if isinstance(value, str) else value)
    except ValueError:
        return None


def canonical(value):
    """A hashable form in which 3, 3.0 and "3" agree, and so do a tuple and a list of them."""
    number = _number(value)
    if number is not None:
        return ("num", number) if number == number else ("nan",)
    if isinstance(value, (bool, type(None), str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, (tuple, list)):
        return ("seq", tuple(canonical(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", frozenset(canonical(v) for v in value))
    if isinstance(value, dict):
        return ("dict", frozenset((canonical(k), canonical(v)) for k, v in value.items()))
    return ("other", repr(value))


def value_of(node):
    """The value of a literal answer (arithmetic of literals included), or a sentinel."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if not predictions._literal(node):
        return _NO_VALUE
    names = {"float": float, "int": int, "complex": complex, "math": math, "np": math, "jnp": math}
    code = compile(ast.Expression(node), "<answer>", "eval")  # jnp.inf, np.pi: math has them too
    try:
        return eval(code, {"__builtins__": {}, **names})
    except Exception:  # anything that does not evaluate is no value
        return _NO_VALUE


_NO_VALUE = object()


def _significant_digits(number: float) -> int:
    mantissa = f"{abs(number):.15g}".split("e")[0].replace(".", "")
    return len(mantissa.strip("0"))


def significant(key) -> bool:
    """A value rare enough that seeing it elsewhere in the file is no chance: not a bool, not
    an integer below 100, not a float of two significant digits (0.5, 1e-3), not a string of
    three characters; a container of three or more values, or holding one significant value."""
    kind = key[0]
    if kind == "num":
        number = key[1]
        if abs(number) == float("inf"):
            return False
        if abs(number) < 1e15 and number == int(number):
            return abs(number) >= 100
        return _significant_digits(number) >= 3
    if kind in ("str", "bytes"):
        return len(key[1]) >= 5  # `data`, `x`, `cuda` recur as names by nature
    if kind in ("seq", "set"):
        items = list(key[1])
        return len(items) >= 3 or any(significant(i) for i in items)
    return kind == "dict"


def spellings(value) -> set[str]:
    """How the value may be written in prose or code: 3 -> 3, 3.0, "3", '3'."""
    number = _number(value)
    if number is not None and number == number and abs(number) != float("inf"):
        words = {repr(number), f"{number:g}"}
        if number == int(number):
            words |= {str(int(number)), f"{int(number)}.0", f"{int(number)}."}
        return words | {f'"{w}"' for w in words} | {f"'{w}'" for w in words}
    if isinstance(value, str):
        return {f'"{value}"', f"'{value}'", f"`{value}`"}
    return set()


def _written(words: set[str], text: str) -> bool:
    """Any of the spellings, whole: not inside a longer number or name (`3` not in `32`, `x3`, `3.5`)."""
    return any(re.search(rf"(?<![\w.]){re.escape(w)}(?![\w]|\.\d)", text) is not None for w in words)


def _literals(tree):
    """(line, canonical value) of every literal in the file, containers and their items."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Constant, ast.Tuple, ast.List, ast.Set, ast.Dict)) and predictions.is_plain(node):
            try:
                yield node.lineno, canonical(ast.literal_eval(node))
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue


def _prose(text: str, tree) -> list[tuple[int, str]]:
    """(line, text, is a comment) of every comment and every line of every string constant of
    the file (docstrings, messages)."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                found.append((token.start[0], token.string, True))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) > 3:
            first = node.lineno + (1 if node.value.startswith("\n") else 0)
            for offset, line in enumerate(node.value.strip("\n").splitlines()):
                found.append((first + offset, line, False))
    return found


# ---- the koan's own name ------------------------------------------------------------------

_GENERIC = {"error", "exception", "warning", "test", "jax", "jnp", "np", "lax", "numpy"}


def words_of(identifier: str) -> list[str]:
    """`stop_gradient` -> [stop, gradient]; `FloatingPointError` -> [floating, point, error]."""
    return [p.lower() for p in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+[a-z]*", identifier)]


def _named_by(answer_node, value, kind: str, koan_name: str) -> str | None:
    """What of the answer the koan's name spells, or None."""
    tokens = [w for w in koan_name.lower().split("_") if w][1:]  # without `test`
    key = canonical(value) if value is not _NO_VALUE else None
    if key is not None and key[0] == "num":
        number = key[1]
        if abs(number) < 1e15 and number == int(number) and str(int(number)) in tokens:
            return str(int(number))
        return None
    if key is not None and key[0] in ("str",):
        words = [w for w in re.split(r"[^0-9a-z]+", key[1].lower()) if w]
    elif key is not None:
        return None
    else:
        node = answer_node.func if isinstance(answer_node, ast.Call) else answer_node
        name = predictions.dotted(node)
        if name is None:
            return None
        words = [w for part in name.split(".")[-1].split("_") for w in words_of(part)]
        if kind == predictions.EXCEPTION:
            while words and words[-1] in ("error", "exception", "warning"):
                words = words[:-1]
            words = [w for w in words if w not in _GENERIC]
            if len(words) < 2:
                return None  # `value`, `type`, `runtime`: a word any name may hold
        elif kind == predictions.CODE and len(words) < 2:
            return None  # one word (`checkpoint`, `callback`) is the topic a name may state
    if not words or len("".join(words)) < 4 or set(words) <= _GENERIC:
        return None
    if words in [tokens[i : i + len(words)] for i in range(len(tokens) - len(words) + 1)]:
        return "_".join(words)
    return "".join(words) if "".join(words) in tokens else None


def _a_local_name(node, tree) -> bool:
    """A blank that asks which of the koan's own variables to pass: the variable is written
    where it is made, which is no answer."""
    return isinstance(node, ast.Name) and any(
        (isinstance(n, ast.Name) and n.id == node.id and isinstance(n.ctx, ast.Store))
        or (isinstance(n, ast.arg) and n.arg == node.id)
        for n in ast.walk(tree)
    )


def findings(
    checkout: course.Course, koan_file: Path, answer_file: Path | None = None
) -> list[Finding]:
    answer_file = answer_file or checkout.answer_of(koan_file)
    shown = checkout.relative(koan_file)
    koan_text, answer_text = (path.read_text(encoding="utf-8") for path in (koan_file, answer_file))
    taken = fills.take(koan_text, answer_text)
    model = koan_model.read(koan_file)
    chapter = checkout.chapter_for(koan_file)
    context = Context.of(answer_text)
    lines = model.lines
    prose = _prose(koan_text, model.tree) if model.tree is not None else []
    readme_file = koan_file.parent / "README.md"
    readme = readme_file.read_text(encoding="utf-8") if readme_file.is_file() else ""
    literals = list(_literals(model.tree)) if model.tree is not None else []
    found = []
    for fill in taken.blanks:
        koan = model.koan(fill.owner)
        if koan is None:
            continue
        answer = " ".join(fill.text.split())
        kind = predictions.kind_of_answer(fill.node, context)
        line = fill.blank[0]

        def say(where: str, fill=fill, answer=answer, line=line) -> None:
            found.append(Finding(shown, line, fill.owner, answer, where))

        valued = kind in (predictions.LITERAL, predictions.ARITHMETIC)
        value = value_of(fill.node) if valued else _NO_VALUE
        named = _named_by(fill.node, value, kind, fill.owner)
        if named is not None:
            say(f"is spelled by the koan's own name ({named})")
        if kind == predictions.EXCEPTION:
            if appears(answer.split(".")[-1], koan.docstring):
                say("is named by the koan's docstring")
            continue
        if kind != predictions.DTYPE and value is not _NO_VALUE:
            elsewhere = _elsewhere(value, line, model, prose, literals)
            if elsewhere is not None:
                say(elsewhere)
            elif readme and significant(canonical(value)) and spellings(value):
                for where, text in enumerate(readme.splitlines(), 1):
                    if f"`{koan_file.name}`" in text and _written(spellings(value), text):
                        say(f"is spelled in the chapter's README.md at line {where}")
                        break
        if _too_common(answer, kind) or _a_local_name(fill.node, taken.tree):
            continue
        if len(answer) >= MIN_NEAR and appears(answer, koan.docstring):
            say("is in the koan's docstring")
        hint = chapter.hint(koan_file.name, fill.owner) if chapter else None
        first = " ".join(level[0] for level in (hint.zh, hint.en) if level) if hint else ""
        if appears(answer, first):
            say("is in the first hint level")
        near = "\n".join(lines[max(0, line - 1 - AROUND) : line - 1] + lines[line : line + AROUND])
        if len(answer) >= MIN_NEAR and kind != predictions.DTYPE and appears(answer, near):
            say(f"is written within {AROUND} lines of the blank")
        if len(answer) >= MIN_OTHER_KOAN and kind != predictions.DTYPE:  # a dtype recurs by nature
            others = [k for k in model.koans if k.name != fill.owner]
            other = next((k for k in others if appears(answer, _text(lines, k.span))), None)
            inside = {n for k in model.koans for n in range(k.span[0], k.span[1] + 1)}
            outside = [(n, text) for n, text in enumerate(lines, 1) if n not in inside]
            where = next((n for n, text in outside if appears(answer, text)), None)
            if other is not None:
                say(f"is written in another koan of the file ({other.name})")
            elif value is _NO_VALUE and where is not None:  # helpers, module code, comments
                say(f"is written at line {where}, outside the koans")
    recorded = _recorded(chapter, koan_file.name) if chapter else set()
    return [f for f in found if (f.koan, f.answer) not in recorded]


def _text(lines: list[str], span: tuple[int, int]) -> str:
    return "\n".join(lines[span[0] - 1 : span[1]])


def _helper_lines(model) -> set[int]:
    """The lines of the file's functions that are not koans (helpers, TODO functions): a
    helper that returns one of several outcomes ("hit", "not written", …) and a docstring
    that lists them enumerate the choices, which answers none of them."""
    koans = {k.name for k in model.koans}
    spans = [span for name, span in model.definitions.items() if name not in koans]
    return {line for start, end in spans for line in range(start, end + 1)}


def _elsewhere(value, line: int, model, prose, literals) -> str | None:
    """Where else in the file the blank's value is written, in any spelling: a literal of the
    code (another koan's assert, the module's own statements) or a comment or string (the
    module's or a koan's docstring, a message, any comment). Helpers' literals and docstrings
    are left out (they enumerate outcomes). Only values rare enough to be no chance
    (`significant`)."""
    key = canonical(value)
    if not significant(key):
        return None
    helpers = _helper_lines(model)
    for where, other in literals:
        if other == key and where != line and where not in helpers:
            return f"is written as a literal at line {where} (the same value)"
    words = spellings(value)
    for where, text, comment in prose:
        if words and (comment or where not in helpers) and _written(words, text):
            return f"is spelled in a comment or string at line {where}"
    return None


def _recorded(chapter: course.Chapter, file: str) -> set[tuple[str, str]]:
    """(koan, answer) of the findings chapter.toml's [giveaways] keeps, each with its reason."""
    return {(key.partition("::")[2], e["answer"]) for key, entries in chapter.giveaways.items()
            if key.partition("::")[0] == file for e in entries if e.get("why") and "answer" in e}  # fmt: skip
