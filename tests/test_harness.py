"""The harness as a learner meets it, on small fake chapters run with pytester."""

from __future__ import annotations

import ast
import json
import os
import pty
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from jaxkoans.plugin import results

# A guard against a hung child, far above what the work takes on a loaded machine.
PROCESS_TIMEOUT_S = 600
REPO = Path(__file__).resolve().parent.parent

HEADER = "from jaxkoans import __, todo\nimport jax, jax.numpy as jnp\nfrom jax import lax\n"


def chapter(pytester: pytest.Pytester, number: str, files: dict[str, str], **settings) -> None:
    """A fake chapter directory NN with a chapter.toml and its test files."""
    directory = pytester.mkpydir(number)
    toml = [f'title_zh = "第{number}章"', f'title_en = "Chapter {number}"']
    toml += [f"{k} = {str(v).lower()}" for k, v in settings.items()]
    toml.append("files = [" + ", ".join(f'"{name}"' for name in files) + "]")
    (directory / "chapter.toml").write_text("\n".join(toml) + "\n", encoding="utf-8")
    for name, body in files.items():
        (directory / name).write_text(HEADER + textwrap.dedent(body), encoding="utf-8")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # the repository's pyproject.toml passes --continue-on-collection-errors the same way
    return pytester.runpytest_subprocess(
        "-p",
        "jaxkoans.plugin.hooks",
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",
        *args,
    )


def test_a_blank_reads_as_one_short_report(pytester):
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        def test_sum():
            """求和。Sum of three ones."""
            assert int(jnp.ones(3).sum()) == __
    '''
        },
    )
    result = run(pytester, "01")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*✍️ 填空 / fill in the blank*01 第01章 / Chapter 01*",
            "*koan: test_sum*",
            "*01/test_a.py:7",
            "*> assert int(jnp.ones(3).sum()) == __",
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")


def test_a_blank_that_jax_trips_over_is_still_the_blank(pytester):
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        def test_scan():
            """扫描。The blank is scan's initial carry."""
            carry, ys = lax.scan(lambda c, x: (c + x, c), __, jnp.ones(3))
    '''
        },
    )
    result = run(pytester, "01")
    result.stdout.fnmatch_lines(["*✍️ 填空 / fill in the blank*", "*> carry, ys = lax.scan(*__*"])
    result.stdout.no_fnmatch_line("*ValueError*")


def test_a_blank_returned_from_a_traced_function_is_the_blank(pytester):
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        def test_scan_step():
            """步骤。The blank is the carry a scan step returns."""
            def step(c, x):
                return __, x
            lax.scan(step, 0.0, jnp.ones(3))
    '''
        },
    )
    result = run(pytester, "01")
    result.stdout.fnmatch_lines(["*✍️ 填空 / fill in the blank*", "*> 8: return __, x"])


def test_an_unwritten_todo_points_at_the_stub(pytester):
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        def double(x):
            """Doubles x."""
            todo("return 2 * x")

        def test_double():
            """加倍。Doubling an array."""
            assert (double(jnp.ones(2)) == 2).all()
    '''
        },
    )
    result = run(pytester, "01")
    result.stdout.fnmatch_lines(
        ["*✍️ 待实现 / write the TODO*", "*01/test_a.py:7", '*> todo("return 2 * x")']
    )


FIX_REGION_KOAN = """
# ✍️ BEGIN
def mean(x):
    return x.sum() / 2  # bug: the size is not always 2
# ✍️ END

def test_mean():
    \"\"\"平均值。The mean.\"\"\"
    assert float(mean(jnp.arange(4.0))) == 1.5
"""


