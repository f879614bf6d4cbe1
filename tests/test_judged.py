"""What a TODO is judged by, in words (jaxkoans/plugin/judged.py): shown under a TODO's failure."""

from __future__ import annotations

from jaxkoans.plugin import costs, judged


def test_the_lines_name_what_binds():
    profile = {"flops": {"outside": 1}, "fresh": {"k": [1.0]}, "grown": {}, "steps": {}}
    zh, en = judged.sentence(
        {"on_path": ["dot_general"], "costs": {"collective_bytes": "free: why"}, "fresh": "ref"},
        {"sig": profile},
    )
    assert zh.startswith(judged.ZH) and en.startswith(judged.EN)
    assert costs.WORDS["flops"][1] in en and costs.WORDS["collective_bytes"][1] not in en
    assert "doubled" not in en  # no grown run in the profile
    assert "scaled up by 32" not in en  # no bold case in the profile
    bold = profile | {"bold": {"k": {"print": [[1.0]]}}}
    zh_bold, en_bold = judged.sentence({"on_path": ["dot_general"]}, {"sig": bold})
    assert "its floats scaled up by 32" in en_bold and "放大 32 倍" in zh_bold
    assert "carry the result" in en and "agree with ref" in en
    _, quiet = judged.sentence({"on_path": ["dot_general"], "liveness": False}, {"sig": profile})
    assert "carry the result" not in quiet


def test_an_untraced_todo_is_judged_by_its_asserts_and_names_no_new_api():
    contract = {"traced": False, "why": "it calls jax.live_arrays(); the koan counts them"}
    _, en = judged.sentence(contract, docstring="count what is alive")
    assert "asserts" in en and "live_arrays" not in en and "the koan counts them" in en
    _, en = judged.sentence(contract, docstring="use jax.live_arrays()")
    assert "jax.live_arrays()" in en
    assert "moved" not in en
    replayed = {"sig": {"fresh": {"test_k": [[0.8, 0.0, 64.0]]}, "ints": {"test_k": True}}}
    zh, en = judged.sentence(contract, replayed, docstring="count what is alive")
    assert "moved (counts one up)" in en and "计数加一" in zh
    replayed["sig"]["names"] = {"test_k": True}  # its dicts' keys renamed (fresh.renamed)
    zh, en = judged.sentence(contract, replayed, docstring="count what is alive")
    assert "moved (counts one up, dict keys renamed)" in en and "字典的键改名" in zh


def test_a_failing_todo_shows_what_it_is_judged_by(tmp_path):
    """The report of a TODO not yet written ends with the
    lines its contract and its answer's profile give: the judge's own inputs."""
    import subprocess
    import sys

    from jaxkoans import course

    here = course.Course.here()
    koan = here.koans / "01" / "test_segments.py"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         f"{koan}::test_write_a_segment_softmax"],
        capture_output=True, text=True, timeout=300, cwd=here.root,
    )  # fmt: skip
    assert "待实现 / write the TODO" in done.stdout
    assert "评判：" in done.stdout and "Judged: its results on inputs" in done.stdout
    assert "segment_max" not in done.stdout.split("Judged:")[1]  # names no primitive
