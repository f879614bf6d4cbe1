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
from jaxkoans.course import koan_model, predictions, reading
from jaxkoans.plugin import boundary, contracts, costs, result_types, runtime
from jaxkoans.plugin.classify import attribute, relative, shipped_text, taken
from jaxkoans.plugin.hangs import HangGuard, register_debugger
from jaxkoans.plugin.report import COURSE, TODOS, koan_name, predict_then_see, render_failure
from jaxkoans.plugin.results import KoanState, Recorder

pytest_plugins = ["jaxkoans.plugin.chip"]  # --tpu: the kernels compiled on a TPU too (opt-in)

OVERRIDES = pytest.StashKey[list[str]]()
BOUNDARY = pytest.StashKey[boundary.Watch]()  # where koans run: plugin/boundary.py


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
    """Configure JAX once per process (the chapters' most devices), before any koan computes."""
    config.stash[COURSE] = checkout = course.Course.here()
    chapters = []
    try:
        for arg in config.args:  # fake courses in tests too
            path = Path(arg.split("::")[0])
            if path.is_file():
                chapters += [c for c in [checkout.chapter_for(path)] if c]
            elif path.is_dir():
                chapters += [course.load_chapter(m) for m in path.rglob(course.MANIFEST)]
        chapters += checkout.chapters()
    except course.CourseDataError as error:
        raise pytest.UsageError(str(error)) from None
    devices = max([c.devices for c in chapters], default=1)
    config.option.force_short_summary = True  # a koan's report is short: CI would repeat it all
    config.stash[OVERRIDES] = runtime.environment_overrides(devices)
    # The xdist controller (`-n 2`) never imports JAX (a second of CPU): its workers run koans.
    workers = config.getoption("dist", "no") != "no" and config.getoption("tx", None)
    worker = hasattr(config, "workerinput")
    controller = bool(workers) and not (config.getoption("collectonly") or worker)
    watchdog = HangGuard(config)  # armed by pytest-timeout's own timer hooks
    config.pluginmanager.register(watchdog, "koans-watchdog")
    if not controller:
        try:
            runtime.configure(devices)
        except runtime.SetupError as error:
            raise pytest.UsageError(str(error)) from None
        config.stash[BOUNDARY] = boundary.Watch(
            boundary.learner_lines_of(checkout), boundary.course_files(checkout)
        )
        register_debugger(watchdog)
    if config.getoption("koans_reveal", False):
        os.environ[REVEAL_ENV] = "1"  # read by raises_exactly and the report (xdist workers too)
    record = config.getoption("koans_record", None)
    if record and not worker:  # the xdist controller records
        config.pluginmanager.register(Recorder(Path(record), Path(config.rootpath)), "koans-record")


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = [f"jax-koans: jax {metadata.version('jax')}, CPU, float64 per chapter"]
    return lines + [f"jax-koans: ⚠️ {note}" for note in config.stash.get(OVERRIDES, [])]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run koans in course order: chapter, the chapter's file order, then line."""

    def key(item: pytest.Item) -> tuple:
        path, line = Path(item.path), item.reportinfo()[1] or 0
        chapter = item.config.stash[COURSE].chapter_for(path)
        if chapter is None:
            return (1, str(path), line)
        return (0, chapter.number, chapter.file_rank(path.name), line)

    items.sort(key=key)


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


def _read_before_call(item: pytest.Item, chapter: course.Chapter):
    """What the harness reads from files for a koan before its call (no JAX computes): the fills
    of the koan (or its module's lines) that compute where a prediction is asked, those it
    reaches that read the test (less what its contracts allow), its twin (a gate's variant
    test_x__s003.py is judged as the koan file it stands for), the twin as shipped, and the
    TODOs and contracted functions to record."""
    checkout, path, koan = item.config.stash[COURSE], Path(item.path), koan_name(item)
    twin = checkout.koans / chapter.number / course.twin_name(path)
    kinds = checkout.predictions(relative(checkout, path) or "")
    own = taken(checkout, path) if kinds else None
    refused = predictions.refusals(own, kinds) if own is not None else []
    computed = [(f, k) for f, k in refused if f.owner in (koan, koan_model.MODULE)]
    learner, allowed = taken(checkout, path, twin), reading.allowed_by(chapter.contracts, twin.name)
    reached = {koan, koan_model.MODULE, *koan_model.read(path).reached(koan)} if learner else ()
    reads = [r for r in reading.refusals(learner, allowed) if r.owner in reached] if learner else []
    shipped = shipped_text(checkout, twin)  # the TODO functions, as shipped with todo()
    item.stash[TODOS] = todos = [t.name for t in koan_model.parse(shipped).todos] if shipped else []
    watched = contracts.to_read(chapter, twin.name, todos) if getattr(item, "module", None) else {}
    return computed, reads, twin, shipped, watched