def test_a_fix_region_as_shipped_reads_as_not_started_and_as_wrong_once_edited(pytester):
    from jaxkoans.course import twins

    chapter(pytester, "01", {"test_a.py": FIX_REGION_KOAN})
    koan = pytester.path / "01" / "test_a.py"
    shipped = twins.region_hashes(koan.read_text(encoding="utf-8"))
    with open(pytester.path / "01" / "chapter.toml", "a", encoding="utf-8") as manifest:
        manifest.write(f'[regions]\n"test_a.py" = ["{shipped[0]}"]\n')

    result = run(pytester, "01")
    result.stdout.fnmatch_lines(
        ["*✍️ 待修复 / fix the marked code*", "*01/test_a.py:5", "*> # ✍️ BEGIN"]
    )
    result.stdout.no_fnmatch_line("*❌*")

    koan.write_text(koan.read_text(encoding="utf-8").replace("/ 2", "/ 3"), encoding="utf-8")
    run(pytester, "01").stdout.fnmatch_lines(["*❌ 还不对 / not yet*"])

    koan.write_text(koan.read_text(encoding="utf-8").replace("/ 3", "/ x.size"), encoding="utf-8")
    run(pytester, "01").assert_outcomes(passed=1)


def test_a_wrong_answer_shows_values_and_the_lesson_without_jax_frames(pytester):
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        def test_sum():
            """求和的教训。The lesson of the sum."""
            assert int(jnp.arange(3).sum()) == 4

        def test_shapes():
            """形状。Shapes must agree for matmul."""
            jnp.ones(3) @ jnp.ones(4)
    '''
        },
    )
    result = run(pytester, "01")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*❌ 还不对 / not yet*",
            "*│ 求和的教训。The lesson of the sum.*",
            "E*assert 3 == 4",
        ]
    )
    result.stdout.fnmatch_lines(["*TypeError: dot_general requires contracting dimensions*"])
    result.stdout.no_fnmatch_line("*site-packages/jax/*")
    result.stdout.no_fnmatch_line("*jaxkoans/*")


def test_an_endless_loop_times_out_with_an_explanation(pytester):
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        def test_loop():
            """循环。A loop that never ends."""
            while True:
                pass
    '''
        },
    )
    result = run(pytester, "01", "--timeout=1")
    result.stdout.fnmatch_lines(["*⏱️ 超时 / timed out*", "*endless loop*"])


def test_an_endless_while_loop_inside_xla_is_stopped_and_the_rest_runs(pytester):
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        def test_hang():
            """死循环。A while_loop that never ends runs inside XLA, out of a signal's reach."""
            lax.while_loop(lambda c: c >= 0, lambda c: c + 1 - 1, 0).block_until_ready()

        import pytest

        @pytest.mark.timeout(600)  # 1 s is the hang's limit: a slow machine must not hit it here
        def test_after():
            """之后。The koans after it still run."""
    '''
        },
    )
    result = run(pytester, "01", "--timeout=1", "-p", "xdist", "-n", "1")
    result.assert_outcomes(failed=1, passed=1)
    result.stderr.fnmatch_lines(["*⏱️ 超时 / timed out: *test_a.py::test_hang*"])


def test_float64_and_devices_follow_each_chapter_in_one_run(pytester):
    check = '''
        def test_settings():
            """设置。Each chapter gets its own settings."""
            assert jnp.ones(1).dtype == jnp.{dtype}
            assert jax.device_count() >= {devices}
    '''
    chapter(pytester, "01", {"test_a.py": check.format(dtype="float32", devices=1)})
    chapter(
        pytester, "02", {"test_b.py": check.format(dtype="float64", devices=8)}, x64=True, devices=8
    )
    chapter(pytester, "03", {"test_c.py": check.format(dtype="float32", devices=8)}, devices=8)
    run(pytester, "01", "02", "03").assert_outcomes(passed=3)
    run(pytester, "03", "02", "01", "-p", "xdist", "-n", "2").assert_outcomes(passed=3)
    run(pytester, "02/test_b.py::test_settings").assert_outcomes(passed=1)


def test_the_xdist_controller_leaves_jax_to_its_workers(pytester):
    """`-n 2`: the process that only hands koans out never imports JAX (a second of CPU before
    the workers start); the workers still get their chapter's settings."""
    chapter(pytester, "02", {"test_b.py": """
        def test_settings():
            \"\"\"设置。The chapter's settings reach the worker.\"\"\"
            assert jnp.ones(1).dtype == jnp.float64 and jax.device_count() >= 8
    """}, x64=True, devices=8)  # fmt: skip
    pytester.makeconftest("""
        import sys
        def pytest_sessionfinish(session):
            if not hasattr(session.config, "workerinput"):
                open("controller.txt", "w").write(str("jax" in sys.modules))
    """)
    run(pytester, "02", "-p", "xdist", "-n", "2").assert_outcomes(passed=1)
    assert (pytester.path / "controller.txt").read_text() == "False"
    run(pytester, "02").assert_outcomes(passed=1)  # without xdist the one process configures JAX
    assert (pytester.path / "controller.txt").read_text() == "True"


def test_a_contradicting_environment_is_named_and_overridden(pytester, monkeypatch):
    monkeypatch.setenv("JAX_ENABLE_X64", "1")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        def test_settings():
            """设置。The course's settings win."""
            assert jnp.ones(1).dtype == jnp.float32
            assert jax.device_count() == 8
    '''
        },
        devices=8,
    )
    result = run(pytester, "01")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*JAX_ENABLE_X64=1 ignored*", "*XLA_FLAGS device count 2 ignored*"]
    )


