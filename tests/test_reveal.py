"""Predict, then see: a wrong prediction's report shows the learner's answer and the lesson,
never what JAX computed (nor captured output), until the learner asks (`reveal`)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jaxkoans.course import shipped as as_shipped

from .fakecourse import HEADER, make_course, progress, progress_process, solve, write

GAMMA = '''
import numpy as np


def test_cumsum():
    """累加。np.cumsum of 1, 2, 3 ends in six."""
    np.testing.assert_array_equal(np.cumsum([1, 2, 3]), {cumsum})


def test_logged():
    """日志。What the code prints is not the learner's to read before predicting."""
    print("the secret is 42")
    assert 6 * 7 == {logged}


def test_computed_then_compared():
    """先算再比。A fill earlier in the koan, compared on a later line."""
    expected = {expected}
    assert int(jnp.arange(4).sum()) == expected


def test_refused():
    """拒绝。A fill JAX refuses: its error message may name what it wanted."""
    assert jnp.ones(3).reshape({shape}).shape == (3, 1)


def test_refused_later():
    """稍后拒绝。The fill is used, and refused, on a later line."""
    shape = {later}
    assert jnp.ones(3).reshape(shape).shape == (3, 1)
'''
PRISTINE = dict(cumsum="__", logged="__", expected="__", shape="__", later="__")
ANSWERS = dict(cumsum="[1, 3, 6]", logged="42", expected="6", shape="(3, 1)", later="(3, 1)")


def commit(root: Path) -> None:
    as_shipped.write(root)  # the course as shipped (koans/.shipped.json)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True, timeout=60)
    subprocess.run([*git, "commit", "-qm", "more koans"], check=True, timeout=60)


@pytest.fixture
def course(tmp_path: Path) -> Path:
    root = make_course(tmp_path / "course")
    write(root / "koans" / "01" / "test_gamma.py", HEADER + GAMMA.format(**PRISTINE))
    write(root / "answers" / "01" / "test_gamma.py", HEADER + GAMMA.format(**ANSWERS))
    commit(root)
    return root


def fill(root: Path, **values: str) -> None:
    write(root / "koans" / "01" / "test_gamma.py", HEADER + GAMMA.format(**{**PRISTINE, **values}))


def pytest_run(root: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "koans/01", "-p", "jaxkoans.plugin.hooks",
         "-p", "no:cacheprovider", "-q", "--no-header", "-rA", *args],
        cwd=root, env={"JAXKOANS_ROOT": str(root), "PATH": "/usr/bin:/bin", "HOME": str(root)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return done.stdout + done.stderr


def section(output: str, koan: str) -> str:
    """The failure report of one koan in pytest's output."""
    start = output.index(f"_ {koan} _")
    rest = output[start + len(koan) + 2 :]
    ends = [i for i in (rest.find("\n___"), rest.find("\n===")) if i >= 0]
    return rest[: min(ends)] if ends else rest


def test_a_wrong_value_shows_the_answer_and_lesson_but_not_the_value(course):
    fill(course, cumsum="[1, 3, 5]", logged="41", expected="7", shape="(2, 2)", later="(2, 2)")
    output = pytest_run(course)
    cumsum = section(output, "test_cumsum")
    assert "`[1, 3, 5]`" in cumsum and "np.cumsum of 1, 2, 3" in cumsum
    assert "ACTUAL" not in cumsum and "DESIRED" not in cumsum and "array(" not in cumsum
    assert "progress.py reveal test_cumsum" in cumsum
    logged = section(output, "test_logged")
    untimed = re.sub(r" in \d+\.\d+s\b", "", output)  # pytest's "in 0.42s" is no leak
    assert "`41`" in logged and "42" not in untimed  # neither the value nor the captured print
    later = section(output, "test_computed_then_compared")
    assert "`7`" in later and "assert 6 ==" not in later and "where" not in later
    refused = section(output, "test_refused")
    assert "`(2, 2)`" in refused and "raise TypeError" in refused
    assert "size 3" not in refused and "reshape array" not in refused
    later = section(output, "test_refused_later")
    assert "`(2, 2)`" in later and "raise TypeError" in later and "size 3" not in later


def test_a_wrong_fill_wrapped_over_lines_hides_the_value_as_on_one_line(course):
    """The one reading of the learner's file (course/fills.py): a fill that black or ruff
    wrapped is the same fill."""
    fill(course, cumsum="[\n        1,\n        3,\n        5,\n    ]  # wrapped\n")
    cumsum = section(pytest_run(course), "test_cumsum")
    assert "`[1, 3, 5]`" in cumsum, cumsum
    assert "ACTUAL" not in cumsum and "DESIRED" not in cumsum and "array(" not in cumsum


@pytest.mark.parametrize(
    "computed",
    [
        "6 * 7",
        "int(6 * 7)",
        "(\n        6\n        * 7\n    )",
        "type('E', (), {'__eq__': lambda *a: True})()",
    ],
)
def test_a_prediction_blank_refuses_a_computation_and_does_not_run_it(course, computed):
    fill(course, logged=computed)
    logged = section(pytest_run(course), "test_logged")
    assert "a prediction, not a computation" in logged and "not a computation" in logged
    assert "这个空要的是你的预测" in logged  # both languages
    assert "the secret is 42" not in logged  # refused before it ran


def test_progress_says_why_a_computed_prediction_is_refused(course):
    alpha = course / "koans" / "01" / "test_alpha.py"
    alpha.write_text(alpha.read_text().replace("== __", "== int(jnp.ones(3).sum())", 1))
    shown = progress(course)
    assert shown.returncode == 0, shown.stderr
    assert "next koan:  01 · test_alpha.py::test_sum" in shown.stdout
    assert "This blank asks for your prediction, not a computation" in shown.stdout
    assert "这个空要的是你的预测" in shown.stdout


def test_a_prediction_blank_still_takes_a_literal_and_an_exception_blank_a_name(course):
    fill(course, logged="42", cumsum="[1, 3, 6]")
    output = pytest_run(course)
    assert "PASSED koans/01/test_gamma.py::test_logged" in output
    assert "PASSED koans/01/test_gamma.py::test_cumsum" in output


def _zip_download(root: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "zip"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns(".git"))
    return copy


def _fork_with_pushed_work(root: Path, tmp_path: Path) -> Path:
    """The learner commits a wrong fill and pushes it: origin/HEAD then holds their work."""
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(root), str(origin)], check=True, timeout=60)
    copy = tmp_path / "fork"
    subprocess.run(["git", "clone", "-q", str(origin), str(copy)], check=True, timeout=60)
    fill(copy, cumsum="[1, 3, 5]")
    git = ["git", "-C", str(copy), "-c", "user.name=l", "-c", "user.email=l@l"]
    subprocess.run([*git, "commit", "-qam", "my work"], check=True, timeout=60)
    subprocess.run([*git, "push", "-q", "origin", "HEAD"], check=True, timeout=60)
    return copy


def _classroom_repository(root: Path, tmp_path: Path) -> Path:
    """A repository made from the course as a template: one fresh commit, no course history."""
    copy = _zip_download(root, tmp_path)
    git = ["git", "-C", str(copy), "-c", "user.name=c", "-c", "user.email=c@c"]
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "Initial commit"]):
        subprocess.run([*git, *step], check=True, timeout=60)
    return copy


@pytest.mark.parametrize(
    "make_copy",
    [lambda root, tmp: root, _fork_with_pushed_work, _classroom_repository, _zip_download],
    ids=["clone", "fork-with-pushed-work", "classroom", "zip-download"],
)
def test_every_copy_of_the_course_knows_it_as_shipped(course, tmp_path, make_copy):
    """koans/.shipped.json travels with the course: a wrong fill stays hidden, a computed fill
    is refused, a file as shipped counts as not started, whatever git holds (or without git)."""
    copy = make_copy(course, tmp_path)
    fill(copy, cumsum="[1, 3, 5]", logged="6 * 7")
    output = pytest_run(copy)
    cumsum = section(output, "test_cumsum")
    assert "`[1, 3, 5]`" in cumsum and "ACTUAL" not in cumsum and "array(" not in cumsum
    assert "not a computation" in section(output, "test_logged")
    listed = json.loads(progress(copy, "--json").stdout)
    states = {k["name"]: k["state"] for k in listed["koans"]} if "koans" in listed else listed
    assert "test_sum" in json.dumps(states)


def test_diff_of_one_koan_runs_only_its_file(course):
    """`diff KOAN` needs to know that koan passed: it runs the koan's file, not its chapter."""
    solve(course, "01", "test_alpha.py")
    fill(course, logged="41")  # another file of the chapter, changed: it would run with it
    shown = progress(course, "diff", "test_sum")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "identical to the answer" in shown.stdout
    remembered = (course / ".jaxkoans" / "results.json").read_text(encoding="utf-8")
    assert "test_alpha.py" in remembered and "test_gamma.py" not in remembered


def test_an_open_blank_does_not_print_captured_output(course):
    output = pytest_run(course)
    assert "fill in the blank" in section(output, "test_logged")
    assert "the secret is 42" not in output


def test_a_todo_keeps_showing_actual_against_expected(course):
    alpha = course / "koans" / "01" / "test_alpha.py"
    alpha.write_text(alpha.read_text().replace('todo("return 2 * x")', "return 3 * x"))
    assert "where" in section(pytest_run(course), "test_double")  # pytest's introspection


def test_koans_reveal_shows_the_value_and_is_remembered(course):
    fill(course, cumsum="[1, 3, 5]")
    output = section(pytest_run(course, "--koans-reveal"), "test_cumsum")
    assert "ACTUAL" in output and "6" in output
    log = (course / ".jaxkoans" / "reveals.jsonl").read_text().splitlines()
    assert [json.loads(line)["nodeid"] for line in log] == ["koans/01/test_gamma.py::test_cumsum"]


def test_a_koan_passed_after_a_reveal_counts_as_revealed(course):
    fill(course, cumsum="[1, 3, 5]")
    shown = progress(course, "reveal", "test_cumsum")
    assert shown.returncode == 0, shown.stderr
    assert "ACTUAL" in shown.stdout
    fill(course, cumsum="[1, 3, 6]", logged="42", expected="6")
    solve(course, "01", "test_alpha.py")
    data = json.loads(progress(course, "--json", "--chapter", "01").stdout)
    revealed = {k["name"]: k["revealed"] for k in data["koans"]}
    assert revealed["test_cumsum"] is True and revealed["test_logged"] is False
    assert data["passed_revealed"] == 1 and data["chapters"][0]["passed_revealed"] == 1
    assert "👁 1" in progress(course, "--chapter", "01").stdout


def test_watch_v_shows_the_hidden_value_and_remembers_it(course):
    from .test_watch import Watch

    fill(course, cumsum="[1, 3, 5]")
    watching = Watch(course, "test_cumsum")
    try:
        watching.expect("🙈", unless="ACTUAL")  # the first verdict hides the value
        watching.send("v")
        watching.expect("ACTUAL")
        watching.send("q")
        assert watching.close() == 0
    finally:
        watching.release()
    log = (course / ".jaxkoans" / "reveals.jsonl").read_text()
    assert "koans/01/test_gamma.py::test_cumsum" in log


def test_reveal_of_an_open_blank_shows_its_answer_and_counts_it(course):
    """A blank not filled yet raises before JAX computes anything: `reveal` shows the answer's
    text for it (and for no other koan's blank), and the koan counts as revealed."""
    fill(course, logged="41")
    shown = progress_process(course, "reveal", "test_cumsum", timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert "> np.testing.assert_array_equal(np.cumsum([1, 2, 3]), __)" in shown.stdout
    assert "__ = [1, 3, 6]" in shown.stdout, shown.stdout
    assert "__ = 42" not in shown.stdout and "__ = 6" not in shown.stdout
    log = (course / ".jaxkoans" / "reveals.jsonl").read_text().splitlines()
    assert [json.loads(line)["nodeid"] for line in log] == ["koans/01/test_gamma.py::test_cumsum"]
    filled = progress_process(course, "reveal", "test_logged", timeout=300)
    assert "not filled yet" not in filled.stdout, filled.stdout  # a wrong fill: its value


def test_watch_v_on_an_open_blank_shows_its_answer_in_a_terminal(course):
    from .test_watch import Watch

    watching = Watch(course, "test_cumsum", terminal=True)
    try:
        watching.expect("✍️ 填空 / fill in the blank", unless="__ = [1, 3, 6]")
        watching.send("v")
        watching.expect("__ = [1, 3, 6]")
        assert "\x1b[2J" in watching.output  # a terminal: each verdict clears the screen
        watching.send("q")
        assert watching.close() == 0
    finally:
        watching.release()
    log = (course / ".jaxkoans" / "reveals.jsonl").read_text()
    assert "koans/01/test_gamma.py::test_cumsum" in log


DELTA = '''

