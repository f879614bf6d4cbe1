"""progress.py's bookkeeping: a broken or hanging file costs only its own koans."""

from __future__ import annotations

from pathlib import Path

from jaxkoans import course
from jaxkoans.course import Course
from jaxkoans.learner.koan_runs import Koan, inventory, listed_koans, merge

HERE = Course.here()

CHAPTER = course.Chapter(number="01", title_zh="章", title_en="Chapter", files=("test_a.py",))


def test_koans_of_a_file_that_does_not_parse_are_still_counted(tmp_path: Path):
    broken = tmp_path / "test_a.py"
    broken.write_text("def test_one():\n    x = (\n\ndef test_two():\n    pass\n", encoding="utf-8")
    assert [(name, line) for name, line, _ in listed_koans(broken)] == [
        ("test_one", 1),
        ("test_two", 4),
    ]


def _koans() -> list[Koan]:
    return [Koan(CHAPTER, Path("koans/01/test_a.py"), name, 1) for name in ("test_one", "test_two")]


def test_a_collect_error_marks_only_that_files_koans():
    koans = [*_koans(), Koan(CHAPTER, Path("koans/01/test_b.py"), "test_three", 1)]
    events = [
        {"event": "collect-error", "path": "koans/01/test_a.py", "message": "SyntaxError"},
        {
            "event": "koan",
            "nodeid": "koans/01/test_b.py::test_three",
            "state": "passed",
            "cause": "",
            "line": 3,
        },
        {"event": "finish", "exitstatus": 1},
    ]
    progress = merge(HERE, koans, events, "")
    assert [k.state for k in progress.koans] == ["failing", "failing", "passed"]
    assert "cannot be imported" in progress.problems[0]


def test_a_hang_names_the_koan_that_was_running():
    events = [
        {"event": "running", "nodeid": "koans/01/test_a.py::test_one"},
        {
            "event": "koan",
            "nodeid": "koans/01/test_a.py::test_one",
            "state": "passed",
            "cause": "",
            "line": 1,
        },
        {"event": "running", "nodeid": "koans/01/test_a.py::test_two"},
    ]
    progress = merge(HERE, _koans(), events, "the koans did not finish within 900 s")
    assert progress.koans[0].state == "passed"
    assert progress.koans[1].result.note == "did not report (crash or hang)"
    assert progress.problems[0] == (
        "the koans did not finish within 900 s (still running: koans/01/test_a.py::test_two)"
    )
    assert "koans/01/test_a.py::test_two" in progress.problems[1]  # named, as a crash is
    assert "test_two" in progress.file_problems["koans/01/test_a.py"]


def test_next_koan_follows_the_recommended_path():
    late = course.Chapter(number="07", title_zh="七", title_en="Seven")
    mid = course.Chapter(number="08", title_zh="八", title_en="Eight")
    koans = [
        Koan(late, Path("koans/07/test_x.py"), "test_x", 1),
        Koan(mid, Path("koans/08/test_y.py"), "test_y", 1),
    ]
    progress = merge(HERE, koans, [], "")
    assert progress.next_koan(["01", "08", "07"]).name == "test_y"


def test_the_inventory_is_in_course_order():
    koans = inventory(HERE, HERE.chapters())
    chapter = HERE.chapters()[0]
    files = [k.path.name for k in koans if k.chapter.number == chapter.number]
    assert files == sorted(files, key=chapter.file_rank)


def test_a_parametrized_koan_passes_only_when_every_case_passes():
    item = {"event": "koan", "path": "koans/01/test_a.py", "cause": "", "line": 1, "duration": 0.1}
    events = [
        {**item, "nodeid": "koans/01/test_a.py::test_one[small]", "name": "test_one[small]", "state": "passed"},
        {**item, "nodeid": "koans/01/test_a.py::test_one[big]", "name": "test_one[big]", "state": "failing", "cause": "wrong", "line": 9},
        {**item, "nodeid": "koans/01/test_a.py::test_two[a]", "name": "test_two[a]", "state": "passed"},
        {**item, "nodeid": "koans/01/test_a.py::test_two[b]", "name": "test_two[b]", "state": "passed"},
    ]  # fmt: skip
    progress = merge(HERE, _koans(), events, "")
    one, two = progress.koans
    assert (one.state, one.result.cause, one.line) == ("failing", "wrong", 9)
    assert two.state == "passed"


def test_an_unwritable_store_costs_only_the_memory(tmp_path, monkeypatch, capsys):
    """A read-only checkout (a classroom's copy): nothing is remembered, one message, no crash."""
    from jaxkoans.learner import state

    monkeypatch.setattr(state, "_warned", set())
    store = tmp_path / ".jaxkoans"

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(state.tempfile, "mkstemp", refuse)
    assert state.save(store, "results.json", {"schema": 1}) is False
    assert state.save(store, "hints.json", {}) is False
    assert state.load(store, "results.json") == {}
    assert capsys.readouterr().err.count("cannot be written") == 1


def test_remembered_results_depend_on_the_whole_harness():
    """A change anywhere in jaxkoans/ (the plugin, the koan-file model), not only in the
    learner's tools, makes progress.py measure the koans again."""
    from jaxkoans.learner import memory

    package = Path(course.__file__).resolve().parents[1]
    digested = set(memory.harness_files(HERE.root))
    for module in (
        "plugin/hooks.py",
        "plugin/classify.py",
        "course/koan_model.py",
        "api/blanks.py",
    ):
        assert package / module in digested
