"""raises_exactly: the koans' `pytest.raises` that names one class, not a family."""

from __future__ import annotations

import pytest

from jaxkoans import raises_exactly


def test_the_exact_class_passes_and_gives_the_exception_info():
    with raises_exactly(ModuleNotFoundError) as info:
        import jaxkoans_no_such_module  # noqa: F401
    assert info.type is ModuleNotFoundError


def test_a_base_class_is_not_enough():
    base_class_given = pytest.raises(AssertionError, match="ModuleNotFoundError was raised")
    with base_class_given, raises_exactly(ImportError):
        import jaxkoans_no_such_module  # noqa: F401


def test_an_unrelated_exception_is_not_swallowed():
    with pytest.raises(KeyError), raises_exactly(ValueError):
        raise KeyError("k")