def test_counts():
    """计数。Every collective of a long program, counted by name."""
    counts = {{f"collective-number-{{i}}": i for i in range(12)}}
    assert counts == {counts}
'''


def test_reveal_shows_the_whole_difference(course):
    """pytest shortens a long comparison ("...", "Use -v to get more diff"); what the learner
    asked to see comes whole."""
    solved = "{" + ", ".join(f'"collective-number-{i}": {i}' for i in range(12)) + "}"
    write(course / "answers" / "01" / "test_delta.py", HEADER + DELTA.format(counts=solved))
    write(course / "koans" / "01" / "test_delta.py", HEADER + DELTA.format(counts="__"))
    commit(course)
    wrong = solved.replace('"collective-number-11": 11', '"collective-number-11": 12')
    write(course / "koans" / "01" / "test_delta.py", HEADER + DELTA.format(counts=wrong))
    shown = progress(course, "reveal", "test_counts")
    assert shown.returncode == 0, shown.stderr
    assert "Use -v to get more diff" not in shown.stdout, shown.stdout
    assert "'collective-number-11': 11" in shown.stdout and "...'" not in shown.stdout


# ---- Koans that mix a TODO (or a fix region) with prediction blanks -------------------------
MIXED = '''
import jax

from jaxkoans import raises_exactly


