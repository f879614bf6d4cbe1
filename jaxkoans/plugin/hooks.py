"""The pytest plugin of the course: JAX set up per chapter, course order, readable koan failures."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from importlib import metadata
from pathlib import Path

import pytest

from jaxkoans import course
from jaxkoans.api.expect import REVEAL_ENV, raises_exactly
from jaxkoans.course import koan_model
from jaxkoans.course.predictions import NotAPrediction
from jaxkoans.course.reading import ReadsTheTest
from jaxkoans.plugin import boundary, contracts, costs, result_types, runtime
from jaxkoans.plugin.classify import (
    Attribution,
    Cause,
    attribute,
    computed_fills,
    reading_refusals,
    shipped_text,
    taken,
)
from jaxkoans.plugin.hangs import HangGuard, register_debugger
from jaxkoans.plugin.report import COURSE, koan_name, predict_then_see, render_failure
from jaxkoans.plugin.results import KoanState, Recorder

pytest_plugins = ["jaxkoans.plugin.chip"]  # --tpu: the kernels compiled on a TPU too (opt-in)

ATTRIBUTION = pytest.StashKey[Attribution]()
OVERRIDES = pytest.StashKey[list[str]]()
BOUNDARY = pytest.StashKey[boundary.Watch]()  # where koans run: plugin/boundary.py


def _chapters_named_by(checkout: course.Course, args: list[str]) -> list[course.Chapter]:
    """Chapters under the paths on the command line (fake courses in tests included)."""
    found = []
    for arg in args:
        path = Path(arg.split("::")[0])
        if path.is_file():
            chapter = checkout.chapter_for(path)
            found += [chapter] if chapter else []
        elif path.is_dir():
            found += [course.load_chapter(m) for m in path.rglob(course.MANIFEST)]
    return found


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("jax-koans")
    group.addoption(
        "--koans-record", metavar="PATH", help="write one JSON line per koan result to PATH"
    )
    group.addoption(
        "--koans-reveal", action="store_true",
        help="show what JAX computed when a prediction is wrong (counts as revealed)",
    )  # fmt: skip


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Configure JAX once per process, before any koan computes anything."""
    config.stash[COURSE] = checkout = course.Course.here()
    try:
        chapters = checkout.chapters() + _chapters_named_by(checkout, config.args)
    except course.CourseDataError as error:
        raise pytest.UsageError(str(error)) from None
    devices = max([c.devices for c in chapters], default=1)
    config.option.force_short_summary = True  # a koan's report is short: CI would repeat it all
    config.stash[OVERRIDES] = runtime.environment_overrides(devices)
    if not _hands_koans_to_workers(config):  # only a process that runs koans needs JAX
        try:
            runtime.configure(devices)
        except runtime.SetupError as error:
            raise pytest.UsageError(str(error)) from None
        config.stash[BOUNDARY] = boundary.Watch(boundary.learner_lines_of(checkout))
    watchdog = HangGuard(config)  # armed by pytest-timeout's own timer hooks
    config.pluginmanager.register(watchdog, "koans-watchdog")
    if not _hands_koans_to_workers(config):
        register_debugger(watchdog)
    if config.getoption("koans_reveal", False):
        os.environ[REVEAL_ENV] = "1"  # read by raises_exactly and the report (xdist workers too)
    record = config.getoption("koans_record", None)
    if record and not hasattr(config, "workerinput"):  # the xdist controller records
        config.pluginmanager.register(Recorder(Path(record), Path(config.rootpath)), "koans-record")


