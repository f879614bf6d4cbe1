"""Every gate of a chapter behind one command (`python -m jaxkoans.authoring stamp`), and one
record (tests/gate_record.toml) of the digest of what each gate read when it last passed: per
koan for the mutation gate, per file with a TODO for the fakes and the shortcut gate. After an
edit of the harness code a chapter's canary (`CANARY`) runs instead of every gate
(CONTRIBUTING.md, "The gates").
"""

from __future__ import annotations

import hashlib
import json
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from jaxkoans import course
from jaxkoans.authoring import mutate, shortcuts
from jaxkoans.course import koan_model
from jaxkoans.course import shipped as as_shipped

RECORD = "tests/gate_record.toml"
HEADER = (
    "# Every gate's record (jaxkoans/authoring/gates.py): per chapter, the harness code its verdicts\n"
    "# were last confirmed with; per koan file, the fakes and shortcut gates' line and one mutation\n"
    "# line per koan: the digest of what that gate reads and its counts. Written by\n"
    "# `python -m jaxkoans.authoring stamp`; do not edit.\n"
)
GATES = ("mutation", "fakes", "shortcuts")
CANARY = {"mutation": 3, "fakes": 2, "shortcuts": 2}  # per chapter
# The harness code every gate's verdict depends on: what a koan imports (api), what decides how
# it fails (plugin, and the course's readers of what the learner wrote), the runner that starts
# pytest, the files that configure pytest (course.HARNESS_FILES; of pyproject.toml only its
# pytest table), and the gates' own modules.
HARNESS = (
    *(name for name in course.HARNESS_FILES if name != "pyproject.toml"), "jaxkoans/__init__.py",
    "jaxkoans/api", "jaxkoans/plugin", "jaxkoans/course", "jaxkoans/learner/runner.py",
)  # fmt: skip
GATE_MODULES = tuple(
    f"jaxkoans/authoring/{name}.py" for name in ("mutate", "shortcuts", "contract_fakes", "gates")
)
MUTATE = GATE_MODULES[0]  # the mutation gate and the fakes check


# ---- what each gate reads ------------------------------------------------------------------


def harness_digest(checkout: course.Course, *gate_modules: str) -> str:
    """A digest of `checkout`'s harness code (HARNESS) and of `gate_modules` (paths under its root)."""
    root = checkout.root
    paths = [root / entry for entry in (*HARNESS, *gate_modules)]
    files = {f for p in paths for f in (p.rglob("*.py") if p.is_dir() else [p] if p.is_file() else [])}
    hashed = hashlib.sha256()
    for path in sorted(files):
        hashed.update(f"{path.relative_to(root).as_posix()}\0".encode())
        hashed.update(path.read_bytes() + b"\0")
    with (root / "pyproject.toml").open("rb") as config:
        pytest_options = tomllib.load(config).get("tool", {}).get("pytest", {})
    hashed.update(json.dumps(pytest_options, sort_keys=True).encode())
    return hashed.hexdigest()


def harness(checkout: course.Course) -> str:
    """The digest of the code every gate's verdict depends on: HARNESS and GATE_MODULES."""
    return harness_digest(checkout, *GATE_MODULES)


def _hash(*parts: object) -> str:
    hashed = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else json.dumps(part, sort_keys=True).encode()
        hashed.update(data + b"\0")
    return hashed.hexdigest()


def _own(table: dict, name: str) -> dict:
    """The entries of a chapter.toml table keyed "file::…" that belong to file `name`."""
    return {k: v for k, v in table.items() if k.split("::", 1)[0] == name}


def _parts(path: Path) -> tuple[str, dict[str, str]]:
    """(the file's lines outside its koans, {koan: its own lines and those of the koans it
    calls}): what every koan of the file reads, and what only one does."""
    if not path.is_file():
        return "", {}
    model = koan_model.read(path)
    lines = model.lines
    own = {k.name: "\n".join(lines[k.span[0] - 1 : k.span[1]]) for k in model.koans}
    inside = {i for k in model.koans for i in range(k.span[0] - 1, k.span[1])}
    common = "\n".join(line for i, line in enumerate(lines) if i not in inside)
    reached = {k: [k, *(d for d in model.reached(k) if d in own and d != k)] for k in own}
    return common, {k: "\n".join(own[d] for d in names) for k, names in reached.items()}