def test_koans_compile_fast_and_a_learners_xla_flags_come_after(pytester, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=2")
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        import os, subprocess, sys

        def test_flags():
            """编译选项。LLVM level 0 first, the learner's flag after it, in subprocesses too."""
            flags = os.environ["XLA_FLAGS"].split()
            assert flags == ["--xla_backend_optimization_level=0", "--xla_backend_optimization_level=2"]
            child = subprocess.run(
                [sys.executable, "-c", "import os; print(os.environ['XLA_FLAGS'])"],
                capture_output=True, text=True, timeout=60,
            )
            assert child.stdout.split() == flags
    '''
        },
    )
    run(pytester, "01").assert_outcomes(passed=1)


def test_koans_run_in_the_chapters_order(pytester):
    body = '''
        def test_{n}():
            """顺序。Course order."""
    '''
    chapter(pytester, "02", {"test_z.py": body.format(n="third")})
    chapter(
        pytester, "01", {"test_y.py": body.format(n="first"), "test_b.py": body.format(n="second")}
    )
    result = run(pytester, "02", "01", "-v")
    result.stdout.fnmatch_lines(
        ["*test_y.py::test_first*", "*test_b.py::test_second*", "*test_z.py::test_third*"]
    )


def test_the_record_says_each_koans_state(pytester):
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        def test_blank():
            """空。Blank."""
            assert 1 == __

        def test_wrong():
            """错。Wrong."""
            assert 1 == 2

        def test_right():
            """对。Right."""
            assert 1 == 1
    ''',
            "test_broken.py": "def test_x(:\n",
        },
    )
    record = pytester.path / "record.jsonl"
    run(pytester, "01", f"--koans-record={record}")
    events = results.read(record)
    states = {e["name"]: (e["state"], e["cause"]) for e in events if e["event"] == "koan"}
    assert states == {
        "test_blank": ("not_started", "blank"),
        "test_wrong": ("failing", "wrong"),
        "test_right": ("passed", ""),
    }
    assert [e["path"] for e in events if e["event"] == "collect-error"] == ["01/test_broken.py"]
    assert events[-1]["event"] == "finish"


def test_a_syntax_error_costs_only_its_own_file(pytester):
    chapter(
        pytester,
        "01",
        {
            "test_a.py": "def test_broken(:\n    pass\n",
            "test_b.py": '''
        def test_fine():
            """好。The other file still runs."""
    ''',
        },
    )
    result = run(pytester, "01")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*🛠️ 语法错误 / syntax error: test_a.py:4*", "*> def test_broken(:*"]
    )
    result.stdout.no_fnmatch_line("*Traceback*")