def _hands_koans_to_workers(config: pytest.Config) -> bool:
    """The xdist controller (`-n 2`): its workers run the koans, so it never imports JAX, whose
    import (a second of CPU) would only delay the workers' start."""
    workers = config.getoption("dist", "no") != "no" and config.getoption("tx", None)
    return (
        bool(workers) and not config.getoption("collectonly") and not hasattr(config, "workerinput")
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Say what JAX the koans run on, and which environment settings were overridden."""
    lines = [f"jax-koans: jax {metadata.version('jax')}, CPU, float64 per chapter"]
    return lines + [f"jax-koans: ⚠️ {note}" for note in config.stash.get(OVERRIDES, [])]


def _course_key(item: pytest.Item) -> tuple:
    path = Path(item.path)
    chapter = item.config.stash[COURSE].chapter_for(path)
    if chapter is None:
        return (1, str(path), item.reportinfo()[1] or 0)
    return (0, chapter.number, chapter.file_rank(path.name), item.reportinfo()[1] or 0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run koans in course order: chapter, the chapter's file order, then line."""
    items.sort(key=_course_key)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Take JAX, pytest and the koan modules out of the garbage collector's view: scanning JAX's
    heap at pytest's exit cost a one-koan run a quarter of its time."""
    gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """Give each koan its chapter's float64 setting and check its device count; afterwards
    put back every JAX flag the koan changed (jax_debug_nans, jax_disable_jit, …)."""
    chapter = item.config.stash[COURSE].chapter_for(Path(item.path))
    if chapter is None:
        return (yield)
    runtime.set_x64(chapter.x64)
    try:
        runtime.require_devices(chapter.devices)
    except runtime.SetupError as error:
        pytest.exit(str(error), returncode=pytest.ExitCode.USAGE_ERROR)
    flags = runtime.snapshot()
    # What earlier koans left alive leaves the collector's view too: a koan that collects
    # garbage itself (jax.checking_leaks) then scans only its own objects (08's: 28.9 s → 0.66 s).
    gc.collect()
    gc.freeze()
    item.config.stash[BOUNDARY].start(item)
    try:
        return (yield)
    finally:
        runtime.restore(flags)
        runtime.set_x64(False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A `pytest.raises(X)` filling an exception blank asks for the exact class, as raises_exactly;
    a prediction blank filled with a computation, or a fill that reads the test, is refused
    before the koan runs; a TODO's program is held to its contract once the asserts pass."""
    checkout = item.config.stash[COURSE]
    chapter = checkout.chapter_for(Path(item.path))
    if chapter is None:
        return (yield)
    koan = koan_name(item)
    refused = computed_fills(checkout, Path(item.path), koan)
    if refused:
        raise NotAPrediction(refused)
    # a gate's variant (test_x__s003.py) is judged as the koan file it stands for
    twin = checkout.koans / chapter.number / course.twin_name(Path(item.path))
    reads = reading_refusals(checkout, Path(item.path), koan, chapter.contracts, twin)
    if reads:
        raise ReadsTheTest(reads)
    module = getattr(item, "module", None)
    shipped = shipped_text(checkout, twin)  # the TODO functions, as shipped with todo()
    todos = [t.name for t in koan_model.parse(shipped).todos] if shipped else []
    watched = contracts.to_read(chapter, twin.name, todos) if module else {}
    item.config.stash[BOUNDARY].watch_module(item)
    expect = item.config.stash[BOUNDARY].fingerprint.expect_member
    with (
        exact_raises_on_fills(checkout, item.path),
        contracts.recording(module, watched, expect) as records,
        result_types.checking(item, chapter, twin.name, shipped),
    ):
        outcome = yield
    profiles = costs.profiles_for(checkout.koans / chapter.number, twin.name)
    met = contracts.check(records, item.nodeid, profiles)  # only once the asserts passed
    if met:
        item.user_properties.append(("koan_contracts", met))
    return outcome


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Turn a koan's failure into a short report that names its blank, TODO or wrong answer."""
    report: pytest.TestReport = yield
    chapter = item.config.stash[COURSE].chapter_for(Path(item.path))
    if chapter is None or not isinstance(item, pytest.Function):
        return report
    if boundary.judge(item.config.stash[BOUNDARY], item, call.when, report):
        return report
    if report.passed and report.when == "call":
        report.user_properties.append(("koan_state", KoanState.PASSED.value))
    if not report.failed or call.excinfo is None:
        return report
    found = attribute(call.excinfo, Path(item.path), chapter.regions.get(Path(item.path).name, ()))
    item.stash[ATTRIBUTION] = found
    report.user_properties.append(("koan_state", found.state.value))
    report.user_properties.append(("koan_cause", found.cause.value))
    if found.lineno:
        report.user_properties.append(("koan_line", found.lineno))
    start = Path(item.config.invocation_params.dir)
    if predict_then_see(chapter, item, found, call.excinfo, report, start):
        return report  # a wrong prediction: the answer and lesson, not JAX's value
    details = _learner_traceback(item, call.excinfo) if found.cause is Cause.WRONG else ""
    report.longrepr = render_failure(chapter, item, found, details, start)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """A koan file that does not parse: say where, in one short report, not an import traceback."""
    report = yield
    if report.failed and isinstance(collector, pytest.Module):
        chapter = collector.config.stash[COURSE].chapter_for(Path(collector.path))
        problem = syntax_problem(Path(collector.path)) if chapter else None
        if problem:
            report.longrepr = problem
    return report


def syntax_problem(path: Path) -> str | None:
    try:
        compile(path.read_text(encoding="utf-8"), str(path), "exec")
    except SyntaxError as error:
        line = (error.text or "").rstrip("\n")
        caret = " " * max((error.offset or 1) - 1, 0) + "^"
        return (
            f"🛠️ 语法错误 / syntax error: {path.name}:{error.lineno}: {error.msg}\n"
            f"   > {line}\n     {caret}\n"
            "   这个文件的 koan 都无法运行，其他文件不受影响。\n"
            "   The koans of this file cannot run until it parses; other files are not affected."
        )
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _learner_traceback(item: pytest.Item, excinfo) -> str:
    """pytest's report of the failure with only the learner's frames (the koan's file):
    JAX's and the harness's frames are hidden."""
    koan_file = Path(item.path)

    def own_frames(info):
        own = info.traceback.filter(lambda entry: _same_file(entry.path, koan_file))
        return own if len(own) else info.traceback

    style = item.config.getoption("tbstyle", "auto")
    return str(
        excinfo.getrepr(
            funcargs=True,
            showlocals=item.config.getoption("showlocals", False),
            style="long" if style == "auto" else style,
            tbfilter=own_frames,
            truncate_locals=True,
        )
    )


def _same_file(path, koan_file: Path) -> bool:
    try:
        return os.path.samefile(path, koan_file)
    except (OSError, TypeError):
        return False


@contextlib.contextmanager
def exact_raises_on_fills(checkout: course.Course, koan_file):
    """While a koan runs: a `pytest.raises(X)` on a line that held `__` as shipped is
    `raises_exactly(X)`, so a copy whose exception blanks still use pytest.raises asks for the
    exact class too. Every other pytest.raises is left as it is."""
    original = pytest.raises
    learner = taken(checkout, Path(koan_file))
    filled = learner.filled_lines() if learner is not None else {}
    koan_file = os.path.realpath(koan_file)

    def raises(expected_exception, *args, **kwargs):
        __tracebackhide__ = True
        caller = sys._getframe(1)
        on_fill = (
            not args
            and set(kwargs) <= {"match"}
            and os.path.realpath(caller.f_code.co_filename) == koan_file
            and caller.f_lineno in filled
        )
        if on_fill:
            return raises_exactly(expected_exception, **kwargs)
        return original(expected_exception, *args, **kwargs)

    pytest.raises = raises
    try:
        yield
    finally:
        pytest.raises = original