def file_digests(chapter: course.Chapter, koan: Path, answer: Path) -> dict[str, dict[str, str]]:
    """{gate: {record key: digest of what it reads}}: the mutation gate per koan ("file::koan":
    the lines outside the file's koans and its own, in koan and answer), the fakes and the
    shortcut gate per file with a TODO (the lines outside the koans and those of the koans that
    reach a TODO). An edit of a koan that reaches no TODO re-gates its own mutants only."""
    name = answer.name
    settings = {"x64": chapter.x64, "devices": chapter.devices}
    (k_common, k_own), (a_common, a_own) = _parts(koan), _parts(answer)
    common = (k_common, a_common, settings)
    found: dict[str, dict[str, str]] = {"mutation": {}}
    for koan_name in a_own:
        equivalent = chapter.equivalent.get(f"{name}::{koan_name}", [])
        mine = (k_own.get(koan_name, ""), a_own[koan_name])
        found["mutation"][f"{name}::{koan_name}"] = _hash(*common, *mine, equivalent)
    model = koan_model.read(koan)  # the koans that reach a TODO function
    todo = sorted({k for t in model.todos for k in model.koans_seeing(t.line)})
    if todo:
        both = (*common, [(k_own.get(k, ""), a_own.get(k, "")) for k in todo])
        contracts = _own(chapter.contracts, name)
        fakes = mutate.fakes_file(answer).read_bytes() if mutate.fakes_file(answer).is_file() else None
        found["fakes"] = {name: _hash(*both, fakes, contracts)}
        found["shortcuts"] = {name: _hash(*both, _own(chapter.shortcuts, name), contracts)}
    return found


def recorded(own: dict, gate: str, key: str) -> dict:
    """A chapter's record entry of `gate` for `key` ("file" or, for the mutation gate,
    "file::koan"); {} when there is none."""
    name, _, koan = key.partition("::")
    entry = own.get(name, {}).get(gate, {})
    return entry.get(koan, {}) if koan else entry


def _record(record: dict, number: str, gate: str, key: str, entry: dict) -> None:
    name, _, koan = key.partition("::")
    table = record.setdefault(number, {}).setdefault(name, {})
    if koan:
        table.setdefault(gate, {})[koan] = entry
    else:
        table[gate] = entry


# ---- the record ----------------------------------------------------------------------------


def record_path(checkout: course.Course) -> Path:
    return checkout.root / RECORD