def test_unreadable_chapter_data_is_named(pytester):
    chapter(pytester, "01", {"test_a.py": "def test_x():\n    pass\n"})
    (pytester.path / "01" / "chapter.toml").write_text("title_zh = [unclosed\n", encoding="utf-8")
    result = run(pytester, "01")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*01/chapter.toml: 章节数据无法读取 / chapter data unreadable*"])


# ---- JAX's process-wide flags ---------------------------------------------------------------


def test_a_koans_jax_flags_do_not_leak_into_the_next(pytester):
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        def test_turns_checks_on():
            """开关。A learner turns JAX's debug flags on while debugging."""
            jax.config.update("jax_debug_nans", True)
            jax.config.update("jax_disable_jit", True)
            jax.config.update("jax_numpy_rank_promotion", "raise")

        def test_after():
            """之后。The next koan runs with the course's settings."""
            assert jnp.isnan(jax.jit(jnp.log)(-1.0))
            assert not jax.config.jax_disable_jit
            assert (jnp.ones(3) + jnp.ones((2, 3))).shape == (2, 3)
    '''
        },
    )
    run(pytester, "01").assert_outcomes(passed=2)
    run(pytester, "01", "-p", "xdist", "-n", "1").assert_outcomes(passed=2)


def test_an_environment_that_sets_a_jax_flag_is_named_and_overridden(pytester, monkeypatch):
    monkeypatch.setenv("JAX_DEBUG_NANS", "1")
    monkeypatch.setenv("JAX_LOG_COMPILES", "true")
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        def test_nan():
            """非数。A NaN is a value, not an error, with the course's settings."""
            assert jnp.isnan(jax.jit(jnp.log)(-1.0))
    '''
        },
    )
    result = run(pytester, "01")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*⚠️ JAX_DEBUG_NANS=1 ignored*", "*⚠️ JAX_LOG_COMPILES=true ignored*"]
    )


def test_the_course_flags_are_jaxs_defaults_but_colour(tmp_path):
    """COURSE_FLAGS are the values the answers ran with: JAX's own defaults in a clean process
    (colour excepted: jaxpr text must not depend on the terminal)."""
    from jaxkoans.plugin import runtime

    script = (
        "import json, jax\n"
        f"names = {sorted(runtime.COURSE_FLAGS)!r}\n"
        "print(json.dumps({n: getattr(jax.config.values[n], 'value', jax.config.values[n])"
        " for n in names}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))}
    shown = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True,
        timeout=PROCESS_TIMEOUT_S, check=True, cwd=tmp_path,
    )  # fmt: skip
    clean = json.loads(shown.stdout)
    assert clean.pop("jax_pprint_use_color") is runtime.COLOUR_DEFAULT
    course_flags = dict(runtime.COURSE_FLAGS)
    assert course_flags.pop("jax_pprint_use_color") is False
    assert course_flags == clean


# ---- the terminal: colour and debuggers -----------------------------------------------------


def in_terminal(args: list[str], cwd, typed: bytes = b"") -> tuple[int, str]:
    """Run `args` with a pseudo-terminal as stdin, stdout and stderr (as a learner's shell
    does); `typed` is typed ahead. Returns (exit code, everything the terminal showed)."""
    leader, follower = pty.openpty()
    child = subprocess.Popen(
        args, cwd=cwd, stdin=follower, stdout=follower, stderr=follower, start_new_session=True
    )
    os.close(follower)
    os.write(leader, typed)
    shown, deadline = bytearray(), time.monotonic() + PROCESS_TIMEOUT_S
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"{args} did not finish: {bytes(shown[-2000:])!r}")
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's last writer has gone
                break
            if not chunk:
                break
            shown += chunk
        return child.wait(timeout=PROCESS_TIMEOUT_S), shown.decode("utf-8", errors="replace")
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        os.close(leader)


# Answers that compare JAX's printed programs (jaxpr text) with what the learner wrote.
PRINTED_PROGRAMS = (
    "answers/01/test_closures.py",
    "answers/01/test_scan.py",
    "answers/08/test_reading_programs.py",
)


