"""`python -m jaxkoans.authoring check` (authoring/check.py) finds each kind of problem, named
where to fix it, on a small course made wrong one way at a time; the real course has none; and
the gates' record (authoring/gates.py) is stale for exactly the koans an edit touched."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from jaxkoans import course
from jaxkoans.authoring import check, gates

from .conftest import chosen, complete_course
from .fakecourse import make_course

HERE = course.Course.here()
CHAPTERS = [c for c in HERE.chapters() if chosen(c.number)]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.number for c in CHAPTERS])
def test_the_course_has_no_problem_check_finds(chapter: course.Chapter):
    """Every static check of the chapter (twins, import time, languages, hints, give-aways,
    manifest, README, regions, contracts, shortcuts); the records are the gates' tests'."""
    problems = check.check(HERE, [chapter], whole=False, records=False)
    assert not problems, "\n".join(problems)


def test_the_course_as_a_whole():
    """koans/ and answers/ hold the same files; koans/course.toml lists every chapter once."""
    problems = [p for p in check.course_problems(HERE) if ".shipped.json" not in p]
    assert not problems, "\n".join(problems)


# ---- check itself, on a small course ------------------------------------------------------

ALPHA, ALPHA_ANSWER = "koans/01/test_alpha.py", "answers/01/test_alpha.py"
TOML = "koans/01/chapter.toml"


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    return complete_course(make_course(tmp_path_factory.mktemp("check") / "course"))


@pytest.fixture
def fresh(clean: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(clean, tmp_path / "course"))


def found(root: Path, records: bool = False) -> list[str]:
    checkout = course.Course(root)
    return check.check(checkout, checkout.chapters(), whole=True, records=records)


def replace(*pairs: tuple[str, str], files: tuple[str, ...] = (ALPHA, ALPHA_ANSWER)) -> Callable:
    def edit(root: Path) -> None:
        for rel in files:
            text = (root / rel).read_text(encoding="utf-8")
            for old, new in pairs:
                assert old in text, (rel, old)
                text = text.replace(old, new)
            (root / rel).write_text(text, encoding="utf-8")

    return edit


def append(rel: str, text: str) -> Callable:
    def edit(root: Path) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((path.read_text(encoding="utf-8") if path.exists() else "") + text)

    return edit


def delete(rel: str) -> Callable:
    return lambda root: (root / rel).unlink()


def both(*edits: Callable) -> Callable:
    def edit(root: Path) -> None:
        for each in edits:
            each(root)

    return edit


READ_BY_TEXT = '''

def test_read_by_text():
    """读程序。The doubled program, read by its text rather than by the program reader."""
    import jax

    assert str(jax.make_jaxpr(double)(1.0)).count("mul") == 1
'''
HINT = '\n[hints."test_alpha.py::test_read_by_text"]\nzh = ["数一数。"]\nen = ["Count the products."]\n'
REGION = "\n\n# ✍️ BEGIN\nSCALE = 2\n# ✍️ END\n"
DOUBLE_LONG = "return jnp.asarray(x) * 2  # doubled, once"
PROBLEMS = {  # what goes wrong -> (the edit, what check says)
    "an answer file missing": (delete(ALPHA_ANSWER), "test_alpha.py: no answer file in answers/"),
    "a koan file missing": (delete(ALPHA), "test_alpha.py: no koan file in koans/"),
    "a chapter not on the path": (
        replace(('"01", "02"', '"01"'), files=("koans/course.toml",)),
        'koans/course.toml: add "02" to `path`',
    ),
    "a path of no chapter": (
        replace(('"01", "02"', '"01", "02", "03"'), files=("koans/course.toml",)),
        "koans/course.toml: `path` names 03, which has no chapter.toml",
    ),
    "a chapter twice on the path": (
        replace(('"01", "02"', '"01", "02", "01"'), files=("koans/course.toml",)),
        "koans/course.toml: `path` names 01 twice",
    ),
    "no path": (
        replace(("path =", "way ="), files=("koans/course.toml",)),
        "koans/course.toml: no `path` list",
    ),
    "a title missing": (
        replace(('title_zh = "第一章"', 'title_zh = ""'), files=(TOML,)),
        f"{TOML}: titles missing",
    ),
    "a file not listed": (
        replace(('files = ["test_alpha.py"]', "files = []"), files=(TOML,)),
        f"{TOML}: `files` must list exactly",
    ),
    "a hint of no koan": (
        replace(("test_alpha.py::test_dtype", "test_alpha.py::test_gone"), files=(TOML,)),
        f"{TOML}: a hint for a koan that does not exist: test_alpha.py::test_gone",
    ),
    "a koan without a hint": (
        replace(("test_alpha.py::test_dtype", "test_alpha.py::test_gone"), files=(TOML,)),
        f"{TOML}: no hint for test_alpha.py::test_dtype",
    ),
    "a hint level missing": (
        replace(('en = ["The default precision."]', "en = []"), files=(TOML,)),
        "test_dtype: needs a hint with zh and en levels",
    ),
    "a zh hint in English": (
        replace(('zh = ["默认精度。"]', 'zh = ["The default."]'), files=(TOML,)),
        "test_dtype: a zh hint level has no Chinese",
    ),
    "an en hint in Chinese": (
        replace(
            ('en = ["The default precision."]', 'en = ["默认的 precision of arrays."]'),
            files=(TOML,),
        ),
        "test_dtype: an en hint level is not English",
    ),
    "a hint that gives the answer": (
        replace(
            ('en = ["The default precision."]', 'en = ["It is jnp.float32 by default."]'),
            files=(TOML,),
        ),
        "::test_dtype: the hint contains the answer ['jnp.float32']",
    ),
    "a hint that copies the solution": (
        both(
            replace(("return 2 * x", DOUBLE_LONG), files=(ALPHA_ANSWER,)),
            replace(
                ('en = ["Multiply by two."]', f'en = ["Write {DOUBLE_LONG} here."]'), files=(TOML,)
            ),
        ),
        "::test_double: the hint copies the solution's code",
    ),
    "a docstring in one language": (
        replace(('"""求和。The sum', '"""The sum')),
        "test_sum: docstring needs Chinese and English",
    ),
    "an answer in its docstring": (
        replace(("jnp.ones makes float32 by default.", "jnp.ones makes jnp.float32 by default.")),
        "koans/01/test_alpha.py:18 (test_dtype): `jnp.float32` is in the koan's docstring",
    ),
    "twins that differ outside their blanks": (
        replace(("jnp.ones(3).sum()", "jnp.ones(3).sum() + 0"), files=(ALPHA_ANSWER,)),
        "koans/01/test_alpha.py:13: koan and answer differ outside blanks, TODO bodies and fix",
    ),
    "an answer with a helper the koan lacks": (
        both(
            replace(("return 2 * x", "return twice(x)"), files=(ALPHA_ANSWER,)),
            append(ALPHA_ANSWER, "\n\ndef twice(x):\n    return 2 * x\n"),
        ),
        "the answer adds a function",
    ),
    "a blank filled over two lines": (
        replace(
            ("== jnp.float32", '== jnp.dtype(\n        "float32"\n    )'), files=(ALPHA_ANSWER,)
        ),
        "the answer must fill this `__` on its line",
    ),
    "nothing to fill in": (
        replace(("== __", "== jnp.float64"), files=("koans/02/test_beta.py",)),
        "test_beta.py: nothing to fill in",
    ),
    "koans of other names": (
        replace(("def test_sum", "def test_total"), files=(ALPHA_ANSWER,)),
        "test_alpha.py: its koans are not those of",
    ),
    "a blank run at import": (
        both(append(ALPHA, "\nSCALE = __\n"), append(ALPHA_ANSWER, "\nSCALE = 2\n")),
        "test_alpha.py: blanks run at import on lines [25]",
    ),
    "a README missing": (delete("koans/01/README.md"), "koans/01/README.md: missing"),
    "a README in one language": (
        replace(("这一章很小，只用来测试工具。", ""), files=("koans/01/README.md",)),
        "koans/01/README.md: needs Chinese and English",
    ),
    "a README's stale count": (
        append("koans/01/README.md", "\n2 koans (2 tests).\n"),
        "koans/01/README.md: its English says 2 koans (2 tests), the chapter has 3 (3 tests)",
    ),
    "a fix region not fingerprinted": (
        both(append(ALPHA, REGION), append(ALPHA_ANSWER, REGION)),
        f"{TOML}: [regions] must fingerprint the fix regions",
    ),
    "a TODO without a contract": (
        replace(
            ('[contracts."test_alpha.py::double"]', '[contracts."test_alpha.py::triple"]'),
            files=(TOML,),
        ),
        f"{TOML}: no technique contract for test_alpha.py::double",
    ),
    "a contract of no TODO": (
        replace(
            ('[contracts."test_alpha.py::double"]', '[contracts."test_alpha.py::triple"]'),
            files=(TOML,),
        ),
        f"{TOML}: a contract for a TODO that does not exist: test_alpha.py::triple",
    ),
    "a contract that asks nothing and says no why": (
        lambda root: (root / TOML).write_text(
            re.sub(r'\nwhy = ".*"', '\nwhy = " "', (root / TOML).read_text(encoding="utf-8"))
        ),
        "contracts.'test_alpha.py::double' asks nothing of the program: say why",
    ),
    "a cost of no dimension": (
        replace(('why = "a one-line', 'costs = { speed = 1 }\nwhy = "a one-line'), files=(TOML,)),
        "contracts.'test_alpha.py::double'.costs: unknown dimension 'speed'",
    ),
    "a free cost without why": (
        replace(('why = "a one-line', 'costs = { flops = " " }\nwhy = "a one-line'), files=(TOML,)),
        "contracts.'test_alpha.py::double'.costs.flops: say why it is free",
    ),
    "a traced contract without a profile": (
        replace(("traced = false", 'on_path = ["mul"]'), files=(TOML,)),
        "koans/01/costs.json: no cost profile of the answers",
    ),
    "a TODO judged by the text of its program": (
        both(
            append(ALPHA, READ_BY_TEXT),
            append(ALPHA_ANSWER, READ_BY_TEXT),
            append(TOML, HINT),
            replace(("traced = false\n", ""), files=(TOML,)),
        ),
        "test_read_by_text judges double by a count of a substring of the program's text",
    ),
    "a library body that does not parse": (
        append(TOML, '\n[shortcuts."test_alpha.py::double"]\nlibrary = ["return (x"]\n'),
        '[shortcuts."test_alpha.py::double"] a library body does not parse',
    ),
}


def test_the_small_course_has_no_problem(clean: Path):
    assert found(clean) == []


@pytest.mark.parametrize("kind", list(PROBLEMS))
def test_check_finds_each_kind_of_problem(fresh: Path, kind: str):
    edit, said = PROBLEMS[kind]
    edit(fresh)
    problems = found(fresh)
    assert any(said in p for p in problems), "\n".join(problems)


def test_check_names_a_stale_manifest(fresh: Path):
    assert not [p for p in found(fresh, records=True) if ".shipped.json" in p]
    replace(("Doubles x.", "Doubles x, twice as large."))(fresh)
    assert any(
        p.startswith("koans/.shipped.json does not match") for p in found(fresh, records=True)
    )


# ---- the gates' record, per koan ----------------------------------------------------------


def stamped(root: Path) -> dict:
    """The record `stamp` would write had every gate passed, written without running one."""
    checkout = course.Course(root)
    record: dict = {}
    for chapter in checkout.chapters():
        record[chapter.number] = {"harness": gates.harness(checkout)}
        for gate, digests in gates.chapter_digests(checkout, chapter).items():
            for key, digest in digests.items():
                counts = {"mutants": 1, "killed": 1, "equivalent": 0} if "::" in key else {}
                gates._record(record, chapter.number, gate, key, {"digest": digest, **counts})
    gates.write(record, gates.record_path(checkout))
    return record


def stale_lines(root: Path) -> list[str]:
    return [p for p in found(root, records=True) if "record" in p or "gate" in p]


def test_an_edit_of_one_prediction_koan_makes_its_own_record_stale_only(fresh: Path):
    """A prediction koan's edit re-gates its own mutants, not its file's TODO (fakes, shortcuts)
    nor the file's other koans; an edit outside the koans (a helper) re-gates them all."""
    stamped(fresh)
    assert stale_lines(fresh) == []
    replace(("The sum of three ones is three.", "Three ones, added, make three."))(fresh)
    assert stale_lines(fresh) == [
        "01: the mutation record is stale for test_alpha.py (test_sum): "
        "python -m jaxkoans.authoring stamp --chapter 01"
    ]
    replace(("Doubles x.", "Doubles x, twice as large."))(fresh)
    said = "\n".join(stale_lines(fresh))
    assert "mutation record is stale for test_alpha.py (test_sum, test_dtype, test_double)" in said
    assert "01: the fakes record is stale for test_alpha.py" in said
    assert "01: the shortcuts record is stale for test_alpha.py" in said
    assert "02:" not in said


def stale_lines_of(record: dict, checkout: course.Course) -> list[str]:
    return [line for s in gates.stale(checkout, checkout.chapters(), record) for line in s.lines()]


def test_a_record_written_and_read_back_is_the_same(fresh: Path):
    record = stamped(fresh)
    assert gates.read(gates.record_path(course.Course(fresh))) == record