def read(path: Path) -> dict[str, dict]:
    """{chapter: {"harness": digest, file name: {gate: {"digest": …, counts…}}}}."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _inline(entry: dict) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in entry.items()) + " }"


def render(record: dict[str, dict]) -> str:
    lines = [HEADER]
    for number in sorted(record):
        chapter = record[number]
        lines.append(f'\n["{number}"]\nharness = {json.dumps(chapter.get("harness", ""))}\n')
        for name in sorted(k for k in chapter if k != "harness"):
            lines.append(f'\n["{number}"."{name}"]\n')
            for gate in ("fakes", "shortcuts"):
                if gate in chapter[name]:
                    lines.append(f"{gate} = {_inline(chapter[name][gate])}\n")
            mutation = chapter[name].get("mutation", {})
            lines += [f"mutation.{k} = {_inline(mutation[k])}\n" for k in sorted(mutation)]
    return "".join(lines)


def write(record: dict[str, dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    part.write_text(render(record), encoding="utf-8")
    part.replace(path)


@dataclass
class Stale:
    """What the record of one chapter no longer covers."""

    chapter: course.Chapter
    files: dict[str, list[str]] = field(default_factory=dict)  # gate -> answer file names
    harness: bool = False  # the harness changed since its verdicts were confirmed
    gone: list[str] = field(default_factory=list)  # recorded files the chapter no longer has
    recorded: bool = False  # the record has a harness digest of the chapter

    @property
    def any(self) -> bool:
        return self.harness or bool(self.gone) or any(self.files.values())

    def lines(self) -> list[str]:
        n = self.chapter.number
        found = [f"{n}: the {gate} record is stale for {_grouped(names)}"
                 for gate, names in self.files.items() if names]  # fmt: skip
        if self.harness and self.recorded:
            found.append(f"{n}: the harness code changed since its gates passed (the canary runs)")
        elif self.harness:
            found.append(f"{n}: no gate has passed yet")
        if self.gone:
            found.append(f"{n}: the record names files that are gone: {', '.join(self.gone)}")
        return [f"{line}: python -m jaxkoans.authoring stamp --chapter {n}" for line in found]


def _grouped(keys: list[str]) -> str:
    """Record keys "a.py::test_x", "a.py::test_y", "b.py" as "a.py (test_x, test_y), b.py"."""
    files: dict[str, list[str]] = {}
    for key in keys:
        name, _, koan = key.partition("::")
        files.setdefault(name, []).extend([koan] if koan else [])
    return ", ".join(f"{n} ({', '.join(k)})" if k else n for n, k in files.items())


def stale(
    checkout: course.Course,
    chapters: list[course.Chapter],
    record: dict | None = None,
    current: str | None = None,
) -> list[Stale]:
    """Each chapter's stale entries (reads files, runs nothing)."""
    record = read(record_path(checkout)) if record is None else record
    current = harness(checkout) if current is None else current
    found = []
    for chapter in chapters:
        own = record.get(chapter.number, {})
        result = Stale(chapter, {gate: [] for gate in GATES})
        result.harness = own.get("harness") != current
        result.recorded = "harness" in own
        pairs, keys = mutate.twin_files(checkout, chapter), set()
        for koan, answer in pairs:
            for gate, digests in file_digests(chapter, koan, answer).items():
                keys |= set(digests)
                for key, digest in digests.items():
                    if recorded(own, gate, key).get("digest") != digest:
                        result.files[gate].append(key)
        names = {answer.name for _, answer in pairs}
        result.gone = sorted(k for k in own if k != "harness" and k not in names)
        per_koan = {n: own[n].get("mutation", {}) for n in names & set(own)}
        result.gone += sorted(f"{name}::{koan}" for name, entry in per_koan.items()
                              for koan in entry
                              if f"{name}::{koan}" not in keys)  # fmt: skip
        found.append(result)
    return found


# ---- the canary ----------------------------------------------------------------------------


def _spread(items: list, count: int) -> list:
    """`count` items spread evenly over `items`, always the same ones."""
    if len(items) <= count or count == 1:
        return list(items[:count])
    return [items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)]


def canary_plan(
    checkout: course.Course, chapter: course.Chapter
) -> tuple[list[mutate.Variant], dict[str, str]]:
    """(the variants, {module: what it is}) of a chapter's canary: CANARY mutants, fakes and
    generated fakes that must fail, each file they change unchanged beside them."""
    variants, named, changed = [], {}, []
    mutants = [m for m in mutate.chapter_mutants(checkout, chapter) if mutate.equivalent_reason(chapter, m) is None]
    for i, m in enumerate(_spread(mutants, CANARY["mutation"])):
        module = f"{m.site.answer.stem}__cm{i:02d}.py"
        variants.append(mutate.Variant(module, mutate.mutated_source(m.site, m.fill), m.site.koans))
        named[module] = f"mutation: {mutate.describe(m)}"
        changed.append((m.site.answer, m.site.koans))
    generated = [s for s in shortcuts.chapter_shortcuts(checkout, chapter)
                 if shortcuts.equivalent_reason(chapter, s) is None
                 and mutate.compiles(shortcuts.variant_source(checkout, s))]  # fmt: skip
    hand_written, _ = mutate.chapter_fakes(checkout, chapter)
    for gate, fakes in (("fakes", hand_written), ("shortcuts", generated)):
        for i, fake in enumerate(_spread(fakes, CANARY[gate])):
            module = f"{fake.answer.stem}__c{gate[0]}{i:02d}.py"
            source = shortcuts.variant_source(checkout, fake)
            variants.append(mutate.Variant(module, source, fake.koans))
            named[module] = f"{gate}: {fake.name}"
            changed.append((fake.answer, fake.koans))
    return variants + mutate.baselines(changed), named


