"""The shortcut gate: the lazy learner's fakes of every TODO, generated from the answer file:
delegations to a callable at hand, the library the lesson replaces (chapter.toml `[shortcuts]`),
a reference substituted for one call, the literals the koans compare against, the answer with a
TODO it calls unwritten, and the contract's families (authoring/contract_fakes.py). Each must
make a koan fail; a true equivalent is recorded in chapter.toml (CONTRIBUTING.md).

    python -m jaxkoans.authoring.shortcuts [--chapter NN …] [--list] [-n 2]
"""

from __future__ import annotations

import argparse
import ast
import inspect
import textwrap
import time
from pathlib import Path

from jaxkoans import course
from jaxkoans.authoring import contract_fakes, mutate
from jaxkoans.authoring.mutate import Fake, Variant
from jaxkoans.course import koan_model, predictions, twins
from jaxkoans.course.file_context import Context

CONSTANTS_PER_TODO = 3


# ---- generating --------------------------------------------------------------------------


def _takes(fn: ast.FunctionDef | ast.Lambda, count: int) -> bool:
    a = fn.args
    positional = len(a.posonlyargs) + len(a.args)
    return positional - len(a.defaults) <= count and (count <= positional or a.vararg is not None)


def _signature_takes(value, count: int) -> bool:
    try:
        inspect.signature(value).bind(*range(count))
    except (TypeError, ValueError):
        return False
    return True


def _enclosing(tree: ast.Module, target: ast.FunctionDef) -> list[ast.stmt]:
    """The statements of the scope that defines `target` (the module, or a function)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and any(stmt is target for stmt in body):
            return body
    return tree.body


def delegations(tree: ast.Module, fn: ast.FunctionDef, context: Context) -> list[tuple[str, str]]:
    """(label, body) of `return f(<fn's arguments>)` for each callable of `fn`'s scope and the
    module's imports that takes them."""
    arguments = contract_fakes.arguments(fn, skip=("self", "cls"))
    count = sum(p.arg not in ("self", "cls") for p in (*fn.args.posonlyargs, *fn.args.args))
    found: dict[str, None] = {}
    scopes = [tree.body] + ([_enclosing(tree, fn)] if _enclosing(tree, fn) is not tree.body else [])
    for stmt in (stmt for body in scopes for stmt in body):
        if isinstance(stmt, koan_model.FUNCTIONS):
            if stmt.name != fn.name and not stmt.name.startswith("test") and _takes(stmt, count):
                found[stmt.name] = None
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Lambda) and _takes(stmt.value, count):
            found |= {t.id: None for t in stmt.targets if isinstance(t, ast.Name)}
    froms = [s for s in tree.body if isinstance(s, ast.ImportFrom) and s.module]
    for alias in (a for s in froms if not s.module.startswith("jaxkoans") for a in s.names):
        value = context.resolve(alias.asname or alias.name)
        if callable(value) and not isinstance(value, type) and _signature_takes(value, count):
            found[alias.asname or alias.name] = None
    return [(f"delegate_{name}", f"return {name}({arguments})") for name in found]


def _names_called(node: ast.AST) -> set[str]:
    calls = (n for n in ast.walk(node) if isinstance(n, ast.Call))
    return {call.func.id for call in calls if isinstance(call.func, ast.Name)}


# Words that name a function as the twin of another (the reference, the slow way).
TWIN_WORDS = {
    "reference", "ref", "slow", "unrolled", "naive", "numpy", "np", "jnp", "dense", "plain",
    "eager", "python", "baseline", "expected", "exact", "direct", "loop",
}  # fmt: skip
COMMON_WORDS = {"of", "the", "a", "to", "make", "get", "run", "fn", "f", "x", "test"}


def _words(name: str) -> set[str]:
    return {w for w in name.lower().strip("_").split("_") if w} - COMMON_WORDS


def _twins(reference: str, callee: str, todo: str) -> bool:
    """A reference that stands in for the call: named as a twin (slow_, _reference, _jnp), or
    sharing a word with the callee or the TODO (slow_step for fast_step)."""
    words = _words(reference)
    return bool(words & TWIN_WORDS) or bool(words & (_words(callee) | _words(todo)))


