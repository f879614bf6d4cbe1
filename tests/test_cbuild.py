"""jaxkoans.api.cbuild: a csrc/ source is compiled once, cached, and a missing compiler says so."""

from __future__ import annotations

import ctypes
import subprocess
from concurrent.futures import ThreadPoolExecutor

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
