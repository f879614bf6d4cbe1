"""raises_exactly and warns_exactly: the koans' `pytest.raises` / `pytest.warns` that name one
class, not a family, and never name the class that was raised or issued unless the learner asked
to see it."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from jaxkoans import BlankError, TodoError, __, raises_exactly, todo, warns_exactly
from jaxkoans.api.expect import REVEAL_ENV, WrongException
from jaxkoans.course import shipped as as_shipped

from .fakecourse import make_course, write


@pytest.fixture(autouse=True)
def hidden(monkeypatch):
    monkeypatch.delenv(REVEAL_ENV, raising=False)


def test_the_exact_class_passes_and_gives_the_exception_info():
    with raises_exactly(ModuleNotFoundError) as info:
        import jaxkoans_no_such_module  # noqa: F401
    assert info.type is ModuleNotFoundError


def test_a_base_class_is_refused_without_naming_the_exact_one():
    with pytest.raises(WrongException) as refused, raises_exactly(ImportError):
        import jaxkoans_no_such_module  # noqa: F401
    assert "base class" in str(refused.value)
    assert "ModuleNotFound" not in str(refused.value)
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


@pytest.mark.parametrize("too_broad", [Exception, BaseException, (KeyError, ValueError), 3])
def test_exception_and_base_exception_are_refused_before_the_code_runs(too_broad):
    ran = []
    with pytest.raises(WrongException, match="too broad") as refused, raises_exactly(too_broad):
        ran.append(True)
    assert not ran
    assert "太宽" in str(refused.value)  # bilingual


def test_another_class_is_not_named_while_hidden():
    with pytest.raises(WrongException) as refused, raises_exactly(ValueError):
        raise KeyError("k")
    assert "KeyError" not in str(refused.value) and "ValueError" in str(refused.value)


def test_revealed_the_class_raised_is_named_and_chained(monkeypatch):
    monkeypatch.setenv(REVEAL_ENV, "1")
    revealed = pytest.raises(WrongException, match="KeyError was raised")
    with revealed as refused, raises_exactly(ValueError):
        raise KeyError("k")
    assert isinstance(refused.value.__cause__, KeyError)


def test_no_exception_at_all_fails_in_its_own_words():
    """Not pytest's "DID NOT RAISE" (the report once read "your answer makes this line raise
    Failed"): raises_exactly says it in both languages."""
    with (
        pytest.raises(WrongException, match="nothing was raised here") as info,
        raises_exactly(KeyError),
    ):
        pass
    assert "没有抛出任何异常" in str(info.value) and "KeyError" in str(info.value)


def test_an_open_blank_stays_a_blank():
    with pytest.raises(BlankError), raises_exactly(__):
        raise KeyError("k")
    with pytest.raises(BlankError), raises_exactly(KeyError):
        __ + 1
    with pytest.raises(TodoError), raises_exactly(KeyError):
        todo("later")


def test_match_checks_the_message_of_the_exact_class():
    with raises_exactly(KeyError, match="needle"):
        raise KeyError("a needle here")
    with pytest.raises(WrongException, match="does not match"), raises_exactly(KeyError, match="x"):
        raise KeyError("other")


def test_warns_exactly_passes_for_the_exact_class_and_gives_the_warnings():
    with warns_exactly(DeprecationWarning, match="old") as issued:
        warnings.warn("old api", DeprecationWarning, stacklevel=1)
    assert [w.category for w in issued] == [DeprecationWarning]


@pytest.mark.parametrize("too_broad", [Warning, ValueError, (UserWarning, FutureWarning), 3])
def test_warns_exactly_refuses_warning_and_non_warnings_before_the_code_runs(too_broad):
    ran = []
    with pytest.raises(WrongException, match="too broad") as refused, warns_exactly(too_broad):
        ran.append(True)
    assert not ran
    assert "太宽" in str(refused.value)  # bilingual


def test_warns_exactly_refuses_a_sibling_or_base_class_without_naming_the_one_issued():
    with pytest.raises(WrongException) as refused, warns_exactly(DeprecationWarning):
        warnings.warn("old api", PendingDeprecationWarning, stacklevel=1)  # a sibling: not a base
    assert "PendingDeprecation" not in str(refused.value)
    assert "is not a DeprecationWarning" in str(refused.value)
    with pytest.raises(WrongException) as refused, warns_exactly(UserWarning):
        warnings.warn("bytes", BytesWarning, stacklevel=1)
    assert "is not a UserWarning" in str(refused.value)

    class JaxLikeWarning(DeprecationWarning):
        pass

    with pytest.raises(WrongException) as refused, warns_exactly(DeprecationWarning):
        warnings.warn("old api", JaxLikeWarning, stacklevel=1)
    assert "base class" in str(refused.value) and "JaxLike" not in str(refused.value)
    assert "父类" in str(refused.value)  # bilingual


