"""The static authoring gate (`python -m jaxkoans.authoring check [--chapter NN]`): each problem
says what to fix and where. Nothing here runs a koan, so the whole course is checked in seconds."""

from __future__ import annotations

import ast
import math
import re
import textwrap
from pathlib import Path

from jaxkoans import course
from jaxkoans.authoring import contract_fakes, gates, giveaways
from jaxkoans.course import fills, koan_model, twins
from jaxkoans.course import shipped as as_shipped
from jaxkoans.plugin import costs

CJK = re.compile(r"[\u4e00-\u9fff]")
WORD = re.compile(r"[A-Za-z]{2,}")


def is_english(text: str, words: int = 3) -> bool:
    return len(WORD.findall(CJK.sub(" ", text))) >= words


def listed(test_file: Path) -> list[tuple[str, int, str]]:
    return [(k.name, k.line, k.docstring) for k in koan_model.read(test_file).koans]


# ---- the course ---------------------------------------------------------------------------------


def course_problems(checkout: course.Course) -> list[str]:
    """koans/ and answers/ hold the same files; koans/course.toml lists every chapter once;
    koans/.shipped.json is fresh."""
    koans, answers = ({p.relative_to(d) for p in d.glob("*/test_*.py")}
                      for d in (checkout.koans, checkout.answers))  # fmt: skip
    problems = [f"koans/{p}: no answer file in answers/" for p in sorted(koans - answers)]
    problems += [f"answers/{p}: no koan file in koans/" for p in sorted(answers - koans)]
    numbers = [c.number for c in checkout.chapters()]
    path = checkout.manifest().get("path")
    if not isinstance(path, list):
        return [*problems, "koans/course.toml: no `path` list (or the file does not parse)"]
    where = "koans/course.toml:"
    problems += [f'{where} add "{n}" to `path` (a chapter left out goes last)'
                 for n in numbers if n not in path]  # fmt: skip
    problems += [f"{where} `path` names {n}, which has no chapter.toml"
                 for n in path if n not in numbers]  # fmt: skip
    return problems + [f"{where} `path` names {n} twice" for n in set(path) if path.count(n) > 1]


SHIPPED_STALE = ("koans/.shipped.json does not match koans/ and answers/: "
                 "run python -m jaxkoans.course.shipped (or python -m jaxkoans.authoring stamp)")  # fmt: skip


# ---- one chapter --------------------------------------------------------------------------------


def manifest_problems(checkout: course.Course, chapter: course.Chapter) -> list[str]:
    """chapter.toml: titles, `files` exactly the chapter's test files, a hint for every koan."""
    directory = checkout.koans / chapter.number
    where = f"koans/{chapter.number}/chapter.toml"
    present = sorted(p.name for p in directory.glob("test_*.py"))
    problems = [] if chapter.title_zh and chapter.title_en else [f"{where}: titles missing"]
    if sorted(chapter.files) != present:
        problems.append(f"{where}: `files` must list exactly the chapter's test files in course order")
    koans = {f"{f}::{name}" for f in present for name, _, _ in listed(directory / f)}
    problems += [f"{where}: a hint for a koan that does not exist: {k}"
                 for k in sorted(set(chapter.hints) - koans)]  # fmt: skip
    return problems + [f'{where}: no hint for {k} ([hints."{k}"] zh/en)'
                       for k in sorted(koans - set(chapter.hints))]  # fmt: skip


def region_problems(checkout: course.Course, chapter: course.Chapter) -> list[str]:
    """A failing koan counts as not started while its fix region is as shipped: the harness
    knows that from the fingerprints in chapter.toml, so they must match the koan files."""
    files = sorted((checkout.koans / chapter.number).glob("test_*.py"))
    actual = {p.name: d for p in files if (d := tuple(koan_model.read(p).region_hashes()))}
    if chapter.regions == actual:
        return []
    table = "".join(f'\n"{n}" = [' + ", ".join(f'"{d}"' for d in ds) + "]" for n, ds in actual.items())
    return [
        f"koans/{chapter.number}/chapter.toml: [regions] must fingerprint the fix regions as "
        f"shipped; the table is:\n[regions]{table}"
    ]


def readme_problems(checkout: course.Course, chapter: course.Chapter) -> list[str]:
    readme = checkout.koans / chapter.number / "README.md"
    if not readme.is_file():
        return [f"koans/{chapter.number}/README.md: missing (what the chapter teaches, both languages)"]
    text = readme.read_text(encoding="utf-8")
    if not (CJK.search(text) and is_english(text, 20)):
        return [f"koans/{chapter.number}/README.md: needs Chinese and English"]
    koans, tests = chapter_counts(checkout.koans / chapter.number)
    return [
        f"koans/{chapter.number}/README.md: its {language} says {said[0]} koans ({said[1]} tests), "
        f"the chapter has {koans} ({tests if tests is not None else '?'} tests)"
        for language, pattern in README_COUNTS.items()
        for said in pattern.findall(text)
        if int(said[0]) != koans or (tests is not None and int(said[1]) != tests)
    ]