def test_answers_that_read_printed_programs_pass_in_a_terminal():
    """JAX colours jaxpr text when stdout is a terminal, unless the harness turns it off: the
    authoring gate runs answers piped, so this gate runs some in a terminal."""
    from jaxkoans import course

    files = [f for f in PRINTED_PROGRAMS if (course.Course.here().root / f).is_file()]
    assert files, "PRINTED_PROGRAMS names no answer file of this course"
    command = [sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider"]
    code, shown = in_terminal(command, course.Course.here().root)
    assert code == 0, shown[-3000:]


def test_jax_debug_breakpoint_talks_to_the_terminal_and_is_skipped_without_one(pytester):
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        def test_debug():
            """调试。jax.debug.breakpoint() inside jit stops there for the learner."""
            def f(x):
                y = x * 2
                jax.debug.breakpoint()
                return y + 1
            assert float(jax.jit(f)(1.0)) == 3.0
    '''
        },
    )
    piped = run(pytester, "01", "--timeout=60")
    piped.assert_outcomes(passed=1)
    piped.stderr.fnmatch_lines(["*jax.debug.breakpoint()*needs a terminal*pytest 01/test_a.py*"])
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "jaxkoans.plugin.hooks",
        "-p",
        "no:cacheprovider",
    ]
    code, shown = in_terminal([*command, "01", "--timeout=60"], pytester.path, b"p y\nc\n")
    assert code == 0, shown
    assert "(jdb)" in shown and "Array(2., dtype=float32)" in shown, shown


def test_the_watchdog_takes_pytest_timeouts_limit_and_stands_down_for_a_debugger(pytester):
    """pytest-timeout's own hooks arm the watchdog with its effective limit; once a debugger
    is entered (breakpoint(), --pdb, jax.debug.breakpoint()) no timer is armed or fires."""
    from types import SimpleNamespace

    from jaxkoans.plugin.hangs import GRACE_S, HangGuard

    watchdog = HangGuard(pytester.parseconfig())
    item = SimpleNamespace(nodeid="01/test_a.py::test_x", config=watchdog.config)
    watchdog.pytest_timeout_set_timer(item, SimpleNamespace(timeout=300.0))
    timer = watchdog._timers[item.nodeid]
    assert timer.interval == 300.0 + GRACE_S
    watchdog.pytest_timeout_cancel_timer(item)
    assert not timer.is_alive() or timer.finished.is_set()
    watchdog.pytest_enter_pdb()
    watchdog.pytest_timeout_set_timer(item, SimpleNamespace(timeout=1.0))
    assert watchdog._timers == {}
    watchdog._expire(item, 1.0, True, threading.get_ident())  # would end this process if it fired


def test_an_xla_hang_is_stopped_at_the_limit_pytest_timeout_uses(pytester, monkeypatch):
    """The limit comes from pytest-timeout (PYTEST_TIMEOUT, a marker with a keyword), not
    from a second reading of the ini file."""
    monkeypatch.setenv("PYTEST_TIMEOUT", "1")
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        import pytest

        def test_env_limit():
            """环境。PYTEST_TIMEOUT sets the limit."""
            lax.while_loop(lambda c: c >= 0, lambda c: c + 1 - 1, 0).block_until_ready()

        @pytest.mark.timeout(timeout=2)
        def test_marker_limit():
            """标记。A marker with a keyword sets the limit."""
            lax.while_loop(lambda c: c >= 0, lambda c: c + 1 - 1, 0).block_until_ready()
    '''
        },
    )
    result = pytester.runpytest_subprocess(
        "-p", "jaxkoans.plugin.hooks", "-p", "no:cacheprovider", "-p", "xdist", "-n", "1", "01",
        timeout=PROCESS_TIMEOUT_S,
    )  # fmt: skip
    result.assert_outcomes(failed=2)
    result.stderr.fnmatch_lines(
        [
            "*timed out: 01/test_a.py::test_env_limit*超过 1 s*",
            "*timed out: 01/test_a.py::test_marker_limit*超过 2 s*",
        ]
    )


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("x46 = true", "unknown key 'x46'"),
        ('devices = "8"', "'devices' 类型不对 / has the wrong type"),
        ('[hints."test_a.py::test_x"]\nzh = ["一"]\nfr = ["un"]', "unknown key hints.*'fr'"),
    ],
)
def test_a_chapter_toml_with_an_unknown_key_is_a_usage_error(pytester, line, named):
    chapter(pytester, "01", {"test_a.py": "def test_x():\n    pass\n"})
    with open(pytester.path / "01" / "chapter.toml", "a", encoding="utf-8") as manifest:
        manifest.write(line + "\n")
    result = run(pytester, "01")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*01/chapter.toml: *{named}*"])


