"""The authoring gate for TODOs: each cheap fake (the reference computed the easy way, a kernel
that skips its technique) put in place of a TODO body must make its koan fail.

Fakes live in answers/NN/fakes/<file without test_>.py as functions <TODO function>__<label>
(see jaxkoans/authoring/mutate.py). Once a chapter has a fakes/ directory, every TODO function of it
needs at least one fake."""

from __future__ import annotations

import json

import pytest

from jaxkoans import course
from jaxkoans.authoring import gates, mutate
from jaxkoans.plugin import results

from .conftest import chosen, complete_course
from .fakecourse import make_course, python_in, write

HERE = course.Course.here()
FAKED = [c for c in HERE.chapters() if (HERE.answers / c.number / mutate.FAKES).is_dir()]


def test_every_fake_makes_its_koan_fail(answers_run):
    """The fakes of every koan file whose koan, answer or fakes changed since its fakes last all
    failed (tests/gate_record.toml), in ONE pytest run (one start of JAX and its workers, not
    one per chapter); each chapter's verdicts are reported on their own. The suite's run of
    answers/ stands in for the baselines (one per chapter still runs beside the fakes)."""
    chosen_chapters = [c for c in FAKED if chosen(c.number)]
    if not chosen_chapters:
        pytest.skip("none of the chapters checked has answers/NN/fakes/")
    files = {s.chapter.number: set(s.files["fakes"]) for s in gates.stale(HERE, chosen_chapters)}
    chapters = [c for c in chosen_chapters if files[c.number]]
    if not chapters:
        pytest.skip("every chosen file's fakes are recorded on its current content")
    passing = {k for k, e in results.by_koan(answers_run).items() if e.state == "passed"}
    checked = mutate.check_all_fakes(HERE, chapters, passing_answers=passing, files=files)
    for chapter in chapters:
        # A koan of the batch that gave no verdict (its worker ended) is never a pass: its
        # files are checked again in a run of their own, and must pass there.
        if None in checked[chapter.number][0].values():
            print(f"{chapter.number}: no verdict in the batch, {checked[chapter.number][2]!r}")
            checked[chapter.number] = mutate.check_all_fakes(HERE, [chapter], files=files)[
                chapter.number
            ]
    wrong = {}
    for number, (verdicts, missing, problem) in checked.items():
        found = [problem] if problem else []
        found += [f"TODO function without a fake: {name}" for name in missing]
        found += [
            f"{name}: {'passes' if v is False else 'no verdict'}"
            for name, v in verdicts.items()
            if v is not True
        ]
        found += [] if verdicts else ["no fake ran"]
        if found:
            wrong[number] = found
    assert not wrong, wrong


FAKES = '''
def double__identity(x):
    """Returns its input: the koan must see that nothing was doubled."""
    return x


def double__added_to_itself(x):
    """Doubles by another route: it passes, and the gate must say so."""
    return x + x
'''


