"""The shortcut gate (jaxkoans/authoring/shortcuts.py): the lazy learner's generated fakes of every
TODO — delegation, the library, the asserts' constants, an unwritten helper — must each make a
koan fail. Koan files whose record (tests/gate_record.toml) no longer matches are run again."""

from __future__ import annotations

import pytest

from jaxkoans import course
from jaxkoans.authoring import gates, shortcuts

from .conftest import chosen
from .fakecourse import make_course, python_in, write

HERE = course.Course.here()
CHAPTERS = [c for c in HERE.chapters() if chosen(c.number)]


def test_every_generated_shortcut_makes_its_koan_fail():
    if not CHAPTERS:
        pytest.skip("no chapter chosen")
    files = {s.chapter.number: set(s.files["shortcuts"]) for s in gates.stale(HERE, CHAPTERS)}
    stale = [c for c in CHAPTERS if files[c.number]]
    if not stale:
        pytest.skip("every chosen file's generated fakes all failed on its current content")
    outcomes = shortcuts.gate(HERE, stale, files=files)
    wrong = {
        o.chapter: [o.problem] * bool(o.problem)
        + [f"passes: {s.name}" for s in o.survived]
        + [f"no verdict: {s.name}" for s in o.unknown]
        for o in outcomes
        if not o.ok
    }
    assert not wrong, wrong


TWIN = '''

def twice(x):
    """The plain reference the TODO must not call."""
    return x * 2
'''


def test_a_todo_that_passes_by_calling_the_reference_in_its_file_is_named(tmp_path):
    root = make_course(tmp_path / "course")
    for tree in ("koans", "answers"):
        path = root / tree / "01" / "test_alpha.py"
        write(path, path.read_text(encoding="utf-8") + TWIN)
    listed = python_in(root, "-m", "jaxkoans.authoring.shortcuts", "--chapter", "01", "--list")
    assert "01 test_alpha.py::double__delegate_twice" in listed.stdout, listed.stdout
    assert "return twice(x)" in listed.stdout
    assert "double__constant_0" in listed.stdout  # the asserts' literal: `return 2`
    ran = python_in(root, "-m", "jaxkoans.authoring.shortcuts", "--chapter", "01", "-n", "1")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "  passes: test_alpha.py::double__delegate_twice  unwritten=[]" in ran.stdout
    chapter_toml = root / "koans" / "01" / "chapter.toml"
    write(
        chapter_toml,
        chapter_toml.read_text(encoding="utf-8")
        + '\n[shortcuts."test_alpha.py::double"]\n'
        + 'equivalent = [{ fake = "delegate_twice", why = "twice is double written again" }]\n',
    )
    again = python_in(root, "-m", "jaxkoans.authoring.shortcuts", "--chapter", "01", "-n", "1")
    assert again.returncode == 0 and "1 equivalent, 0 survived" in again.stdout, again.stdout