def test_a_cpp_build_that_fails_or_hangs_is_the_environment_not_an_answer(pytester):
    (pytester.path / "broken.cc").write_text("int f( {\n", encoding="utf-8")
    chapter(
        pytester,
        "05",
        {
            "test_a.py": '''
        import pathlib, time
        from jaxkoans.api import cbuild

        import pytest

        @pytest.mark.timeout(600)  # a real compiler's run; 2 s is the hung build's limit only
        def test_build_fails():
            """编译。The kernel's library."""
            source = pathlib.Path(__file__).parent.parent / "broken.cc"
            cbuild.build(source, build_dir=source.parent / "build")

        def test_build_hangs(monkeypatch):
            """编译。A compiler that never finishes."""
            monkeypatch.setattr(cbuild.subprocess, "run", lambda *a, **k: time.sleep(60))
            source = pathlib.Path(__file__).parent.parent / "broken.cc"
            cbuild.build(source, build_dir=source.parent / "hung")
    '''
        },
    )
    record = pytester.path / "record.jsonl"
    result = run(pytester, "05", "--timeout=2", f"--koans-record={record}")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*🛠️ 环境 / environment*", "*python progress.py doctor*"])
    result.stdout.fnmatch_lines(["*│ *broken.cc*"])  # what the compiler said
    result.stdout.no_fnmatch_line("*❌*")
    result.stdout.no_fnmatch_line("*⏱️*")
    states = {e["name"]: (e["state"], e["cause"]) for e in results.read(record) if "state" in e}
    assert states == {
        "test_build_fails": ("environment", "environment"),
        "test_build_hangs": ("environment", "environment"),
    }


def test_cbuilds_own_timeout_is_a_build_error(tmp_path, monkeypatch):
    from jaxkoans.api import cbuild

    def hung(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])

    source = tmp_path / "k.cc"
    source.write_text("int f() { return 0; }\n", encoding="utf-8")
    monkeypatch.setattr(cbuild.subprocess, "run", hung)
    with pytest.raises(cbuild.BuildError, match="timed out"):
        cbuild.build(source, build_dir=tmp_path / "build")


def test_a_parametrized_koans_hint_names_the_koan_without_its_case(pytester):
    chapter(
        pytester,
        "01",
        {
            "test_a.py": '''
        import pytest

        @pytest.mark.parametrize("n", [1, 2])
        def test_cases(n):
            """情形。Each case."""
            assert n == __
    '''
        },
    )
    result = run(pytester, "01")
    result.assert_outcomes(failed=2)
    hints = [line.strip() for line in result.stdout.lines if "progress.py hint" in line]
    assert hints == ["💡 python progress.py hint test_cases"] * 2


# ---- The one model of a koan file (jaxkoans.course.koan_model) ------------------------------

NESTED_KOAN = '''\
from jaxkoans import __, todo


def outer(x):
    """外层。The outer function, not a TODO: its nested function is."""
    scale = 2

    def inner(y):
        """内层。The TODO."""
        todo("write inner")

    return inner(x) * scale


def helper(x):
    return outer(x)


@pytest.mark.slow
def test_uses_the_helper():
    """经由 helper。Through the helper."""
    assert helper(1) == 2


def test_a_blank():
    """一个空。One blank, and `__` in a string is none: "__"."""
    assert 1 + 1 == __
    # ✍️ BEGIN
    value = 3
    # ✍️ END
'''


