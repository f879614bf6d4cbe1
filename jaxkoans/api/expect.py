"""Expectations the koans share beyond pytest's own: `raises_exactly`, the exact-class raises,
and `warns_exactly`, the exact-class warns.

An exception blank asks the learner to predict *which* error JAX raises. So a wrong class must
not be answered with the right one: unless the learner asked to see it (`progress.py reveal`,
`pytest --koans-reveal`), the failure says that another class was raised, never which.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings

import pytest

from jaxkoans.api import REVEAL_ENV
from jaxkoans.api.blanks import BlankError, TodoError, _Blank, _refuse

TOO_BROAD = (Exception, BaseException)


class WrongException(AssertionError):
    """The code raised, but not exactly the class the koan's line names. / 抛出的类不对。"""


def revealing() -> bool:
    """True when the learner asked to see what JAX computed (and raised)."""
    return os.environ.get(REVEAL_ENV) == "1"


def refuse_too_broad(cls) -> None:
    """A koan's exception must be one exact class: `Exception`, `BaseException`, a tuple or a
    non-class is refused before the code runs, with the reason (never the right class)."""
    __tracebackhide__ = True
    if isinstance(cls, _Blank):
        _refuse()
    if isinstance(cls, type) and issubclass(cls, BaseException) and cls not in TOO_BROAD:
        return
    raise WrongException(
        f"请写出确切的异常类：{_name(cls)} 太宽了，几乎任何错误都满足它，也就什么都没预测。\n"
        f"Name the exact exception class: {_name(cls)} is too broad — nearly any error "
        "matches it, so it predicts nothing."
    )


@contextlib.contextmanager
def raises_exactly(cls, *, match: str | re.Pattern[str] | None = None):
    """pytest.raises，但要求异常的类恰好是 cls（不接受它的父类，也不接受 Exception）。
    pytest.raises, but the exception's class must be exactly `cls`, not one of its bases.

    Most of JAX's tracer errors are TypeErrors and ModuleNotFoundError is an ImportError: a koan
    that asks which error it is must not accept the base class (or `Exception`)."""
    __tracebackhide__ = True
    refuse_too_broad(cls)
    info = None
    try:
        with pytest.raises(BaseException) as info:
            yield info
    except pytest.fail.Exception as nothing:  # pytest's "DID NOT RAISE": no exception at all
        if "DID NOT RAISE" not in str(nothing):
            raise
        raise WrongException(
            f"这段代码没有抛出任何异常（预测的是 {_name(cls)}）/ nothing was raised here "
            f"(predicted: {_name(cls)})"
        ) from None
    raised = info.value
    if isinstance(raised, BlankError | TodoError) or not isinstance(raised, Exception):
        raise raised  # an open blank, a TODO, Ctrl-C, pytest's own outcomes: not an answer
    if type(raised) is not cls:
        if revealing():
            raise WrongException(
                f"抛出的是 {_name(type(raised))}，不是 {_name(cls)} / "
                f"{_name(type(raised))} was raised, not {_name(cls)}"
            ) from raised
        raise WrongException(_wrong_class_message(cls, raised)) from None
    if match is not None and not re.search(match, str(raised)):
        raise WrongException(
            f"异常的消息不符合 {match!r} / the exception's message does not match {match!r}"
        ) from (raised if revealing() else None)


@contextlib.contextmanager
def warns_exactly(cls, *, match: str | re.Pattern[str] | None = None):
    """pytest.warns，但要求警告的类恰好是 cls（不接受它的父类，也不接受 Warning）。
    pytest.warns, but one warning's class must be exactly `cls`, not one of its bases.

    pytest.warns accepts a base class, and pytest.warns(Warning) passes for every warning: a koan
    that asks which warning JAX issues must not. Gives the list of warnings issued; the ones that are
    not the expected one are issued again on success, as pytest.warns does, but not on a wrong
    prediction (under the course's error filter that would name the class)."""
    __tracebackhide__ = True
    if isinstance(cls, _Blank):
        _refuse()
    if not (isinstance(cls, type) and issubclass(cls, Warning) and cls is not Warning):
        raise WrongException(
            f"请写出确切的警告类：{_name(cls)} 不是一个具体的警告类（Warning 太宽，什么都满足）。\n"
            f"Name the exact warning class: {_name(cls)} is not one specific warning class "
            "(Warning is too broad: every warning matches it, so it predicts nothing)."
        )
    with warnings.catch_warnings(record=True) as issued:
        warnings.simplefilter("always")
        yield issued
    exact = [w for w in issued if w.category is cls]
    hits = [w for w in exact if match is None or re.search(match, str(w.message))]
    if hits:
        for w in issued:
            if w not in hits:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        return
    if not issued:
        raise WrongException(
            f"没有发出任何警告（预测的是 {_name(cls)}）/ no warning was issued (predicted: {_name(cls)})"
        )
    if exact:
        raise WrongException(
            f"警告的消息不符合 {match!r} / the warning's message does not match {match!r}"
        )
    if revealing():
        names = ", ".join(sorted({_name(w.category) for w in issued}))
        raise WrongException(
            f"发出的是 {names}，不是 {_name(cls)} / {names} was issued, not {_name(cls)}"
        )
    base = any(issubclass(w.category, cls) for w in issued)
    raise WrongException(_wrong_class_message(cls, base, ("发出的警告", "warning issued")))


def _wrong_class_message(cls: type, raised, what=("抛出的异常", "exception raised")) -> str:
    """A wrong class: `raised` (an exception, or True when a subclass of `cls` was issued) is
    said to be a subclass of `cls`, or not, never which class it is."""
    if raised is True or isinstance(raised, cls):
        return (
            f"{_name(cls)} 是{what[0]}的父类：请写出确切的那个类。\n"
            f"{_name(cls)} is a base class of the {what[1]}: name the exact class."
        )
    return (
        f"{what[0]}不是 {_name(cls)}（是哪个类先不显示：先预测，再验证）。\n"
        f"The {what[1]} is not {_article(cls)} {_name(cls)} (which one stays hidden: "
        "predict, then check)."
    )


def _article(cls) -> str:
    """'an' before a class name read with a vowel sound (AttributeError, IndexError), else 'a'."""
    word = _name(cls).rsplit(".", 1)[-1].lower()
    you = word.startswith(("uni", "us", "uti"))  # a UserWarning, a UnicodeError: "you"
    return "an" if word[:1] in "aeiou" and not you else "a"


def _name(cls) -> str:
    if isinstance(cls, type):
        module = cls.__module__
        return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
    return repr(cls)
