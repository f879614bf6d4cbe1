"""Issue 55: the boundary a koan's checks run behind (jaxkoans/plugin/boundary.py), refusals by
kind, results of exact types (plugin/result_types.py), and honest work that keeps its points.

Each route class of the issue is shown caught, with three more routes of our own per class;
honest edits are shown free. The unit tests run in this process; the end-to-end ones run the
learner's pytest and grade on a small course of their own.
"""

from __future__ import annotations

import ast
import dataclasses
import gc
import inspect
import marshal
import os
import shutil
import subprocess
import sys
import textwrap
import traceback
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import numpy.testing  # loaded before a fingerprint, as the plugin does
import pytest

from jaxkoans.course import fills, predictions
from jaxkoans.course import shipped as shipped_course
from jaxkoans.grader import grading, tamper
from jaxkoans.plugin import boundary, result_types

REPO = Path(__file__).resolve().parent.parent


# ---- 1. state by value: a function changed in place keeps its identity, not its fingerprint ---


@pytest.fixture
def fingerprint():
    found = boundary.Fingerprint()
    yield found
    assert found.restore() == [] or True  # whatever a failed test left is put back


def _noop(*args, **kwargs):
    return None


def _swap_code_by_marshal():
    code = marshal.loads(marshal.dumps(_noop.__code__))
    np.testing.assert_allclose.__code__ = code


def _swap_code_by_codetype():
    c = _noop.__code__
    built = types.CodeType(
        c.co_argcount, c.co_posonlyargcount, c.co_kwonlyargcount, c.co_nlocals,
        c.co_stacksize, c.co_flags, c.co_code, c.co_consts, c.co_names, c.co_varnames,
        c.co_filename, c.co_name, c.co_qualname, c.co_firstlineno, c.co_linetable,
        c.co_exceptiontable,
    )  # fmt: skip
    object.__setattr__(np.testing.assert_array_equal, "__code__", built)


def _widen_defaults():
    object.__setattr__(np.testing.assert_allclose, "__defaults__", (1e9, 1e9, True, "", True))


def _kwdefaults_in_place():
    function = next(
        f
        for f in vars(np.testing).values()
        if isinstance(f, types.FunctionType) and f.__kwdefaults__
    )
    key = next(iter(function.__kwdefaults__))
    function.__kwdefaults__[key] = object()  # no setattr, no audit event


def _closure_cell():
    function = next(
        f
        for f in vars(jax._src.numpy.lax_numpy).values()
        if isinstance(f, types.FunctionType) and f.__closure__
    )
    cell = next(c for c in function.__closure__ if c.cell_contents is not None)
    cell.cell_contents = _noop


def _class_attribute():
    type.__setattr__(type(jnp.ones(1)), "__sub__", lambda a, b: 0.0)


def _module_name():
    object.__setattr__(np.testing, "assert_array_equal", _noop)


IN_PLACE = {  # the issue's two, then ours
    "__defaults__ through object.__setattr__": _widen_defaults,
    "__code__ built by marshal": _swap_code_by_marshal,
    "__code__ built by types.CodeType": _swap_code_by_codetype,
    "__kwdefaults__ changed in place": _kwdefaults_in_place,
    "a closure cell's contents": _closure_cell,
    "a method of jax.Array's class": _class_attribute,
    "a module's name, by object.__setattr__": _module_name,
}


@pytest.mark.parametrize("route", IN_PLACE)
def test_a_function_changed_in_place_is_found_by_value_and_put_back(fingerprint, route):
    real = np.testing.assert_allclose
    IN_PLACE[route]()
    found = fingerprint.restore()
    assert found, route
    assert fingerprint.restore() == []  # put back: the next koan runs on the real ones
    assert np.testing.assert_allclose is real
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(1.0, 2.0)
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal([1], [2])