def test_the_koan_model_reads_koans_blanks_todos_and_regions():
    from jaxkoans.course import koan_model

    model = koan_model.parse(NESTED_KOAN)
    assert [(k.name, k.line, k.span) for k in model.koans] == [
        ("test_uses_the_helper", 20, (19, 22)),
        ("test_a_blank", 25, (25, 29)),  # the END comment is no statement
    ]
    assert model.koan("test_uses_the_helper").docstring == "经由 helper。Through the helper."
    assert model.blanks == ((27, 20),)
    assert model.regions == ((28, 30),)
    assert model.owner(27) == "test_a_blank" and model.owner(5) == koan_model.MODULE
    assert model.reached("test_uses_the_helper") == ["test_uses_the_helper", "helper", "outer"]
    # the helper's TODO is where the first koan waits; the blank, where the second does
    assert model.first_blank_line("test_uses_the_helper") == 10
    assert model.first_blank_line("test_a_blank") == 27


def test_a_koan_reaches_the_functions_a_module_level_table_holds():
    """A fake of `matmul` must run the koan that finds it in a table (07's TPU koan did not)."""
    from jaxkoans.course import koan_model

    model = koan_model.parse(
        "import functools\n\ndef matmul(x):\n    return x\n\ndef unused():\n    pass\n\n"
        "CASES: dict = {'mm': (functools.partial(matmul),)}\nALIAS = CASES\n\n"
        "def test_cases():\n    for fn, in ALIAS.values():\n        fn(1)\n"
    )
    assert model.reached("test_cases") == ["test_cases", "matmul"]
    assert model.koans_seeing(4) == ("test_cases",)


def test_a_todo_in_a_nested_function_makes_only_the_nested_one_a_todo():
    """One meaning everywhere: the function whose own statements call todo() is the TODO; the
    function around it is not, so its other lines must stay as shipped (twins) and an edit there
    is not a fill (fills, which grade runs)."""
    from jaxkoans.course import fills, koan_model, twins

    model = koan_model.parse(NESTED_KOAN)
    assert [(t.name, t.todo_line, t.body) for t in model.todos] == [("inner", 10, (9, 10))]
    answer = NESTED_KOAN.replace('todo("write inner")', "return y").replace("== __", "== 2")
    report = twins.compare_text(NESTED_KOAN, answer, Path("k.py"))
    assert report.ok and report.todo_bodies == {"inner": "        return y"}
    edited = answer.replace("scale = 2", "scale = 1")
    assert not twins.compare_text(NESTED_KOAN, edited, Path("k.py")).ok
    taken = fills.take(NESTED_KOAN, edited)
    assert "scale = 2" in taken.graded and "return y" in taken.graded
    assert [(e.owner, e.student_line) for e in taken.ignored] == [(koan_model.MODULE, 6)]


def test_the_koan_model_of_a_broken_file_still_counts_its_koans(tmp_path):
    from jaxkoans.course import koan_model

    path = tmp_path / "test_broken.py"
    path.write_text("def test_one(:\n    pass\n\ndef test_two():\n    pass\n", encoding="utf-8")
    model = koan_model.read(path)
    assert model.tree is None and isinstance(model.error, SyntaxError)
    assert [(k.name, k.line) for k in model.koans] == [("test_one", 1), ("test_two", 4)]
    path.write_text("def test_three():\n    pass\n", encoding="utf-8")  # read again once changed
    assert [k.name for k in koan_model.read(path).koans] == ["test_three"]
    deep = koan_model.parse("def test_deep():\n    x = " + "+".join(["1"] * 50_000) + "\n")
    assert deep.tree is None and [k.name for k in deep.koans] == ["test_deep"]