def prewarm(item: pytest.Item) -> None:
    """What the harness reads for `item`, read in grade's xdist worker before it forks the koan's
    process (grader/run_guard.py), which inherits the caches: half a second of CPU a koan."""
    checkout, watch = item.config.stash.get(COURSE, None), item.config.stash.get(BOUNDARY, None)
    chapter = checkout.chapter_for(Path(item.path)) if checkout is not None else None
    if chapter is None or watch is None:
        return
    watch.catch_up()  # the modules the koan files imported: fingerprinted once, here
    _read_before_call(item, chapter)
    if getattr(item, "module", None) is not None:
        watch.learner_codes(item.module)  # which code objects hold the learner's lines


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A `pytest.raises(X)` filling an exception blank asks for the exact class, as raises_exactly;
    a prediction blank filled with a computation, or a fill that reads the test, is refused
    before the koan runs; a TODO's program is held to its contract once the asserts pass."""
    checkout = item.config.stash[COURSE]
    chapter = checkout.chapter_for(Path(item.path))
    if chapter is None:
        return (yield)
    computed, reads, twin, shipped, watched = _read_before_call(item, chapter)
    if computed:
        raise predictions.NotAPrediction(computed)
    if reads:
        raise reading.ReadsTheTest(reads)
    item.config.stash[BOUNDARY].watch_module(item)
    fingerprint, module = item.config.stash[BOUNDARY].fingerprint, getattr(item, "module", None)
    with (
        exact_raises_on_fills(checkout, item.path, fingerprint.names.expect),
        contracts.recording(module, watched, fingerprint.names.expect) as records,
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
    report.user_properties.append(("koan_state", found.state.value))
    report.user_properties.append(("koan_cause", found.cause.value))
    if found.lineno:
        report.user_properties.append(("koan_line", found.lineno))
    start = Path(item.config.invocation_params.dir)
    if not predict_then_see(chapter, item, found, call.excinfo, report, start):
        report.longrepr = render_failure(chapter, item, found, call.excinfo, start)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """A koan file that does not parse: say where, in one short report, not an import traceback."""
    report = yield
    path = Path(collector.path)
    if not (report.failed and isinstance(collector, pytest.Module)):
        return report
    if collector.config.stash[COURSE].chapter_for(path) is None:
        return report
    try:
        compile(path.read_text(encoding="utf-8"), str(path), "exec")
    except SyntaxError as error:
        line, caret = (error.text or "").rstrip("\n"), " " * max((error.offset or 1) - 1, 0) + "^"
        report.longrepr = (
            f"🛠️ 语法错误 / syntax error: {path.name}:{error.lineno}: {error.msg}\n"
            f"   > {line}\n     {caret}\n"
            "   这个文件的 koan 都无法运行，其他文件不受影响。\n"
            "   The koans of this file cannot run until it parses; other files are not affected."
        )
    except (OSError, UnicodeDecodeError):
        pass
    return report


@contextlib.contextmanager
def exact_raises_on_fills(checkout: course.Course, koan_file, expect):
    """While a koan runs: a `pytest.raises(X)` on a line that held `__` as shipped is
    `raises_exactly(X)`, so a copy whose exception blanks still use pytest.raises asks for the
    exact class too. `expect(namespace, key, value)` tells the boundary of this patch."""
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
    expected = expect(vars(pytest), "raises", raises)
    try:
        yield
    finally:
        pytest.raises = original
        expect(vars(pytest), "raises", expected)