# "56 个 koan（56 个测试）" and "56 koans (56 tests)": a parametrized koan is several tests.
README_COUNTS = {
    "Chinese": re.compile(r"(\d+) 个 koan（(\d+) 个测试）"),
    "English": re.compile(r"(\d+) koans? \((\d+) tests?\)"),
}


def chapter_counts(directory: Path) -> tuple[int, int | None]:
    """(koans, tests) of a chapter's koan files, read without running them; tests is None when
    a parametrize's cases are not a list (or a module-level list, or a slice of one)."""
    koans, tests = 0, 0
    for path in sorted(directory.glob("test_*.py")):
        model = koan_model.read(path)
        names = {k.name for k in model.koans}
        body = model.tree.body if model.tree is not None else []
        lists = {t.id: node.value for node in body if isinstance(node, ast.Assign)
                 for t in node.targets if isinstance(t, ast.Name)}  # fmt: skip
        for node in body:
            if isinstance(node, koan_model.FUNCTIONS) and node.name in names:
                koans += 1
                cases = [_cases(d, lists) for d in node.decorator_list]
                known = tests is not None and None not in cases
                tests = tests + math.prod(cases) if known else None
    return koans, tests


def _cases(decorator: ast.expr, lists: dict[str, ast.expr]) -> int | None:
    """How many tests a decorator makes of its koan: a parametrize's cases, else 1."""
    if not (isinstance(decorator, ast.Call) and ast.unparse(decorator.func).endswith("parametrize")):
        return 1
    values = [k.value for k in decorator.keywords if k.arg == "argvalues"] + decorator.args[1:2]
    return _length(values[0], lists) if values else None


def _length(node: ast.expr, lists: dict[str, ast.expr]) -> int | None:
    if isinstance(node, ast.Name) and node.id in lists:
        return _length(lists[node.id], lists)
    if isinstance(node, ast.List | ast.Tuple | ast.Dict):
        return len(node.keys if isinstance(node, ast.Dict) else node.elts)
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("list", "tuple", "sorted"):
        return _length(node.args[0], lists) if len(node.args) == 1 else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        whole = _length(node.value, lists)
        try:
            parts = [ast.literal_eval(b) if b else None for b in (node.slice.lower, node.slice.upper, node.slice.step)]
        except ValueError:
            return None
        return len(range(whole)[slice(*parts)]) if whole is not None else None
    return None


def shortcut_problems(checkout: course.Course, chapter: course.Chapter) -> list[str]:
    """Each `[shortcuts]` library body parses as a function body (the shortcut gate splices it
    in as written: no indentation after its first line)."""
    problems = []
    for key, entry in sorted(chapter.shortcuts.items()):
        for body in entry.get("library", ()):
            try:
                ast.parse(textwrap.dedent(body))
            except SyntaxError as error:
                problems.append(f'koans/{chapter.number}/chapter.toml: [shortcuts."{key}"] a library body '
                                f"does not parse ({error.msg}, its line {error.lineno}): {body[:60]!r}")  # fmt: skip
    return problems


def profile_problems(checkout: course.Course, chapter: course.Chapter) -> list[str]:
    """Every traced contract has its answer's cost profile (koans/NN/costs.json), and a
    dimension a contract frees says why (plugin/costs.py)."""
    where = f"koans/{chapter.number}/chapter.toml"
    problems = []
    for key, contract in sorted(chapter.contracts.items()):
        for dimension, value in contract.get("costs", {}).items():
            if dimension not in costs.BOUNDS:
                problems.append(f"{where}: contracts.{key!r}.costs: unknown dimension {dimension!r}")
            elif isinstance(value, str) and not value.strip():
                problems.append(f"{where}: contracts.{key!r}.costs.{dimension}: say why it is free")
    traced = [k for k, c in chapter.contracts.items() if c.get("traced", True) and "::regions" not in k]
    profiled = {f"{filename}::{todo}" for filename in {k.split("::")[0] for k in traced}
                for todo in costs.profiles_for(checkout.koans / chapter.number, filename)}  # fmt: skip
    missing = sorted(set(traced) - profiled)
    run = f"python -m jaxkoans.authoring.programs --costs --chapter {chapter.number}"
    if traced and not profiled:
        problems.append(f"koans/{chapter.number}/{costs.FILE}: no cost profile of the answers: run {run}")
    elif missing:
        problems.append(f"koans/{chapter.number}/{costs.FILE}: no profile for {', '.join(missing)} (its answer is "
                        f"never called on arrays, or the file is stale: run {run})")  # fmt: skip
    return problems