def test_honest_use_of_the_libraries_changes_nothing(fingerprint):
    x = jnp.arange(6.0).reshape(2, 3)
    jax.jit(lambda a: (a * 2).sum(0))(x).block_until_ready()
    jax.grad(lambda a: jnp.sin(a).sum())(x)
    np.testing.assert_allclose(np.asarray(x), np.arange(6.0).reshape(2, 3))
    assert fingerprint.intact() and fingerprint.restore() == []


# ---- 2. refusals by kind: an audit hook sees the route, however it is spelled -----------------


@pytest.fixture(scope="module")
def hook():
    """An audit hook for which every line of this file is the learner's, no category allowed."""
    arm, drain = boundary.install(lambda code, offset: "" if code.co_filename == __file__ else None)
    return arm, drain


def _frames_by_current_frames():  # the issue's route: the program reader's frame names
    frames = sys._current_frames()
    return [object.__getattribute__(f, "f_code").co_name for f in frames.values()]


def _frames_by_getframe():
    look = getattr(sys, "_get" + "frame")
    return look(1).f_back


def _frames_by_generator():
    def gen():
        yield 1

    g = gen()
    return object.__getattribute__(g, "gi" + "_frame")


def _frames_by_coroutine():
    async def co():
        return 1

    c = co()
    try:
        return getattr(c, "cr_" + "frame")
    finally:
        c.close()


def _frames_by_traceback():
    try:
        raise ValueError
    except ValueError as error:
        return error.__traceback__.tb_frame.f_back


def _code_by_replace():
    return _noop.__code__.replace(co_name="other")


def _code_by_marshal():
    return marshal.loads(marshal.dumps(compile("1", "<x>", "eval")))


def _code_by_codetype():
    c = _noop.__code__
    return types.CodeType(
        c.co_argcount, c.co_posonlyargcount, c.co_kwonlyargcount, c.co_nlocals,
        c.co_stacksize, c.co_flags, c.co_code, c.co_consts, c.co_names, c.co_varnames,
        c.co_filename, c.co_name, c.co_qualname, c.co_firstlineno, c.co_linetable,
        c.co_exceptiontable,
    )  # fmt: skip


def _defaults_set():
    def f(a=1):
        return a

    object.__setattr__(f, "__defaults__", (2,))


def _inspect_stack():
    return inspect.stack()


def _inspect_currentframe():
    return inspect.currentframe()


def _extract_stack():
    return traceback.extract_stack()


def _referrers():
    return gc.get_referrers(_noop)


def _ctypes():
    import ctypes

    return ctypes.c_long.from_address(id(_noop))


def _subprocess():
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", "pass"], timeout=60, check=True)


def _os_system():
    import os

    return os.system("true")


def _whole_batch():  # red team 11a: a batch norm from the BatchTracer's whole batch
    return jax.vmap(lambda x: x - getattr(x, "val").mean(0), axis_name="batch")(jnp.ones((4, 2)))


def _tangent_read():
    return jax.jvp(lambda x: x * x.tangent, (1.0,), (2.0,))


def _whole_batch_by_contents():  # red team 12b: the slots handed out by a method of JAX's
    return jax.vmap(lambda x: x - dict(x._contents())["val"].mean(0))(jnp.ones((4, 2)))


READS = {  # the issue's route first; then the brief's list and our own
    "sys._current_frames + object.__getattribute__": (_frames_by_current_frames, "frames"),
    "sys._getframe spelled apart": (_frames_by_getframe, "frames"),
    "gi_frame": (_frames_by_generator, "frames"),
    "cr_frame": (_frames_by_coroutine, "frames"),
    "tb_frame": (_frames_by_traceback, "frames"),
    "code.replace": (_code_by_replace, "code"),
    "marshal.loads": (_code_by_marshal, "code"),
    "types.CodeType": (_code_by_codetype, "code"),
    "__defaults__ set": (_defaults_set, "code"),
    "inspect.stack": (_inspect_stack, "frames"),
    "inspect.currentframe": (_inspect_currentframe, "frames"),
    "traceback.extract_stack": (_extract_stack, "frames"),
    "gc.get_referrers": (_referrers, "inspect"),
    "ctypes": (_ctypes, "inspect"),
    # another process reads the answer file (`cat`): red team 6
    "subprocess.run": (_subprocess, "exec"),
    "os.system": (_os_system, "exec"),
    # a transformation's tracer holds more than its function is handed
    "BatchTracer.val": (_whole_batch, "tracer"),
    "JVPTracer.tangent": (_tangent_read, "tracer"),
    "BatchTracer._contents": (_whole_batch_by_contents, "tracer"),
}


