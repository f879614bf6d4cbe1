"""The grader's watch inside the grading run (docs/sandbox.md), loaded with `-p` as
`_jaxkoans_grade_guard` (standard library and pytest only: any version of the course can be
graded). Its events are JSON lines: the controller's on the pipe `$JAXKOANS_GRADE_GUARD_FD`,
the workers' at once on the grader's write-only FIFO `$JAXKOANS_GRADE_GUARD` (a process that
dies still leaves its evidence); `graded_run` and `grading` read them.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import ClassVar

import pytest

MESSAGE_LIMIT = 4000
_state: dict = {}


def _emit(event: str, **fields) -> None:
    line = json.dumps({"event": event, **fields, "pid": os.getpid()}, ensure_ascii=False)
    fd = _state["fd"] if "fd" in _state else _worker_fd()
    if fd is not None:
        with contextlib.suppress(OSError):
            _write(fd, (line + "\n").encode("utf-8"))


def _write(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _worker_fd() -> int | None:
    """A worker's end of the grader's FIFO, opened once (writable on the read-only mount)."""
    if "worker_fd" not in _state:
        _state["worker_fd"], path = None, os.environ.get("JAXKOANS_GRADE_GUARD")
        with _quiet(), contextlib.suppress(OSError, TypeError):
            _state["worker_fd"] = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    return _state["worker_fd"]


@contextlib.contextmanager
def _quiet():
    """The guard's own actions: the audit hook does not judge them."""
    _Audit.quiet = True
    try:
        yield
    finally:
        _Audit.quiet = False


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Stop before any koan runs when `jaxkoans` is not the pristine course's copy."""
    import jaxkoans

    root = Path(os.environ.get("JAXKOANS_ROOT", "")).resolve()
    where = Path(jaxkoans.__file__).resolve()
    ok = root in where.parents
    worker = getattr(config, "workerinput", {}).get("workerid", "controller")
    _state["controller"] = worker == "controller"
    _state["config"] = config
    fd = os.environ.pop("JAXKOANS_GRADE_GUARD_FD", "")
    # Non-dumpable: no process of the same user may ptrace it or open its /proc/<pid>/fd (the
    # controller's pipes; a worker's memory, which its koans' processes may not reach).
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    if _state["controller"] and fd.isdigit():
        _state["fd"] = int(fd)
        with contextlib.suppress(OSError):
            os.set_inheritable(int(fd), False)
    elif not _state["controller"]:
        _Audit.install(root)
        _DeferRegions.install()
        _ForkEachKoan.install(config)
    _emit("harness", worker=worker, jaxkoans=str(where), ok=ok)
    if not ok:
        raise pytest.UsageError(
            f"grade: jaxkoans was imported from {where}, not from the pristine course at {root}"
        )


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """Name the file being imported (a file whose import crashes the interpreter is named)."""
    if not isinstance(collector, pytest.Module):
        return (yield)
    _emit("collecting", file=collector.nodeid)
    try:
        return (yield)
    finally:
        _emit("collected", file=collector.nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _DeferRegions.run_whole_file(item)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """After its teardown: what the koan's process tried against the run (`_Audit`)."""
    report = yield
    if call.when == "teardown":
        seen, _Audit.seen = _Audit.seen[:20], []
        if seen:
            report.user_properties.append(("grade_violation", seen))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """The controller: where each report came from, what the worker found, failures' text."""
    if not _state.get("controller"):
        return
    node = getattr(report, "node", None)
    worker = getattr(node, "gateway", None)
    worker = getattr(worker, "id", None) or "controller"
    _emit("reported", nodeid=report.nodeid, when=report.when, worker=worker)
    if node is not None and not _scheduled(report.nodeid, node):
        _emit("forged", nodeid=report.nodeid, worker=worker)
    for key, value in report.user_properties:
        if key == "grade_patched":
            _emit("patched", nodeid=report.nodeid, names=list(value)[:20])
        elif key == "grade_violation":
            _emit("violation", nodeid=report.nodeid, what=list(value)[:20])
    if report.failed or report.skipped:
        text = (report.longreprtext or "")[:MESSAGE_LIMIT]
        _emit("message", nodeid=report.nodeid, when=report.when, outcome=report.outcome, text=text)


def _scheduled(nodeid: str, node) -> bool:
    """Was `nodeid` given to `node` and not yet completed? (True where the scheduler cannot be
    read, e.g. a crash report the controller made.)"""
    session = _state.get("config") and _state["config"].pluginmanager.getplugin("dsession")
    scheduler = getattr(session, "sched", None)
    pending = getattr(scheduler, "node2pending", None)
    collection = getattr(scheduler, "collection", None)
    if not isinstance(pending, dict) or collection is None or node not in pending:
        return True
    return any(collection[i] == nodeid for i in pending[node])


class _KoanProcess:
    """A process forked from the worker that runs the koans it is sent, one at a time: on its
    command pipe an item's index and its next item's (-1: none, every fixture torn down); on
    its output pipe what it would send the controller, as JSON lines, then DONE. `koan`,
    `reached`: the last koan it ran and the student's code that koan reaches (None: unknown)."""

    DONE = b'["koan_done", {}]\n'
    live: ClassVar[dict[str, _KoanProcess]] = {}  # role -> the worker's process for it

    def __init__(self, worker, role: str, koan: str, reached: frozenset[str] | None) -> None:
        self.role, self.koan, self.reached, self.status = role, koan, reached, None
        with contextlib.suppress(Exception):  # made once here, not emptied by every process
            worker.config._tmp_path_factory.getbasetemp()
        commands_read, self.commands = os.pipe()
        self.output, output_write = os.pipe()
        gc.freeze()  # the worker's objects stay out of the child's collections: fewer copies
        self.pid = os.fork()
        if self.pid == 0:  # the koan process: it never returns
            try:
                os.close(self.commands)
                os.close(self.output)
                _ForkEachKoan.isolate(worker, output_write)
                with os.fdopen(commands_read, "rb") as source:
                    for line in source:  # until the worker closes the pipe
                        index, following = (int(number) for number in line.split())
                        worker.item_index = index
                        item = worker.session.items[index]
                        nextitem = _ForkEachKoan.item_at(worker, following)
                        worker.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                        _write(output_write, self.DONE)
            finally:
                os._exit(0)
        os.close(commands_read)
        os.close(output_write)
        _KoanProcess.live[role] = self

    def run(self, index: int, following: int) -> tuple[bytes, bool]:
        """What it sent for the koan of `index` (keeping the fixtures the item of `following`
        shares), and whether it ended (or said too much) before its DONE."""
        try:
            os.write(self.commands, f"{index} {following}\n".encode())
        except OSError:
            return b"", True
        data = bytearray()
        while not data.endswith(self.DONE):
            ready, _, _ = select.select([self.output], [], [], 0.2)
            chunk = os.read(self.output, 1 << 16) if ready else b""
            data += chunk
            if (ready and not chunk) or len(data) > _ForkEachKoan.LIMIT:
                return bytes(data), True
            if not ready:
                done, status = os.waitpid(self.pid, os.WNOHANG)
                if done:
                    self.pid, self.status = 0, status
                    return bytes(data), True
        return bytes(data[: -len(self.DONE)]), False

    def end(self) -> int:
        """End it (it holds nothing the run still needs); its wait status."""
        if _KoanProcess.live.get(self.role) is self:
            del _KoanProcess.live[self.role]
        for fd in (self.commands, self.output):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.pid:
            with _quiet(), contextlib.suppress(OSError):  # the guard ending its own child
                os.kill(self.pid, signal.SIGKILL)
                self.status = os.waitpid(self.pid, 0)[1]
            self.pid = 0
        return self.status or 0


class _ForkEachKoan:
    """Each koan in a process forked from the worker (which never initialised a JAX backend),
    whose reports alone the worker sends on; koans share a process only where no student code
    reaches a koan it would not reach alone: course code only (one shared process per worker),
    or a chain of one file's koans (docs/sandbox.md, `tamper.student_code_reached`)."""

    RELAYED = frozenset({"logwarning", "warning_recorded"})
    PHASES = ("setup", "call", "teardown")
    LIMIT = 64 << 20  # bytes one koan may send
    # What JAX imports on its first compilation, and numpy's asserts: no thread, no backend.
    WARM = ("jaxlib.mlir.dialects.mhlo", "jaxlib.mlir.dialects.builtin", "numpy.testing")
    reached: ClassVar[dict[str, frozenset[str]]] = {}  # koan id -> student code it reaches
    course_code: ClassVar[frozenset[str]] = frozenset()  # koan ids that reach none

    @classmethod
    def install(cls, config: pytest.Config) -> None:
        plugins = config.pluginmanager.get_plugins()
        interactor = next((p for p in plugins if type(p).__name__ == "WorkerInteractor"), None)
        if interactor is None or not hasattr(os, "fork"):
            return
        interactor.run_one_test = lambda: cls.run_one(interactor)  # before the snapshot
        for name in cls.WARM:  # imported once here, not again by every koan's process
            with contextlib.suppress(Exception):
                importlib.import_module(name)
        listed = os.environ.get("JAXKOANS_GRADE_REACHED", "")
        with _quiet(), contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            with open(listed, encoding="utf-8") as source:  # the guard reading its own file
                found = json.load(source)
            cls.reached = {str(k): frozenset(map(str, v)) for k, v in found.items()}
        cls.course_code = frozenset(k for k, names in cls.reached.items() if not names)

    @staticmethod
    def koan_of(item) -> str | None:
        return item.nodeid.split("[")[0] if item is not None else None

    @staticmethod
    def item_at(worker, index: int):
        return worker.session.items[index] if index >= 0 else None

    @staticmethod
    def same_file(koan: str, other: str | None) -> bool:
        return other is not None and other.split("::")[0] == koan.split("::")[0]

    @classmethod
    def follows(cls, koan: str, reached: frozenset[str] | None, item) -> bool:
        """May `item` run after `koan` (reaching `reached`) in one process? Its next case may;
        a koan of the same file may where it reaches all of it."""
        after = cls.koan_of(item)
        if after is None or after == koan:
            return after is not None
        mine = cls.reached.get(after)
        known = reached is not None and mine is not None
        return cls.same_file(koan, after) and known and reached <= mine

    @classmethod
    def keeps(cls, koan: str, reached: frozenset[str] | None, item) -> bool:
        """Does the chain's process (its last koan `koan`) stay up for the worker's next `item`?
        Where `item` may follow it, or is course code of the same file (a later koan may)."""
        after = cls.koan_of(item)
        shared = cls.same_file(koan, after) and after in cls.course_code
        return shared or cls.follows(koan, reached, item)

    @classmethod
    def run_one(cls, worker) -> None:
        worker.item_index = worker.nextitem_index
        worker.nextitem_index = worker.torun.get()
        item = worker.session.items[worker.item_index]
        following = worker.nextitem_index  # an index, or xdist's end marker
        following = following if isinstance(following, int) else -1
        nextitem = cls.item_at(worker, following)
        start = time.perf_counter()
        if getattr(sys.modules.get("jax._src.xla_bridge"), "_backends", None):  # no safe fork
            _emit("not_isolated", nodeid=item.nodeid)
            worker.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        else:
            with contextlib.suppress(Exception):  # the harness reads the files, in the worker
                importlib.import_module("jaxkoans.plugin.hooks").prewarm(item)
            worker.sendevent("logstart", nodeid=item.nodeid, location=item.location)
            if cls.koan_of(item) not in cls.course_code:
                cls.alone_or_in_a_chain(worker, item, following)
            elif not cls.passed_shared(worker, item, following):
                cls.forked(worker, item)  # judged alone
            worker.sendevent("logfinish", nodeid=item.nodeid, location=item.location)
        for process in list(_KoanProcess.live.values()):
            if nextitem is None or (
                process.role == "chain" and not cls.keeps(process.koan, process.reached, nextitem)
            ):
                process.end()
        duration = time.perf_counter() - start
        worker.sendevent(
            "runtest_protocol_complete", item_index=worker.item_index, duration=duration
        )

    @classmethod
    def passed_shared(cls, worker, item: pytest.Item, following: int) -> bool:
        """Run a koan of the course's own code in the shared process; True (and its reports
        sent) only where every phase passed there."""
        nextitem = cls.item_at(worker, following)
        following = following if cls.koan_of(nextitem) in cls.course_code else -1
        for _ in range(2):  # a shared process found dead (a koan killed it) is started again
            process = _KoanProcess.live.get("course") or _KoanProcess(worker, "course", "", None)
            data, ended = process.run(worker.item_index, following)
            if not (ended and not data):
                break
            process.end()
        if ended or cls.phases(data, worker.item_index) != dict.fromkeys(cls.PHASES, "passed"):
            process.end()
            return False
        cls.relay(worker, item, data, 0)
        _emit("shared", nodeid=item.nodeid)  # for the grade's account of the run
        return True

    @classmethod
    def alone_or_in_a_chain(cls, worker, item: pytest.Item, following: int) -> None:
        """A koan in the chain's process (`follows`), or in a new one that ends after it
        unless the next koan may follow."""
        koan, process = cls.koan_of(item), _KoanProcess.live.get("chain")
        mine = cls.reached.get(koan)
        if process is not None and not cls.follows(process.koan, process.reached, item):
            process.end()
            process = None
        nextitem = cls.item_at(worker, following)
        stays = nextitem is not None and cls.keeps(koan, mine, nextitem)
        if process is None:
            process = _KoanProcess(worker, "chain", koan, mine)
        elif process.koan != koan:  # a later koan of the file: it reaches all the code before
            _emit("chained", nodeid=item.nodeid)
            process.koan, process.reached = koan, mine
        # the module's fixtures stay up where the process does (a koan of its file is next)
        data, ended = process.run(worker.item_index, following if stays else -1)
        status = process.end() if ended else 0
        relayed = cls.relay(worker, item, data, status)
        if not (relayed and stays) or "found" in cls.phases(data, worker.item_index):
            process.end()  # what it did may not reach the next koan: that starts afresh

    @classmethod
    def phases(cls, data: bytes, index: int) -> dict[str, str]:
        """phase -> outcome of the reports in `data` for the item of `index`; "found" where
        they carry the guard's evidence."""
        outcomes = {}
        for line in data.decode("utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                name, kwargs = json.loads(line)
                report = kwargs.get("data") or {}
                if name == "testreport" and report.get("item_index") == index:
                    outcomes[report.get("when")] = report.get("outcome")
                    found = [key for key, _ in report.get("user_properties") or ()]
                    if any(str(key).startswith("grade_") for key in found):
                        outcomes["found"] = "evidence"  # the guard's: patched, violation
        return outcomes

    @classmethod
    def forked(cls, worker, item: pytest.Item) -> None:
        process = _KoanProcess(worker, "alone", "", None)  # the koan alone
        cls.relay(worker, item, process.run(worker.item_index, -1)[0], process.end())

    @classmethod
    def isolate(cls, worker, out: int) -> None:
        """A koan's process: no way to the controller nor to the worker's other koan processes,
        but its pipe `out`, where what it would send the controller goes as JSON lines."""
        io = getattr(getattr(worker.channel, "gateway", None), "_io", None)
        for stream in (getattr(io, "outfile", None), getattr(io, "infile", None)):
            with contextlib.suppress(Exception):
                os.close(stream.fileno())
        for process in _KoanProcess.live.values():
            for fd in (process.commands, process.output):
                with contextlib.suppress(OSError):
                    os.close(fd)
        _KoanProcess.live = {}
        _Audit.pid = os.getpid()

        def send(name: str, **kwargs) -> None:
            if name not in ("logstart", "logfinish"):  # the worker sends its own
                _write(out, json.dumps([name, kwargs], default=str).encode("utf-8") + b"\n")

        worker.sendevent = send

    @classmethod
    def relay(cls, worker, item: pytest.Item, data: bytes, status: int) -> bool:
        seen: set[str] = set()
        refused: list[str] = []
        for line in data.decode("utf-8", errors="replace").splitlines():
            try:
                name, kwargs = json.loads(line)
            except (ValueError, TypeError):
                refused.append("sent something that is not a report")
                continue
            if name in cls.RELAYED and isinstance(kwargs, dict):
                with contextlib.suppress(Exception):
                    worker.sendevent(name, **kwargs)
                continue
            report = kwargs.get("data") if isinstance(kwargs, dict) else None
            report = report if isinstance(report, dict) else {}
            when, what = report.get("when"), report.get("nodeid")
            mine = (what, report.get("item_index")) == (item.nodeid, worker.item_index)
            if name != "testreport" or not mine or when not in cls.PHASES or when in seen:
                refused.append(f"sent {name!r} for {what or 'nothing'}: not its own report")
                continue
            seen.add(when)
            report["worker_id"], report["testrun_uid"] = worker.workerid, worker.testrunuid
            worker.sendevent("testreport", data=report)
        if refused:
            _emit("violation", nodeid=item.nodeid, what=refused[:3])
        if "teardown" not in seen:
            cls.crashed(worker, item, status)
        return not refused and "teardown" in seen

    @staticmethod
    def crashed(worker, item: pytest.Item, status: int) -> None:
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            name = signal.Signals(number).name if number in signal.valid_signals() else number
            how = f"ended by signal {name}"
        else:
            how = f"exited with code {os.WEXITSTATUS(status)}"
        fspath = item.nodeid.split("::")[0]
        text = f"the koan's own process {how} before it reported its end"
        report = pytest.TestReport(item.nodeid, (fspath, None, fspath), {}, "failed", text, "???")
        worker.pytest_runtest_logreport(report)


class _DeferRegions:
    """A worker imports a koan file without the statements that reach into a fix region (the
    student's module-level code); each koan's process runs the whole file before its setup, so
    a region's code reaches only the koans of its own file."""

    BEGIN, END = "# ✍️ BEGIN", "# ✍️ END"  # koan_model's markers: the guard imports no course
    deferred: ClassVar[set[str]] = set()  # files imported without their regions
    whole: ClassVar[set[str]] = set()  # files this process has run whole

    @classmethod
    def install(cls) -> None:
        hooks = [f for f in sys.meta_path if type(f).__name__ == "AssertionRewritingHook"]
        if len(hooks) != 1:
            return
        hook, import_whole = hooks[0], hooks[0].exec_module

        def exec_module(module) -> None:
            origin = getattr(module.__spec__, "origin", None)
            code = cls.without_regions(Path(origin), hook.config) if origin else None
            if code is None:
                return import_whole(module)
            cls.deferred.add(origin)
            exec(code, module.__dict__)

        hook.exec_module = exec_module  # this loader only; pytest's classes stay as they are

    @classmethod
    def without_regions(cls, path: Path, config):
        """The file's code without its statements that reach into a fix region (None: none)."""
        from _pytest.assertion.rewrite import rewrite_asserts

        source = path.read_bytes()
        spans, start = [], None
        lines = source.decode("utf-8", errors="replace").splitlines()
        for number, line in enumerate(lines, start=1):
            if line.strip().startswith(cls.BEGIN):
                start = number
            elif line.strip().startswith(cls.END) and start is not None:
                spans.append((start, number))
                start = None
        if start is not None:  # an unclosed region runs to the end
            spans.append((start, len(lines) + 1))
        if not spans:
            return None
        tree = ast.parse(source, filename=str(path))
        tree.body = [
            statement
            for statement in tree.body
            if not any(statement.lineno < e and statement.end_lineno > b for b, e in spans)
        ]
        rewrite_asserts(tree, source, str(path), config)
        return compile(tree, str(path), "exec", dont_inherit=True)

    @classmethod
    def run_whole_file(cls, item: pytest.Item) -> None:
        """Before a koan's setup: its file as written, run in the module the worker collected
        (the collected koans and fixtures stay the ones pytest calls)."""
        from _pytest.assertion.rewrite import _rewrite_test

        module = getattr(item, "module", None)
        origin = getattr(module, "__file__", None)
        if origin not in cls.deferred or origin in cls.whole:
            return
        cls.whole.add(origin)
        _, code = _rewrite_test(Path(origin), item.config)
        exec(code, module.__dict__)


class _Audit:
    """An audit hook in each worker (it cannot be removed): a koan's actions against the run
    (writing or deleting a file it loads, reading `answers/`, another process's /proc entries,
    signalling another process)."""

    seen: ClassVar[list[str]] = []
    root = ""
    quiet = False
    LOADED = (".py", ".pth", ".toml", ".ini", ".cfg", ".so", ".json", ".jsonl")
    EVENTS: ClassVar[set[str]] = {
        "open", "os.remove", "os.rename", "os.rmdir", "os.truncate", "os.chmod", "os.symlink",
        "os.link", "shutil.rmtree", "os.kill", "os.killpg", "signal.pthread_kill",
    }  # fmt: skip

    @classmethod
    def install(cls, root: Path) -> None:
        cls.root = str(root)
        fifo = os.environ.get("JAXKOANS_GRADE_GUARD", "")
        cls.guard = os.path.dirname(fifo) if fifo else "\0"  # the guard's own directory
        cls.pid = os.getpid()
        sys.addaudithook(cls.hook)

    @staticmethod
    def hook(event: str, args: tuple) -> None:
        if _Audit.quiet or event not in _Audit.EVENTS:
            return
        try:
            what = _Audit.judge(event, args)
        except Exception:
            return
        if what and what not in _Audit.seen:
            _Audit.seen.append(what)
            with _quiet():  # sent at once: the process may not live to report it
                current = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
                _emit("violation", nodeid=current, what=[what])

    @staticmethod
    def judge(event: str, args: tuple) -> str:
        if event == "os.kill":
            pid, sig = args
            if pid != _Audit.pid and sig != 0:
                return f"os.kill({pid}, {sig}): signalled another process"
            return f"os.kill(own pid, {sig}): signalled itself" if sig in _FATAL else ""
        if event in ("os.killpg", "signal.pthread_kill"):
            return "" if args[-1] == 0 else f"{event}{args}: signalled a process group or thread"
        if isinstance(args[0], int):
            return ""
        path = os.fsdecode(args[0])
        where_fd = _DIR_FD.get(event)
        absolute = _absolute(path, args[where_fd] if where_fd and len(args) > where_fd else None)
        parts = absolute.split(os.sep)
        if "answers" in parts:
            return f"{event} {path}: reached for answers/"
        private = ("fd", "mem", "environ", "root", "cwd")
        other = len(parts) > 3 and parts[2].isdigit() and int(parts[2]) != _Audit.pid
        if other and parts[1] == "proc" and parts[3] in private:
            return f"{event} {path}: another process's /proc entry"
        paths = [absolute]
        if event in ("os.rename", "os.link", "os.symlink") and isinstance(args[1], str | bytes):
            target_fd = args[3] if event == "os.rename" and len(args) > 3 else None
            paths.append(_absolute(os.fsdecode(args[1]), target_fd))
        for where in paths:
            if not where.startswith((_Audit.root + os.sep, _Audit.guard + os.sep)):
                continue
            if event in ("os.remove", "os.rename", "os.rmdir", "shutil.rmtree"):
                return f"{event} {path}: deleted or moved the graded run's files"
            if where.startswith(_Audit.guard + os.sep):  # the guard opens its FIFO quietly
                source = where.endswith(".py") and event == "open" and not _writes(*args[1:3])
                if not source:  # its source is read for a traceback of a koan's process
                    return f"{event} {path}: reached for the guard's files"
                continue
            loaded = where.endswith(_Audit.LOADED)
            if loaded and (event != "open" or _writes(args[1], args[2])):
                return f"{event} {path}: changed the graded run's files"
        return ""


_DIR_FD = {"os.remove": 1, "os.rmdir": 1, "shutil.rmtree": 1, "os.rename": 2}  # args' dir_fd


def _absolute(path: str, dir_fd) -> str:
    """`path` made absolute against `dir_fd` where given (shutil.rmtree removes by names relative
    to a directory's descriptor), else the working directory."""
    if isinstance(dir_fd, int) and not os.path.isabs(path):
        with contextlib.suppress(OSError):
            return os.path.normpath(os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path))
    return os.path.abspath(path)


_FATAL = {9, 19, 20}  # SIGKILL, SIGSTOP, SIGTSTP: a koan that stops its own process


def _writes(mode, flags) -> bool:
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC
    by_mode = isinstance(mode, str) and any(c in mode for c in "wax+")
    return by_mode or (isinstance(flags, int) and bool(flags & writing))
