"""Expectations the koans share beyond pytest's own."""

from __future__ import annotations

import contextlib

import pytest


@contextlib.contextmanager
def raises_exactly(cls):
    """pytest.raises，但要求异常的类恰好是 cls（不接受它的父类）。
    pytest.raises, but the exception's class must be exactly `cls`, not one of its bases.

    Most of JAX's tracer errors are TypeErrors and ModuleNotFoundError is an ImportError: a koan
    that asks which error it is must not accept the base class (or `Exception`)."""
    __tracebackhide__ = True
    with pytest.raises(cls) as info:
        yield info
    raised = type(info.value).__name__
    assert type(info.value) is cls, (
        f"抛出的是 {raised}，不是 {cls.__name__} / {raised} was raised, not {cls.__name__}"
    )
