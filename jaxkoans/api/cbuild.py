"""Build a C++ source of `csrc/` into a shared library for jax.ffi, once (chapter 05).

The library is cached in `build/ffi/` (ignored by git) under a name derived from the source's
hash, the JAX version and the compiler; a build writes a temporary file and renames it into
place under a lock, so pytest-xdist workers neither collide nor compile twice. A koan calls
`ffi_library` (built and loaded once per process) or `ffi_target` (that, plus one symbol
registered with jax.ffi): without a C++ compiler they skip the koan with
`CompilerNotFoundError`'s message; a compiler or library that fails raises `BuildError`, which
the harness reports as an environment problem, never as the learner's answer.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from jaxkoans import course

# The koans that import this module run in a pytest child of one course ($JAXKOANS_ROOT): a koan
# calls build() with no course to pass, so the koan API takes the process's course here.
COURSE_ROOT = course.Course.here().root
CSRC = COURSE_ROOT / "csrc"
BUILD_DIR = COURSE_ROOT / "build" / "ffi"
COMPILERS = ("g++", "clang++", "c++")  # the first one on PATH builds
FLAGS = ("-std=c++17", "-O2", "-shared", "-fPIC")
BUILD_TIMEOUT_S = 300


class CompilerNotFoundError(RuntimeError):
    """No C++ compiler on PATH. / PATH 上没有 C++ 编译器。"""


class BuildError(RuntimeError):
    """The compiler rejected the source or did not finish in time. / 编译失败或超时。"""


def find_compiler() -> str:
    """The path of the first of g++, clang++, c++ found on PATH."""
    for name in COMPILERS:
        found = shutil.which(name)
        if found:
            return found
    raise CompilerNotFoundError(
        "未找到 C++ 编译器（g++、clang++ 或 c++），第 05 章需要它来编译 csrc/ 里的 FFI 内核；"
        "安装后重新运行（Debian/Ubuntu: apt install g++；macOS: xcode-select --install）。\n"
        "No C++ compiler (g++, clang++ or c++) on PATH: chapter 05 needs one to build the FFI "
        "kernels of csrc/. Install one (Debian/Ubuntu: apt install g++; macOS: "
        "xcode-select --install) and run again."
    )


def _key(source: Path, compiler: str) -> str:
    import jax

    digest = hashlib.sha256(source.read_bytes())
    for part in (jax.__version__, os.path.realpath(compiler), *FLAGS):
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def _lock(path: Path):
    """An exclusive lock on `path` where fcntl exists; elsewhere rename alone keeps builds safe."""
    try:
        import fcntl
    except ImportError:  # Windows: concurrent builds may both compile, the rename stays atomic
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(source: str | Path, *, build_dir: Path | None = None) -> Path:
    """Compile `source` (a path, or a name inside csrc/) against jax.ffi.include_dir() once;
    return the shared library's path."""
    source = Path(source)
    source = source if source.is_absolute() else CSRC / source
    compiler = find_compiler()  # first, so that no compiler skips even with a library cached
    out_dir = Path(build_dir) if build_dir is not None else BUILD_DIR
    library = out_dir / f"{source.stem}-{_key(source, compiler)}.so"
    if library.is_file():
        return library
    if build_dir is None and not _writable(out_dir):
        out_dir = fallback_dir()  # a read-only checkout (grade's sandbox, a classroom copy)
        library = out_dir / library.name
        if library.is_file():
            return library
    try:
        return _compile(source, compiler, library)
    except OSError as error:  # a compiler that cannot start, a build/ffi/ that cannot be written
        raise BuildError(
            f"编译失败 / build failed: {compiler} on {source.name} into {out_dir}: {error}"
        ) from error


def _writable(directory: Path) -> bool:
    """Whether `directory` exists or can be made, and can be written."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(directory, os.W_OK)


def scratch_folder(prefix: str) -> Path:
    """A private folder for this process's sources and library copies, removed when the process
    exits: a koan's files must not pile up in the temporary directory run after run. A process
    ended by a signal or os._exit runs no atexit, so its folder (named by its pid) is swept by
    the next process that makes one."""
    _sweep(prefix)
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _sweep(prefix: str) -> None:
    """Remove the scratch folders of this prefix whose process is gone."""
    for folder in Path(tempfile.gettempdir()).glob(f"{glob.escape(prefix)}*-*"):
        pid = folder.name[len(prefix) :].partition("-")[0]
        if pid.isdigit() and folder.is_dir() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def fallback_dir() -> Path:
    """Where libraries are built when the course's build/ffi/ cannot be written: the temporary
    directory, one folder per course checkout."""
    tag = hashlib.sha256(str(COURSE_ROOT).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"jaxkoans-ffi-{tag}"


def _compile(source: Path, compiler: str, library: Path) -> Path:
    import jax

    out_dir = library.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    with _lock(out_dir / f".{library.name}.lock"):
        if library.is_file():  # another process built it while we waited
            return library
        handle, temporary = tempfile.mkstemp(prefix=f".{library.name}.", suffix=".tmp", dir=out_dir)
        os.close(handle)
        command = [
            compiler,
            *FLAGS,
            "-isystem",  # JAX's headers: their warnings are not ours
            jax.ffi.include_dir(),
            str(source),
            "-o",
            temporary,
        ]
        try:
            try:
                done = subprocess.run(
                    command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
                )
            except subprocess.TimeoutExpired as error:  # a hung compiler is a failed build
                raise BuildError(
                    f"编译超时 / build timed out after {BUILD_TIMEOUT_S} s: {' '.join(command)}"
                ) from error
            if done.returncode != 0:
                raise BuildError(
                    f"编译失败 / build failed: {' '.join(command)}\n{done.stderr[-4000:]}"
                )
            os.chmod(temporary, 0o755)  # mkstemp made it private; a library is read by all
            os.replace(temporary, library)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
    return library


def ffi_library(source: str | Path) -> ctypes.CDLL:
    """`source` (a path, or a name inside csrc/) built by `build` and loaded with ctypes, once per
    process and library. Without a C++ compiler the calling koan is skipped with
    `CompilerNotFoundError`'s message, a cached library notwithstanding; a `BuildError`
    propagates (the environment, not an answer), and so does a library ctypes cannot load, as a
    `BuildError` too.
    """
    try:
        library = build(source)
    except CompilerNotFoundError as error:
        import pytest  # only a koan asks for a library, and a koan runs under pytest

        pytest.skip(str(error))
    try:
        return _load(library)
    except OSError as error:  # a truncated or foreign library: the machine's problem, not an answer
        raise BuildError(
            f"无法加载 / cannot load {library}: {error}\n"
            f"删除它再运行一次（会用 PATH 上的编译器重新编译）/ delete it and run again (the "
            f"compiler on PATH builds it anew): rm {library}"
        ) from error


@functools.cache
def _load(library: Path) -> ctypes.CDLL:
    return ctypes.CDLL(str(library))


def ffi_target(name: str, source: str | Path, symbol: str, *, platform: str = "cpu") -> str:
    """Register the FFI handler `symbol` of `ffi_library(source)` with jax.ffi as the target
    `name` for `platform`, once per process, and return `name` (for `jax.ffi.ffi_call`). A koan
    that gives its own name depends on no other koan's registration. Skips like `ffi_library`.
    """
    library = ffi_library(source)
    return _register(name, platform, library, symbol)


@functools.cache
def _register(name: str, platform: str, library: ctypes.CDLL, symbol: str) -> str:
    import jax

    jax.ffi.register_ffi_target(
        name, jax.ffi.pycapsule(getattr(library, symbol)), platform=platform
    )
    return name