def contract_problems(checkout: course.Course, chapter: course.Chapter) -> list[str]:
    """A technique contract for every TODO function and every file's fix regions; none for a
    TODO that does not exist; a contract that reads nothing of the program says why; a koan
    that judges a TODO's technique by the text of a program (a count of a substring, a walk of
    the top level) has a contract that reads the program instead."""
    where = f"koans/{chapter.number}/chapter.toml"
    wanted: dict[str, Path] = {}
    for koan_file in sorted((checkout.koans / chapter.number).glob("test_*.py")):
        model = koan_model.read(koan_file)
        wanted |= {f"{koan_file.name}::{t.name}": koan_file for t in model.todos}
        if model.regions:
            wanted[f"{koan_file.name}::regions"] = koan_file
    problems = [
        f'{where}: no technique contract for {key} ([contracts."{key}"]: on_path, absent, '
        "max_intermediate, or traced = false with why; python -m jaxkoans.authoring.programs "
        "prints what its answer builds)"
        for key in sorted(set(wanted) - set(chapter.contracts))
    ]
    problems += [f"{where}: a contract for a TODO that does not exist: {key}"
                 for key in sorted(set(chapter.contracts) - set(wanted))]  # fmt: skip
    for key, contract in sorted(chapter.contracts.items()):
        asks = any(contract.get(k) for k in (*contract_fakes.ASKS, "fresh"))
        if not asks and not contract.get("why", "").strip():
            problems.append(f"{where}: contracts.{key!r} asks nothing of the program: say why")
    problems += profile_problems(checkout, chapter)
    for koan_file in sorted({*wanted.values()}):
        answer = checkout.answer_of(koan_file)
        model = koan_model.read(answer) if answer.is_file() else None
        todos = {t.name for t in koan_model.read(koan_file).todos}
        for koan in model.koans if model else ():
            proxy = text_proxies(model.tree, koan.name)
            reached = sorted(set(model.reached(koan.name)) & todos)
            contracts = [chapter.contracts.get(f"{koan_file.name}::{t}", {}) for t in reached]
            judged = [  # read by the program reader, or said why no program can be read
                c for c in contracts
                if any(c.get(k) for k in contract_fakes.ASKS) or c.get("traced") is False
            ]  # fmt: skip
            if proxy and reached and not judged:
                problems.append(f"{answer.relative_to(checkout.root)}:{proxy[0][0]} {koan.name} judges "
                                f"{', '.join(reached)} by {proxy[0][1]}: give the TODO a contract the "
                                "program reader checks (on_path / absent / max_intermediate)")  # fmt: skip
    return problems


def text_proxies(tree: ast.Module, koan: str) -> list[tuple[int, str]]:
    """(line, what) of each place koan `koan` reads a program by its text or its top level only:
    `str(jaxpr).count(…)`, `"…" in str(jaxpr)`, `….as_text().count(…)`, `jaxpr.eqns`."""
    node = next((n for n in tree.body if getattr(n, "name", None) == koan), None)
    found = []
    for sub in ast.walk(node) if node else ():
        if isinstance(sub, ast.Attribute) and sub.attr == "eqns":
            found.append((sub.lineno, "a walk of the jaxpr's top level (.eqns)"))
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            base = sub.func.value
            text = isinstance(base, ast.Call) and (
                (isinstance(base.func, ast.Name) and base.func.id == "str")
                or (isinstance(base.func, ast.Attribute) and base.func.attr == "as_text")
            )
            if sub.func.attr == "count" and text:
                found.append((sub.lineno, "a count of a substring of the program's text"))
    return sorted(found)


# ---- one koan file ------------------------------------------------------------------------------


def twin_problems(checkout: course.Course, koan_file: Path) -> list[str]:
    """The koan file and its answer differ only at blanks, TODO bodies and fix regions."""
    answer = checkout.answer_of(koan_file)
    problems = list(twins.compare(koan_file, answer).problems)
    model = koan_model.read(koan_file)
    if not problems and not (model.blank_lines or model.todos or model.regions):
        problems.append(f"{koan_file}: nothing to fill in")
    if [n for n, _, _ in listed(koan_file)] != [n for n, _, _ in listed(answer)]:
        problems.append(f"{koan_file}: its koans are not those of {answer}, in the same order")
    return problems


