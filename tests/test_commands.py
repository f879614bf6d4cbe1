"""progress.py's commands end to end on a small fake course, against golden files.

Set UPDATE_GOLDEN=1 to rewrite the golden files after an intended change of output.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxkoans.course import fills
from jaxkoans.course import shipped as as_shipped

from .fakecourse import (
    REPO,
    dedent,
    make_course,
    progress,
    progress_process,
    solve,
    tree_digest,
)

GOLDEN = Path(__file__).parent / "golden" / "progress"
PROCESS_TIMEOUT_S = 600  # a guard against a hung child, far above the work it waits for


def matches_golden(name: str, text: str, root: Path) -> None:
    text = text.replace(str(root), "<root>")
    golden = GOLDEN / f"{name}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text, encoding="utf-8")
    assert golden.is_file(), f"no golden file {golden}: run with UPDATE_GOLDEN=1 once"
    assert text == golden.read_text(encoding="utf-8")


@pytest.fixture
def course(tmp_path: Path) -> Path:
    return make_course(tmp_path / "course")


def edit(course: Path, chapter: str = "01", name: str = "test_alpha.py") -> None:
    """A learner's first edit: the file differs from the shipped one (its first blank filled)."""
    mine = course / "koans" / chapter / name
    mine.write_text(mine.read_text().replace("== __", "== 3", 1), encoding="utf-8")


# Were pytest started, this option would make it fail: a command that must not run koans.
NO_RUN = {"PYTEST_ADDOPTS": "--no-such-option"}


def test_status_shows_each_chapter_and_the_next_koan(course):
    shown = progress(course)
    assert shown.returncode == 0, shown.stderr
    matches_golden("status_fresh", shown.stdout, course)
    solve(course, "01", "test_alpha.py")
    shown = progress(course)
    matches_golden("status_chapter_one_done", shown.stdout, course)
    data = json.loads(progress(course, "--json").stdout)
    assert data["schema"] == 1
    assert data["total"] == {
        "total": 4, "passed": 3, "failing": 0, "not_started": 1, "skipped": 0, "environment": 0,
        "passed_with_ignored_edits": 0,
    }  # fmt: skip
    assert data["next"]["nodeid"] == "koans/02/test_beta.py::test_x64"


def test_chapter_option_narrows_and_unknown_chapter_is_an_error(course):
    shown = progress(course, "--chapter", "2")
    assert "02 第二章 / Chapter two" in shown.stdout and "01 第一章" not in shown.stdout
    assert progress(course, "--chapter", "7").returncode == 2


def test_unchanged_files_are_not_run_again(course):
    edit(course)
    first = json.loads(progress(course, "--json").stdout)
    again = progress(course, "--json", env_extra=NO_RUN)
    assert json.loads(again.stdout) == first
    solve(course, "02", "test_beta.py")  # a changed file runs again
    changed = json.loads(progress(course, "--json").stdout)
    assert changed["total"]["passed"] == 2
    rerun = progress(course, "--json", "--all", env_extra=NO_RUN)
    assert "exit code 4" in " ".join(json.loads(rerun.stdout)["problems"])


def test_hint_reveals_one_more_level_each_time(course):
    first = progress(course, "hint")
    second = progress(course, "hint")
    third = progress(course, "hint", "test_sum", "--lang", "zh")
    matches_golden("hint_levels", first.stdout + second.stdout + third.stdout, course)
    assert progress(course, "hint", "test_nothing").returncode == 1


def test_diff_waits_until_the_koan_passes(course):
    refused = progress(course, "diff", "test_sum")
    assert refused.returncode == 1 and "--force" in refused.stdout
    spoiled = progress(course, "diff", "test_sum", "--force")
    matches_golden("diff_forced", spoiled.stdout, course)
    solve(course, "01", "test_alpha.py")
    whole = progress(course, "diff", "koans/01/test_alpha.py")
    assert whole.returncode == 0 and "identical" in whole.stdout
    for named in ("test_alpha.py", "01/test_alpha.py"):  # a koan file by its name, from anywhere
        by_name = progress(course, "diff", named)
        assert by_name.returncode == 0 and "identical" in by_name.stdout, by_name.stderr


