"""A small fake course on disk, for testing the tools end to end (like exercism's examples)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from jaxkoans.course import Course
from jaxkoans.course import shipped as as_shipped
from jaxkoans.learner import cli

REPO = Path(__file__).resolve().parent.parent
HEADER = "import jax.numpy as jnp\n\nfrom jaxkoans import __, todo  # noqa: F401\n"

ALPHA = '''

def double(x):
    """Doubles x."""
    {double}


def test_sum():
    """求和。The sum of three ones is three."""
    assert int(jnp.ones(3).sum()) == {sum}


def test_dtype():
    """类型。jnp.ones makes float32 by default."""
    assert jnp.ones(1).dtype == {dtype}


def test_double():
    """加倍。Write double() so that it doubles an array."""
    assert (double(jnp.ones(2)) == 2).all()
'''
BETA = '''

def test_x64():
    """双精度。This chapter runs in float64."""
    assert jnp.ones(1).dtype == {dtype}
'''
MANIFEST = """title_zh = "{zh}"
title_en = "{en}"
x64 = {x64}
files = ["{file}"]
{hints}"""
HINTS = """
[hints."test_alpha.py::test_sum"]
zh = ["三个一相加。", "结果是一个整数。"]
en = ["Three ones added up.", "The result is an integer."]

[hints."test_alpha.py::test_dtype"]
zh = ["默认精度。"]
en = ["The default precision."]

[hints."test_alpha.py::test_double"]
zh = ["乘以二。"]
en = ["Multiply by two."]

[contracts."test_alpha.py::double"]
traced = false
allow = ["os.environ"]
why = "a one-line product, nothing to read (tests/test_program.py gives it a contract of its own); the gate tests' blocking fake reports its pid through the environment"
"""
PYPROJECT = """[tool.pytest.ini_options]
addopts = "--import-mode=importlib --continue-on-collection-errors"
timeout = 3
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_course(root: Path) -> Path:
    """koans/ and answers/ of two chapters (01: three koans; 02: float64), in a git repository."""
    write(root / "pyproject.toml", PYPROJECT)
    write(root / "koans" / "course.toml", 'path = ["01", "02"]\n')
    alpha = dict(double='todo("return 2 * x")', sum="__", dtype="__")
    solved = dict(double="return 2 * x", sum="3", dtype="jnp.float32")
    for tree, values in (("koans", alpha), ("answers", solved)):
        write(root / tree / "01" / "test_alpha.py", HEADER + ALPHA.format(**values))
    write(root / "koans" / "02" / "test_beta.py", HEADER + BETA.format(dtype="__"))
    write(root / "answers" / "02" / "test_beta.py", HEADER + BETA.format(dtype="jnp.float64"))
    write(
        root / "koans" / "01" / "chapter.toml",
        MANIFEST.format(
            zh="第一章", en="Chapter one", x64="false", file="test_alpha.py", hints=HINTS
        ),
    )
    write(
        root / "koans" / "02" / "chapter.toml",
        MANIFEST.format(zh="第二章", en="Chapter two", x64="true", file="test_beta.py", hints=""),
    )
    as_shipped.write(root)  # the course as shipped travels with it (koans/.shipped.json)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "course"], check=True)
    return root


def solve(root: Path, chapter: str, name: str) -> None:
    """Copy a koan file's answer over it, as a learner who finished it would have."""
    answer = (root / "answers" / chapter / name).read_text(encoding="utf-8")
    (root / "koans" / chapter / name).write_text(answer, encoding="utf-8")


def progress(
    root: Path, *args: str, env_extra: dict | None = None, **ignored
) -> subprocess.CompletedProcess:
    """progress.py's command line on the course at `root`, run in this process: `cli.main` with
    that course's Course, its output captured. `env_extra` is the environment the command
    (and the pytest children it starts) sees; stdin is not a terminal."""
    del ignored  # stdin=DEVNULL, timeout=: what a child process needed
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    os.environ.update({"LANG": "C.UTF-8", **(env_extra or {})})
    os.environ.pop("JAXKOANS_ROOT", None)  # the Course names the course, not the process
    try:
        os.chdir(root)
        with open(os.devnull, encoding="utf-8") as nothing:
            sys.stdin = nothing
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = cli.main(list(args), checkout=Course(root))
                except SystemExit as stop:  # argparse's usage errors
                    code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    finally:
        sys.stdin = saved_stdin
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["progress.py", *args], code, out.getvalue(), err.getvalue())


def progress_process(
    root: Path, *args: str, timeout: float = 300, env_extra: dict | None = None, **kwargs
) -> subprocess.CompletedProcess:
    """This checkout's progress.py as a process of its own on the course at `root` (what a
    process-level check needs: signals, the interpreter's exit, progress.py itself)."""
    env = {**os.environ, "JAXKOANS_ROOT": str(root), "LANG": "C.UTF-8", **(env_extra or {})}
    return subprocess.run(
        [sys.executable, str(REPO / "progress.py"), *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=timeout, **kwargs,
    )  # fmt: skip


def python_in(root: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `python ARGS` with this checkout's harness on the course at `root` (e.g. the
    mutation gate: `-m jaxkoans.authoring.mutate …`)."""
    env = {**os.environ, "JAXKOANS_ROOT": str(root), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def tree_digest(root: Path) -> dict[str, bytes]:
    """Every file under koans/, to prove a command left them alone."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in (root / "koans").rglob("*")
        if p.is_file()
    }


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def is_alive(pid: int) -> bool:
    """Running, not merely a zombie waiting for a parent that is gone (Linux /proc)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
