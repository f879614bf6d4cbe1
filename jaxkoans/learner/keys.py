"""Keys for `progress.py watch`: one key at once on a terminal (cbreak mode, given back on exit
and on Ctrl-Z), one command per line from a pipe."""

from __future__ import annotations

import contextlib
import os
import signal
import sys


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

    def _cbreak(self, on: bool = True) -> None:
        import termios  # POSIX only, like the watch itself
        import tty

        with contextlib.suppress(termios.error):
            if on:
                self._saved = tty.setcbreak(self._terminal, termios.TCSANOW)
            elif self._saved is not None:
                termios.tcsetattr(self._terminal, termios.TCSADRAIN, self._saved)
        self._saved = self._saved if on else None

    def _suspend(self, signum, frame) -> None:
        """Ctrl-Z: the shell gets its terminal back as it was; `fg` resumes the keys."""
        self._cbreak(on=False)
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
        if self._terminal is not None:
            self._cbreak(on=False)

    def fileno(self) -> int | None:
        return self.fd

    def read(self) -> list[str]:
        """The keys waiting on stdin."""
        try:
            data = os.read(self.fd, 1024) if self.fd is not None else None
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