def backups(course: Path) -> list[Path]:
    return list((course / ".jaxkoans" / "backups" / "koans" / "01").glob("test_alpha.py.*.bak"))


def test_reset_restores_the_file_and_keeps_the_learners_where_git_ignores_it(course):
    """The learner's version is kept in .jaxkoans/backups/, which the course's .gitignore
    ignores (a .bak left in koans/ was committed by students), and the command says where."""
    (course / ".gitignore").write_text((REPO / ".gitignore").read_text(), encoding="utf-8")
    git = ["git", "-C", str(course), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", ".gitignore"], check=True, timeout=60)
    subprocess.run([*git, "commit", "-qm", "ignore"], check=True, timeout=60)
    mine = course / "koans" / "01" / "test_alpha.py"
    mine.write_text(mine.read_text().replace("== __", "== 3", 1), encoding="utf-8")
    edited = mine.read_text()
    asked = progress_process(course, "reset", "test_sum", stdin=subprocess.DEVNULL)
    assert asked.returncode == 1 and mine.read_text() == edited  # not a terminal: needs --yes
    done = progress_process(course, "reset", "koans/01/test_alpha.py", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    shipped = as_shipped.read_manifest(course / "koans")["koans/01/test_alpha.py"]["text"]
    assert mine.read_text() == shipped
    [backup] = backups(course)
    assert backup.read_text() == edited
    assert f"yours: {backup.relative_to(course).as_posix()}" in done.stdout, done.stdout
    status = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=all"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert status.stdout == "", status.stdout  # nothing for `git add -A` to pick up


def test_reset_of_one_koan_resets_only_its_blanks_and_todos(course):
    """Three learners lost the other koans of a file to `reset KOAN`: now only that koan's
    blanks and the TODO functions it reaches come back as shipped."""
    solve(course, "01", "test_alpha.py")
    mine = course / "koans" / "01" / "test_alpha.py"
    mine.write_text(mine.read_text().replace("== 3", "== (\n        3  # mine\n    )"))
    solved = mine.read_text()
    done = progress(course, "reset", "test_sum", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    text = mine.read_text()
    assert "__  # mine" in text  # its blank is open again, the learner's comment kept
    assert "== jnp.float32" in text and "    return 2 * x" in text  # the other koans kept
    assert [b.read_text() for b in backups(course)] == [solved]
    progress(course, "reset", "test_double", "--yes")
    assert 'todo("return 2 * x")' in mine.read_text() and "== jnp.float32" in mine.read_text()
    again = progress(course, "reset", "test_double", "--yes")
    assert again.returncode == 0 and "already as shipped" in again.stdout


HELPED = '''

def scaled(x):
    """A helper the koan calls, with a blank of its own."""
    return x * {factor}


def test_scaled():
    """缩放。A helper's blank is the koan's too."""
    assert int(scaled(jnp.int32(2))) == {result}


def test_other():
    """别的。Another koan of the file."""
    assert int(jnp.int32(1)) == {other}
'''


def test_reset_of_one_koan_restores_the_blanks_of_the_helpers_it_calls_and_says_which(course):
    """`reset KOAN` once said "already as shipped" with a blank of the helper the koan calls
    still filled (chapter 07's copy_by_blocks): every blank and TODO the koan reaches comes
    back, and the report names them (issue 45)."""
    from .fakecourse import HEADER, write
    from .test_reveal import commit

    koans, answers = course / "koans" / "01", course / "answers" / "01"
    write(koans / "test_helped.py", HEADER + HELPED.format(factor="__", result="__", other="__"))
    write(answers / "test_helped.py", HEADER + HELPED.format(factor="3", result="6", other="1"))
    commit(course)
    mine = koans / "test_helped.py"
    write(mine, HEADER + HELPED.format(factor="3", result="6", other="1"))
    done = progress(course, "reset", "test_scaled", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert mine.read_text() == HEADER + HELPED.format(factor="__", result="__", other="1")
    assert (
        "test_scaled (1 个空 / blank)" in done.stdout and "scaled (1 个空 / blank)" in done.stdout
    )
    write(mine, HEADER + HELPED.format(factor="4", result="__", other="1"))
    done = progress(course, "reset", "test_scaled", "--yes")  # only the helper was filled
    assert done.returncode == 0 and "already as shipped" not in done.stdout, done.stdout
    assert mine.read_text() == HEADER + HELPED.format(factor="__", result="__", other="1")
    again = progress(course, "reset", "test_scaled", "--yes")
    assert again.returncode == 0 and "already as shipped" in again.stdout


def test_reset_in_a_read_only_checkout_says_so_and_changes_nothing(course, monkeypatch, capsys):
    """A read-only checkout (here: every write refused, as it is for a learner who is not
    root) ends in a plain sentence, never a PermissionError traceback."""
    import argparse
    import shutil

    from jaxkoans.course import Course
    from jaxkoans.learner.commands import reset

    mine = course / "koans" / "01" / "test_alpha.py"
    mine.write_text(mine.read_text().replace("== __", "== 3", 1), encoding="utf-8")
    before = mine.read_text()

    def refused(source, target, **_):
        raise PermissionError(13, "Permission denied", str(target))

    monkeypatch.setattr(shutil, "copy2", refused)
    code = reset.run(
        argparse.Namespace(target=str(mine), yes=True, ref=None, checkout=Course(course))
    )
    said = capsys.readouterr().out
    assert code == 1 and "cannot write" in said and "Permission denied" in said, said
    assert mine.read_text() == before and not backups(course)


def test_no_command_but_reset_writes_into_koans(course):
    before = tree_digest(course)
    for args in ([], ["--json"], ["hint"], ["diff", "--force"], ["--all"]):
        progress(course, *args)
    assert tree_digest(course) == before


BROKEN = {
    "syntax": "def test_broken(:\n    pass\n",
    "import": "import no_such_module_anywhere\n\ndef test_imports():\n    pass\n",
    "loop": dedent('''
        def test_python_loop():
            """死循环。Python never returns."""
            while True:
                pass
    '''),
    "xla": dedent('''
        from jax import lax

        def test_xla_loop():
            """死循环。XLA never returns."""
            lax.while_loop(lambda c: c >= 0, lambda c: c + 1 - 1, 0).block_until_ready()
    '''),
    "crash": dedent('''
        import ctypes

        def test_segfault():
            """崩溃。The interpreter dies."""
            ctypes.string_at(0)
    '''),
}


def test_broken_files_cost_only_their_own_koans(course):
    chapter = course / "koans" / "01"
    for name, text in BROKEN.items():
        (chapter / f"test_{name}.py").write_text(text, encoding="utf-8")
    solve(course, "01", "test_alpha.py")
    shown = progress(course, "--json", timeout=600)
    data = json.loads(shown.stdout)
    states = {k["name"]: (k["state"], k["note"]) for k in data["koans"]}
    assert states["test_sum"][0] == states["test_double"][0] == "passed"
    assert states["test_x64"][0] == "not_started"
    for name in ("test_broken", "test_imports", "test_python_loop"):  # each reported failing
        assert states[name][0] == "failing", (name, states[name])
    for name in ("test_xla_loop", "test_segfault"):  # no report came back: counted as open
        assert states[name] == ("crashed", "did not report (crash or hang)"), (name, states[name])
    assert data["total"]["failing"] == 5
    problems = " ".join(data["problems"])
    assert "test_syntax.py" in problems and "test_import.py" in problems


def test_a_deleted_koan_still_counts_and_is_named(course):
    mine = course / "koans" / "01" / "test_alpha.py"
    text = mine.read_text()
    mine.write_text(text[: text.index("def test_double")], encoding="utf-8")
    data = json.loads(progress(course, "--json").stdout)
    assert data["total"]["total"] == 4
    deleted = [k for k in data["koans"] if k["name"] == "test_double"]
    assert deleted[0]["state"] == "missing" and "deleted" in deleted[0]["note"]
    assert data["total"]["failing"] == 1  # a deleted koan is counted as an open attempt
    assert any("test_double" in p for p in data["problems"])


def test_damaged_memory_is_set_aside(course):
    edit(course)  # a file as shipped is not run, so nothing would be remembered
    progress(course)
    store = course / ".jaxkoans"
    (store / "results.json").write_text("{not json", encoding="utf-8")
    (store / "hints.json").write_bytes(b"\x00\xff")
    shown = progress(course)
    assert shown.returncode == 0 and "✅ 1  ❌ 0  ✍️ 2" in shown.stdout
    assert progress(course, "hint").returncode == 0
    assert (store / "results.json.damaged").is_file() and (store / "hints.json.damaged").is_file()
    json.loads((store / "results.json").read_text())


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (Linux /proc)."""
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            children = (
                (task / "children").read_text().split() if (task / "children").exists() else []
            )
            found.update(int(c) for c in children)
            todo += [int(c) for c in children]
    return found


def is_alive(pid: int) -> bool:
    """Running, not merely a zombie waiting for a parent that is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(condition, deadline_s: float = PROCESS_TIMEOUT_S):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_ctrl_c_stops_cleanly_and_keeps_nothing_half_written(course):
    (course / "koans" / "01" / "test_slow.py").write_text(BROKEN["loop"], encoding="utf-8")
    before = tree_digest(course)
    env = {**os.environ, "JAXKOANS_ROOT": str(course)}
    child = subprocess.Popen(
        [sys.executable, str(REPO / "progress.py")], cwd=course, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # Interrupt once pytest and its xdist worker run (the slow koan loops for 3 s).
    running = wait_for(lambda: (d := descendants(child.pid)) and len(d) >= 2 and d)
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=PROCESS_TIMEOUT_S)
    assert child.returncode == 130 and "interrupted" in stderr
    assert tree_digest(course) == before
    results = course / ".jaxkoans" / "results.json"
    assert not results.exists() or json.loads(results.read_text())
    assert wait_for(lambda: not [pid for pid in running if is_alive(pid)])


def test_doctor_passes_here_and_names_the_fix_for_a_wrong_pin(course):
    here = progress(REPO, "doctor", timeout=200)
    assert here.returncode == 0, here.stdout
    assert "❌" not in here.stdout and "✅ jax 0.12.0.1" in here.stdout
    (course / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["jax==0.0.1", "no-such-package==1.0"]\n'
        + (course / "pyproject.toml").read_text(),
        encoding="utf-8",
    )
    wrong = progress(course, "doctor", timeout=200)
    assert wrong.returncode == 1
    assert "❌ jax 0.12.0.1 ≠ pin 0.0.1" in wrong.stdout
    assert "❌ no-such-package 未安装 / not installed (pin 1.0)" in wrong.stdout
    assert wrong.stdout.count("→ bash setup.sh") == 2


# ---- the learner's loop: nothing run that need not be, nothing lost ---------------------------


def test_a_fresh_clone_shows_its_progress_without_running_a_koan(course):
    shown = progress(course, env_extra=NO_RUN)
    assert shown.returncode == 0, shown.stderr
    matches_golden("status_fresh", shown.stdout, course)
    assert not (course / ".jaxkoans" / "results.json").exists()


def test_all_for_one_chapter_keeps_the_other_chapters_remembered(course):
    edit(course)
    edit(course, "02", "test_beta.py")
    first = json.loads(progress(course, "--json").stdout)
    progress(course, "--all", "--chapter", "02")
    again = json.loads(progress(course, "--json", env_extra=NO_RUN).stdout)
    assert again["problems"] == [] and again["koans"] == first["koans"]


def test_status_after_an_edit_runs_only_the_koans_it_touched_and_shows_each(course):
    edit(course)  # test_sum filled: the file's three koans run once
    first = progress(course, "--json")
    assert "running 3 koan(s) of 1 file(s)" in first.stderr, first.stderr
    mine = course / "koans" / "01" / "test_alpha.py"
    mine.write_text(mine.read_text().replace("dtype == __", "dtype == jnp.float32"), "utf-8")
    second = progress(course, "--json")
    assert "running 1 koan(s) of 1 file(s)" in second.stderr, second.stderr
    shown = [line.split()[-1] for line in second.stderr.splitlines() if "::" in line]
    assert shown == ["koans/01/test_alpha.py::test_dtype"], second.stderr
    states = {k["name"]: k["state"] for k in json.loads(second.stdout)["koans"]}
    del states["test_x64"]  # chapter 02, as shipped
    assert states == {"test_sum": "passed", "test_dtype": "passed", "test_double": "not_started"}
    # A helper outside the koans (the TODO function) is part of every koan of its file.
    mine.write_text(mine.read_text().replace('todo("return 2 * x")', "return 2 * x"), "utf-8")
    third = progress(course, "--json")
    assert "running 3 koan(s) of 1 file(s)" in third.stderr, third.stderr
    assert json.loads(third.stdout)["total"]["passed"] == 3


def test_hint_without_a_target_runs_no_koan(course):
    edit(course)
    shown = progress(course, "hint", env_extra=NO_RUN)
    assert shown.returncode == 0 and "test_alpha.py::test_sum" in shown.stdout
    assert not (course / ".jaxkoans" / "results.json").exists()


def test_hint_takes_a_parametrized_case_as_its_koan(course):
    shown = progress(course, "hint", "test_sum[8-16-8]")
    assert shown.returncode == 0 and "test_alpha.py::test_sum" in shown.stdout


def test_hint_with_lang_speaks_that_language_only(course):
    for lang, hint, other in (
        ("en", "Three ones added up.", "再运行"),
        ("zh", "三个一相加。", "run it"),
    ):
        shown = progress_process(course, "hint", "test_sum", "--lang", lang, "--level", "1")
        assert shown.returncode == 0 and f"1. {hint}" in shown.stdout, shown.stdout
        assert other not in shown.stdout and " / " not in shown.stdout, shown.stdout
    missing = progress_process(course, "hint", "no_such_koan", "--lang", "en")
    assert missing.stdout.strip() == "no such koan: no_such_koan", missing.stdout


def test_diff_of_one_koan_runs_that_koan_only(course):
    solve(course, "01", "test_alpha.py")
    shown = progress_process(course, "diff", "test_sum")
    assert shown.returncode == 0 and "identical to the answer" in shown.stdout, shown.stderr
    assert "running 1 koan(s) of 1 file(s)" in shown.stderr, shown.stderr
    ran = [line.split()[-1] for line in shown.stderr.splitlines() if line.startswith("   ✅")]
    assert ran == ["koans/01/test_alpha.py::test_sum"], shown.stderr
    again = progress_process(course, "diff", "test_dtype")  # test_sum's result is kept
    assert "running 1 koan(s)" in again.stderr and "test_sum" not in again.stderr, again.stderr


def test_diff_of_a_koan_shows_the_todo_helper_it_calls(course):
    spoiled = progress(course, "diff", "test_double", "--force")
    assert spoiled.returncode == 0
    assert '-    todo("return 2 * x")' in spoiled.stdout and "+    return 2 * x" in spoiled.stdout
    # the file's two blank lines between the helper and the koan are kept (issue 45)
    assert "+    return 2 * x\n \n \n def test_double():" in spoiled.stdout, spoiled.stdout


def test_diff_without_a_target_right_after_a_pass_shows_that_koan(course):
    solve(course, "01", "test_alpha.py")
    progress(course)
    shown = progress(course, "diff")
    assert shown.returncode == 0, shown.stdout
    assert "identical" in shown.stdout  # the koan just passed, solved as its answer is


def test_diff_force_on_a_file_that_does_not_parse_says_so(course):
    mine = course / "koans" / "01" / "test_alpha.py"
    mine.write_text(mine.read_text() + "\ndef broken(:\n", encoding="utf-8")
    shown = progress(course, "diff", "test_sum", "--force")
    assert shown.returncode == 1
    assert "syntax error: test_alpha.py:" in shown.stderr and "Traceback" not in shown.stderr


SKIPPED = dedent('''
    import pytest

    def test_needs_a_compiler():
        """跳过。Skipped where the machine lacks what it needs."""
        pytest.skip("no C++ compiler")
''')


def test_skipped_koans_are_counted_apart_and_never_next(course):
    solve(course, "01", "test_alpha.py")
    (course / "koans" / "01" / "test_skip.py").write_text(SKIPPED, encoding="utf-8")
    shown = progress(course)
    assert "✅ 3  ❌ 0  ✍️ 0  ⏭️ 1" in shown.stdout, shown.stdout
    assert "koans were skipped on this machine" in shown.stdout
    data = json.loads(progress(course, "--json").stdout)
    assert data["next"]["name"] == "test_x64"
    assert data["total"]["skipped"] == 1


BUILD_FAILS = dedent('''
    import os

    from jaxkoans.api import cbuild

    def test_needs_a_kernel():
        """编译。Needs the C++ kernel built."""
        if not os.environ.get("FAKE_COMPILER_FIXED"):
            raise cbuild.BuildError("编译失败 / build failed: g++ said no")
''')


def test_a_failed_cpp_build_is_not_an_attempt_and_never_next(course):
    solve(course, "01", "test_alpha.py")
    (course / "koans" / "01" / "test_build.py").write_text(BUILD_FAILS, encoding="utf-8")
    shown = progress(course)
    assert "✅ 3  ❌ 0  ✍️ 0  🛠️ 1" in shown.stdout, shown.stdout
    assert "the C++ build failed (not counted as attempts): python progress.py doctor" in (
        shown.stdout
    )
    data = json.loads(progress(course, "--json").stdout)
    assert data["next"]["name"] == "test_x64"
    assert data["total"]["environment"] == 1 and data["total"]["failing"] == 0
    built = [k for k in data["koans"] if k["name"] == "test_needs_a_kernel"]
    assert [(k["state"], k["cause"]) for k in built] == [("environment", "environment")]
    # the file is unchanged, but a failed build is measured again: the machine may be fixed
    fixed = json.loads(progress(course, "--json", env_extra={"FAKE_COMPILER_FIXED": "1"}).stdout)
    assert fixed["total"]["environment"] == 0 and fixed["total"]["passed"] == 4


def test_a_deleted_todo_docstring_is_no_edit_and_a_changed_one_marks_only_its_callers(course):
    """Deleting a TODO function's docstring changes nothing grade runs: its body is still the
    learner's, and no koan is marked. A changed docstring is an edit grade ignores, noted on the
    koans that call the function only."""
    solve(course, "01", "test_alpha.py")
    mine = course / "koans" / "01" / "test_alpha.py"
    solved = mine.read_text(encoding="utf-8")
    mine.write_text(solved.replace('    """Doubles x."""\n', ""), encoding="utf-8")
    shown = progress_process(course, "--chapter", "01")
    assert "3/3    ✅ 3  ❌ 0  ✍️ 0\n" in shown.stdout, shown.stdout
    assert "grade" not in shown.stdout, shown.stdout
    shipped = as_shipped.read_manifest(course / "koans")["koans/01/test_alpha.py"]["text"]
    graded = fills.take(shipped, mine.read_text(encoding="utf-8")).graded
    assert '"""Doubles x."""\n    return 2 * x' in graded  # grade runs the learner's body
    mine.write_text(solved.replace('"""Doubles x."""', '"""Twice x."""'), encoding="utf-8")
    data = json.loads(progress_process(course, "--json", "--chapter", "01").stdout)
    marked = {k["name"] for k in data["koans"] if k["ignored_edits"]}
    assert marked == {"test_double"}, data["koans"]


def test_a_pass_that_needs_an_edit_grade_ignores_is_not_a_plain_pass(course):
    solve(course, "01", "test_alpha.py")
    mine = course / "koans" / "01" / "test_alpha.py"
    # the learner changes an assert (outside every blank and TODO body): grade runs the course's
    mine.write_text(
        mine.read_text(encoding="utf-8").replace("assert (double(", "assert True or (double("),
        encoding="utf-8",
    )
    line = next(
        n for n, text in enumerate(mine.read_text().splitlines(), 1) if "assert True" in text
    )
    shown = progress(course)
    assert "2/3    ✅ 2  ❌ 0  ✍️ 0  ⚠️ 1" in shown.stdout, shown.stdout
    assert f"koans/01/test_alpha.py:{line} (test_double): " in shown.stdout
    data = json.loads(progress(course, "--json").stdout)
    by_name = {k["name"]: k for k in data["koans"]}
    assert by_name["test_double"]["state"] == "passed"
    assert [e.split(": ")[0] for e in by_name["test_double"]["ignored_edits"]] == [
        f"koans/01/test_alpha.py:{line}"
    ]
    assert by_name["test_sum"]["ignored_edits"] == []
    assert data["chapters"][0]["passed"] == 2
    assert data["chapters"][0]["passed_with_ignored_edits"] == 1


def test_a_deleted_koan_file_is_named_and_reset_brings_it_back(course):
    mine = course / "koans" / "01" / "test_alpha.py"
    shipped = mine.read_text()
    mine.unlink()
    data = json.loads(progress(course, "--json").stdout)
    assert data["total"]["total"] == 4
    assert any("koans/01/test_alpha.py" in p and "reset" in p for p in data["problems"])
    done = progress(course, "reset", "koans/01/test_alpha.py", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert mine.read_text() == shipped


@pytest.mark.parametrize(
    "damage",
    ["wrong shape", "store is a file", "damaged name taken", "hints of the wrong shape"],
)
def test_damaged_memory_of_any_shape_never_crashes(course, damage):
    edit(course)
    progress(course)
    store = course / ".jaxkoans"
    if damage == "wrong shape":
        files = {"koans/01/test_alpha.py": {"key": 1, "koans": []}, "x": []}
        (store / "results.json").write_text(json.dumps({"schema": 1, "files": files}))
    elif damage == "store is a file":
        for path in store.iterdir():
            path.unlink()
        store.rmdir()
        store.write_text("not a directory", encoding="utf-8")
    elif damage == "damaged name taken":
        (store / "results.json").write_text("{not json", encoding="utf-8")
        (store / "results.json.damaged").mkdir()
    else:
        koans = ("test_sum", "test_dtype", "test_double")
        seen = {f"koans/01/test_alpha.py::{name}": "x" for name in koans}
        (store / "hints.json").write_text(json.dumps(seen), encoding="utf-8")
    shown = progress(course)
    assert shown.returncode == 0 and "✅ 1  ❌ 0  ✍️ 2" in shown.stdout, shown.stderr
    assert "Traceback" not in shown.stderr
    assert progress(course, "hint").returncode == 0


def test_a_crashed_koan_is_named_and_not_run_again_while_its_file_is_unchanged(course):
    (course / "koans" / "01" / "test_crash.py").write_text(BROKEN["crash"], encoding="utf-8")
    first = json.loads(progress(course, "--json", timeout=600).stdout)
    named = [p for p in first["problems"] if "test_crash.py::test_segfault" in p]
    assert named, first["problems"]
    again = json.loads(progress(course, "--json", env_extra=NO_RUN).stdout)
    assert again["problems"] == first["problems"]  # remembered, not run again (no exit code 4)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_end_the_child_pytest_and_its_workers(course, stop):
    (course / "koans" / "01" / "test_slow.py").write_text(BROKEN["loop"], encoding="utf-8")
    env = {**os.environ, "JAXKOANS_ROOT": str(course)}
    child = subprocess.Popen(
        [sys.executable, str(REPO / "progress.py")], cwd=course, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    running = wait_for(lambda: (d := descendants(child.pid)) and len(d) >= 2 and d)
    child.send_signal(stop)
    child.communicate(timeout=PROCESS_TIMEOUT_S)
    assert child.returncode == 128 + stop
    assert wait_for(lambda: not [pid for pid in running if is_alive(pid)])


def test_doctor_names_a_compiler_that_cannot_build(course, tmp_path):
    (course / "csrc").mkdir()
    (course / "csrc" / "kernel.cc").write_text("int f() { return 1; }\n", encoding="utf-8")
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("g++", "clang++", "c++"):
        (fake / name).write_text("#!/bin/sh\necho 'internal compiler error' >&2\nexit 1\n")
        (fake / name).chmod(0o755)
    shown = progress(course, "doctor", env_extra={"PATH": f"{fake}:{os.environ['PATH']}"})
    assert shown.returncode == 1
    assert "无法编译 / cannot build kernel.cc: internal compiler error" in shown.stdout


def test_a_student_release_has_no_answers_and_keeps_the_course_as_shipped(course, tmp_path):
    """`progress.py release DIR`: no answers/ (a template made from the course would hand every
    student the answers); status, predict-then-see and deleted koans still work from
    koans/.shipped.json; diff says where the answers are."""
    target = tmp_path / "student"
    made = progress(course, "release", str(target), "--answers", "ask Ada for the answers")
    assert made.returncode == 0, made.stdout + made.stderr
    assert not (target / "answers").exists() and not (target / "tests").exists()
    assert (target / "koans" / ".shipped.json").is_file() and (target / "pyproject.toml").is_file()
    assert progress(course, "release", str(target)).returncode == 2  # never over a directory
    mine = target / "koans" / "01" / "test_alpha.py"
    text = mine.read_text(encoding="utf-8").replace("sum()) == __", "sum()) == 4")
    mine.write_text(text.split("def test_double")[0], encoding="utf-8")  # test_double deleted
    data = json.loads(progress(target, "--json", "--chapter", "01").stdout)
    states = {k["name"]: (k["state"], k["note"]) for k in data["koans"]}
    assert states["test_sum"][0] == "failing" and "deleted" in states["test_double"][1], states
    shown = progress(target, "diff", "test_sum", "--force")
    assert shown.returncode == 1 and "ask Ada for the answers" in shown.stdout, shown.stdout


ENDLESS = dedent('''
    def test_endless():
        """死循环。
        It never returns.
        """
        while True:
            pass
''')


def test_an_endless_loop_is_named_and_lang_en_prints_english_only(course):
    """A koan the time limit stopped is named so, in its run line and under the next koan (not
    a bare ❌); `--lang en` prints the summary in English only, before a command or after it."""
    solve(course, "01", "test_alpha.py")
    (course / "koans" / "01" / "test_slow.py").write_text(ENDLESS, encoding="utf-8")
    shown = progress(course, "--lang", "en", "--chapter", "01")
    assert "test_endless  ⏱️ timed out (an endless loop?)" in shown.stderr, shown.stderr
    assert "next koan:  01 · test_slow.py::test_endless" in shown.stdout, shown.stdout
    assert "⏱️ timed out and stopped (an endless loop?)\n  │ It never returns.\n" in shown.stdout
    assert not re.search("[\u4e00-\u9fff]", shown.stdout + shown.stderr), shown
    hint = progress(course, "--lang", "zh", "hint", "test_endless", env_extra=NO_RUN)
    assert hint.stdout.startswith("没有提示 test_endless"), hint.stdout
    (course / "koans" / "01" / "test_alpha.py").unlink()  # reveal and diff name what is missing
    for command in ("reveal", "diff"):
        gone = progress(course, "--lang", "en", command, "test_sum", env_extra=NO_RUN)
        missing = "koans/01/test_alpha.py the file is missing: python progress.py reset"
        assert gone.returncode == 1 and missing in gone.stdout, gone
