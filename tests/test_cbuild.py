"""jaxkoans.api.cbuild: a csrc/ source is compiled once, cached, and a missing compiler says so."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from jaxkoans.api import cbuild

# Small, but it goes through JAX's FFI headers like the real kernels do.
SOURCE = """
#include "xla/ffi/api/c_api.h"
extern "C" int answer() { return XLA_FFI_API_MAJOR * 0 + 42; }
"""


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "answer.cc"
    path.write_text(SOURCE, encoding="utf-8")
    return path


def test_build_compiles_once_and_reuses_the_library(source, tmp_path, monkeypatch):
    out = tmp_path / "build"
    library = cbuild.build(source, build_dir=out)
    assert library.parent == out and library.suffix == ".so"
    assert ctypes.CDLL(str(library)).answer() == 42

    def no_compiler(*args, **kwargs):
        raise AssertionError(f"compiled again: {args}")

    monkeypatch.setattr(subprocess, "run", no_compiler)
    assert cbuild.build(source, build_dir=out) == library
    assert sorted(p.name for p in out.iterdir() if not p.name.endswith(".lock")) == [library.name]


def test_an_edited_source_gets_a_new_library(source, tmp_path):
    out = tmp_path / "build"
    first = cbuild.build(source, build_dir=out)
    source.write_text(SOURCE.replace("42", "43"), encoding="utf-8")
    second = cbuild.build(source, build_dir=out)
    assert second != first
    assert ctypes.CDLL(str(second)).answer() == 43


def test_concurrent_builds_share_one_library(source, tmp_path):
    out = tmp_path / "build"
    with ThreadPoolExecutor(2) as pool:
        paths = list(pool.map(lambda _: cbuild.build(source, build_dir=out), range(2)))
    assert paths[0] == paths[1]
    leftovers = [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == [], "temporary files left behind"


def test_a_compile_error_is_reported_with_the_compiler_output(tmp_path):
    broken = tmp_path / "broken.cc"
    broken.write_text("this is not C++\n", encoding="utf-8")
    with pytest.raises(cbuild.BuildError, match=r"broken\.cc"):
        cbuild.build(broken, build_dir=tmp_path / "build")
    assert [p.name for p in (tmp_path / "build").iterdir() if p.suffix in (".so", ".tmp")] == []


def test_a_missing_compiler_raises_a_bilingual_error(source, tmp_path, monkeypatch):
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(cbuild.CompilerNotFoundError) as info:
        cbuild.build(source, build_dir=tmp_path / "build")
    message = str(info.value)
    assert "未找到 C++ 编译器" in message
    assert "No C++ compiler (g++, clang++ or c++)" in message


def test_names_inside_csrc_resolve_there():
    assert (cbuild.CSRC / "leaky_sum.cc").is_file()
    assert cbuild.BUILD_DIR.relative_to(cbuild.CSRC.parent).as_posix() == "build/ffi"


# ---- what the koans call: ffi_library and ffi_target ------------------------------------


def test_ffi_library_builds_and_loads_once(source, tmp_path, monkeypatch):
    monkeypatch.setattr(cbuild, "BUILD_DIR", tmp_path / "build")
    library = cbuild.ffi_library(source)
    assert library.answer() == 42
    assert cbuild.ffi_library(source) is library  # one load per process / 每个进程只加载一次
    assert [p.suffix for p in (tmp_path / "build").iterdir() if p.suffix == ".so"] == [".so"]


def test_ffi_target_registers_the_handler_once_under_its_name(monkeypatch):
    import jax
    import jax.numpy as jnp
    import numpy as np

    name = cbuild.ffi_target("test_cbuild_leaky_sum", "leaky_sum.cc", "LeakySum")
    assert name == "test_cbuild_leaky_sum"
    x = jnp.array([1.0, 2.0, 3.0, 4.0])
    call = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(x.shape, x.dtype))
    np.testing.assert_allclose(call(x, decay=np.float32(0.5), reverse=False), [1, 2.5, 4.25, 6.125])

    registered = []
    monkeypatch.setattr(jax.ffi, "register_ffi_target", lambda *a, **k: registered.append(a[0]))
    assert cbuild.ffi_target(name, "leaky_sum.cc", "LeakySum") == name
    assert registered == []  # already registered in this process
    cbuild.ffi_target("test_cbuild_leaky_sum_2", "leaky_sum.cc", "LeakySum")
    assert registered == ["test_cbuild_leaky_sum_2"]  # another name is another registration


def test_ffi_library_skips_without_a_compiler(source, tmp_path, monkeypatch):
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(cbuild, "BUILD_DIR", tmp_path / "build")
    for load in (lambda: cbuild.ffi_library(source), lambda: cbuild.ffi_target("t", source, "f")):
        with pytest.raises(pytest.skip.Exception, match=r"No C\+\+ compiler"):
            load()


def test_ffi_library_lets_a_build_error_through(tmp_path, monkeypatch):
    broken = tmp_path / "broken.cc"
    broken.write_text("this is not C++\n", encoding="utf-8")
    monkeypatch.setattr(cbuild, "BUILD_DIR", tmp_path / "build")
    with pytest.raises(cbuild.BuildError, match=r"broken\.cc"):
        cbuild.ffi_library(broken)


def test_a_cached_library_is_not_used_without_a_compiler(source, tmp_path, monkeypatch):
    # the library's name depends on the compiler: without one, nothing cached is trusted, and the
    # koan skips like doctor says (it once passed on a stale build while doctor said "missing")
    monkeypatch.setattr(cbuild, "BUILD_DIR", tmp_path / "build")
    cached = cbuild.build(source)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(cbuild, "_load", lambda library: pytest.fail(f"loaded {library}"))
    with pytest.raises(pytest.skip.Exception, match=r"No C\+\+ compiler"):
        cbuild.ffi_library(source)
    assert cached.is_file()  # kept for when a compiler is back


def test_a_compiler_that_cannot_start_is_a_build_error_naming_it(source, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    broken = bin_dir / "g++"
    broken.write_bytes(b"\x00not an executable\n")  # exec fails: OSError, not a return code
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(cbuild.BuildError, match=r"build failed: .*/bin/g\+\+ on answer\.cc"):
        cbuild.build(source, build_dir=tmp_path / "build")
    assert [p.name for p in (tmp_path / "build").iterdir() if p.suffix in (".so", ".tmp")] == []


def test_a_build_directory_that_cannot_be_made_is_a_build_error(source, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(
        cbuild.BuildError, match=r"build failed: \S+ on answer\.cc into \S+a-file/build"
    ):
        cbuild.build(source, build_dir=blocker / "build")  # a file where the folder would go


def test_a_library_that_cannot_be_loaded_is_a_build_error(source, tmp_path, monkeypatch):
    monkeypatch.setattr(cbuild, "BUILD_DIR", tmp_path / "build")
    library = cbuild.build(source)
    library.write_bytes(b"truncated")  # a cache damaged after the build (a full disk, say)
    with pytest.raises(cbuild.BuildError, match=r"cannot load .*answer-.*\.so") as info:
        cbuild.ffi_library(source)
    assert f"rm {library}" in str(info.value)


KOAN_FILE = '''
import os, pathlib
from jaxkoans.api import cbuild

SOURCE = pathlib.Path(__file__).parent.parent / "broken.cc"
cbuild.BUILD_DIR = SOURCE.parent / "build"  # not the course's build/ffi

def test_build_fails():
    """编译。The kernel's library."""
    cbuild.ffi_library(SOURCE)

