"""The harness as a learner meets it, on small fake chapters run with pytester."""

from __future__ import annotations

import textwrap

import pytest

from jaxkoans import results

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
        "-p", "jaxkoans.plugin", "-p", "no:cacheprovider", "--continue-on-collection-errors", *args
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
    from jaxkoans import twins

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