def substitutions(
    tree: ast.Module, fn: ast.FunctionDef, answer_body: str, koans: tuple[str, ...]
) -> list[tuple[str, str]]:
    """(label, body) of the answer's body with one call replaced by a call of a reference the
    koans call and the answer does not, where that reference takes the call's arguments."""
    tops = [n for n in tree.body if isinstance(n, koan_model.FUNCTIONS)]
    defined = {n.name: n for n in tops if not n.name.startswith("test") and n.name != fn.name}
    used_by_koans = set().union(*(_names_called(t) for t in tops if t.name in koans))
    references = [defined[name] for name in sorted(used_by_koans - _names_called(fn) - {fn.name}) if name in defined]
    if not references:
        return []
    body_tree = ast.parse(textwrap.dedent(answer_body))
    calls = [n for n in ast.walk(body_tree)
             if isinstance(n, ast.Call) and not any(isinstance(a, ast.Starred) for a in n.args)]  # fmt: skip
    found = {}
    for reference in references:
        for i, call in enumerate(calls):
            callee = (predictions.dotted(call.func) or "").rsplit(".", 1)[-1]
            if not _takes(reference, len(call.args)) or not _twins(reference.name, callee, fn.name):
                continue
            original = call.func
            call.func = ast.Name(reference.name, ast.Load())
            try:
                text = ast.unparse(body_tree)
            finally:
                call.func = original
            found.setdefault(text, f"substitute_{reference.name}_{i}")
    return [(label, text) for text, label in found.items()]


def constants(model: koan_model.KoanFile, koans: tuple[str, ...]) -> list[tuple[str, str]]:
    """(label, body) of `return <literal>` for the literals the koans' asserts compare against."""
    values: dict[str, None] = {}
    tops = {n.name: n for n in model.tree.body if isinstance(n, koan_model.FUNCTIONS)}
    for name in koans:
        for node in ast.walk(tops[name]) if name in tops else ():
            candidates = []
            if isinstance(node, ast.Compare):
                candidates = [node.left, *node.comparators]
            elif isinstance(node, ast.Call) and "assert" in (ast.unparse(node.func) or ""):
                candidates = list(node.args[1:2])
            values |= {ast.unparse(c): None for c in candidates if predictions.is_plain(c)
                       and not isinstance(getattr(c, "value", None), (bool, type(None)))}  # fmt: skip
    return [(f"constant_{i}", f"return {value}") for i, value in enumerate(list(values)[:CONSTANTS_PER_TODO])]


def library(chapter: course.Chapter, key: str, context: Context) -> list[tuple[str, str]]:
    """(label, body) of each library body the chapter data names, and its private-path twin."""
    found = []
    for i, body in enumerate(chapter.shortcuts.get(key, {}).get("library", [])):
        private = _through_private_path(body, context)
        found += [(f"library_{i}", body)] + ([(f"library_{i}_private", private)] if private else [])
    return found


def _through_private_path(body: str, context: Context) -> str | None:
    """`body` with each dotted library name replaced by its definition's own module path."""
    tree = ast.parse(textwrap.dedent(body))
    imports, replaced = [], {}
    for node in ast.walk(tree):
        name = predictions.dotted(node) if isinstance(node, ast.Attribute) else None
        value = context.resolve(name) if name else None
        module = getattr(value, "__module__", None) or ""
        if value is not None and module.startswith("jax._src") and name not in replaced:
            alias = f"_private_{len(replaced)}"
            imports.append(f"from {module} import {value.__name__} as {alias}")
            replaced[name] = alias
    if not replaced:
        return None
    text = textwrap.dedent(body)
    for name, alias in sorted(replaced.items(), key=lambda item: -len(item[0])):
        text = text.replace(name, alias)
    return "\n".join([*imports, text])


def file_shortcuts(chapter: course.Chapter, koan: Path, answer: Path) -> list[Fake]:
    spans = twins.todo_spans(koan, answer)
    if not spans:
        return []
    text = answer.read_text(encoding="utf-8")
    tree, model, context, todo_names, found = ast.parse(text), koan_model.read(answer), Context.of(text), set(spans), []
    for fn in ast.walk(tree):
        if not isinstance(fn, koan_model.FUNCTIONS) or fn.name not in todo_names:
            continue
        koans = model.koans_seeing(spans[fn.name][0] + 1)
        helpers = tuple(sorted(_names_called(fn) & todo_names - {fn.name}))
        key = f"{answer.name}::{fn.name}"
        answer_body = "\n".join(model.lines[slice(*model.body_of(fn.name))])
        bodies = delegations(tree, fn, context) + library(chapter, key, context) + constants(model, koans)
        bodies += substitutions(tree, fn, answer_body, koans)
        bodies += [(f"unwritten_{'_'.join(helpers)}", textwrap.dedent(answer_body))] if helpers else []
        references = library(chapter, key, context)[:1] or delegations(tree, fn, context)[:1]
        if references and contract_fakes.asks_of_program(chapter.contracts.get(key, {})):
            bodies += contract_fakes.families(fn, textwrap.dedent(answer_body), references[0])
        found += [Fake(answer, fn.name, label, body, koans, helpers) for label, body in bodies]
    return found