def test_no_compiler(monkeypatch):
    """编译器。No compiler on PATH."""
    monkeypatch.setenv("PATH", os.fspath(SOURCE.parent / "empty"))
    cbuild.ffi_target("koans_t", SOURCE, "f")
'''


def test_a_koan_reads_a_failed_build_as_the_environment_and_no_compiler_as_a_skip(pytester):
    (pytester.path / "broken.cc").write_text("int f( {\n", encoding="utf-8")
    (pytester.path / "empty").mkdir()
    directory = pytester.mkpydir("05")
    (directory / "chapter.toml").write_text(
        'title_zh = "第05章"\ntitle_en = "Chapter 05"\nfiles = ["test_a.py"]\n', encoding="utf-8"
    )
    (directory / "test_a.py").write_text(KOAN_FILE, encoding="utf-8")
    result = pytester.runpytest_subprocess(
        "-p", "jaxkoans.plugin.hooks", "-p", "no:cacheprovider", "-rs", "05"
    )  # fmt: skip
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*🛠️ 环境 / environment*", "*│ *broken.cc*"])
    result.stdout.fnmatch_lines(["SKIPPED*未找到 C++ 编译器*", "No C++ compiler*"])
    result.stdout.no_fnmatch_line("*❌*")


def test_a_read_only_course_builds_in_the_temporary_directory(source, tmp_path, monkeypatch):
    """grade's sandbox (and a read-only classroom copy) cannot write the course's build/ffi/:
    the library is built in the temporary directory instead, once."""
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setattr(cbuild, "BUILD_DIR", blocker / "build" / "ffi")  # cannot be made
    monkeypatch.setattr(cbuild.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    library = cbuild.build(source)
    assert library.parent == cbuild.fallback_dir() and library.parent.is_relative_to(
        tmp_path / "tmp"
    )
    assert ctypes.CDLL(str(library)).answer() == 42
    assert cbuild.build(source) == library  # built once


def _python(code: str, tmp_path) -> subprocess.CompletedProcess:
    """`code` in a fresh Python whose temporary directory is tmp_path."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )


MAKE = "from jaxkoans.api import cbuild\nfolder = cbuild.scratch_folder('jaxkoans-test-')\n"


def test_a_scratch_folder_is_gone_when_its_process_exits(tmp_path):
    """A koan's sources and library copies do not pile up in the temporary directory."""
    done = _python(MAKE + "(folder / 'x.cc').write_text('')\nprint(folder)\n", tmp_path)
    assert done.returncode == 0, done.stderr
    folder = done.stdout.strip()
    assert folder.startswith(str(tmp_path)) and not os.path.exists(folder)


def test_a_scratch_folder_left_by_a_killed_process_is_swept_by_the_next(tmp_path):
    """A process ended by a signal runs no atexit: the next scratch folder of that prefix sweeps
    its folder, and leaves a live process's folder alone."""
    kill = "import os, signal\nprint(folder, flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n"
    killed = _python(MAKE + kill, tmp_path)
    left = Path(killed.stdout.strip())
    assert killed.returncode == -9 and left.is_dir()  # no atexit ran
    live = tmp_path / f"jaxkoans-test-{os.getpid()}-live"
    live.mkdir()
    other = tmp_path / "jaxkoans-test-notapid"
    other.mkdir()
    swept = _python(MAKE, tmp_path)
    assert swept.returncode == 0, swept.stderr
    assert not left.exists() and live.is_dir() and other.is_dir()