def triple(x):
    """Triples x."""
    {triple}


def compiled_triple(x):
    """A helper: jit compiles the TODO, so no traceback passes through it."""
    return jax.jit(triple).lower(x).compile()


# ✍️ BEGIN
def scale(x):
    return {scale}
# ✍️ END


def test_traced_by_jit():
    """编译。A TODO compiled by a helper, then a prediction about the result."""
    x = jnp.arange(3.0)
    out = compiled_triple(x)(x)
    assert float(out.sum()) == 9.0
    assert out.shape == {shape}


def test_compared_with_code():
    """比较。One line compares the TODO's value with a prediction."""
    total = float(triple(jnp.ones(2)).sum())
    assert total == {total}


def test_prediction_beside_code():
    """旁边。A prediction on its own line, next to an assert on the TODO."""
    assert float(triple(jnp.ones(2)).sum()) == 6.0
    assert jnp.ones(2).dtype == {dtype}


def test_fix_region():
    """修复。A fix region, compiled by jit, and a prediction."""
    doubled = jax.jit(scale)(jnp.ones(2))
    assert float(doubled.sum()) == 4.0
    assert doubled.shape == {region_shape}


REGISTRY = {{}}


def test_effect_then_code():
    """效果。A fill in a call made for its effect, then a value of the TODO that reads it."""
    REGISTRY.update(factor={factor})
    assert float(triple(jnp.ones(2)).sum()) * REGISTRY["factor"] == 12.0


