"""Which of the course's files changed: `watchfiles` in a thread, one batch per save, waking
the watch loop's select through a pipe. Where inotify cannot work (--poll,
WATCHFILES_FORCE_POLLING, a network or WSL mount, no inotify watch left) the tree is polled. The
file being worked on is also compared by content (watchfiles' poller compares whole seconds of
mtime); with inotify, a change that no event reported switches to polling.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import sys
import threading
import time
from pathlib import Path

import watchfiles

from jaxkoans.learner.language import say

POLL_S, VERIFY_S = 0.2, 1.0
STEP_MS, MAX_BATCH_MS = 30, 500  # a batch ends when STEP_MS pass without a new path: one a save
HEARTBEAT_MS = 200  # watchfiles yields an empty batch this often: its first says it started
START_S = 30.0  # how long a start may take on a loaded machine before it is not waited for
NATIVE = {"linux": "inotify", "darwin": "FSEvents"}.get(sys.platform, "native events")


def digest(path: Path) -> str | None:
    try:
        return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    except OSError:
        return None


class Stream:
    """`watchfiles.watch(root)` in a thread: batches of changed paths, and a pipe for select."""

    def __init__(self, root: Path, polling: bool) -> None:
        self.root, self.polling = root, polling
        self.error: Exception | None = None  # why the thread ended early
        self._batches: queue.SimpleQueue[set[Path]] = queue.SimpleQueue()
        self._started, self._stop = threading.Event(), threading.Event()
        self._read_fd, self._write_fd = os.pipe()
        for fd in (self._read_fd, self._write_fd):
            os.set_blocking(fd, False)
        self._thread = threading.Thread(target=self._run, name="jaxkoans-watch", daemon=True)
        self._thread.start()
        self._started.wait(START_S)  # so that a failed start is known before the first line

    def _run(self) -> None:
        options = dict(debounce=MAX_BATCH_MS, step=STEP_MS, rust_timeout=HEARTBEAT_MS)
        depth = len(self.root.parts)
        try:
            for changes in watchfiles.watch(
                self.root, watch_filter=None, stop_event=self._stop, yield_on_timeout=True,
                force_polling=self.polling, poll_delay_ms=int(POLL_S * 1000),
                raise_interrupt=False, **options,
            ):  # fmt: skip
                self._started.set()
                paths = {Path(p) for _, p in changes}
                for change, path in changes:  # files written into a new directory before
                    # inotify watched it (a new chapter copied in) have no event of their own
                    if change == watchfiles.Change.added and os.path.isdir(path):
                        with contextlib.suppress(OSError):
                            paths |= {p for p in Path(path).rglob("*") if p.is_file()}
                paths = {
                    p
                    for p in paths
                    if not any(n.startswith(".") or n == "__pycache__" for n in p.parts[depth:])
                }
                if paths:
                    self._batches.put(paths)
                    self._wake()
        except Exception as error:  # OSError: no inotify watch left; watchfiles' RuntimeError
            self.error = error
            self._wake()
        finally:
            self._started.set()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # a full pipe has woken select already
            os.write(self._write_fd, b".")

    def drain(self) -> set[Path]:
        """The paths changed since the last call (the pipe first, so no wake-up is lost)."""
        with contextlib.suppress(OSError):
            while os.read(self._read_fd, 4096):
                pass
        changed: set[Path] = set()
        with contextlib.suppress(queue.Empty):
            while True:
                changed |= self._batches.get_nowait()
        return changed

    def close(self) -> None:
        """Stop the thread (watchfiles looks at the event every STEP_MS) and close the pipe."""
        self._stop.set()
        self._thread.join(START_S)
        if not self._thread.is_alive():  # else it may still write: leave its pipe open
            for fd in (self._read_fd, self._write_fd):
                os.close(fd)


class Watcher:
    """Changes under `root`: select on `fileno()`, call `changes()` when it is readable and
    whenever `wait_s()` seconds have passed."""

    def __init__(self, root: Path, poll: bool = False) -> None:
        self.root, self.focus = root, None
        self._content: str | None = None  # the focus as last reported or checked
        self._suspect = False  # it changed and no event said so yet
        self._check_at = 0.0
        forced = os.environ.get("WATCHFILES_FORCE_POLLING", "")
        if forced.lower() in ("", "false", "disable", "disabled"):
            forced = ""
        reason = "--poll" if poll else forced and f"WATCHFILES_FORCE_POLLING={forced}"
        self.mode, self.why = NATIVE, NATIVE
        self.stream = Stream(root, polling=bool(reason))
        if reason:
            self._poll(reason, start=False)
        elif self.stream.error is not None:
            self._poll(f"{say(f'{NATIVE} 不可用', f'{NATIVE} unavailable')}: {self.stream.error}")

    def _poll(self, reason: str, start: bool = True) -> None:
        if start:
            self.stream.close()
            self.stream = Stream(self.root, polling=True)
        said = say(f"每 {POLL_S} s 轮询一次", f"polling every {POLL_S} s")
        self.mode, self.why, self._suspect = "poll", f"{said} ({reason})", False

    def fileno(self) -> int:
        return self.stream._read_fd

    def _period(self) -> float:
        return POLL_S if self.mode == "poll" else VERIFY_S

    def wait_s(self) -> float:
        return max(0.0, self._check_at - time.monotonic()) if self.focus else self._period()

    def watch_closely(self, path: Path | None) -> None:
        """The file being worked on, compared by content (see the module's doc)."""
        self.focus, self._content, self._suspect = path, digest(path) if path else None, False
        self._check_at = time.monotonic() + self._period()

    def changes(self) -> set[Path]:
        changed = self.stream.drain()
        if self.stream.error is not None and self.mode != "poll":
            self._poll(f"{say(f'{NATIVE} 出错', f'{NATIVE} failed')}: {self.stream.error}")
        focus = self.focus
        if focus in changed:
            self._content, self._suspect = digest(focus), False
        elif focus is not None and time.monotonic() >= self._check_at:
            content = digest(focus)
            if content == self._content:
                self._suspect = False
            elif self.mode != "poll" and not self._suspect:  # watchfiles may gather its batch
                self._suspect, content = True, self._content
            elif self.mode != "poll":  # it changed a whole check ago and no event said so
                self._poll(say(f"{NATIVE} 没有报告修改", f"{NATIVE} missed a change"))
            self._check_at = time.monotonic() + self._period()
            changed |= {focus} if content != self._content else set()
            self._content = content
        return changed

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc) -> None:
        self.stream.close()