def canary(
    checkout: course.Course, chapters: list[course.Chapter], workers: int = 2
) -> dict[str, list[str]]:
    """Every chapter's canary in ONE pytest run: {chapter: what failed} ([] when it passed)."""
    plans = {c.number: canary_plan(checkout, c) for c in chapters}
    runs = {n: variants for n, (variants, _) in plans.items()}
    passed, problem = mutate.run_chapters(checkout, runs, workers)
    found = {}
    for number, (variants, named) in plans.items():
        wrong = [problem] if problem and variants else []
        for variant in variants:
            verdict = passed.get((number, variant.name))
            if variant.name.endswith(mutate.BASE):
                if verdict is not True:
                    wrong.append(f"the unchanged {variant.name.removesuffix(mutate.BASE)}.py "
                                 f"did not pass ({verdict})")  # fmt: skip
            elif verdict is not False:
                wrong.append(f"{'passes' if verdict else 'no verdict'}: {named[variant.name]}")
        found[number] = wrong
    return found


# ---- stamp ---------------------------------------------------------------------------------


@dataclass
class Failure:
    chapter: str
    gate: str
    what: str

    def __str__(self) -> str:
        return f"{self.chapter} {self.gate}: {self.what}"


def _failures(number: str, gate: str, *whats: str) -> list[Failure]:
    return [Failure(number, gate, what) for what in whats if what]


def _mutation(
    checkout: course.Course, chapter: course.Chapter, names: list[str], record: dict, workers: int
) -> list[Failure]:
    outcome = mutate.gate(checkout, chapter, set(names), workers)
    print("\n".join(mutate.table([outcome])), flush=True)
    failures = _failures(chapter.number, "mutation", outcome.problem,
                         *(f"survives: {mutate.describe(m)}" for m in outcome.survived),
                         *(f"no verdict: {mutate.describe(m)}" for m in outcome.unknown))  # fmt: skip
    if outcome.problem:
        return failures
    digests = chapter_digests(checkout, chapter)["mutation"]
    failed = {f"{m.site.answer.name}::{k}" for m in (*outcome.survived, *outcome.unknown)
              for k in m.site.koans}  # fmt: skip
    for key in set(names) - failed:  # a mutant counts for the first koan that sees it
        mine = [m for m in outcome.tried if m.key == key]
        equivalent = sum(m.key == key for m, _ in outcome.equivalent)
        _record(record, chapter.number, "mutation", key, {
            "digest": digests[key], "mutants": len(mine),
            "killed": len(mine) - equivalent, "equivalent": equivalent,
        })  # fmt: skip
    return failures


def _fakes(checkout: course.Course, chapters: list[course.Chapter], names: dict[str, list[str]],
           record: dict, workers: int) -> list[Failure]:  # fmt: skip
    checked = mutate.check_all_fakes(checkout, chapters, workers, files={n: set(v) for n, v in names.items()})
    failures = []
    for chapter in chapters:
        verdicts, missing, problem = checked[chapter.number]
        failures += _failures(chapter.number, "fakes", problem,
                              *(f"TODO function without a fake: {m}" for m in missing),
                              *(f"{'passes' if v is False else 'no verdict'}: {k}"
                                for k, v in sorted(verdicts.items()) if v is not True))  # fmt: skip
        print(f"{chapter.number}: {sum(v is True for v in verdicts.values())}/{len(verdicts)} "
              f"fakes fail their koan", flush=True)  # fmt: skip
        if problem:
            continue
        digests = chapter_digests(checkout, chapter)
        for name in names[chapter.number]:
            mine = {k: v for k, v in verdicts.items() if k.split("::")[0] == name}
            if not mine or not all(v is True for v in mine.values()) or any(m.split("::")[0] == name for m in missing):
                continue
            _record(record, chapter.number, "fakes", name,
                    {"digest": digests["fakes"][name], "fakes": len(mine)})  # fmt: skip
    return failures