@pytest.mark.parametrize("route", READS)
def test_a_read_of_frames_or_code_is_refused_by_kind(hook, route):
    arm, drain = hook
    function, category = READS[route]
    drain()
    arm("koan")
    try:
        function()
    finally:
        arm(None)
    found = drain()
    assert any(f": {category}, from the learner's code (test_boundary.py:" in f for f in found), (
        found
    )


@pytest.mark.parametrize("link", [os.symlink, os.link])
def test_a_koan_file_imported_through_a_link_is_refused(tmp_path, monkeypatch, link):
    """A link to an answer file under another name, imported: the open is the answer's text
    (red team 6: `os.symlink(answer, "seg_copy.py")`, then `import seg_copy`)."""
    answer = tmp_path / "answers" / "01" / "test_x.py"
    answer.parent.mkdir(parents=True)
    answer.write_text("VALUE = 42\n")
    course = frozenset({(answer.stat().st_dev, answer.stat().st_ino)})
    arm, drain = boundary.install(
        lambda code, offset: "" if code.co_filename == __file__ else None, None, course
    )
    link(answer, tmp_path / "linked_copy_of_x.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    arm("koan")
    try:
        import linked_copy_of_x  # noqa: F401
    finally:
        arm(None)
        sys.modules.pop("linked_copy_of_x", None)
    assert any(f.startswith("open: file, from the learner's code") for f in drain())


def test_the_libraries_own_reads_and_honest_code_are_not_refused(hook):
    arm, drain = hook
    drain()
    arm("koan")
    try:
        x = jnp.arange(4.0)
        jax.jit(lambda a: jnp.cumsum(a) * 2)(x).block_until_ready()  # JAX reads code itself
        np.testing.assert_allclose(np.asarray(jax.grad(lambda a: (a**2).sum())(x)), 2 * x)
        batch_norm = jax.vmap(lambda a: a - jax.lax.pmean(a, "b"), axis_name="b")  # JAX's reads
        jax.jvp(jax.jit(batch_norm), (x,), (x,))
    finally:
        arm(None)
    assert drain() == []


def test_a_library_installed_under_the_standard_library_is_no_standard_library():
    """conda, or a Python without a venv, installs packages under lib/python3.X/: a read of
    `__code__` there is the package's, not the learner line that called it (found on a TPU
    machine, where Mosaic's lowering reads the kernel's code)."""
    stdlib, packages = "/opt/conda/lib/python3.13/", ("/opt/conda/lib/python3.13/site-packages/",)
    assert boundary.standard_library("/opt/conda/lib/python3.13/inspect.py", stdlib, packages)
    assert boundary.standard_library("<string>", stdlib, packages)
    jax_file = "/opt/conda/lib/python3.13/site-packages/jax/_src/pallas/core.py"
    assert not boundary.standard_library(jax_file, stdlib, packages)
    assert not boundary.standard_library("/work/koans/07/test_kernels.py", stdlib, packages)


def test_the_text_refuses_the_same_kinds_before_the_koan_runs():
    from jaxkoans.course import reading

    spelled = {
        "sys._current_frames()": "frames",
        "object.__getattribute__(f, name)": "code",
        "object.__setattr__(t, 'assert_allclose', f)": "code",
        "g.ag_frame": "frames",
        "import marshal": "code",
        "types.CodeType": "code",
        "gc.get_referrers(f)": "inspect",
        "from jaxkoans.plugin import boundary": "harness",
        "import subprocess": "exec",
        "import runpy": "exec",
        "from multiprocessing import Pool": "exec",
        "os.popen('cat answers/01/x.py')": "exec",
        "from os import execv": "exec",
    }
    for source, category in spelled.items():
        found = reading.in_node(ast.parse(source), {"types": "types", "gc": "gc"})
        assert category in {c for _, _, c in found}, (source, found)


# ---- 3. results of exact types ------------------------------------------------------------------


class _Zero(float):  # the issue's route: passes abs(result - measured) < 1e-12
    def __sub__(self, other):
        return 0.0


class _Spoofed(float):  # named after a builtin
    __module__ = "builtins"
    __qualname__ = "float"


class _Row(tuple):
    pass


@dataclasses.dataclass
class _Box:
    value: object


FOREIGN = {
    "a float subclass": _Zero(1.0),
    "a class built by type()": type("F", (float,), {"__eq__": lambda s, o: True})(1.0),
    "a class that names itself float": _Spoofed(1.0),
    "a subclass inside a tuple and a dict": (1.0, {"x": [2, _Zero(3.0)]}),
    "a subclass in a namespace": types.SimpleNamespace(a=1, b=_Zero(0.0)),
    "a tuple subclass": _Row((1, 2)),
}
HONEST = {
    "float": 0.5,
    "int, str, None, bool": (3, "s", None, True),
    "numpy": (np.float32(1.0), np.arange(3), np.dtype("int8")),
    "jax": (jnp.ones(3), jax.sharding.PartitionSpec("x", None), jax.jit(lambda a: a)),
    "containers": {"a": [1, (2.0, {"b": jnp.zeros(2)})], "c": frozenset({1})},
}


@pytest.mark.parametrize("case", FOREIGN)
def test_a_result_of_a_type_the_learners_code_defines_is_foreign(case):
    assert result_types.foreign(FOREIGN[case], set()) is not None


@pytest.mark.parametrize("case", HONEST)
def test_results_of_library_types_are_exact(case):
    assert result_types.foreign(HONEST[case], set()) is None


def test_a_class_of_the_shipped_file_is_the_courses_own():
    assert result_types.foreign(_Box(1.0), {_Box}) is None
    assert result_types.foreign(_Box(_Zero(1.0)), {_Box}) is not None


# ---- 5. honest work keeps every point --------------------------------------------------------


@pytest.mark.parametrize(
    "fill", ["dict(x=0, y=1)", "dict(x=0, y=dict(z=(1, 2)))", "[dict(a=1.5), None]"]
)
def test_a_dict_call_of_literals_is_a_literal(fill):
    tree = ast.parse(f"value = {fill}")
    node = tree.body[0].value
    assert predictions.is_prediction(predictions.LITERAL, node, tree)


@pytest.mark.parametrize("fill", ["dict(x=f())", "dict(**d)", "dict([(1, 2)])", "dict(x=y)"])
def test_a_dict_call_that_computes_is_not(fill):
    tree = ast.parse(f"value = {fill}")
    assert not predictions.is_prediction(predictions.LITERAL, tree.body[0].value, tree)


def test_dict_rebound_by_the_file_is_not_the_builtin():
    tree = ast.parse("def dict(**k):\n    return 0\n\nvalue = dict(x=0)")
    assert not predictions.is_prediction(predictions.LITERAL, tree.body[1].value, tree)


REGION_SHIPPED = '''"""A koan with a fix region."""

from jaxkoans import __, todo  # noqa: F401


def test_region():
    """修复。The sum of a list."""
    # ✍️ BEGIN
    total = sum([1,2,3]) # a comment
    # ✍️ END
    assert total == 7
'''


def test_a_formatters_change_in_a_fix_region_is_no_attempt():
    formatted = REGION_SHIPPED.replace(
        "    total = sum([1,2,3]) # a comment\n",
        "    total = sum(\n        [1, 2, 3]\n    )  # a comment, reflowed\n",
    )
    taken = fills.take(REGION_SHIPPED, formatted)
    assert taken.graded == REGION_SHIPPED and taken.nodes == [] and taken.ignored == []
    edited = REGION_SHIPPED.replace("sum([1,2,3])", "sum([1, 2, 4])")
    assert fills.take(REGION_SHIPPED, edited).graded != REGION_SHIPPED  # an edit still counts


# ---- End to end: the learner's pytest and grade on a course of their own ---------------------

KOAN = '''"""假的一章 / a fake chapter: the boundary."""

import jax.numpy as jnp
import numpy as np

from jaxkoans import __, todo  # noqa: F401


def scaled(x):
    """Returns 2 * x."""
    {scaled}


def measured():
    """Returns the float 0.5."""
    {measured}


def test_scaled():
    """加倍。scaled doubles an array."""
    np.testing.assert_allclose(scaled(jnp.arange(3.0)), [0.0, 2.0, 4.0])


def test_measured():
    """测量。measured returns one half."""
    result = measured()
    assert abs(result - 0.5) < 1e-12


def test_sizes():
    """字典。A dict of sizes."""
    assert {{"x": 0, "y": 2}} == {sizes}
'''
BLANKS = {"scaled": 'todo("return 2 * x")', "measured": 'todo("return 0.5")', "sizes": "__"}
ANSWERS = {"scaled": "return 2 * x", "measured": "return 0.5", "sizes": '{"x": 0, "y": 2}'}
MANIFEST = """title_zh = "边界"
title_en = "Boundary"
files = ["test_k.py"]

[contracts."test_k.py::measured"]
traced = false
why = "a float from the host"
"""
REL = "koans/01/test_k.py"


def _body(code: str) -> str:
    return "\n    ".join(textwrap.dedent(code).strip().splitlines())


E2E = {  # the issue's three routes, one per class; honest work beside them
    "scaled": _body("""
        import numpy as np
        object.__setattr__(np.testing.assert_allclose, "__defaults__", (1e9, 1e9, True, "", True))
        return x
    """),
    "measured": _body("""
        class Zero(float):
            def __sub__(self, other):
                return 0.0

        return Zero(0.25)
    """),
    "sizes": 'dict(x=0, y=2)',
}  # fmt: skip
MARSHAL = _body("""
    import marshal
    import numpy as np
    np.testing.assert_allclose.__code__ = marshal.loads(marshal.dumps((lambda *a, **k: None).__code__))
    return x
""")  # fmt: skip


PAST_THE_TEXT = _body("""
    t = np.testing
    t.assert_allclose = lambda *a, **k: None
    return x
""")  # no name the reading engine refuses: only the run's fingerprint sees it


PUT_BACK = _body("""
    t = np.testing
    real = t.assert_allclose
    def fake(*a, **k):
        t.assert_allclose = real  # put back as the koan calls it: no comparison after sees it
    t.assert_allclose = fake
    return x
""")


@pytest.fixture(scope="module")
def course_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("boundary") / "course"
    shutil.copytree(REPO / "jaxkoans", root / "jaxkoans", ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copy(REPO / "conftest.py", root / "conftest.py")

    def write(rel: str, text: str) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")

    write("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "--import-mode=importlib"\npythonpath = ["."]\ntestpaths = ["koans"]\ntimeout = 60\n')  # fmt: skip
    write("koans/course.toml", 'path = ["01"]\n')
    write("koans/01/chapter.toml", MANIFEST)
    write(REL, KOAN.format(**BLANKS))
    write("answers/01/test_k.py", KOAN.format(**ANSWERS))
    shipped_course.write(root)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "course"], check=True)
    return root


def _pytest(root: Path, text: str) -> subprocess.CompletedProcess:
    (root / REL).write_text(text, encoding="utf-8")
    try:
        return subprocess.run(
            [sys.executable, "-m", "pytest", REL, "-q", "-p", "no:randomly", "-p", "no:cacheprovider"],
            cwd=root, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        (root / REL).write_text(KOAN.format(**BLANKS), encoding="utf-8")


def test_the_learners_pytest_fails_each_route_and_passes_honest_work(course_root):
    honest = _pytest(course_root, KOAN.format(**ANSWERS))
    assert "3 passed" in honest.stdout, honest.stdout[-3000:]
    routes = _pytest(course_root, KOAN.format(**{**ANSWERS, **E2E}))
    out = routes.stdout
    assert "FAILED koans/01/test_k.py::test_scaled" in out, out[-3000:]
    assert "FAILED koans/01/test_k.py::test_measured" in out, out[-3000:]
    assert "a type your code defines" in out and "你的代码定义的" in out
    assert "koans/01/test_k.py::test_sizes" not in out.split("short test summary")[-1]
    swapped = _pytest(course_root, KOAN.format(**{**ANSWERS, "scaled": MARSHAL}))
    assert "FAILED koans/01/test_k.py::test_scaled" in swapped.stdout, swapped.stdout[-3000:]
    patched = _pytest(course_root, KOAN.format(**{**ANSWERS, "scaled": PAST_THE_TEXT}))
    assert "FAILED koans/01/test_k.py::test_scaled" in patched.stdout, patched.stdout[-3000:]
    assert "numpy.testing.assert_allclose" in patched.stdout  # named, and put back
    put_back = _pytest(course_root, KOAN.format(**{**ANSWERS, "scaled": PUT_BACK}))
    assert "FAILED koans/01/test_k.py::test_scaled" in put_back.stdout, put_back.stdout[-3000:]
    assert "before the call of" in put_back.stdout  # seen at the check itself


def test_grade_finds_each_route_and_honest_work_keeps_its_points(course_root, tmp_path):
    pristine = grading.prepare_course(str(course_root), tmp_path / "pristine")
    copies = {}
    cases = {"honest": ANSWERS, "routes": {**ANSWERS, **E2E}, "marshal": {**ANSWERS, "scaled": MARSHAL}, "past": {**ANSWERS, "scaled": PAST_THE_TEXT}}  # fmt: skip
    for name, fills_ in cases.items():
        where = tmp_path / name
        shutil.copytree(course_root, where, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        (where / REL).write_text(KOAN.format(**fills_), encoding="utf-8")
        copies[name] = grading.grade(where, pristine, grading.Options(workers=1))
    status = {n: {k.name: k.state for k in g.koans} for n, g in copies.items()}
    assert status["honest"] == dict.fromkeys(("test_scaled", "test_measured", "test_sizes"), "passed"), copies["honest"].findings  # fmt: skip
    assert copies["honest"].findings == []  # honest work: no finding at all
    assert status["routes"]["test_scaled"] == "tampered", copies["routes"].findings
    assert status["routes"]["test_measured"] == "tampered", copies["routes"].findings
    assert status["routes"]["test_sizes"] == "passed"  # dict(x=0, y=2) is a literal
    assert status["marshal"]["test_scaled"] == "tampered", copies["marshal"].findings
    assert status["past"]["test_scaled"] == "tampered", copies["past"].findings
    kinds = {(f.kind, k) for name in ("routes", "past") for f in copies[name].findings for k in f.koans}  # fmt: skip
    assert ("run_violation", "test_measured") in kinds  # the result's type, as it returned
    assert ("runtime_patch", "test_scaled") in kinds  # the fingerprint, by value


def test_grade_takes_a_reformatted_fix_region_as_shipped(course_root, tmp_path):
    rel = "koans/01/test_r.py"
    shipped = tmp_path / "test_r.py"
    shipped.write_text(REGION_SHIPPED, encoding="utf-8")
    formatted = REGION_SHIPPED.replace("sum([1,2,3]) # a comment", "sum([1, 2, 3])  # a comment")
    check = tamper.check_file(rel, shipped, formatted, {})
    assert check.graded == REGION_SHIPPED and check.notes == [] and check.findings == []
