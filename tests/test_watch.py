"""`progress.py watch` on small fake courses, driven through pipes as a learner would use it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from jaxkoans.learner import watcher as watcher_module
from jaxkoans.learner.commands import watch as watch_command
from jaxkoans.learner.watcher import Watcher

from . import fakecourse

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 180  # generous: the machine is slow and each watch imports JAX once
HEADER = "import jax\nimport jax.numpy as jnp\n\nfrom jaxkoans import __\n"
ONE_AND_TWO = {
    "test_a.py": '''
    def test_one():
        """一加一。One plus one."""
        assert int(jnp.int32(1) + 1) == __


    def test_two():
        """二加二。Two plus two."""
        assert int(jnp.int32(2) + 2) == __
    '''
}


def chapter(root: Path, number: str, files: dict[str, str], **settings) -> Path:
    """A fake chapter koans/NN with its chapter.toml (one hint for test_two) and test files."""
    directory = root / "koans" / number
    directory.mkdir(parents=True)
    toml = [f'title_zh = "第{number}章"', f'title_en = "Chapter {number}"']
    toml += [f"{key} = {str(value).lower()}" for key, value in settings.items()]
    toml.append("files = [" + ", ".join(f'"{name}"' for name in files) + "]")
    toml += ['[hints."test_a.py::test_two"]', 'zh = ["想想四。"]', 'en = ["Think of four."]']
    (directory / "chapter.toml").write_text("\n".join(toml) + "\n", encoding="utf-8")
    for name, body in files.items():
        (directory / name).write_text(HEADER + textwrap.dedent(body), encoding="utf-8")
    return directory


def like_the_course(root: Path) -> None:
    """The course's own conftest.py and pytest settings (filterwarnings = error, timeout)."""
    for name in ("conftest.py", "pyproject.toml"):
        (root / name).write_text((REPO / name).read_text(encoding="utf-8"), encoding="utf-8")