def test_a_koan_still_compiling_is_waited_for_and_never_ends_the_run(monkeypatch):
    """The hang guard ends a run stuck in a compiled program, but XLA compiling a big program
    on a slow machine is no hang: the guard looks again later (pytest-timeout then fails that
    koan as timed out, and the run goes on)."""
    import types

    from jaxkoans.plugin import hangs

    release = threading.Event()
    fake = "def backend_compile_and_load():\n    release.wait(30)\n"
    namespace = {"release": release}
    exec(compile(fake, "/x/site-packages/jax/_src/compiler.py", "exec"), namespace)
    thread = threading.Thread(target=namespace["backend_compile_and_load"])
    thread.start()
    ended = []
    monkeypatch.setattr(
        hangs,
        "_abort",
        lambda config, nodeid, limit, compiling=False: ended.append((nodeid, compiling)),
    )
    guard = hangs.HangGuard(config=None)
    item = types.SimpleNamespace(nodeid="k.py::test_slow", config=None)
    try:
        # a guard, not a measure: a slow machine waits longer
        deadline = time.monotonic() + PROCESS_TIMEOUT_S
        while not hangs.compiling(thread.ident) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert hangs.compiling(thread.ident)
        assert not hangs.compiling(threading.get_ident())  # this thread runs no compiler
        guard._timers[item.nodeid] = threading.Timer(1, lambda: None)
        guard._expire(item, 60.0, False, thread.ident, 65.0)
        assert ended == [] and guard._timers[item.nodeid].is_alive()  # looked again later
        guard._timers.pop(item.nodeid).cancel()
        guard._timers[item.nodeid] = threading.Timer(1, lambda: None)
        guard._expire(item, 60.0, False, thread.ident, 60.0 * hangs.COMPILE_PATIENCE)
        assert ended == [("k.py::test_slow", True)]  # a compile that never ends is stuck too
        ended.clear()
        release.set()
        thread.join()
        guard._timers.pop(item.nodeid).cancel()
        guard._timers[item.nodeid] = threading.Timer(1, lambda: None)
        guard._expire(item, 60.0, False, threading.get_ident(), 65.0)  # stuck running: ended
        assert ended == [("k.py::test_slow", False)]
    finally:
        release.set()
        for timer in guard._timers.values():
            timer.cancel()


# ---- the layers of the harness -------------------------------------------------------------------

# Each layer may import itself and the layers before it, never one after it. The authoring tools
# (the gates) sit on top: they run the learner's runner and read the plugin's records, and no
# layer below imports them.
LAYERS = ("course", "api", "plugin", "learner", "grader", "authoring")


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "course"  # `jaxkoans`: data


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, module) of every jaxkoans import in a file, at any depth (lazy ones too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("jaxkoans")]
        elif (
            isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jaxkoans")
        ):
            for alias in node.names:  # `from jaxkoans.authoring import mutate` names a module
                child = f"{node.module}.{alias.name}"
                named = (
                    child
                    if (REPO / Path(*child.split("."))).with_suffix(".py").exists()
                    else node.module
                )
                found.append((node.lineno, named))
    return found


def test_the_harness_imports_downward_only():
    """course (the course as data) < api (what a koan imports) < plugin < learner < grader <
    authoring: a module imports from its own layer or those before it."""
    wrong = []
    for path in sorted((REPO / "jaxkoans").rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        own = LAYERS.index(_layer(module))
        for line, target in _imports(path, module):
            if module == "jaxkoans" and target.startswith("jaxkoans.api"):
                continue  # the package re-exports the koans' API lazily
            if LAYERS.index(_layer(target)) > own:
                wrong.append(f"{path.relative_to(REPO)}:{line}: {_layer(module)} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_no_import_circle_inside_a_package():
    """Imports go one way inside a package too (a package's __init__ counts as a module): in a
    circle (hooks ↔ report, a package and a module it imports) what a module holds depends on
    which of them was imported first."""
    graph = {}
    for path in sorted((REPO / "jaxkoans").rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        graph[module] = {target for _, target in _imports(path, module) if target != module}

    def reached(start: str) -> set[str]:
        found, frontier = set(), list(graph[start])
        while frontier:
            current = frontier.pop()
            if current not in found and current in graph:
                found.add(current)
                frontier += graph[current]
        return found

    in_circles = {module for module in graph if module in reached(module)}
    assert not in_circles, sorted(in_circles)
