"""The mutation gate: a plausible wrong fill of each blank must fail its koan; `--fakes`: each
hand-written fake of a TODO must too (CONTRIBUTING.md, "The gates").

    python -m jaxkoans.authoring.mutate --chapter 03                  one chapter (repeat --chapter for more)
    python -m jaxkoans.authoring.mutate answers/03/test_meshes.py::test_x   only these koans (or names)
    python -m jaxkoans.authoring.mutate --fakes --chapter 03          the TODO fakes instead
"""

from __future__ import annotations

import argparse
import ast
import difflib
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from jaxkoans import course
from jaxkoans.course import fills, koan_model, predictions, twins
from jaxkoans.course.file_context import Context
from jaxkoans.learner import runner
from jaxkoans.plugin import results

# A variant that times out inside a compiled loop (a fake whose lax.while_loop never converges)
# is interrupted in Python while XLA's threads keep computing: the worker would slow every later
# koan it runs until one of them, a baseline too, timed out. pytest-timeout's thread method ends
# the worker instead (xdist starts another); its koan never reports, which is never a pass.
WORKER_ENDS_ON_TIMEOUT = ("-o", "timeout_method=thread")
STARTUP_S = 300  # a pytest process and its workers importing JAX, flax and optax, loaded machine
PER_FILL = 6  # wrong fills tried per blank

# Values that are interchangeable in form and differ in meaning: a fill from one family is
# mutated into its neighbours (attribute names, string values of JAX APIs).
FAMILIES: tuple[tuple[str, ...], ...] = (
    ("float32", "float16", "bfloat16", "float64", "int32", "int8", "int64", "uint8", "uint32"),
    ("complex64", "complex128"),
    ("jacfwd", "jacrev"),
    ("jvp", "vjp", "linearize"),
    ("psum", "pmean", "pmax", "pmin"),
    ("all_gather", "psum_scatter", "all_to_all", "ppermute"),
    ("DEFAULT", "HIGH", "HIGHEST"),
    ("jit", "checkpoint", "vmap", "grad"),
    ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all", "legacy_vectorized"),
    ("threefry2x32", "rbg", "unsafe_rbg"),
    ("device", "pinned_host", "unpinned_host"),
    ("SAME", "VALID"),
    ("sum", "mean", "max", "min", "prod"),
    ("x", "y", "data", "model"),  # mesh axis names
)
COMMON_ERRORS = (
    "ValueError", "TypeError", "RuntimeError", "KeyError", "IndexError", "AttributeError",
    "NotImplementedError", "ZeroDivisionError", "FloatingPointError", "AssertionError",
)  # fmt: skip


# ---- wrong fills --------------------------------------------------------------------------