def test_warns_exactly_names_the_warning_issued_only_when_revealed(monkeypatch):
    monkeypatch.setenv(REVEAL_ENV, "1")
    revealed = pytest.raises(WrongException, match="FutureWarning was issued")
    with revealed, warns_exactly(DeprecationWarning):
        warnings.warn("old api", FutureWarning, stacklevel=1)


def test_warns_exactly_fails_without_a_warning_and_on_another_message():
    with pytest.raises(WrongException, match="no warning"), warns_exactly(UserWarning):
        pass
    no_match = pytest.raises(WrongException, match="does not match")
    with no_match, warns_exactly(UserWarning, match="needle"):
        warnings.warn("haystack", UserWarning, stacklevel=1)


def test_warns_exactly_issues_the_other_warnings_again_only_on_success():
    with warnings.catch_warnings(record=True) as outside:
        warnings.simplefilter("always")
        with warns_exactly(FutureWarning):
            warnings.warn("expected", FutureWarning, stacklevel=1)
            warnings.warn("unrelated", UserWarning, stacklevel=1)
    assert [(w.category, str(w.message)) for w in outside] == [(UserWarning, "unrelated")]
    with warnings.catch_warnings(record=True) as outside:
        warnings.simplefilter("always")
        with pytest.raises(WrongException), warns_exactly(FutureWarning):
            warnings.warn("unrelated", UserWarning, stacklevel=1)
    assert outside == []  # under the course's error filter it would name the class


def test_warns_exactly_keeps_an_open_blank_a_blank():
    with pytest.raises(BlankError), warns_exactly(__):
        warnings.warn("old api", DeprecationWarning, stacklevel=1)
    with pytest.raises(BlankError), warns_exactly(DeprecationWarning):
        __ + 1


PRISTINE_RAISES = '''
import pytest

from jaxkoans import __


def test_which_error():
    """哪个错误。Which error does a missing key raise?"""
    with pytest.raises(__):
        {}["missing"]


def test_the_authors_own_raises():
    """作者的 raises。A pytest.raises the koan wrote itself is left alone."""
    with pytest.raises(Exception):
        {}["missing"]
'''


def run_koans(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "koans/01/test_raises.py", "-p", "jaxkoans.plugin.hooks",
         "-p", "no:cacheprovider", "-q", "--no-header"],
        cwd=root, env={"JAXKOANS_ROOT": str(root), "PATH": "/usr/bin:/bin", "HOME": str(root)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("fill", "passes", "says"),
    [
        ("KeyError", True, ""),
        ("LookupError", False, "base class"),
        ("Exception", False, "too broad"),
        ("BaseException", False, "too broad"),
        ("ValueError", False, "is not a ValueError"),
    ],
)
def test_a_pytest_raises_blank_asks_for_the_exact_class(tmp_path, fill, passes, says):
    root = make_course(tmp_path / "course")
    write(root / "koans" / "01" / "test_raises.py", PRISTINE_RAISES)
    as_shipped.write(root)  # the course as shipped (koans/.shipped.json)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True, timeout=60)
    subprocess.run([*git, "commit", "-qm", "raises koan"], check=True, timeout=60)
    write(
        root / "koans" / "01" / "test_raises.py",
        PRISTINE_RAISES.replace("pytest.raises(__)", f"pytest.raises({fill})"),
    )
    ran = run_koans(root)
    assert ("1 failed" not in ran.stdout) is passes, ran.stdout
    assert "2 passed" in ran.stdout if passes else "1 passed" in ran.stdout
    assert says in ran.stdout
    if not passes:
        assert "KeyError" not in ran.stdout.replace(f"pytest.raises({fill})", "")
        assert f"`{fill}`" in ran.stdout  # the learner's answer is shown


def test_the_refusal_reads_with_the_right_article():
    from jaxkoans.api.expect import _wrong_class_message

    assert "is not an AttributeError" in _wrong_class_message(AttributeError, ValueError())
    assert "is not a ValueError" in _wrong_class_message(ValueError, KeyError())