class Watch:
    """`progress.py watch` in a child process: its output collected, commands sent by line;
    with `terminal`, in a real terminal (a pty that `script` makes), one key at a time."""

    def __init__(self, root: Path, *args: str, terminal: bool = False) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
        env.update(JAXKOANS_ROOT=str(root), PYTHONIOENCODING="utf-8")
        command = [sys.executable, str(REPO / "progress.py"), "watch", *args]
        if terminal:
            command = ["script", "-qfec", shlex.join(command), "/dev/null"]
        self.terminal = terminal
        self.process = subprocess.Popen(
            command,
            cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, encoding="utf-8", bufsize=1,
        )  # fmt: skip
        self.output, self.seen = "", 0
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            with self.changed:
                self.output += line
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def expect(self, text: str, unless: str | None = None) -> None:
        """Wait until `text` appears after what was expected before (fail on `unless`)."""
        deadline = time.monotonic() + TIMEOUT_S
        with self.changed:
            while True:
                found = self.output.find(text, self.seen)
                if found >= 0:
                    self.seen = found + len(text)
                    return
                rest = self.output[self.seen :]
                if unless and unless in rest:
                    pytest.fail(f"{unless!r} before {text!r}:\n{rest}")
                left = deadline - time.monotonic()
                if left <= 0 or not self.reader.is_alive():
                    pytest.fail(f"no {text!r} within {TIMEOUT_S} s; the output:\n{self.output}")
                self.changed.wait(left)

    def send(self, line: str) -> None:
        self.process.stdin.write(line if self.terminal else line + "\n")
        self.process.stdin.flush()

    def close(self) -> int:
        """Wait for the exit code, then release the process and its pipes."""
        try:
            return self.process.wait(timeout=TIMEOUT_S)
        finally:
            self.release()

    def release(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process.stdin.close()
        self.reader.join(timeout=TIMEOUT_S)
        self.process.stdout.close()


@pytest.fixture
def watch():
    started: list[Watch] = []

    def start(root: Path, *args: str, terminal: bool = False) -> Watch:
        started.append(Watch(root, *args, terminal=terminal))
        return started[-1]

    yield start
    for each in started:
        each.release()


@pytest.mark.parametrize("mode", ["inotify", "poll"])
def test_a_save_shows_the_verdict_and_a_pass_moves_on(tmp_path, watch, mode):
    koans = chapter(tmp_path, "01", ONE_AND_TWO)
    like_the_course(tmp_path)
    koan_file = koans / "test_a.py"
    shipped = koan_file.read_text(encoding="utf-8")
    session = watch(tmp_path, *(["--poll"] if mode == "poll" else []))
    session.expect(watcher_module.NATIVE if mode == "inotify" else "polling every 0.2 s (--poll)")
    session.expect("01 · test_a.py::test_one")
    session.expect("✍️ 填空 / fill in the blank")

    koan_file.write_text(shipped.replace("+ 1) == __", "+ 1) == 3"), encoding="utf-8")
    session.expect("❌ 还不对 / not yet", unless="✅")
    session.expect("assert 2 == 3")

    koan_file.write_text(shipped.replace("+ 1) == __", "+ 1) == 2"), encoding="utf-8")
    session.expect("✅ 通过 / passed  ·  01 · test_a.py::test_one", unless="❌")
    session.expect("👀 01 · test_a.py::test_two")
    session.expect("✍️ 填空 / fill in the blank")

    session.send("h")
    session.expect("💡 01 · test_a.py::test_two")
    session.send("q")
    assert session.close() == 0
    assert not list(tmp_path.rglob("__pycache__"))  # the learner's files only, no bytecode


def test_n_skips_to_the_next_koan(tmp_path, watch):
    chapter(tmp_path, "01", ONE_AND_TWO)
    session = watch(tmp_path, "test_one")
    session.expect("✍️ 填空 / fill in the blank")
    session.send("n")
    session.expect("⏭️ 跳过 / skipped  ·  01 · test_a.py::test_one")
    session.expect("👀 01 · test_a.py::test_two")
    session.send("q")
    assert session.close() == 0


def test_a_koan_that_passed_and_is_broken_again_is_reported(tmp_path, watch):
    koans = chapter(tmp_path, "01", ONE_AND_TWO)
    koan_file = koans / "test_a.py"
    shipped = koan_file.read_text(encoding="utf-8")
    session = watch(tmp_path)
    session.expect("✍️ 填空 / fill in the blank")
    one = shipped.replace("+ 1) == __", "+ 1) == 2")
    koan_file.write_text(one, encoding="utf-8")
    session.expect("👀 01 · test_a.py::test_two")
    # One save: test_two solved, test_one (passed before) broken again.
    koan_file.write_text(
        one.replace("+ 1) == 2", "+ 1) == 5").replace("+ 2) == __", "+ 2) == 4"), "utf-8"
    )
    session.expect("✅ 通过 / passed  ·  01 · test_a.py::test_two")
    session.expect("⚠️ 又坏了 / broken again: 01 · test_a.py::test_one")
    session.expect("👀 01 · test_a.py::test_one")
    session.expect("❌ 还不对 / not yet", unless="🎉")
    session.send("q")
    assert session.close() == 0


def test_the_watch_says_why_it_moves_to_another_chapter(tmp_path, watch):
    chapter(tmp_path, "09", ONE_AND_TWO)
    tenth = chapter(tmp_path, "10", {"test_a.py": ONE_AND_TWO["test_a.py"].split("\n\n\n")[0]})
    (tmp_path / "koans" / "course.toml").write_text('path = ["10", "09"]\n', encoding="utf-8")
    koan_file = tenth / "test_a.py"
    session = watch(tmp_path)
    session.expect("👀 10 · test_a.py::test_one")
    koan_file.write_text(koan_file.read_text().replace("== __", "== 2"), encoding="utf-8")
    session.expect("✅ 通过 / passed  ·  10 · test_a.py::test_one")
    session.expect("➡️ 第 09 章 / on to chapter 09")
    session.expect("the course's path: 10 → 09")
    session.expect("👀 09 · test_a.py::test_one")
    session.send("q")
    assert session.close() == 0


def _alive(pid: int) -> bool:
    """Running, not a zombie (a container's init may never reap tmux's server)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.mark.skipif(
    shutil.which("tmux") is None, reason="needs tmux (Debian: apt-get install tmux)"
)
def test_in_a_real_terminal_each_note_reads_once(tmp_path):
    """tmux keeps a cleared screen in its scrollback: the watch clears that too, so a pass and a
    skip read once in the whole pane, not once per screen."""
    koans = chapter(tmp_path, "01", ONE_AND_TWO)
    like_the_course(tmp_path)
    koan_file = koans / "test_a.py"
    pane = f"jaxkoans-{os.getpid()}"
    tmux = ["tmux", "-L", pane]
    command = f"JAXKOANS_ROOT={tmp_path} {sys.executable} {REPO / 'progress.py'} watch"
    subprocess.run([*tmux, "new-session", "-d", "-x", "120", "-y", "40", command], check=True)

    def screen() -> str:
        shown = subprocess.run(
            [*tmux, "capture-pane", "-p", "-S", "-"], capture_output=True, text=True, timeout=30
        )
        return shown.stdout

    def wait_for(text: str) -> str:
        deadline = time.monotonic() + TIMEOUT_S
        while text not in (shown := screen()):
            if time.monotonic() > deadline:  # a guard against waiting forever
                pytest.fail(f"no {text!r} in the pane:\n{shown}")
            time.sleep(0.2)
        return shown

    server = subprocess.run(
        [*tmux, "display-message", "-p", "#{pid}"], capture_output=True, text=True, timeout=30
    )
    try:
        wait_for("✍️ 填空 / fill in the blank")
        koan_file.write_text(koan_file.read_text().replace("+ 1) == __", "+ 1) == 2"), "utf-8")
        shown = wait_for("👀 01 · test_a.py::test_two")
        assert shown.count("✅ 通过 / passed  ·  01 · test_a.py::test_one") == 1, shown
        subprocess.run([*tmux, "send-keys", "n"], check=True)
        shown = wait_for("↩️ 只剩这一个")
        assert shown.count("⏭️ 跳过 / skipped  ·  01 · test_a.py::test_two") == 1, shown
    finally:  # q ends the watch, which ends its pane, its session and the server
        subprocess.run([*tmux, "send-keys", "q"], check=False)
        deadline = time.monotonic() + TIMEOUT_S
        while (
            time.monotonic() < deadline
            and not subprocess.run(
                [*tmux, "has-session"], capture_output=True, timeout=30
            ).returncode
        ):
            time.sleep(0.1)
        subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)
        with contextlib.suppress(ValueError, ProcessLookupError, ChildProcessError):
            pid, deadline = int(server.stdout), time.monotonic() + TIMEOUT_S
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.05)


def test_each_chapter_gets_its_devices_and_float64(tmp_path, watch):
    check = '''
    def test_{name}():
        """设备与精度。Devices and precision."""
        assert jax.device_count() == 8
        assert jnp.zeros(()).dtype == jnp.{dtype}
    '''
    chapter(tmp_path, "01", {"test_a.py": check.format(name="x64", dtype="float64")}, devices=8, x64=True)  # fmt: skip
    chapter(tmp_path, "02", {"test_b.py": check.format(name="x32", dtype="float32")})
    session = watch(tmp_path)
    session.expect("✅ 已通过 / already passes  ·  01 · test_a.py::test_x64", unless="❌")
    session.expect("✅ 已通过 / already passes  ·  02 · test_b.py::test_x32", unless="❌")
    session.expect("🎉")
    assert session.close() == 0


def test_a_koan_that_never_ends_is_stopped(tmp_path, watch):
    chapter(tmp_path, "01", {"test_a.py": "def test_forever():\n    while True:\n        pass\n"})
    session = watch(tmp_path, "--timeout", "3")
    session.expect("⏱️ 超时 / timed out")
    session.send("q")
    assert session.close() == 0


def _wait_for_change(watcher: Watcher, path: Path) -> set[Path]:
    deadline, seen = time.monotonic() + 30, set()
    while path not in seen and time.monotonic() < deadline:
        select.select([watcher.fileno()], [], [], watcher.wait_s())
        seen |= watcher.changes()
    return seen


def _watch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "jaxkoans-watch"]


def _saved_an_hour_ago(directory: Path) -> None:
    """As a learner's files are: watchfiles' poller sees no change within one second of mtime."""
    earlier = time.time() - 3600
    for path in directory.rglob("*"):
        os.utime(path, (earlier, earlier))


@pytest.mark.parametrize("poll", [False, True], ids=["inotify", "poll"])
def test_saves_by_rename_new_chapters_and_deletions_are_seen(tmp_path, poll):
    koans = chapter(tmp_path, "01", ONE_AND_TWO)
    _saved_an_hour_ago(koans)
    with Watcher(tmp_path / "koans", poll=poll) as watcher:
        if not poll and watcher.mode != "inotify":
            pytest.skip(f"inotify is not available here: {watcher.why}")
        temporary = koans / ".test_a.py.swp"
        temporary.write_text(HEADER, encoding="utf-8")
        os.replace(temporary, koans / "test_a.py")  # how many editors save
        seen = _wait_for_change(watcher, koans / "test_a.py")
        assert koans / "test_a.py" in seen and temporary not in seen  # hidden files never count
        later = chapter(tmp_path, "02", ONE_AND_TWO)
        assert later / "test_a.py" in _wait_for_change(watcher, later / "test_a.py")
        (later / "test_a.py").write_text(HEADER + "# edited\n", encoding="utf-8")
        later_s = time.time() + 5  # saved a few seconds after it was made, as a learner would
        os.utime(later / "test_a.py", (later_s, later_s))
        assert later / "test_a.py" in _wait_for_change(watcher, later / "test_a.py")
        (later / "test_a.py").unlink()
        assert later / "test_a.py" in _wait_for_change(watcher, later / "test_a.py")
    assert _watch_threads() == []  # closing it leaves no thread behind


def _silent_watch(*paths, stop_event, **options):
    """watchfiles.watch on a mount whose changes never arrive (WSL, NFS): empty batches."""
    while not stop_event.wait(0.01):
        yield set()


def test_a_change_that_inotify_misses_switches_to_polling(tmp_path, monkeypatch):
    koans = chapter(tmp_path, "01", ONE_AND_TWO)
    monkeypatch.setattr(watcher_module, "VERIFY_S", 0.0)
    monkeypatch.setattr(watcher_module.watchfiles, "watch", _silent_watch)
    with Watcher(tmp_path / "koans") as watcher:
        if watcher.mode != "inotify":
            pytest.skip(f"inotify is not available here: {watcher.why}")
        focus = koans / "test_a.py"
        watcher.watch_closely(focus)
        assert watcher.changes() == set()
        focus.write_text(HEADER + "# saved from the other side\n", encoding="utf-8")
        # One check may come before watchfiles' batch of the save; the next one may not.
        assert watcher.changes() == set() and watcher.mode == "inotify"
        assert focus in watcher.changes()
        assert watcher.mode == "poll"
        assert "missed a change" in watcher.why


def test_no_inotify_watch_left_falls_back_to_polling(tmp_path, monkeypatch):
    koans = chapter(tmp_path, "01", ONE_AND_TWO)
    _saved_an_hour_ago(koans)
    real_watch = watcher_module.watchfiles.watch

    def watch(*paths, force_polling, **options):
        if not force_polling:  # what notify raises when max_user_watches is reached
            raise OSError(28, "No space left on device (os error 28)")
        return real_watch(*paths, force_polling=force_polling, **options)

    monkeypatch.setattr(watcher_module.watchfiles, "watch", watch)
    with Watcher(tmp_path / "koans") as watcher:
        assert watcher.mode == "poll"
        assert "unavailable" in watcher.why and "os error 28" in watcher.why
        (koans / "test_a.py").write_text(HEADER + "# edited\n", encoding="utf-8")
        assert koans / "test_a.py" in _wait_for_change(watcher, koans / "test_a.py")
    assert _watch_threads() == []


def test_two_saves_within_one_mtime_second_are_both_seen_when_polling(tmp_path):
    """watchfiles' poller compares whole seconds of mtime: the file being worked on is also
    compared by content."""
    koans = chapter(tmp_path, "01", ONE_AND_TWO)
    focus = koans / "test_a.py"
    with Watcher(tmp_path / "koans", poll=True) as watcher:
        watcher.watch_closely(focus)
        focus.write_text(HEADER + "# first\n", encoding="utf-8")
        assert focus in _wait_for_change(watcher, focus)
        first = focus.stat().st_mtime_ns
        focus.write_text(HEADER + "# again\n", encoding="utf-8")
        os.utime(focus, ns=(first, first))  # a filesystem with coarse timestamps
        assert focus in _wait_for_change(watcher, focus)


@pytest.mark.parametrize(("value", "mode"), [("1", "poll"), ("false", "inotify")])
def test_watchfiles_force_polling_is_honoured(tmp_path, monkeypatch, value, mode):
    chapter(tmp_path, "01", ONE_AND_TWO)
    monkeypatch.setenv("WATCHFILES_FORCE_POLLING", value)
    with Watcher(tmp_path / "koans") as watcher:
        if mode == "inotify" and watcher.mode != "inotify":
            pytest.skip(f"inotify is not available here: {watcher.why}")
        assert watcher.mode == mode
        assert ("WATCHFILES_FORCE_POLLING=1" in watcher.why) == (mode == "poll")


def test_a_fall_back_to_polling_is_said_once(tmp_path, capsys):
    """The watch loop names the new way of watching the first time it changes, not again."""

    class Switching:
        why = "inotify"

    watcher = Switching()
    session = watch_command.Session(None, [], tmp_path, watcher)
    session.changed(set())
    watcher.why = "轮询 / polling every 0.2 s (inotify missed a change)"
    session.changed(set())
    session.changed(set())
    assert capsys.readouterr().out.count("inotify missed a change") == 1


def test_a_chapter_watch_ends_with_that_chapter_and_says_each_pass_once(tmp_path, watch):
    koans = chapter(tmp_path, "01", ONE_AND_TWO)
    chapter(tmp_path, "02", ONE_AND_TWO)
    with open(koans / "chapter.toml", "a", encoding="utf-8") as manifest:
        manifest.write(
            '[hints."test_a.py::test_one"]\nzh = ["一。", "二。"]\nen = ["One.", "Two."]\n'
        )
    koan_file = koans / "test_a.py"
    shipped = koan_file.read_text(encoding="utf-8")
    session = watch(tmp_path, "--chapter", "01")
    session.expect("✍️ 填空 / fill in the blank")
    session.send("h")
    session.expect("💡 01 · test_a.py::test_one  (1/2)")
    session.expect("press h for the next level")
    one = shipped.replace("+ 1) == __", "+ 1) == 2")
    koan_file.write_text(one, encoding="utf-8")
    session.expect("👀 01 · test_a.py::test_two")
    koan_file.write_text(one.replace("+ 2) == __", "+ 2) == 4"), encoding="utf-8")
    session.expect("🎉 第 01 章全部通过 / every koan of chapter 01 passes")
    session.expect("next: python progress.py watch --chapter 02")
    assert session.close() == 0
    passes = [line for line in session.output.splitlines() if line.startswith("✅")]
    assert sum("test_a.py::test_one" in line for line in passes) == 1, session.output
    assert "every koan passes" not in session.output
    # What watch found is remembered: the summary right after runs no koan.
    env_extra = {"PYTEST_ADDOPTS": "--no-such-option"}
    summary = fakecourse.progress(tmp_path, "--json", "--chapter", "01", env_extra=env_extra)
    data = json.loads(summary.stdout)
    assert data["problems"] == [] and data["total"]["passed"] == 2, summary.stdout


FLOOD_AND_CRASH = {
    "test_a.py": '''
    def test_flood():
        """输出。A koan that prints ten megabytes."""
        print("x" * 10_000_000)
        breakpoint()  # no terminal in watch: skipped with a note, not the end of the run
        assert int(jnp.int32(1) + 1) == 3


    def test_crash():
        """崩溃。A koan that kills the interpreter."""
        import ctypes
        ctypes.string_at(0)
    '''
}


def test_a_flood_a_breakpoint_and_a_crash_in_watch(tmp_path, watch):
    """10 MB of output is cut, breakpoint() is skipped (no terminal), a segfault shows the
    learner's line."""
    chapter(tmp_path, "01", FLOOD_AND_CRASH)
    session = watch(tmp_path)
    session.expect("earlier characters cut")
    session.expect("breakpoint() (")
    session.expect("needs a terminal and was skipped here")
    session.expect("⌚")
    session.send("n")
    session.expect("💥 崩溃 / crashed: SIGSEGV")
    session.expect("koans/01/test_a.py:16 (in test_crash)")
    session.expect("> ctypes.string_at(0)")
    session.send("q")
    assert session.close() == 0
    assert len(session.output) < 100_000
    crash = session.output[session.output.index("💥") :]
    assert "_pytest" not in crash and "pluggy" not in crash, crash


DTYPE = {
    "test_a.py": '''
    def test_dtype():
        """精度。The precision of a float."""
        assert jnp.zeros(()).dtype == __
    '''
}


def test_a_chapter_toml_changed_since_the_last_run_sets_the_next(tmp_path, watch):
    """Each run is a fresh pytest child: a change to chapter.toml after a verdict
    (x64 switched on) is what the next verdict follows."""
    koans = chapter(tmp_path, "01", DTYPE)
    like_the_course(tmp_path)
    koan_file = koans / "test_a.py"
    koan_file.write_text(
        koan_file.read_text(encoding="utf-8").replace("== __", "== jnp.float64"), encoding="utf-8"
    )
    session = watch(tmp_path, "test_dtype")
    session.expect("❌ 还不对 / not yet", unless="✅")  # float32 in a chapter without x64
    manifest = koans / "chapter.toml"
    manifest.write_text("x64 = true\n" + manifest.read_text(encoding="utf-8"), encoding="utf-8")
    session.expect("✅ 通过 / passed  ·  01 · test_a.py::test_dtype", unless="❌")
    assert session.close() == 0


def _processes_of(root: Path) -> set[int]:
    """The processes started for the course at `root` (the watch and its forked children)."""
    mark = f"JAXKOANS_ROOT={root}\0".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:  # ended, or a zombie
                continue
            if mark in environ + b"\0":
                found.add(int(entry.name))
    return found


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {TIMEOUT_S} s")
        time.sleep(0.05)  # polling /proc: no event says when a process ends


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
@pytest.mark.parametrize("stop", ["q", "SIGTERM", "SIGKILL"])
def test_no_process_of_the_watch_outlives_it(tmp_path, watch, stop):
    chapter(tmp_path, "01", ONE_AND_TWO)
    session = watch(tmp_path, "test_one")
    session.expect("✍️ 填空 / fill in the blank")
    if stop == "q":
        session.send("q")
    else:
        session.process.send_signal(getattr(signal, stop))
    session.process.wait(timeout=TIMEOUT_S)
    _until(lambda: not _processes_of(tmp_path), "end of every child")


def test_watch_blames_the_code_of_a_mixed_koan_and_hides_a_prediction(tmp_path, watch):
    """The report watch shows is the plugin's (issue 45): in a koan holding a TODO and a
    prediction, a wrong TODO shows its values and no reveal; a wrong prediction stays hidden."""
    from .test_reveal import MIXED, MIXED_PRISTINE, commit, fill_mixed

    root = fakecourse.make_course(tmp_path / "course")
    koan_file = root / "koans" / "01" / "test_mixed.py"
    fakecourse.write(koan_file, fakecourse.HEADER + MIXED.format(**MIXED_PRISTINE))
    fakecourse.write(
        root / "answers" / "01" / "test_mixed.py",
        fakecourse.HEADER + MIXED.format(**MIXED_PRISTINE),
    )
    commit(root)
    fill_mixed(root, triple="return 2 * x")
    session = watch(root, "test_prediction_beside_code")
    session.expect("❌ 还不对 / not yet", unless="🙈")
    session.expect("assert 4.0 == 6.0", unless="🙈")
    fill_mixed(root, dtype="jnp.float16")
    session.expect("👁", unless="✅")
    verdict = session.output[session.output.rfind("❌") :]
    assert "`jnp.float16`" in verdict and "🙈" in verdict and "float32" not in verdict, verdict
    session.send("q")
    assert session.close() == 0


def test_after_a_pass_watch_goes_to_the_courses_next_koan_as_progress_does(tmp_path, watch):
    """Watch's next koan is progress.py's (koan_runs.first_open): an open koan earlier in the
    chapter comes before the next chapter (issue 45: "on to chapter 11" with 07 at 40/45)."""
    koans = chapter(tmp_path, "01", ONE_AND_TWO)
    chapter(tmp_path, "02", ONE_AND_TWO)
    koan_file = koans / "test_a.py"
    session = watch(tmp_path, "koans/01/test_a.py::test_two")
    session.expect("👀 01 · test_a.py::test_two")
    koan_file.write_text(koan_file.read_text().replace("+ 2) == __", "+ 2) == 4"), "utf-8")
    session.expect("✅ 通过 / passed  ·  01 · test_a.py::test_two")
    session.expect("👀 01 · test_a.py::test_one", unless="02 ·")
    session.send("q")
    assert session.close() == 0
    summary = json.loads(fakecourse.progress(tmp_path, "--json").stdout)
    assert summary["next"]["name"] == "test_one" and summary["next"]["chapter"] == "01", summary


def test_watch_of_a_chapter_stays_in_it_after_a_pass_and_speaks_one_language(tmp_path, watch):
    """`watch 02` starts at chapter 02 (not "no such koan"); after a pass the next koan is the
    chapter's next open one, then the next chapter's, not chapter 01's first; with --lang en
    the watch's own lines are in English only (in a real terminal)."""
    chapter(tmp_path, "01", ONE_AND_TWO)
    koan_file = chapter(tmp_path, "02", {"test_b.py": ONE_AND_TWO["test_a.py"]}) / "test_b.py"
    session = watch(tmp_path, "02", "--lang", "en", terminal=True)
    session.expect("👀 02 · test_b.py::test_one", unless="01 · test_a.py")
    koan_file.write_text(koan_file.read_text().replace("+ 1) == __", "+ 1) == 2"), "utf-8")
    session.expect("✅ passed  ·  02 · test_b.py::test_one")
    session.expect("👀 02 · test_b.py::test_two", unless="01 · test_a.py")
    koan_file.write_text(koan_file.read_text().replace("+ 2) == __", "+ 2) == 4"), "utf-8")
    session.expect("➡️ on to chapter 01: Chapter 01  (the course's path: 01 → 02)")
    session.expect("👀 01 · test_a.py::test_one")
    session.send("q")
    assert session.close() == 0
    own = [line for line in session.output.splitlines() if line.startswith(("✅", "➡️", "⏳", "⌚"))]
    assert own and not [line for line in own if re.search("[\u4e00-\u9fff]", line)], own
    assert "h hint · n next · r rerun · v reveal · q quit" in session.output


@pytest.mark.parametrize("target", ["02/test_b.py", "test_b.py", "koans/02/test_b.py", "2"])
def test_watch_takes_a_koan_file_or_a_chapter_number(tmp_path, watch, target):
    chapter(tmp_path, "01", ONE_AND_TWO)
    chapter(tmp_path, "02", {"test_b.py": ONE_AND_TWO["test_a.py"]})
    session = watch(tmp_path, target, terminal=True)
    session.expect("👀 02 · test_b.py::test_one", unless="01 · test_a.py")
    session.send("q")
    assert session.close() == 0


def test_a_deleted_koan_file_is_named_and_next_stays_in_its_chapter(tmp_path, watch):
    """Deleting the file of the koan in focus says so and how to bring it back (not "no result
    … exit code 4"), and `n` then goes on to the chapter's next file, not to chapter 01's first
    koan; with --lang en the koan's lesson is shown in English (in a real terminal)."""
    chapter(tmp_path, "01", ONE_AND_TWO)
    lesson = '"""一加一。\n        One plus one.\n        """'
    two_lines = ONE_AND_TWO["test_a.py"].replace('"""一加一。One plus one."""', lesson)
    koans = chapter(tmp_path, "02", {"test_b.py": two_lines, "test_c.py": two_lines})
    session = watch(tmp_path, "02", "--lang", "en", terminal=True)
    session.expect("👀 02 · test_b.py::test_one")
    session.expect("  │ One plus one.")
    (koans / "test_b.py").unlink()
    session.expect(
        "🗑️ koans/02/test_b.py the file is missing: python progress.py reset koans/02/test_b.py"
    )
    session.send("n")
    session.expect("👀 02 · test_c.py::test_one", unless="01 · test_a.py")
    session.send("q")
    assert session.close() == 0
    assert "一加一" not in session.output and "no result" not in session.output, session.output