def test_a_fake_that_passes_is_named_and_a_missing_fake_is_listed(tmp_path):
    root = make_course(tmp_path / "course")
    write(root / "answers" / "01" / "fakes" / "alpha.py", FAKES)
    ran = python_in(
        root, "-m", "jaxkoans.authoring.mutate", "--fakes", "--chapter", "01", "-n", "1"
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert "01: 1/2 fakes fail their koan, 0 TODO functions without a fake" in lines
    assert "  passes: test_alpha.py::double__added_to_itself" in lines


KILLING_FAKE = FAKES.split("\n\n\ndef double__added_to_itself")[0] + "\n"


def test_fakes_that_all_fail_are_recorded_and_a_changed_fake_is_checked_again(tmp_path):
    """`python -m jaxkoans.authoring stamp` records a file whose every fake failed its koan;
    its fakes are then stale only once its koan, answer or fakes file changes."""
    root = complete_course(make_course(tmp_path / "course"))
    fakes = root / "answers" / "01" / "fakes" / "alpha.py"
    write(fakes, KILLING_FAKE)
    stamped = python_in(root, "-m", "jaxkoans.authoring", "stamp", "--chapter", "01", "-n", "1")
    assert stamped.returncode == 0, stamped.stdout + stamped.stderr
    record = (root / gates.RECORD).read_text(encoding="utf-8")
    assert '["01"."test_alpha.py"]' in record and "fakes = 1 }" in record
    checkout = course.Course(root)
    assert not any(s.files["fakes"] for s in gates.stale(checkout, checkout.chapters()))
    write(fakes, FAKES)  # a fake that passes joins: the file is stale, and fails
    stale = gates.stale(checkout, checkout.chapters())
    assert [s.files["fakes"] for s in stale if s.chapter.number == "01"] == [["test_alpha.py"]]
    restamped = python_in(root, "-m", "jaxkoans.authoring", "stamp", "--chapter", "01", "-n", "1")
    assert (
        restamped.returncode == 1
        and "01 fakes: passes: test_alpha.py::double__added_to_itself" in restamped.stderr
    )
    assert (root / gates.RECORD).read_text(encoding="utf-8") == record


STAND_IN = """
import json, sys
from jaxkoans import course
from jaxkoans.authoring import mutate
checkout = course.Course.here()
chapters = [c for c in checkout.chapters() if c.number == "01"]
for passing in ([], ["answers/01/test_alpha.py::test_double"]):
    verdicts = mutate.check_all_fakes(checkout, chapters, 1, passing_answers=set(passing))["01"][0]
    print(json.dumps(verdicts, sort_keys=True))
"""


def test_answers_that_passed_stand_in_for_the_baselines(tmp_path):
    """With the suite's run of answers/ as the baselines, a fake has a verdict only where its
    koans passed there: no verdict is never a pass, and a passing fake is still named."""
    root = make_course(tmp_path / "course")
    write(root / "answers" / "01" / "fakes" / "alpha.py", FAKES)
    ran = python_in(root, "-c", STAND_IN)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    unknown, known = (json.loads(line) for line in ran.stdout.splitlines()[-2:])
    assert set(unknown.values()) == {None}, unknown
    assert known == {
        "test_alpha.py::double__added_to_itself": False,
        "test_alpha.py::double__identity": True,
    }


def test_the_fake_body_replaces_only_the_todo_body(tmp_path):
    root = make_course(tmp_path / "course")
    write(root / "answers" / "01" / "fakes" / "alpha.py", FAKES)
    fakes, missing = mutate.chapter_fakes(
        course.Course(root), course.load_chapter(root / "koans/01/chapter.toml")
    )
    assert [f.label for f in fakes] == ["identity", "added_to_itself"] and not missing
    assert fakes[0].koans == ("test_double",)
    faked = mutate.faked_source(fakes[0]).splitlines()
    answer = (root / "answers" / "01" / "test_alpha.py").read_text().splitlines()
    assert [line for line in faked if line not in answer] == ["    return x"]
    assert [line for line in answer if line not in faked] == ["    return 2 * x"]


ENDLESS = '''
def double__never_converges(x):
    """Loops inside XLA forever, as a fake CG on a singular operator does."""
    from jax import lax

    return lax.while_loop(lambda y: y.sum() > -1, lambda y: y + 1, x)
'''


def test_a_fake_stuck_in_compiled_code_is_killed_and_its_worker_replaced(tmp_path):
    """Past its limit the fake's worker ends (XLA's threads would go on computing in it) and
    another runs the baseline: the fake is killed, and its file still has a verdict."""
    root = make_course(tmp_path / "course")
    write(root / "answers" / "01" / "fakes" / "alpha.py", ENDLESS)
    ran = python_in(
        root, "-m", "jaxkoans.authoring.mutate", "--fakes", "--chapter", "01", "-n", "1"
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "01: 1/1 fakes fail their koan, 0 TODO functions without a fake" in ran.stdout
