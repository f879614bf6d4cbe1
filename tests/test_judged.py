"""A TODO's docstring ends with what its contract judges (jaxkoans/authoring/judged.py): the check
finds the lines missing, or stale once the contract changes."""

from __future__ import annotations

from jaxkoans import course
from jaxkoans.authoring import judged
from jaxkoans.plugin import costs

HERE = course.Course.here()
GELU = "test_other_platforms.py::gelu"


def _chapter(checkout: course.Course, number: str = "02") -> course.Chapter:
    return next(c for c in checkout.chapters() if c.number == number)


def test_the_lines_name_what_binds():
    profile = {"flops": {"outside": 1}, "fresh": {"k": [1.0]}, "grown": {}, "steps": {}}
    zh, en = judged.sentence(
        {"on_path": ["dot_general"], "costs": {"collective_bytes": "free: why"}, "fresh": "ref"},
        {"sig": profile},
    )
    assert zh.startswith(judged.ZH) and en.startswith(judged.EN)
    assert costs.WORDS["flops"][1] in en and costs.WORDS["collective_bytes"][1] not in en
    assert "doubled" not in en  # no grown run in the profile
    assert "carry the result" in en and "agree with ref" in en
    _, quiet = judged.sentence({"on_path": ["dot_general"], "liveness": False}, {"sig": profile})
    assert "carry the result" not in quiet


def test_an_untraced_todo_is_judged_by_its_asserts_and_names_no_new_api():
    contract = {"traced": False, "why": "it calls jax.live_arrays(); the koan counts them"}
    _, en = judged.sentence(contract, docstring="count what is alive")
    assert "asserts" in en and "live_arrays" not in en and "the koan counts them" in en
    _, en = judged.sentence(contract, docstring="use jax.live_arrays()")
    assert "jax.live_arrays()" in en
