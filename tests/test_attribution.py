"""Whom a failure is pinned on (plugin/classify.py): the fix region only for a koan that runs
it, and never an exception blank for values computed beside its `with raises_exactly(…)`."""

from __future__ import annotations

import ast
import textwrap

from jaxkoans.course import fills
from jaxkoans.plugin import classify
from tests.test_harness import chapter, run

REGION_AND_PREDICTION = """
# ✍️ BEGIN
def mean(x):
    return x.sum() / 2  # bug: the size is not always 2
# ✍️ END

def test_mean():
    \"\"\"平均值。The mean.\"\"\"
    assert float(mean(jnp.arange(4.0))) == 1.5

def test_a_prediction():
    \"\"\"预测。A prediction that never runs the region.\"\"\"
    assert jnp.arange(4.0).shape == (5,)
"""


def test_an_unfixed_region_is_pinned_only_on_the_koans_that_run_it(pytester):
    """A wrong prediction in a koan that never reaches the untouched region reads as a wrong
    answer, not as "fix the marked code" (issue 59: capstones training and tools)."""
    from jaxkoans.course import twins

    chapter(pytester, "01", {"test_a.py": REGION_AND_PREDICTION})
    koan = pytester.path / "01" / "test_a.py"
    shipped = twins.region_hashes(koan.read_text(encoding="utf-8"))
    with open(pytester.path / "01" / "chapter.toml", "a", encoding="utf-8") as manifest:
        manifest.write(f'[regions]\n"test_a.py" = ["{shipped[0]}"]\n')
    result = run(pytester, "01")
    result.stdout.fnmatch_lines(
        ["*::test_mean - ✍️ 待修复 / fix the marked code*", "*::test_a_prediction - ❌ 还不对*"]
    )


SHIPPED = '''
def test_served():
    exp = make()
    assert exp.result == __
    with raises_exactly(__):
        exp.call(1)
'''


def test_a_call_inside_raises_exactly_does_not_make_its_blank_a_source():
    """`with raises_exactly(X): exp.call(…)` checks an exception; it computes nothing that
    `exp` holds. A failing assert on `exp` reads the fills of its own line, not X (issue 59:
    09 export serving reported "your answer: ValueError · ValueError" for a TODO's bug)."""
    learner = SHIPPED.replace("result == __", "result == 3").replace("(__)", "(ValueError)")
    taken = fills.take(textwrap.dedent(SHIPPED), textwrap.dedent(learner))
    function = taken.tree.body[0]
    statement = next(n for n in ast.walk(function) if isinstance(n, ast.Assert))
    found = classify._DataWalk(taken, function).origins(statement)
    assert [fill.text for fill in found.fills] == ["3"]