def _shortcuts(checkout: course.Course, chapters: list[course.Chapter],
               names: dict[str, list[str]], record: dict, workers: int) -> list[Failure]:  # fmt: skip
    outcomes = shortcuts.gate(checkout, chapters, workers, files={n: set(v) for n, v in names.items()})
    failures = []
    for chapter, outcome in zip(chapters, outcomes, strict=True):
        print(shortcuts.summary(outcome), flush=True)
        failures += _failures(chapter.number, "shortcuts", outcome.problem,
                              *(f"passes: {s.name}" for s in outcome.survived),
                              *(f"no verdict: {s.name}" for s in outcome.unknown))  # fmt: skip
        if outcome.problem or outcome.unknown:
            continue
        digests = chapter_digests(checkout, chapter)
        for name in names[chapter.number]:
            if any(s.answer.name == name for s in outcome.survived):
                continue
            equivalent = sum(s.answer.name == name for s, _ in outcome.equivalent)
            killed = sum(s.answer.name == name for s in outcome.killed)
            _record(record, chapter.number, "shortcuts", name, {
                "digest": digests["shortcuts"][name], "fakes": killed + equivalent,
                "killed": killed, "equivalent": equivalent,
            })  # fmt: skip
    return failures


def _covers_all(checkout: course.Course, stale: Stale) -> bool:
    """Every gate of every file of the chapter is stale: they all run."""
    digests = chapter_digests(checkout, stale.chapter)
    return all(set(keys) <= set(stale.files[gate]) for gate, keys in digests.items())


def chapter_digests(checkout: course.Course, chapter: course.Chapter) -> dict[str, dict[str, str]]:
    """{gate: {record key: digest}} of every koan file of the chapter."""
    found: dict[str, dict[str, str]] = {gate: {} for gate in GATES}
    for koan, answer in mutate.twin_files(checkout, chapter):
        for gate, digests in file_digests(chapter, koan, answer).items():
            found[gate] |= digests
    return found


def stamp(
    checkout: course.Course,
    chapters: list[course.Chapter],
    full: bool = False,
    workers: int = 2,
    gates=GATES,
    failures: list[Failure] | None = None,
) -> list[Failure]:
    """Run what is stale of `chapters` (with `full`, every file of the `gates` named), record
    what passed, write the manifest; `failures` (the static checks') and the gates' failures."""
    started = time.monotonic()
    as_shipped.write(checkout.root)
    print(f"wrote {as_shipped.SOURCE}", flush=True)
    failures = list(failures or [])
    record = read(record_path(checkout))
    current = harness(checkout)
    todo = stale(checkout, chapters, record, current)
    if full:
        for s in todo:
            s.harness = True
            every = chapter_digests(checkout, s.chapter)
            s.files = {g: list(every[g]) if g in gates else s.files[g] for g in GATES}
    for s in todo:
        own = record.get(s.chapter.number, {})
        for key in s.gone:
            name, _, koan = key.partition("::")
            own.get(name, {}).get("mutation", {}).pop(koan, None) if koan else own.pop(name, None)
    for s in todo:  # one chapter at a time: each mutation run is CPU heavy
        if s.files["mutation"]:
            failures += _mutation(checkout, s.chapter, s.files["mutation"], record, workers)
    for gate, run in (("fakes", _fakes), ("shortcuts", _shortcuts)):
        chosen = [s for s in todo if s.files[gate]]
        if chosen:
            names = {s.chapter.number: s.files[gate] for s in chosen}
            failures += run(checkout, [s.chapter for s in chosen], names, record, workers)
    # A chapter whose every gate ran on every file confirms the harness by itself; one whose
    # record still covers some files runs its canary.
    whole = [s.chapter for s in todo
             if s.harness and ((full and set(gates) == set(GATES)) or _covers_all(checkout, s))]  # fmt: skip
    failed = {f.chapter for f in failures if f.gate != "check"}
    for chapter in whole:
        if chapter.number not in failed:
            record.setdefault(chapter.number, {})["harness"] = current
    sampled = [s.chapter for s in todo if s.harness and s.chapter not in whole]
    if sampled:
        print(f"canary: {', '.join(c.number for c in sampled)}", flush=True)
        for number, wrong in canary(checkout, sampled, workers).items():
            failures += [Failure(number, "canary", w) for w in wrong]
            if wrong:
                failures.append(Failure(number, "canary", "run every gate: python -m "
                                        f"jaxkoans.authoring stamp --full --chapter {number}"))  # fmt: skip
            else:
                record.setdefault(number, {})["harness"] = current
    write(record, record_path(checkout))
    print(f"记录已更新 / recorded in {RECORD} ({time.monotonic() - started:.0f} s)")
    return failures
