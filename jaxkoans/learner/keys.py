"""Keys for `progress.py watch`: one key at once on a terminal (cbreak mode, given back on exit
and on Ctrl-Z), one command per line from a pipe; a thread reads them during a long import."""

from __future__ import annotations

import _thread
import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Iterator


class Keys:
    """h/n/r/v/q: single keys in cbreak mode on a terminal, else one command per line."""

    def __init__(self) -> None:
        try:
            self.fd: int | None = sys.stdin.fileno()
        except (AttributeError, ValueError, OSError):
            self.fd = None
        self.tty = self.fd is not None and os.isatty(self.fd)
        self._terminal = self.fd if self.tty else None
        self._saved: list | None = None
        self._stop_handler = None
        self._buffer = b""
        self._heard: list[str] = []  # keys the listening thread read for the main thread

    def _cbreak(self) -> None:
        import termios  # POSIX only, like the watch itself
        import tty

        with contextlib.suppress(termios.error):
            self._saved = tty.setcbreak(self._terminal, termios.TCSANOW)

    def _restore(self) -> None:
        import termios

        if self._saved is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self._terminal, termios.TCSADRAIN, self._saved)
            self._saved = None

    def _suspend(self, signum, frame) -> None:
        """Ctrl-Z: the shell gets its terminal back as it was; `fg` resumes the keys."""
        self._restore()
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stopped here until SIGCONT
        signal.signal(signal.SIGTSTP, self._suspend)
        self._cbreak()

    def __enter__(self) -> Keys:
        if self._terminal is not None:
            self._cbreak()
            self._stop_handler = signal.signal(signal.SIGTSTP, self._suspend)
        return self

    def __exit__(self, *exc) -> None:
        if self._stop_handler is not None:
            signal.signal(signal.SIGTSTP, self._stop_handler)
        self._restore()

    def fileno(self) -> int | None:
        return self.fd

    @contextlib.contextmanager
    def listening(self) -> Iterator[None]:
        """While the main thread is busy, read the keys in a thread: q or Ctrl-D interrupts it
        with KeyboardInterrupt (as Ctrl-C does); other keys wait for `read`."""
        if self.fd is None:
            yield
            return
        stop = threading.Event()

        def listen() -> None:
            while not stop.is_set() and self.fd is not None:
                with contextlib.suppress(OSError, ValueError):
                    if not select.select([self.fd], [], [], 0.05)[0]:
                        continue
                keys = self._read_now()
                self._heard += keys
                if "q" in keys:
                    _thread.interrupt_main()
                    return

        thread = threading.Thread(target=listen, name="jaxkoans-keys", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def waiting(self) -> bool:
        """Keys the listening thread read that `read` has not returned yet."""
        return bool(self._heard)

    def read(self) -> list[str]:
        """The keys heard by the listening thread, else those waiting on stdin."""
        if self._heard:
            heard, self._heard = self._heard, []
            return heard
        return self._read_now()

    def _read_now(self) -> list[str]:
        if self.fd is None:
            return []
        try:
            data = os.read(self.fd, 1024)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            data = b""
        if not data:  # end of input: keep watching, Ctrl-C quits
            self.fd = None
            return []
        if self.tty:
            return ["q" if c == "\x04" else c.lower() for c in data.decode(errors="ignore")]
        *lines, self._buffer = (self._buffer + data).split(b"\n")
        return [line.decode(errors="ignore").strip().lower()[:1] for line in lines]