def evaluated_at_import(node: ast.AST):
    """The nodes Python evaluates while it imports a module: all but the bodies of functions
    and lambdas (their decorators and defaults, class bodies and module statements are)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        arguments = node.args
        outside = [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]
        outside += getattr(node, "decorator_list", [])
    else:
        outside = list(ast.iter_child_nodes(node))
    yield node
    for child in outside:
        yield from evaluated_at_import(child)


def import_time_problems(checkout: course.Course, koan_file: Path) -> list[str]:
    """A learner's fill runs only where its koan runs: grade's workers import every koan file
    before forking a process per koan, so nothing the learner writes may run at import."""
    early = [node.lineno for node in evaluated_at_import(ast.parse(koan_file.read_text(encoding="utf-8")))
             if (isinstance(node, ast.Name) and node.id == "__")
             or (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "todo")]  # fmt: skip
    return [f"{koan_file}: blanks run at import on lines {early}; move them into a function"] * bool(early)


def language_problems(checkout: course.Course, koan_file: Path) -> list[str]:
    """A docstring in Chinese and English, and a hint with zh and en levels, for every koan."""
    chapter = checkout.chapter_for(koan_file)
    problems = []
    for name, line, doc in listed(koan_file):
        where = f"{koan_file}:{line} {name}"
        if not (CJK.search(doc) and is_english(doc, 6)):
            problems.append(f"{where}: docstring needs Chinese and English")
        hint = chapter.hint(koan_file.name, name) if chapter else None
        if not (hint and hint.zh and hint.en):
            problems.append(f"{where}: needs a hint with zh and en levels")
            continue
        if not all(CJK.search(t) for t in hint.zh):
            problems.append(f"{where}: a zh hint level has no Chinese")
        if not all(is_english(t) and not CJK.search(t) for t in hint.en):
            problems.append(f"{where}: an en hint level is not English")
    return problems


def hint_problems(checkout: course.Course, koan_file: Path) -> list[str]:
    """No hint holds its koan's answer or copies a TODO's solution."""
    answer = checkout.answer_of(koan_file)
    report = twins.compare(koan_file, answer)
    texts = [path.read_text(encoding="utf-8") for path in (koan_file, answer)]
    blanks = [(f.blank[0], f.text) for f in fills.take(*texts).blanks] if report.ok else []
    chapter = checkout.chapter_for(koan_file)
    spans = koan_model.read(koan_file).spans
    problems = []
    body_lines = [ln.strip() for b in report.todo_bodies.values() for ln in b.splitlines()]
    for name, _, _ in listed(koan_file):
        hint = chapter.hint(koan_file.name, name) if chapter else None
        texts = " ".join((hint.zh + hint.en) if hint else ())
        start, end = spans[name]
        own = [text for line, text in blanks if start <= line <= end]
        given = [a for a in own if len(a.strip()) >= 4 and not a.strip().replace(".", "").isdigit()
                 and giveaways.appears(a.strip(), texts)]  # an answer copied into a hint  # fmt: skip
        if given:
            problems.append(f"{koan_file}::{name}: the hint contains the answer {given}")
        copied = [ln for ln in body_lines if len(ln) > 24 and ln in texts]
        if copied:
            problems.append(f"{koan_file}::{name}: the hint copies the solution's code {copied}")
    return problems


def giveaway_problems(checkout: course.Course, koan_file: Path) -> list[str]:
    return [str(f) for f in giveaways.findings(checkout, koan_file, checkout.answer_of(koan_file))]


FILE_CHECKS = (twin_problems, import_time_problems, language_problems, hint_problems,
               giveaway_problems)  # fmt: skip
CHAPTER_CHECKS = (manifest_problems, region_problems, readme_problems, contract_problems,
                  shortcut_problems)  # fmt: skip


def check(
    checkout: course.Course, chapters: list[course.Chapter], whole: bool, records: bool = True
) -> list[str]:
    """Every static problem of `chapters` (and of the whole course with `whole`); with
    `records`, the stale gate records and a stale manifest too."""
    problems = course_problems(checkout) if whole else []
    for chapter in chapters:
        for each in CHAPTER_CHECKS:
            problems += each(checkout, chapter)
        for koan_file in sorted((checkout.koans / chapter.number).glob("test_*.py")):
            if not checkout.answer_of(koan_file).is_file():
                continue  # course_problems names it
            for each in FILE_CHECKS:
                problems += each(checkout, koan_file)
    if not records:
        return problems
    problems += [SHIPPED_STALE] if as_shipped.stale(checkout.root) else []
    return problems + [line for entry in gates.stale(checkout, chapters) for line in entry.lines()]