def chapter_shortcuts(
    checkout: course.Course, chapter: course.Chapter, files: set[str] | None = None
) -> list[Fake]:
    """The generated fakes of the chapter (of its answer files `files`, when given)."""
    return [s for koan, answer in mutate.twin_files(checkout, chapter) if files is None or answer.name in files
            for s in file_shortcuts(chapter, koan, answer)]  # fmt: skip


def variant_source(checkout: course.Course, shortcut: Fake) -> str:
    return mutate.faked_source(shortcut, checkout.koan_of(shortcut.answer))


# ---- running -------------------------------------------------------------------------------


def summary(outcome: mutate.Outcome) -> str:
    return (f"{outcome.chapter}: {len(outcome.tried)} generated fakes, {len(outcome.killed)} "
            f"killed, {len(outcome.equivalent)} equivalent, {len(outcome.survived)} survived")  # fmt: skip


def equivalent_reason(chapter: course.Chapter, shortcut: Fake) -> str | None:
    entries = chapter.shortcuts.get(f"{shortcut.answer.name}::{shortcut.function}", {})
    return next((e.get("why") or None for e in entries.get("equivalent", []) if e.get("fake") == shortcut.label), None)


def gate(
    checkout: course.Course,
    chapters: list[course.Chapter],
    workers: int = 2,
    files: dict[str, set[str]] | None = None,
) -> list[mutate.Outcome]:
    """Every chapter's generated fakes in ONE pytest run, each beside its file's baseline
    (with `files`, {chapter: answer file names}: only those files' fakes)."""
    plan: dict[str, list[Variant]] = {}
    names: dict[str, dict[str, Fake]] = {}
    for chapter in chapters:
        only = None if files is None else files.get(chapter.number, set())
        variants, names[chapter.number] = mutate.fake_variants(checkout, chapter_shortcuts(checkout, chapter, only), "s")
        plan[chapter.number] = [v for v in variants if mutate.compiles(v.source)]
    passed, problem = mutate.run_chapters(checkout, plan, workers)
    outcomes = []
    for chapter in chapters:
        named = names[chapter.number]
        compiled = {v.name for v in plan[chapter.number]}  # one that does not compile fails
        passed |= {(chapter.number, m): False for m in named if m not in compiled}
        outcome = mutate.Outcome(chapter.number, list(named.values()), problem=problem)
        outcome.judge(passed, named, lambda s, chapter=chapter: equivalent_reason(chapter, s))
        outcomes.append(outcome)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jaxkoans.authoring.shortcuts")
    parser.add_argument("--chapter", action="append", default=[], help="NN (default: all)")
    parser.add_argument("--list", action="store_true", help="print the generated fakes only")
    parser.add_argument("-n", dest="workers", type=int, default=2)
    args = parser.parse_args(argv)
    checkout = course.Course.here()
    chapters = checkout.chosen(args.chapter)
    if args.list:
        for chapter in chapters:
            for shortcut in chapter_shortcuts(checkout, chapter):
                print(f"{chapter.number} {shortcut.name}  unwritten={list(shortcut.unwritten)}")
                print(textwrap.indent(shortcut.body, "    "))
        return 0
    started = time.monotonic()
    outcomes = gate(checkout, chapters, args.workers)
    for outcome in outcomes:
        print(summary(outcome) + (f" ({outcome.problem})" if outcome.problem else ""))
        for shortcut in outcome.survived:
            print(f"  passes: {shortcut.name}  unwritten={list(shortcut.unwritten)}")
            print(textwrap.indent(shortcut.body, "      "))
        print("".join(f"  no verdict: {s.name}\n" for s in outcome.unknown), end="")
    print(f"shortcut gate: {time.monotonic() - started:.0f} s")
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
