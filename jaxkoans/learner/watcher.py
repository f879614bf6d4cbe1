"""Which of the course's files changed: inotify on Linux, polling file signatures elsewhere.

inotify (through ctypes, no dependency) watches every directory of koans/, so an editor that
saves by writing a new file and renaming it over the old one is seen like one that writes in
place. Where inotify is missing, or the course lives on a network or WSL mount that does not
deliver its events, the tree is polled every 0.2 s. Even with inotify, the file being worked on
is checked every second; a change that inotify did not report switches to polling.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import struct
import sys
import time
from pathlib import Path

POLL_S = 0.2
VERIFY_S = 1.0
# Filesystems whose changes made elsewhere (the server, the Windows side) inotify never sees.
REMOTE_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "v9fs", "drvfs", "vboxsf", "afs", "ceph"}
    | {"fuse.sshfs", "fuse.vmhgfs-fuse", "glusterfs", "fuse.glusterfs", "lustre", "gpfs"}
)

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x4000, 0x8000
IN_ONLYDIR, IN_ISDIR = 0x01000000, 0x40000000
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, getattr(os, "O_CLOEXEC", 0o2000000)
MASK = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
) | (IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name

Signature = tuple[int, int, int]  # mtime_ns, size, inode


def _skipped(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__"


def directories(root: Path) -> list[Path]:
    """`root` and every directory below it, without hidden ones and __pycache__."""
    found = [root]
    for here, subdirs, _ in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not _skipped(d))
        found += [Path(here) / d for d in subdirs]
    return found


def signature(path: Path) -> Signature | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def digest(path: Path) -> str | None:
    try:
        return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    except OSError:
        return None


def snapshot(root: Path) -> dict[Path, Signature]:
    files = {}
    for directory in directories(root):
        with contextlib.suppress(OSError):
            for entry in os.scandir(directory):
                if entry.is_file() and not _skipped(entry.name):
                    with contextlib.suppress(OSError):
                        st = entry.stat()
                        files[Path(entry.path)] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return files


def filesystem_type(path: Path) -> str:
    """The type of the filesystem `path` is on, from /proc/self/mountinfo ('' if unknown)."""
    best, kind = "", ""
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    target = str(path.resolve())
    for line in lines:
        before, _, after = line.partition(" - ")
        fields = before.split()
        if len(fields) < 5 or not after:
            continue
        mount = fields[4].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, kind = mount, after.split()[0]
    return kind


class Poller:
    """Compares the tree's file signatures every POLL_S seconds; the file being worked on also
    by content, for filesystems whose timestamps are coarse."""

    mode = "poll"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = snapshot(root)
        self.due = time.monotonic() + POLL_S
        self.focus: Path | None = None
        self._focus_digest: str | None = None

    def fileno(self) -> int | None:
        return None

    def wait_s(self) -> float:
        return max(0.0, self.due - time.monotonic())

    def watch_closely(self, path: Path | None) -> None:
        self.focus, self._focus_digest = path, digest(path) if path else None

    def changes(self) -> set[Path]:
        if time.monotonic() < self.due:
            return set()
        now = snapshot(self.root)
        changed = {p for p in now.keys() | self.files.keys() if now.get(p) != self.files.get(p)}
        self.files = now
        if self.focus is not None:
            content = digest(self.focus)
            if content != self._focus_digest:
                changed.add(self.focus)
            self._focus_digest = content
        self.due = time.monotonic() + POLL_S
        return changed


class Inotify:
    """inotify on every directory of the tree; new directories are watched as they appear."""

    mode = "inotify"

    def __init__(self, root: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._add = libc.inotify_add_watch
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.root = root
        self.dirs: dict[int, Path] = {}
        try:
            for directory in directories(root):
                self._watch(directory)
        except OSError:
            self.close()
            raise

    def _watch(self, directory: Path) -> None:
        wd = self._add(self.fd, os.fsencode(directory), MASK)
        if wd < 0:
            error = ctypes.get_errno()
            if directory == self.root or error == 28:  # ENOSPC: max_user_watches reached
                raise OSError(error, f"inotify_add_watch {directory}: {os.strerror(error)}")
            return  # a directory that vanished again
        self.dirs[wd] = directory

    def fileno(self) -> int | None:
        return self.fd

    def wait_s(self) -> float | None:
        return None

    def _read(self) -> bytes:
        data = bytearray()
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                return bytes(data)
            if not chunk:
                return bytes(data)
            data += chunk

    def changes(self) -> set[Path]:
        data, changed, offset = self._read(), set(), 0
        while offset + EVENT.size <= len(data):
            wd, mask, _, length = EVENT.unpack_from(data, offset)
            raw = data[offset + EVENT.size : offset + EVENT.size + length].rstrip(b"\0")
            offset += EVENT.size + length
            if mask & IN_Q_OVERFLOW:  # events were lost: everything may have changed
                changed |= set(snapshot(self.root))
                continue
            if mask & IN_IGNORED:
                self.dirs.pop(wd, None)
                continue
            directory = self.dirs.get(wd)
            if directory is None or not raw:
                continue
            path = directory / os.fsdecode(raw)
            if mask & IN_ISDIR:
                if mask & (IN_CREATE | IN_MOVED_TO) and not _skipped(path.name):
                    for new in directories(path):  # files may be there before the watch is
                        self._watch(new)
                        changed |= {p for p in new.iterdir() if p.is_file()}
                continue
            changed.add(path)
        return changed

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Watcher:
    """Changes under `root` since the last call, by inotify or polling (see the module's doc).

    `fileno()` (None when polling) is for select; call `changes()` when it is readable and
    whenever `wait_s()` seconds have passed.
    """

    def __init__(self, root: Path, poll: bool = False) -> None:
        self.root = root
        self.focus: Path | None = None
        self._focus_seen: Signature | None = None
        self._verify_at = time.monotonic() + VERIFY_S
        self.backend: Poller | Inotify
        self.why = self._choose(poll)

    def _choose(self, poll: bool) -> str:
        kind = filesystem_type(self.root) if sys.platform == "linux" else ""
        if poll:
            reason = "--poll"
        elif sys.platform != "linux":
            reason = "没有 inotify / no inotify here"
        elif kind in REMOTE_FILESYSTEMS:
            reason = f"{kind} 收不到 inotify 事件 / inotify misses changes on {kind}"
        else:
            try:
                self.backend = Inotify(self.root)
                return "inotify"
            except (OSError, AttributeError) as error:
                reason = f"inotify 不可用 / inotify unavailable: {error}"
        self.backend = Poller(self.root)
        return f"轮询 / polling every {POLL_S} s ({reason})"

    @property
    def mode(self) -> str:
        return self.backend.mode

    def fileno(self) -> int | None:
        return self.backend.fileno()

    def wait_s(self) -> float:
        if isinstance(self.backend, Poller):
            return self.backend.wait_s()
        return max(0.0, self._verify_at - time.monotonic()) if self.focus else VERIFY_S

    def watch_closely(self, path: Path | None) -> None:
        """The file being worked on: checked by content when polling, by stat with inotify."""
        self.focus, self._focus_seen = path, None
        if isinstance(self.backend, Poller):
            self.backend.watch_closely(path)

    def changes(self) -> set[Path]:
        if isinstance(self.backend, Poller):
            return self.backend.changes()
        if self.focus is None or time.monotonic() < self._verify_at:
            changed = self.backend.changes()
            if self.focus in changed:
                self._focus_seen = None
            return changed
        # stat first, then drain: a change visible to the stat has its event queued already.
        seen = signature(self.focus)
        changed = self.backend.changes()
        self._verify_at = time.monotonic() + VERIFY_S
        if self.focus in changed:
            self._focus_seen = None
        elif self._focus_seen is None:
            self._focus_seen = seen
        elif seen != self._focus_seen:  # it changed and inotify said nothing: events get lost
            self.backend.close()
            self.backend = Poller(self.root)
            self.backend.watch_closely(self.focus)
            self.why = f"轮询 / polling every {POLL_S} s (inotify 没有报告修改 / missed a change)"
            changed.add(self.focus)
        return changed

    def close(self) -> None:
        if isinstance(self.backend, Inotify):
            self.backend.close()

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