def test_raises_around_code():
    """异常。An exception blank around a call of the TODO, in a pallas-like long call."""
    with raises_exactly(
        {exc}
    ):
        jnp.ones(3).reshape(
            triple(2),
        )
'''
MIXED_PRISTINE = dict(
    triple='todo("return 3 * x")', scale="x", shape="__", total="__", dtype="__",
    region_shape="__", exc="__", factor="__",
)  # fmt: skip
MIXED_ANSWERS = dict(
    triple="return 3 * x", scale="2 * x", shape="(3,)", total="6.0", dtype="jnp.float32",
    region_shape="(2,)", exc="TypeError", factor="2",
)  # fmt: skip


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    root = make_course(tmp_path / "course")
    write(root / "koans" / "01" / "test_mixed.py", HEADER + MIXED.format(**MIXED_PRISTINE))
    write(root / "answers" / "01" / "test_mixed.py", HEADER + MIXED.format(**MIXED_ANSWERS))
    commit(root)
    return root


def fill_mixed(root: Path, **values: str) -> None:
    text = HEADER + MIXED.format(**{**MIXED_ANSWERS, **values})
    write(root / "koans" / "01" / "test_mixed.py", text)


def run_mixed(root: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "koans/01/test_mixed.py", "-p", "jaxkoans.plugin.hooks",
         "-p", "no:cacheprovider", "-q", "--no-header", "-rA", *args],
        cwd=root, env={"JAXKOANS_ROOT": str(root), "PATH": "/usr/bin:/bin", "HOME": str(root)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return done.stdout + done.stderr


def test_a_wrong_todo_shows_its_values_whatever_predictions_the_koan_holds(mixed):
    """Follow the data: an assert whose values came from the learner's TODO (called, or traced
    by a helper's jit/lower), or from a fix region, shows actual against expected and never
    sends the learner to `reveal`, with the right predictions in place (issue 45)."""
    fill_mixed(mixed, triple="return 2 * x", scale="3 * x")
    output = run_mixed(mixed)
    for koan, shown in (("test_traced_by_jit", "assert 6.0 == 9.0"),
                        ("test_prediction_beside_code", "assert 4.0 == 6.0"),
                        ("test_fix_region", "assert 6.0 == 4.0")):  # fmt: skip
        report = section(output, koan)
        assert shown in report, report
        assert "🙈" not in report and "reveal" not in report and "your answer" not in report
    assert not (mixed / ".jaxkoans" / "reveals.jsonl").exists()
    revealed = run_mixed(mixed, "--koans-reveal", "-k", "test_traced_by_jit")
    assert "assert 6.0 == 9.0" in revealed
    assert not (mixed / ".jaxkoans" / "reveals.jsonl").exists()  # nothing was hidden


def test_a_line_comparing_code_with_a_prediction_stays_hidden_and_names_both(mixed):
    """An assert whose one side is the TODO's value and the other a prediction: either may be
    wrong, and the value would tell the prediction, so it stays hidden; the report names the
    code the line compares."""
    fill_mixed(mixed, triple="return 2 * x", total="6.0")
    report = section(run_mixed(mixed), "test_compared_with_code")
    assert "`6.0`" in report and "4.0" not in report, report
    assert "`triple`" in report and "你的代码" in report and "from your code" in report


def test_a_wrong_prediction_beside_a_right_todo_stays_hidden(mixed):
    fill_mixed(mixed, shape="(1, 3)", dtype="jnp.float16", region_shape="(4,)", total="5.0")
    output = run_mixed(mixed)
    for koan, answer, code in (("test_traced_by_jit", "(1, 3)", "`triple`"),
                               ("test_prediction_beside_code", "jnp.float16", None),
                               ("test_fix_region", "(4,)", "`scale`")):  # fmt: skip
        report = section(output, koan)
        assert f"`{answer}`" in report and "🙈" in report, report
        assert "(3,)" not in report and "(2,)" not in report and "float32" not in report
        assert report.count("your answer") == 1
        # the shape of a value the code computed: the line compares the two, and names the code
        assert (code in report) if code else ("your code" not in report), report
    compared = section(output, "test_compared_with_code")
    assert "`5.0`" in compared and "6.0" not in compared


def test_a_fill_of_a_call_made_for_its_effect_keeps_the_values_hidden(mixed):
    """A fill in a call made for its effect (a registration, a config switch) reaches the values
    computed after it without a name to follow: they stay hidden, the code named beside it."""
    fill_mixed(mixed, factor="3")
    report = section(run_mixed(mixed, "-k", "test_effect_then_code"), "test_effect_then_code")
    assert "`3`" in report and "🙈" in report and "18.0" not in report, report
    assert "`triple`" in report


def test_each_fill_is_shown_once_however_many_lines_it_spans(mixed):
    """A fill of `with raises_exactly(X):` over several lines, or whose statement spans many
    lines, is one answer: shown once."""
    fill_mixed(mixed, exc="ValueError")
    report = section(run_mixed(mixed), "test_raises_around_code")
    assert report.count("`ValueError`") == 1, report
    assert "an exception" not in report or "a ValueError" not in report


EPSILON = """
import collections

State = collections.namedtuple("State", "count mu nu")


def test_state():
    \"\"\"状态。Adam's step count starts at zero; its moments are large arrays.\"\"\"
    state = State(jnp.zeros((), jnp.int32), jnp.zeros((32, 32)), jnp.zeros((32, 32)))
    assert int(state.count) == {count}
"""


def test_reveal_shortens_the_long_values_of_the_assert_as_pytest_does(course):
    """At -vv pytest prints each intermediate value whole (an Adam state was a hundred lines of
    zeros): `reveal` cuts each "where" line to pytest's own sizes, the comparison stays whole."""
    write(course / "answers" / "01" / "test_epsilon.py", HEADER + EPSILON.format(count="0"))
    write(course / "koans" / "01" / "test_epsilon.py", HEADER + EPSILON.format(count="__"))
    commit(course)
    write(course / "koans" / "01" / "test_epsilon.py", HEADER + EPSILON.format(count="1"))
    shown = progress(course, "reveal", "test_state")
    assert shown.returncode == 0, shown.stderr
    assert "assert 0 == 1" in shown.stdout, shown.stdout
    where = [line for line in shown.stdout.splitlines() if "where" in line and "State(" in line]
    assert where and all(len(line) <= 480 and "..." in line for line in where), where
    assert max(len(line) for line in shown.stdout.splitlines()) <= 480