def _number_mutants(value: int | float) -> list[int | float]:
    if value == 0:
        return [1, -1] if isinstance(value, int) else [1.0, -1.0]
    found = [value + 1, value - 1, value * 2]
    found.append(value // 2 if isinstance(value, int) else value / 2)
    return [v for v in found if v != value]


def _class_text(cls: type, context: Context) -> str:
    if cls.__module__ == "builtins":
        return cls.__name__
    for name, module in context.imports.items():
        candidate = f"{name}.errors.{cls.__name__}" if module == "jax" else ""
        if candidate and context.resolve(candidate) is cls:
            return candidate
    return f'__import__("{cls.__module__}", fromlist=["_"]).{cls.__qualname__}'


def _exception_mutants(cls: type, context: Context) -> list[str]:
    """The parent class, then siblings: the classes a learner mistakes this one for (JAX's own
    of the same module, then the common built-in ones)."""
    parents = [base for base in cls.__mro__[1:] if base is not object]
    found = [_class_text(parents[0], context)] if parents else []
    kin = [
        c
        for c in (parents[0].__subclasses__() if parents else [])
        if c is not cls and not c.__name__.startswith("_")
        and (c.__name__ in COMMON_ERRORS or c.__module__ == cls.__module__ != "builtins")
    ]  # fmt: skip
    found += [_class_text(c, context) for c in kin[:2]]
    common = [name for name in COMMON_ERRORS if name != cls.__name__ and name not in found]
    return found + common[: max(0, 4 - len(found))]


def _family_mutants(name: str) -> list[str]:
    found = []
    for family in FAMILIES:
        if name in family:
            found += [other for other in family if other != name and other not in found]
    return found


def wrong_fills(fill: str, context: Context, limit: int = PER_FILL) -> list[str]:
    """Plausible wrong fills for `fill` (source text), most telling first, at most `limit`."""
    try:
        tree = ast.parse(fill.strip(), mode="eval")
    except SyntaxError:
        return []
    original = ast.unparse(tree)
    rounds: list[list[str]] = []  # one list per rule; taken round-robin
    dotted = predictions.dotted(tree.body)
    if dotted:
        value = context.resolve(dotted)
        if isinstance(value, type) and issubclass(value, BaseException):
            rounds.append(_exception_mutants(value, context))
        prefix, _, last = dotted.rpartition(".")
        siblings = [f"{prefix}.{s}" if prefix else s for s in _family_mutants(last)]
        rounds.append([s for s in siblings if context.resolve(s) is not None])

    def edits(rule):  # each rule puts the node back as it was: edits never accumulate
        per_node = [rule(tree, node) for node in list(ast.walk(tree))]
        # the first edit of every node before the second of any: `f(0.1, k=4)` tries k too
        depth = max((len(edits) for edits in per_node), default=0)
        return [edits[d] for d in range(depth) for edits in per_node if d < len(edits)]

    def constants(fresh, node):
        if not isinstance(node, ast.Constant):
            return []
        v = node.value
        if isinstance(v, bool):
            values = [not v]
        else:
            values = _number_mutants(v) if isinstance(v, int | float) else _string_mutants(v, context) if isinstance(v, str) else []  # fmt: skip
        made = []
        for value in values:
            saved = node.value
            node.value = value
            made.append(ast.unparse(fresh))
            node.value = saved
        return made

    def swaps(fresh, node):
        if not isinstance(node, ast.Tuple | ast.List) or len(node.elts) < 2:
            return []
        made = []
        for i in range(len(node.elts) - 1):
            a, b = node.elts[i], node.elts[i + 1]
            if ast.dump(a) == ast.dump(b):
                continue
            node.elts[i], node.elts[i + 1] = b, a
            made.append(ast.unparse(fresh))
            node.elts[i], node.elts[i + 1] = a, b
        return made

    rounds.append(edits(swaps))
    rounds.append(edits(constants))
    found: list[str] = []
    for depth in range(max((len(r) for r in rounds), default=0)):
        for rule in rounds:
            if depth < len(rule) and rule[depth] != original and rule[depth] not in found:
                found.append(rule[depth])
    return found[:limit]


def _string_mutants(value: str, context: Context) -> list[str]:
    family = _family_mutants(value)
    others = [s for s in context.strings if s != value and s not in family]
    close = difflib.get_close_matches(value, others, n=3, cutoff=0.0)
    return family[:3] + close


# ---- where the blanks are -----------------------------------------------------------------


@dataclass
class Site:
    """One blank of an answer file: where its fill is, and the koans that can see it."""

    answer: Path
    line: int  # 1-based, in the answer file
    span: tuple[int, int]  # the fill's columns in that line
    fill: str
    koans: tuple[str, ...]  # test functions to run


@dataclass
class Mutant:
    site: Site
    fill: str  # the wrong fill
    module: str = ""  # the generated module's file name

    @property
    def key(self) -> str:
        return f"{self.site.answer.name}::{self.site.koans[0]}"

    @property
    def answer(self) -> Path:
        return self.site.answer


def sites(koan: Path, answer: Path) -> list[Site]:
    """Every blank of `answer` on one line, with its fill's columns (fills.take's reading)."""
    text = answer.read_text(encoding="utf-8")
    lines, model = text.splitlines(), koan_model.read(answer)
    found = []
    for fill in fills.take(koan.read_text(encoding="utf-8"), text).blanks:
        node = fill.node
        if node.end_lineno != node.lineno:
            continue  # twins keep a fill on its line; check.py names one that is not
        line = lines[node.lineno - 1]
        start, end = (len(line.encode()[:col].decode()) for col in (node.col_offset, node.end_col_offset))  # bytes
        found.append(Site(answer, node.lineno, (start, end), line[start:end], model.koans_seeing(node.lineno)))
    return found


def mutated_source(site: Site, fill: str) -> str:
    lines = site.answer.read_text(encoding="utf-8").splitlines(keepends=True)
    line, (start, end) = lines[site.line - 1], site.span
    lines[site.line - 1] = line[:start] + fill + line[end:]
    return "".join(lines)


def compiles(source: str) -> bool:
    """A variant that does not compile is no variant (a null byte in a string: ValueError)."""
    try:
        compile(source, "<variant>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def chapter_mutants(
    checkout: course.Course, chapter: course.Chapter, wanted: set[str] | None = None
) -> list[Mutant]:
    """The mutants of a chapter's answers (only the koans in `wanted`, if given)."""
    return [Mutant(site, fill)
            for koan, answer in twin_files(checkout, chapter)
            for context in [Context.of(answer.read_text(encoding="utf-8"))]
            for site in sites(koan, answer)
            if not wanted or any(_wanted(wanted, answer, k) for k in site.koans)
            for fill in wrong_fills(site.fill, context) if compiles(mutated_source(site, fill))]  # fmt: skip


def twin_files(checkout: course.Course, chapter: course.Chapter) -> list[tuple[Path, Path]]:
    """The chapter's (koan, answer) file pairs, in file-name order; an answer without a koan
    twin is not a koan yet."""
    answers = sorted((checkout.answers / chapter.number).glob("test_*.py"))
    pairs = [(checkout.koans / chapter.number / answer.name, answer) for answer in answers]
    return [(koan, answer) for koan, answer in pairs if koan.is_file()]


def _wanted(wanted: set[str], answer: Path, koan: str) -> bool:
    relative = f"answers/{answer.parent.name}/{answer.name}"
    names = {koan, f"{answer.name}::{koan}", f"{relative}::{koan}", answer.name, relative}
    return bool(names & {w.replace("koans/", "answers/", 1) for w in wanted})  # a file: its koans


# ---- running ------------------------------------------------------------------------------


@dataclass
class Variant:
    """A module to run: a copy of an answer file with something changed, and its koans."""

    name: str  # file name in the chapter's temporary directory
    source: str
    koans: tuple[str, ...]


BASE = "__base.py"  # an answer file unchanged beside its variants: their verdicts need it to pass


def baselines(changed: list[tuple[Path, tuple[str, ...]]]) -> list[Variant]:
    """One unchanged copy of each answer file of `changed` ((answer, koans) of each variant),
    run with the koans of all its variants."""
    koans: dict[Path, set[str]] = {}
    for answer, names in changed:
        koans.setdefault(answer, set()).update(names)
    return [Variant(f"{answer.stem}{BASE}", answer.read_text(encoding="utf-8"), tuple(sorted(names)))
            for answer, names in sorted(koans.items())]  # fmt: skip


def run_limit(checkout: course.Course, koans: int, workers: int = 2) -> float:
    """A whole run's limit, from its work: every koan may take pytest-timeout's whole limit (the
    course's `timeout`), shared by the workers, plus the start of the processes."""
    return STARTUP_S + koan_limit(checkout) * koans / max(1, workers)


def koan_limit(checkout: course.Course) -> float:
    """pytest-timeout's limit of one koan: the course's own, stretched by the machine's load (a
    slow compile there must not read as a fake killed; a fake that hangs is still stopped)."""
    return runner.koan_timeout(checkout.root) * load_factor()


def load_factor() -> float:
    """How many runnable processes share each core (the last minute's load), at least 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this system
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


def run_chapters(
    checkout: course.Course, chapters: dict[str, list[Variant]], workers: int = 2
) -> tuple[dict[tuple[str, str], bool], str]:
    """Every variant's koans in ONE pytest process: ({(chapter, variant name): True when every
    koan of it reported and passed}, a problem or ""). A koan that never reported (its worker
    killed) counts as not passed; when the whole run failed, such variants are absent."""
    chapters = {number: variants for number, variants in chapters.items() if variants}
    if not chapters:
        return {}, ""
    events, problem = run_chapter_events(checkout, chapters, workers)
    passed: dict[tuple[str, str], list[bool]] = {}
    reported: dict[tuple[str, str], set[str]] = {}
    for event in events:
        if event.get("event") == "koan":
            module = _module_of(event["path"])
            passed.setdefault(module, []).append(event["state"] == "passed")
            reported.setdefault(module, set()).add(event["name"].split("[", 1)[0])
        elif event.get("event") == "collect-error":
            passed.setdefault(_module_of(event["path"]), []).append(False)
    verdicts = {}
    for chapter, variants in chapters.items():
        for variant in variants:
            key = (chapter, variant.name)
            complete = set(variant.koans) <= reported.get(key, set())
            if not all(passed.get(key, [])) or complete or not problem:
                verdicts[key] = all(passed.get(key, [])) and complete  # unreported: never a pass
    return verdicts, problem


def run_chapter_events(
    checkout: course.Course, chapters: dict[str, list[Variant]], workers: int = 2
) -> tuple[list[dict], str]:
    """Every variant's koans in ONE pytest process, each in a directory named like its chapter:
    (the run record's events, a problem or "")."""
    with tempfile.TemporaryDirectory(prefix="jaxkoans-mutants-") as scratch:
        nodeids = []
        for chapter, variants in chapters.items():
            directory = Path(scratch) / chapter  # named like the chapter: chapter_for finds it
            directory.mkdir()
            for variant in variants:
                (directory / variant.name).write_text(variant.source, encoding="utf-8")
                nodeids += [f"{directory / variant.name}::{k}" for k in variant.koans]
        record = Path(scratch) / "record.jsonl"
        arguments = Path(scratch) / "nodeids.txt"
        arguments.write_text("\n".join(nodeids) + "\n", encoding="utf-8")
        command = runner.pytest_command(
            [f"@{arguments}"], record=record, workers=workers,
            options=("-q", "--tb=no", "-c", str(checkout.root / "pyproject.toml"), "--rootdir", scratch,
                     "-o", f"timeout={koan_limit(checkout):.0f}", *WORKER_ENDS_ON_TIMEOUT),
        )  # fmt: skip
        limit = run_limit(checkout, len(nodeids), workers)
        code, stderr = runner.run_in_group(command, limit, cwd=checkout.root)  # ends its workers too
        problem = ("" if code in (0, 1) else f"the run did not finish within {limit:.0f} s" if code is None
                   else "\n".join(stderr.strip().splitlines()[-5:]))  # fmt: skip
        return (results.read(record) if record.exists() else []), problem


def _module_of(path: str) -> tuple[str, str]:
    """(chapter, file name) of a variant's path in a record."""
    return Path(path).parent.name, Path(path).name


# ---- TODO fakes -------------------------------------------------------------------------
# A TODO must fail for a cheap fake: the reference computed the easy way, a kernel that skips
# its accumulation, jnp code around an empty pallas_call. Fakes live beside the answers, in
# answers/NN/fakes/<file without test_>.py (never collected, never imported: only parsed), as
# functions named <TODO function>__<label> whose body replaces the answer's TODO body.

FAKES = "fakes"


@dataclass(frozen=True)
class Fake:
    """A body in place of a TODO function's answer: hand-written (answers/NN/fakes/) or generated
    (authoring/shortcuts.py), with the TODO functions it leaves as shipped."""

    answer: Path
    function: str  # the TODO function it stands in for
    label: str  # a generated one's is kind_detail: "delegate_simulate_unrolled", …
    body: str
    koans: tuple[str, ...]
    unwritten: tuple[str, ...] = ()  # TODO functions left as shipped in this variant

    @property
    def name(self) -> str:
        return f"{self.answer.name}::{self.function}__{self.label}"


def fakes_file(answer: Path) -> Path:
    return answer.parent / FAKES / f"{answer.stem.removeprefix('test_')}.py"


def chapter_fakes(
    checkout: course.Course, chapter: course.Chapter, files: set[str] | None = None
) -> tuple[list[Fake], list[str]]:
    """(every fake of the chapter, "file::function" of each TODO function that has none); only
    of the answer files named in `files`, when given."""
    fakes, missing = [], []
    for koan, answer in twin_files(checkout, chapter):
        if files is not None and answer.name not in files:
            continue
        model, path = koan_model.read(answer), fakes_file(answer)
        written = koan_model.read(path) if path.is_file() else None
        nodes = [n for n in written.tree.body if isinstance(n, ast.FunctionDef)
                 and "__" in n.name.strip("_")] if written else []  # fmt: skip
        for function, (start, _) in twins.todo_spans(koan, answer).items():
            own = [n for n in nodes if n.name.partition("__")[0] == function]
            missing += [] if own else [f"{answer.name}::{function}"]
            fakes += [Fake(answer, function, n.name.partition("__")[2],
                           "\n".join(written.lines[slice(*koan_model.body_span(n))]),
                           model.koans_seeing(start + 1)) for n in own]  # fmt: skip
    return fakes, missing


def faked_source(fake: Fake, koan: Path | None = None) -> str:
    """The answer file with the TODO body of `fake.function` replaced by the fake's, and the body
    of each TODO function the fake leaves unwritten as shipped (in `koan`)."""
    text = koan_model.splice_body(fake.answer.read_text(encoding="utf-8"), fake.function, fake.body)
    shipped = koan_model.read(koan) if koan is not None else None
    for helper in fake.unwritten:
        start, end = shipped.body_of(helper)
        text = koan_model.splice_body(text, helper, "\n".join(shipped.lines[start:end]))
    return text


def check_all_fakes(
    checkout: course.Course,
    chapters: list[course.Chapter],
    workers: int = 2,
    passing_answers: set[str] | None = None,
    files: dict[str, set[str]] | None = None,
) -> dict[str, tuple[dict[str, bool | None], list[str], str]]:
    """The fakes of every chapter in ONE pytest run: {number: (verdicts, missing, problem)}.
    A verdict needs its file's baseline to pass; `passing_answers` (nodeids of a run of answers/
    just made) stands in for all but one baseline per chapter. `files`: {chapter: file names}."""
    planned = {}
    for chapter in chapters:
        only = None if files is None else files.get(chapter.number, set())
        fakes, missing = chapter_fakes(checkout, chapter, only)
        variants, named = fake_variants(checkout, fakes, "f")
        if passing_answers is not None:
            variants = _one_baseline(variants)
        planned[chapter.number] = (variants, named, missing)
    runs = {number: variants for number, (variants, _, _) in planned.items()}
    passed, problem = run_chapters(checkout, runs, workers)
    found = {}
    for number, (variants, named, missing) in planned.items():
        canary = all(passed.get((number, v.name)) is True for v in variants if v.name.endswith(BASE))
        verdicts = {}
        for module, fake in named.items():
            if passing_answers is None:
                base = passed.get((number, f"{fake.answer.stem}{BASE}"))
            else:  # this file's koans passed in answers/, and the fakes' directory works
                answer = f"answers/{number}/{fake.answer.name}"
                base = canary and all(f"{answer}::{k}" in passing_answers for k in fake.koans)
            verdict = passed.get((number, module))
            verdicts[fake.name] = None if base is not True or verdict is None else not verdict
        found[number] = (verdicts, missing, problem if named else "")
    return found


def _one_baseline(variants: list[Variant]) -> list[Variant]:
    """The fakes and, of their baselines, only the one with the fewest koans."""
    bases = sorted((v for v in variants if v.name.endswith(BASE)), key=lambda v: (len(v.koans), v.name))
    return [v for v in variants if not v.name.endswith(BASE)] + bases[:1]


def fake_variants(
    checkout: course.Course, fakes: list[Fake], tag: str
) -> tuple[list[Variant], dict[str, Fake]]:
    """Each fake's module (`<file>__<tag>NNN.py`) beside its file's baseline, and {module: fake}."""
    named = {f"{fake.answer.stem}__{tag}{i:03d}.py": fake for i, fake in enumerate(fakes)}
    sources = {m: faked_source(fake, checkout.koan_of(fake.answer)) for m, fake in named.items()}
    variants = [Variant(m, source, named[m].koans) for m, source in sources.items()]
    return variants + baselines([(f.answer, f.koans) for f in fakes]), named


# ---- the gate -----------------------------------------------------------------------------


@dataclass
class Outcome:
    """A gate's verdicts on one chapter: each of its mutants (or generated fakes) must fail."""

    chapter: str
    tried: list
    killed: list = field(default_factory=list)
    equivalent: list[tuple[object, str]] = field(default_factory=list)  # each with its reason
    survived: list = field(default_factory=list)
    unknown: list = field(default_factory=list)  # baseline failed or no report
    problem: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not (self.survived or self.unknown or self.problem)

    @property
    def rate(self) -> float:
        counted = len(self.killed) + len(self.survived) + len(self.equivalent)
        return 100.0 * len(self.killed) / counted if counted else 100.0

    def judge(self, passed: dict[tuple[str, str], bool], named: dict, reason) -> None:
        """Each of `named` ({module: what it is}) by its verdict in `passed` (run_chapters) beside
        its file's unchanged copy; `reason(it)` says why a survivor is an equivalent, or None."""
        for module, it in named.items():
            base = passed.get((self.chapter, f"{it.answer.stem}{BASE}"))
            verdict = passed.get((self.chapter, module))
            if base is not True or verdict is None:
                self.unknown.append(it)
            elif not verdict:
                self.killed.append(it)
            elif (why := reason(it)) is not None:
                self.equivalent.append((it, why))
            else:
                self.survived.append(it)


def _normal(fill: str) -> str:
    try:
        return ast.unparse(ast.parse(fill.strip(), mode="eval"))
    except SyntaxError:
        return fill.strip()


def equivalent_reason(chapter: course.Chapter, mutant: Mutant) -> str | None:
    return next((str(entry.get("why", "")) for koan in mutant.site.koans
                 for entry in chapter.equivalent.get(f"{mutant.site.answer.name}::{koan}", ())
                 if _normal(str(entry.get("fill", ""))) == _normal(mutant.fill)), None)  # fmt: skip


def gate(
    checkout: course.Course,
    chapter: course.Chapter,
    wanted: set[str] | None = None,
    workers: int = 2,
) -> Outcome:
    started = time.perf_counter()
    mutants = chapter_mutants(checkout, chapter, wanted)
    outcome = Outcome(chapter.number, mutants)
    for i, mutant in enumerate(mutants):
        mutant.module = f"{mutant.site.answer.stem}__m{i:04d}.py"
    variants = [Variant(m.module, mutated_source(m.site, m.fill), m.site.koans) for m in mutants]
    variants += baselines([(m.site.answer, m.site.koans) for m in mutants])
    passed, outcome.problem = run_chapters(checkout, {chapter.number: variants}, workers)
    outcome.judge(passed, {m.module: m for m in mutants}, lambda m: equivalent_reason(chapter, m))
    outcome.seconds = time.perf_counter() - started
    return outcome


def describe(mutant: Mutant) -> str:
    site = mutant.site
    where = f"answers/{site.answer.parent.name}/{site.answer.name}:{site.line}"
    return f"{where}  {'/'.join(site.koans[:2])}  `{site.fill}` → `{mutant.fill}`"


def table(outcomes: list[Outcome]) -> list[str]:
    return ["chapter  mutants  killed  equivalent  survived  unknown  kill rate  seconds"] + [
        f"{o.chapter:>7}  {len(o.tried):>7}  {len(o.killed):>6}  {len(o.equivalent):>10}"
        f"  {len(o.survived):>8}  {len(o.unknown):>7}  {o.rate:>8.1f} %  {o.seconds:>7.0f}" for o in outcomes]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jaxkoans.authoring.mutate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("koans", nargs="*", help="only these koans: name, file.py::name, nodeid, "
                        "or a file (all its koans)")
    parser.add_argument("--chapter", action="append", default=[], metavar="NN")
    parser.add_argument("-n", "--workers", type=int, default=2)
    parser.add_argument("--survivors", type=Path, help="also write the survivors to this file")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--fakes", action="store_true", help="check the TODO fakes instead")
    args = parser.parse_args(argv)  # fmt: skip
    wanted = {k.split("[", 1)[0] for k in args.koans} or None
    numbers = {c.zfill(2) for c in args.chapter}
    if wanted and not numbers:
        numbers = {Path(k.split("::")[0]).parent.name for k in wanted if "/" in k}
    checkout = course.Course.here()
    chapters = checkout.chosen(sorted(numbers))
    if not chapters:
        print(f"没有这一章 / no such chapter: {sorted(numbers)}", file=sys.stderr)
        return 2
    if args.fakes:
        return fakes_main(checkout, chapters, args)
    if args.list:
        print("".join(f"{describe(m)}\n" for c in chapters for m in chapter_mutants(checkout, c, wanted)), end="")
        return 0
    if wanted and not any(chapter_mutants(checkout, c, wanted) for c in chapters):
        print(f"没有选中任何变异 / no mutants for {sorted(wanted)}: name a koan, file.py::koan, "
              "a nodeid or an answer file", file=sys.stderr)  # fmt: skip
        return 2
    outcomes, survivors = [], []
    for chapter in chapters:  # one chapter at a time: each run is CPU heavy
        outcomes.append(outcome := gate(checkout, chapter, wanted, args.workers))
        print(table([outcome])[-1], flush=True)
        survivors += [f"{chapter.number}  {describe(m)}" for m in outcome.survived]
        if outcome.problem:
            print(f"⚠️  {chapter.number}: {outcome.problem}")
    print("\n" + "\n".join(table(outcomes)))
    if survivors:
        print("\n存活的变异 / survivors (a wrong fill that passes):\n" + "\n".join("  " + s for s in survivors))
    if args.survivors:
        args.survivors.write_text("".join(s + "\n" for s in survivors), encoding="utf-8")
    unknown = sum(len(o.unknown) for o in outcomes)
    if unknown:
        print(f"\n⚠️  {unknown} mutants have no verdict (their baseline failed or did not report)")
    return 1 if survivors or unknown else 0


def fakes_main(checkout: course.Course, chapters: list[course.Chapter], args) -> int:
    failed = 0
    named = [Path(k.split("::")[0]) for k in args.koans if k.split("::")[0].endswith(".py")]
    files = {c.number: {p.name for p in named if p.parent.name == c.number} for c in chapters} if named else None
    checked = check_all_fakes(checkout, chapters, args.workers, files=files)
    for chapter in chapters:
        verdicts, missing, problem = checked[chapter.number]
        killed = sum(v is True for v in verdicts.values())
        print(f"{chapter.number}: {killed}/{len(verdicts)} fakes fail their koan, "
              f"{len(missing)} TODO functions without a fake")  # fmt: skip
        for name, verdict in sorted(verdicts.items()):
            if verdict is not True:
                print(f"  {'passes' if verdict is False else 'no verdict'}: {name}")
                failed += 1
        print("".join(f"  no fake: {name}\n" for name in missing), end="")
        if problem:
            print(f"⚠️  {chapter.number}: {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    with runner.stop_signals_leave():  # an outer `timeout` ends the gate and its child run
        raise SystemExit(main())
