"""authoring/check.py: a chapter README's koan and test counts match the chapter's koan files."""

from __future__ import annotations

from pathlib import Path

from jaxkoans.authoring import check
from jaxkoans.course import Course

from .fakecourse import dedent, make_course, write

README = """# 第一章 / Chapter one

这一章讲 JAX 的基础。This chapter teaches the basics of JAX arrays, their default types, and
how a function written by you is traced, compiled and run on the devices of this machine.

{koans} 个 koan（{tests} 个测试）。
{koans} koans ({tests} tests).
"""
CASES = dedent('''
    import pytest

    SHAPES = [(1,), (2,), (3,)]
    NAMES = {"a": 1, "b": 2}


    @pytest.mark.parametrize("shape", SHAPES[:2])
    @pytest.mark.parametrize("name", list(NAMES))
    def test_grid(shape, name):
        """网格。Two shapes times two names."""


    @pytest.mark.parametrize("shape", [(4,), (5,), (6,)])
    def test_listed(shape):
        """列表。Three cases."""
''')


def problems(tmp_path: Path, koans: int, tests: int) -> list[str]:
    root = make_course(tmp_path / "course")  # chapter 01: test_alpha.py, three koans
    write(root / "koans" / "01" / "test_cases.py", CASES)  # two koans, 4 + 3 tests
    write(root / "koans" / "01" / "README.md", README.format(koans=koans, tests=tests))
    checkout = Course(root)
    return check.readme_problems(checkout, checkout.chapters()[0])


def test_a_readme_with_the_chapters_counts_passes(tmp_path):
    assert problems(tmp_path, 5, 10) == []


def test_a_stale_readme_count_is_named_in_each_language(tmp_path):
    assert problems(tmp_path, 4, 9) == [
        "koans/01/README.md: its Chinese says 4 koans (9 tests), the chapter has 5 (10 tests)",
        "koans/01/README.md: its English says 4 koans (9 tests), the chapter has 5 (10 tests)",
    ]
    assert len(problems(tmp_path / "tests", 5, 9)) == 2  # the parametrized cases are counted
