"""progress.py's commands end to end on a small fake course, against golden files.

Set UPDATE_GOLDEN=1 to rewrite the golden files after an intended change of output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .fakecourse import REPO, dedent, make_course, progress, solve, tree_digest

GOLDEN = Path(__file__).parent / "golden" / "progress"


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


def test_status_shows_each_chapter_and_the_next_koan(course):
    shown = progress(course)
    assert shown.returncode == 0, shown.stderr
    matches_golden("status_fresh", shown.stdout, course)
    solve(course, "01", "test_alpha.py")
    shown = progress(course)
    matches_golden("status_chapter_one_done", shown.stdout, course)
    data = json.loads(progress(course, "--json").stdout)
    assert data["schema"] == 1
    assert data["total"] == {"total": 4, "passed": 3, "failing": 0, "not_started": 1}
    assert data["next"]["nodeid"] == "koans/02/test_beta.py::test_x64"


def test_chapter_option_narrows_and_unknown_chapter_is_an_error(course):
    shown = progress(course, "--chapter", "2")
    assert "02 第二章 / Chapter two" in shown.stdout and "01 第一章" not in shown.stdout
    assert progress(course, "--chapter", "7").returncode == 2


def test_unchanged_files_are_not_run_again(course):
    first = json.loads(progress(course, "--json").stdout)
    # Were pytest started again, this option would make it fail: the summary must not need it.
    poisoned = {"PYTEST_ADDOPTS": "--no-such-option"}
    started = time.perf_counter()
    again = progress(course, "--json", env_extra=poisoned)
    elapsed = time.perf_counter() - started
    assert json.loads(again.stdout) == first
    assert elapsed < 2.0, f"warm summary took {elapsed:.2f} s"
    solve(course, "02", "test_beta.py")  # a changed file runs again
    changed = json.loads(progress(course, "--json").stdout)
    assert changed["total"]["passed"] == 1
    rerun = progress(course, "--json", "--all", env_extra=poisoned)
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


def test_reset_restores_the_file_and_keeps_the_learners(course):
    mine = course / "koans" / "01" / "test_alpha.py"
    mine.write_text(mine.read_text().replace("== __", "== 3", 1), encoding="utf-8")
    edited = mine.read_text()
    asked = progress(course, "reset", "test_sum", stdin=subprocess.DEVNULL)
    assert asked.returncode == 1 and mine.read_text() == edited  # not a terminal: needs --yes
    done = progress(course, "reset", "koans/01/test_alpha.py", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert mine.read_text() == (course / "koans/01/test_alpha.py").read_text()
    backups = list(mine.parent.glob("test_alpha.py.*.bak"))
    assert [b.read_text() for b in backups] == [edited]
    pristine = subprocess.run(
        ["git", "-C", str(course), "show", "HEAD:koans/01/test_alpha.py"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert mine.read_text() == pristine


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
    for name in (
        "test_broken",
        "test_imports",
        "test_python_loop",
        "test_xla_loop",
        "test_segfault",
    ):
        assert states[name][0] == "failing", (name, states[name])
    problems = " ".join(data["problems"])
    assert "test_syntax.py" in problems and "test_import.py" in problems


def test_a_deleted_koan_still_counts_and_is_named(course):
    mine = course / "koans" / "01" / "test_alpha.py"
    text = mine.read_text()
    mine.write_text(text[: text.index("def test_double")], encoding="utf-8")
    data = json.loads(progress(course, "--json").stdout)
    assert data["total"]["total"] == 4
    deleted = [k for k in data["koans"] if k["name"] == "test_double"]
    assert deleted[0]["state"] == "failing" and "deleted" in deleted[0]["note"]
    assert any("test_double" in p for p in data["problems"])


def test_damaged_memory_is_set_aside(course):
    progress(course)
    store = course / ".jaxkoans"
    (store / "results.json").write_text("{not json", encoding="utf-8")
    (store / "hints.json").write_bytes(b"\x00\xff")
    shown = progress(course)
    assert shown.returncode == 0 and "✍️ 3" in shown.stdout
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


def wait_for(condition, deadline_s: float = 60.0):
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
    _, stderr = child.communicate(timeout=60)
    assert child.returncode == 130 and "interrupted" in stderr
    assert tree_digest(course) == before
    results = course / ".jaxkoans" / "results.json"
    assert not results.exists() or json.loads(results.read_text())
    assert wait_for(lambda: not [pid for pid in running if is_alive(pid)], 10)


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
