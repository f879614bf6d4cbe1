"""The program reader, the refusal of fills that read the test, and technique contracts."""

from __future__ import annotations

import ast
import textwrap
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxkoans.api import program
from jaxkoans.course import fills, reading
from jaxkoans.plugin import contracts

X = jnp.arange(4.0)


def test_dead_code_beside_the_result_is_not_on_the_path():
    def reference_with_dead_kernel(x):
        _ = lax.while_loop(lambda c: c < 3, lambda c: c + 1, 0)  # discarded
        return jnp.sin(x) + 0.0 * jnp.cos(x)  # scaled away

    read = program.of(reference_with_dead_kernel, X)
    assert read.on_path("sin")
    assert not read.on_path("cos") and read.anywhere("cos")
    assert not read.on_path("while") and read.anywhere("while")


def test_a_nested_jit_and_a_literal_select_are_read_through():
    def hidden(x):
        inner = jax.jit(lambda z: jnp.exp(jnp.outer(z, z)).sum(0))(x)  # a 4x4 inside a jit
        return jnp.where(False, jnp.tanh(x), inner)

    read = program.of(hidden, X)
    assert read.on_path("exp") and not read.on_path("tanh")
    assert read.largest_live() == 16


def test_loop_bodies_keep_what_their_carry_needs():
    def loop(x):
        def body(c):
            return c[0] + 1, c[1] * 2.0, jnp.log(c[2])  # the third carry is never read

        return lax.while_loop(lambda c: c[0] < 3, body, (0, x, x))[1]

    read = program.of(loop, X)
    assert read.on_path("mul") and read.on_path("lt")
    assert not read.on_path("log") and read.anywhere("log")

    def scanned(x):
        return lax.scan(lambda c, xi: (c + xi, jnp.tanh(xi)), 0.0, x)[0]

    read = program.of(scanned, X)
    assert read.on_path("add") and not read.on_path("tanh")


def test_compiled_hlo_is_read_from_the_entry_root():
    compiled = jax.jit(lambda x: jnp.sin(x) @ x.T).lower(jnp.ones((3, 3))).compile()
    ops = program.hlo_ops(compiled.as_text())
    assert ops["dot"] == 1 and ops["sine"] >= 1


PRISTINE = '''
from jaxkoans import todo


def solve(fn, x):
    """Solve it."""
    todo("solve")


def test_solve():
    assert solve(abs, -1) == 1
'''


def _refusals(body: str, allowed=None):
    learner = PRISTINE.replace('    todo("solve")', textwrap.indent(textwrap.dedent(body), "    "))
    return reading.refusals(fills.take(PRISTINE, learner), allowed)


@pytest.mark.parametrize(
    ("body", "category"),
    [
        ("return fn.__closure__[0].cell_contents", "closure"),
        ("return solve.__wrapped__(fn, x)", "wrapped"),
        ("return fn.__globals__['answer']", "globals"),
        ("import sys\nreturn sys._getframe(1).f_locals['expected']", "frames"),
        ("from sys import _getframe as look\nreturn look(1)", "frames"),
        ("import inspect\nreturn inspect.stack()", "inspect"),
        ("return eval('1')", "exec"),
        ("return open(__file__).read()", "file"),
        ("return getattr(fn, '__code__')", "code"),
        ("with jax.transfer_guard('allow'):\n    return fn(x)", "jax.transfer_guard"),
        ("jax.config.update('jax_debug_nans', False)\nreturn fn(x)", "jax.config.update"),
        ("import warnings\nwarnings.simplefilter('ignore')\nreturn fn(x)", "warnings.simplefilter"),
        # the harness's instruments: contracts' sys.monitoring, the watchdog's signals
        ("import sys\nsys.monitoring.free_tool_id(4)\nreturn fn(x)", "sys.monitoring"),
        ("from sys import monitoring as m\nm.set_events(4, 0)\nreturn fn(x)", "sys.monitoring"),
        (
            "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nreturn fn(x)",
            "signal.signal",
        ),
    ],
)
def test_a_fill_that_reads_the_test_is_refused(body, category):
    found = _refusals(body)
    assert category in {r.category for r in found}, found
    assert all(r.owner == "solve" for r in found)


def test_a_contract_allows_what_its_answer_needs_and_honest_code_passes():
    assert not _refusals("return fn.__code__", {"solve": {"code"}})
    assert not _refusals("return jnp.abs(x) if fn is abs else fn(x)")
    # a constant switches nothing
    assert not _refusals("import signal\nreturn fn(x) * -signal.SIGABRT")


def test_a_broken_contract_names_what_is_missing():
    def shortcut(x):
        _ = lax.while_loop(lambda c: c < 3, lambda c: c + 1, 0)
        return jnp.argmax(x > 1.0)

    read = program.of(shortcut, X)
    problems = contracts.broken(read, {"on_path": ["while"], "absent": ["argmax"]})
    assert len(problems) == 2
    assert "while" in problems[0] and "argmax" in problems[1]
    assert not contracts.broken(read, {"on_path": ["argmax"]})
    assert contracts.broken("TypeError: nope", {"on_path": ["while"]})


def test_recording_wraps_the_module_function_and_restores_it():
    namespace = type(ast)("fake_koan")
    namespace.square = lambda x: x * x
    original = namespace.square
    with contracts.recording(namespace, {"square": {"absent": ["mul"]}}) as records:
        assert float(jax.jit(namespace.square)(np.float32(3.0))) == 9.0
    assert namespace.square is original
    with pytest.raises(contracts.ContractBroken, match="mul"):
        contracts.check(records)


def _run_alpha(root, double: str) -> str:
    import subprocess
    import sys

    from tests.fakecourse import write

    solved = (root / "answers" / "01" / "test_alpha.py").read_text(encoding="utf-8")
    write(root / "koans" / "01" / "test_alpha.py", solved.replace("return 2 * x", double))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "koans/01/test_alpha.py::test_double", "-p",
         "jaxkoans.plugin.hooks", "-p", "no:cacheprovider", "-q", "--no-header"],
        cwd=root, env={"JAXKOANS_ROOT": str(root), "PATH": "/usr/bin:/bin", "HOME": str(root)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return done.stdout + done.stderr


@pytest.fixture
def contracted_course(tmp_path):
    from tests.fakecourse import make_course

    root = make_course(tmp_path / "course")
    manifest = root / "koans" / "01" / "chapter.toml"
    text = manifest.read_text(encoding="utf-8")
    start = text.index('[contracts."test_alpha.py::double"]')
    contract = (
        '[contracts."test_alpha.py::double"]\non_path = ["mul"]\nabsent = ["pure_callback"]\n'
    )
    manifest.write_text(
        text[:start] + contract + 'why = "doubling is a product"\n', encoding="utf-8"
    )
    return root


def test_the_contract_fails_a_koan_whose_asserts_pass_another_way(contracted_course):
    report = _run_alpha(contracted_course, "return x + x")
    assert "1 failed" in report, report
    assert "right numbers, not the lesson's technique" in report and "结果对，技术不对" in report
    assert "`mul`" in report

    hidden = _run_alpha(contracted_course, "return x + x + 0.0 * (2 * x)")  # the technique, dead
    assert "1 failed" in hidden and "only in code no output depends on" in hidden, hidden
    assert "1 passed" in _run_alpha(contracted_course, "return 2 * x")


def test_a_fill_reading_the_test_is_refused_before_it_runs(contracted_course):
    body = "import sys\n    print('RAN')\n    return sys._getframe(1).f_locals.get('x', 2 * x)"
    report = _run_alpha(contracted_course, body)
    assert "1 failed" in report and "reads the test instead of solving the problem" in report
    assert "读了测试" in report and "sys._getframe" in report and "RAN" not in report


def test_fresh_inputs_catch_a_todo_that_answers_from_the_tests_table():
    module = type(ast)("fake_koan")
    table = {3: np.float32(9.0)}  # what the test happens to ask
    module.reference = lambda x: x * x
    module.square = lambda x: jnp.asarray(table.get(int(x.size) + 2, 0.0), jnp.float32) + 0 * x
    module.honest = lambda x: x * x
    contract = {"fresh": "reference"}
    with contracts.recording(module, {"square": contract, "honest": contract}) as records:
        module.square(np.ones(1, np.float32))
        module.honest(np.ones(1, np.float32))
    broken, honest = records
    assert contracts.disagreements(broken, *broken.seen[0][1][1:3], "koan")
    assert not contracts.disagreements(honest, *honest.seen[0][1][1:3], "koan")


def test_in_loop_tells_work_done_each_step_from_work_done_once():
    def per_step(w, xs):
        return lax.scan(lambda c, x: (c + jnp.dot(x, w), None), 0.0, xs)[0]

    def once_then_idle(w, xs):  # the whole batch at once, then a loop that only adds
        total = jnp.dot(xs, w).sum()
        return lax.scan(lambda c, x: (c + total / 4, None), 0.0, xs)[0]

    w, xs = jnp.ones(3), jnp.ones((4, 3))
    assert program.of(per_step, w, xs).in_loop("dot_general")
    assert not program.of(once_then_idle, w, xs).in_loop("dot_general")
    assert contracts.broken(program.of(once_then_idle, w, xs), {"in_loop": ["dot_general"]})


@pytest.mark.parametrize(
    ("body", "category"),
    [
        ("return getattr(fn, '__clo' + 'sure__')", "inspect"),
        ("import operator\nreturn operator.attrgetter('__wra' + 'pped__')(fn)", "inspect"),
        # an f-string whose written end ends a refused name (f_back, __globals__)
        ("part = 'f'\nreturn getattr(fn, f'{part}_back')", "inspect"),
        ("return getattr(fn, f'{x}globals__')", "inspect"),
        ("return getattr(sys, f'_get{x}frame')", "inspect"),
        ("with jax._src.config.transfer_guard('allow'):\n    return fn(x)", "jax.transfer_guard"),
        (
            "from jax._src.api import disable_jit\nwith disable_jit():\n    return fn(x)",
            "jax.disable_jit",
        ),
        ("import glob\nreturn glob.glob('koans/*/test_*.py')", "file"),
        ("try:\n    fn()\nexcept Exception as e:\n    return e.__traceback__", "frames"),
        # a wait on the clock where the work is waited on
        ("import time\nfn(x)\ntime.sleep(3)\nreturn x", "time.sleep"),
        ("from time import sleep as pause\nfn(x)\npause(3)\nreturn x", "time.sleep"),
        ("import asyncio\nasyncio.run(asyncio.sleep(3))\nreturn fn(x)", "asyncio.sleep"),
    ],
)
def test_a_read_spelled_another_way_is_refused_too(body, category):
    assert category in {r.category for r in _refusals(body)}


def test_a_field_named_by_an_f_string_with_a_plain_end_is_no_read_of_the_test():
    """Red team 7c: 08 `compiled_bytes` summing `getattr(stats, f"{part}_size_in_bytes")` was
    refused as reading the test; the written end names no frame, closure or module."""
    body = "return sum(getattr(fn, f'{p}_size_in_bytes') for p in ('argument', 'temp'))"
    assert _refusals(body) == []


def test_a_kernel_lives_through_its_ref_writes_and_dies_with_its_call():
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.exp(x_ref[...])

    def call(x):
        out = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return pl.pallas_call(kernel, grid=(1,), out_shape=out, interpret=True)(x)

    assert program.of(call, X).on_path("exp")  # written under pl.when: a write, no output
    dead = program.of(lambda x: jnp.sin(x) + 0.0 * call(x), X)
    assert not dead.on_path("pallas_call") and not dead.on_path("exp")


@pytest.mark.parametrize("signature", ["def f(x):", "def f(x, y, *, bm=2, bn=3):"])
def test_every_contract_fake_compiles_for_any_signature(signature):
    from jaxkoans.authoring import contract_fakes

    fn = ast.parse(signature + "\n    pass").body[0]
    bodies = contract_fakes.families(fn, "return x", ("library_0", "return x"))
    assert len(bodies) == len(contract_fakes.FAMILIES)
    for _, body in bodies:
        compile(signature + "\n" + textwrap.indent(body, "    "), "<fake>", "exec")


def test_each_output_must_go_through_the_technique_when_asked():
    def jvp_like(x):  # the primal through the technique, the tangent beside it
        return jnp.sin(x), jnp.cos(x) + 0.0 * jnp.sin(x)

    read = program.of(jvp_like, X)
    assert read.on_path("sin")
    assert not contracts.broken(read, {"on_path": ["sin"]})
    assert contracts.broken(read, {"on_path": ["sin"], "each_output": True})


def _ring_sum(k):
    """A ring under shard_map: the loop's carry varies along "i", which only the tracers' types say."""
    n = lax.axis_size("i")

    def step(_, carry):
        total, block = carry
        return total + block, lax.ppermute(block, "i", [(j, (j + 1) % n) for j in range(n)])

    return lax.fori_loop(0, n, step, (jnp.zeros_like(k), k))[0]


def test_a_todo_under_shard_map_is_read_on_the_traces_own_tracers():
    namespace = type(ast)("fake_koan")
    namespace.ring = _ring_sum
    mesh = jax.make_mesh((jax.device_count(),), ("i",))
    contract = {"in_loop": ["ppermute"], "absent": ["all_gather"]}
    blocks = jax.device_put(jnp.arange(4.0 * mesh.size), jax.NamedSharding(mesh, jax.P("i")))
    with contracts.recording(namespace, {"ring": contract}) as records:
        ring = jax.shard_map(
            lambda k: namespace.ring(k), mesh=mesh, in_specs=jax.P("i"), out_specs=jax.P("i")
        )
        jax.jit(ring)(blocks)
    assert contracts.check(records) == ["ring"]  # read, and met

    namespace.ring = lambda k: _ring_sum(k) + 0.0 * lax.all_gather(k, "i").sum()
    with contracts.recording(namespace, {"ring": contract}) as records:
        jax.jit(jax.shard_map(
            lambda k: namespace.ring(k), mesh=mesh, in_specs=jax.P("i"), out_specs=jax.P("i")
        ))(blocks)  # fmt: skip
    with pytest.raises(contracts.ContractBroken, match="all_gather"):
        contracts.check(records)


def test_a_value_in_host_memory_is_retraced_in_host_memory():
    """A TODO handed a state that lives in host memory (06's compute_on koan) is re-traced on a
    host-memory input, or an honest `state + update` reads as mixing memory spaces."""
    mesh = jax.make_mesh((jax.device_count(),), ("d",))
    on_host = jax.NamedSharding(mesh, jax.P("d"), memory_kind="pinned_host")
    state = jax.device_put(jnp.ones(2 * mesh.size), on_host)
    specs = []
    jax.jit(lambda s: specs.append(contracts._spec(s)) or s)(state)
    with jax.sharding.use_abstract_mesh(jax.typeof(state).sharding.mesh):
        aval = jax.make_jaxpr(lambda s: s)(specs[0]).jaxpr.invars[0].aval
    assert aval.memory_space == jax.memory.Space.Host
    plain = jax.device_put(jnp.ones(2 * mesh.size), jax.NamedSharding(mesh, jax.P("d")))
    jax.jit(lambda s: specs.append(contracts._spec(s)) or s)(plain)
    with jax.sharding.use_abstract_mesh(jax.typeof(plain).sharding.mesh):
        aval = jax.make_jaxpr(lambda s: s)(specs[1]).jaxpr.invars[0].aval
    assert aval.memory_space == jax.memory.Space.Device


# ---- the cost reader: figures computed by hand ----------------------------------------------


def test_a_matmul_costs_two_flops_per_multiply_add():
    costs = program.of(lambda x, w: x @ w, jnp.ones((8, 16)), jnp.ones((16, 4))).costs()
    assert costs.flops == {"outside": 2 * 8 * 16 * 4}
    assert costs.largest_intermediate == 8 * 4 * 4  # the f32[8,4] result
    assert costs.bytes_accessed == (8 * 16 + 16 * 4 + 8 * 4) * 4
    assert costs.serial_steps == 0 and costs.kernel_launches == 0


def test_a_ragged_dot_costs_each_row_against_its_own_groups_matrix():
    """Roofline has no rule for ragged_dot_general (the reader counted its output's size, so
    one dense dot per group over every row cost more than it): 2·M·K·N, as one dot of the
    rows against their own group's matrix."""
    lhs, rhs = jnp.ones((128, 8)), jnp.ones((2, 8, 16))
    sizes = jnp.array([60, 68], jnp.int32)
    ragged = program.of(lax.ragged_dot, lhs, rhs, sizes).costs().flops["outside"]
    every = program.of(lambda a, b: jnp.einsum("mk,gkn->gmn", a, b), lhs, rhs).costs()
    assert ragged == 2 * 128 * 8 * 16 and every.flops["outside"] == 2 * ragged


def test_a_reshaped_input_is_no_intermediate():
    """A reshape is a view (XLA's bitcast): one loss over all rows of a reshaped batch makes no
    array larger than its own products (red team 6: an honest `xs.reshape(-1, F)` was refused)."""
    xs, w = jnp.ones((6, 32, 16)), jnp.ones((16, 4))
    costs = program.of(lambda xs, w: jnp.tanh(xs.reshape(-1, 16) @ w), xs, w).costs()
    assert costs.largest_intermediate == 6 * 32 * 4 * 4  # the f32[192,4] products, not the f32[192,16]


def test_a_loop_body_counts_times_its_trip_count():
    def scanned(x):  # 8 steps of tanh over 16 elements; the loop's carry is the result
        return lax.scan(lambda c, r: (c * jnp.tanh(r), None), jnp.ones(16), x)[0]

    costs = program.of(scanned, jnp.ones((8, 16))).costs()
    assert costs.flops == {"outside": 8 * (16 + 16)}  # tanh and mul, 16 each, 8 times
    assert costs.serial_steps == 8 and costs.data_dependent_loops == 0

    def nested(x):  # 3 outer steps of a 5-step fori_loop: 3 + 15 serial steps
        def inner(c):
            return lax.fori_loop(0, 5, lambda i, v: v * 2.0, c)

        return lax.scan(lambda c, _: (inner(c), None), x, None, length=3)[0]

    costs = program.of(nested, jnp.ones(4)).costs()
    assert costs.serial_steps == 3 + 3 * 5 and costs.flops == {"outside": 3 * 5 * 4}


def test_bytes_handed_to_host_callbacks_count_every_run():
    def norm_sent(g):  # the norm reaches the host: one float each of 3 steps
        step = lambda c, _: (jax.debug.callback(print, jnp.linalg.norm(c)) or c, None)  # noqa: E731
        return lax.scan(step, g, None, length=3)[0]

    def all_sent(g):  # the whole array does
        return jax.pure_callback(np.linalg.norm, jax.ShapeDtypeStruct((), g.dtype), g)

    assert program.of(norm_sent, jnp.ones(100)).costs().host_bytes == 3 * 4
    assert program.of(all_sent, jnp.ones(100)).costs().host_bytes == 100 * 4
    from jaxkoans.plugin import costs

    def norm_once(g):
        jax.debug.callback(print, jnp.linalg.norm(g))
        return g

    norm, whole = (program.of(f, jnp.ones(3)).costs().as_dict() for f in (norm_once, all_sent))
    assert any("host callbacks: 12" in p for p in costs.exceeded(whole, norm, {}))


def test_each_bind_of_a_primitive_defined_outside_jax_counts_as_an_opaque_call():
    """Its work is hidden from the reader like a callback's: four binds where the answer has one
    are more calls (red team 6b: a rule binding the primitive four times passed the costs)."""
    import functools

    from jax._src import dispatch
    from jax.extend.core import Primitive

    doubled = Primitive("doubled")
    doubled.def_impl(functools.partial(dispatch.apply_primitive, doubled))  # JAX's own impl
    doubled.def_abstract_eval(lambda x: x)  # and a rule of ours: defined outside JAX
    mlir_rule = jax.interpreters.mlir.lower_fun(lambda x: 2 * x, multiple_results=False)
    jax.interpreters.mlir.register_lowering(doubled, mlir_rule)
    once = program.of(lambda x: doubled.bind(x) * 3.0, jnp.ones(4)).costs()
    four = program.of(lambda x: doubled.bind(doubled.bind(doubled.bind(doubled.bind(x)))),
                      jnp.ones(4)).costs()  # fmt: skip
    assert (once.opaque_calls, four.opaque_calls) == (1, 4)
    assert program.of(lambda x: jnp.exp(x) * 3.0, jnp.ones(4)).costs().opaque_calls == 0


def test_a_while_whose_trip_count_the_data_decides_is_flagged():
    def doubling(x):
        return lax.while_loop(lambda c: c.sum() < 100.0, lambda c: c * 2.0, x)

    costs = program.of(doubling, jnp.ones(4)).costs()
    assert costs.data_dependent_loops == 1 and costs.serial_steps == 1


def test_collective_bytes_per_device_follow_the_ring():
    mesh = jax.make_mesh((8,), ("i",))
    a = jax.device_put(jnp.ones((64, 4)), jax.NamedSharding(mesh, jax.P("i")))
    shard = 8 * 4 * 4  # f32[8,4] on each device
    total = lambda f: program.of(f, a).costs().collective_bytes  # noqa: E731
    psum = jax.shard_map(
        lambda b: lax.psum(b, "i"), mesh=mesh, in_specs=jax.P("i"), out_specs=jax.P()
    )
    assert total(psum) == {"all-reduce": 2 * shard * 7 // 8}  # reduce-scatter, then all-gather
    gather = jax.shard_map(
        lambda b: lax.all_gather(b, "i", tiled=True), mesh=mesh, in_specs=jax.P("i"),
        out_specs=jax.P(), check_vma=False,
    )  # fmt: skip
    assert total(gather) == {"all-gather": 8 * shard * 7 // 8}


def test_work_inside_the_holder_a_contract_names_is_the_techniques_place():
    def newton(f, x):  # 4 fixed steps of x - f(x) / 2x on x^2 - a
        return lax.fori_loop(0, 4, lambda i, x: x - f(x) / (2.0 * x), x)

    def honest(a):  # the steps run as custom_root's solve
        f = lambda x: x * x - a  # noqa: E731
        return lax.custom_root(f, jnp.ones_like(a), newton, lambda g, y: y / 2.0)

    def outside(a):  # the same steps before it, their root handed in as the guess
        f = lambda x: x * x - a  # noqa: E731
        root = newton(f, jnp.ones_like(a))
        return lax.custom_root(f, root, lambda f, x0: x0, lambda g, y: y / 2.0)

    n = 64
    a = jnp.full(n, 2.0)
    np.testing.assert_allclose(honest(a), outside(a))
    # 4 steps over n elements of f (mul, sub), then mul, div, sub; inside custom_root the
    # step also counts its counter (1) and the call of f (eval_jaxpr, n: roofline has no rule)
    step, held = 4 * 5 * n, 4 * (5 * n + 1 + n)
    own = n  # the custom_root equation's output (no rule either)
    named = ("call_hi_primitive",)
    assert program.of(honest, a).costs(named).flops == {"outside": own, "technique": held}
    assert program.of(outside, a).costs(named).flops == {"outside": step + own}
    assert program.of(honest, a).costs().flops == {"outside": own + held}  # none named
    from jaxkoans.plugin import costs

    answer = program.of(honest, a).costs(named).as_dict()
    assert answer["technique_steps"] == 4  # the fori_loop inside the solve
    assert costs.exceeded(program.of(honest, a).costs(named).as_dict(), answer, {}) == []
    said = costs.exceeded(program.of(outside, a).costs(named).as_dict(), answer, {})
    assert "does 0 flops inside it" in said[0] and "runs no loop inside it" in said[1]

    def one_step_inside(a):  # the loop outside, one step of it as the solve: flops enough
        f = lambda x: x * x - a  # noqa: E731
        root = newton(f, jnp.ones_like(a))
        step = lambda f, x: x - f(x) / (2.0 * x)  # noqa: E731
        return lax.custom_root(f, root, step, lambda g, y: y / 2.0)

    (said,) = costs.exceeded(program.of(one_step_inside, a).costs(named).as_dict(), answer, {})
    assert "runs no loop inside it where the answer's runs 4 steps" in said
    assert costs.exceeded(program.of(outside, a).costs(named).as_dict(), answer,
                          {"technique_flops": "why"}) == []  # fmt: skip


def test_a_kernel_body_counts_times_its_grid_and_apart_from_the_rest():
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + 1.0

    def doubled(x):
        spec = pl.BlockSpec((2, 16), lambda i: (i, 0))
        y = pl.pallas_call(kernel, grid=(4,), in_specs=[spec], out_specs=spec,
                           out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)  # fmt: skip
        return jnp.exp(y)

    costs = program.of(doubled, jnp.ones((8, 16))).costs()
    assert costs.flops == {"outside": 8 * 16, "kernel": 4 * 2 * (2 * 16)}
    assert costs.kernel_launches == 1 and costs.grids == ((4,),)


def _blocked_product(body, grid=(4, 4), extra=()):
    """C[i, j] = body's work on the blocks A[i] and B[j] (8 x 8 each) over a grid of blocks."""
    from jax.experimental import pallas as pl

    def kernel(a_ref, b_ref, *refs):
        body(pl.program_id(0), pl.program_id(1), a_ref, b_ref, *refs)

    def product(a, b, *flags):
        blocks = [
            pl.BlockSpec((8, 8), lambda i, j: (i, 0)),
            pl.BlockSpec((8, 8), lambda i, j: (0, j)),
        ]
        return pl.pallas_call(
            kernel, grid=grid, out_shape=jax.ShapeDtypeStruct((8 * grid[0], 8 * grid[1]), a.dtype),
            in_specs=blocks + [pl.BlockSpec((1, 1), lambda i, j: (0, 0))] * len(flags),
            out_specs=pl.BlockSpec((8, 8), lambda i, j: (i, j)), interpret=True,
        )(a, b, *flags)  # fmt: skip

    a, b = jnp.ones((8 * grid[0], 8)), jnp.ones((8, 8 * grid[1]))
    return program.of(product, a, b, *extra)


_DOT = 2 * 8 * 8 * 8  # one 8 x 8 block product: 1024 flops


def _dots(read) -> list[tuple[int, int]]:
    return [(e.times, e.flops * e.times) for e in read.equations if e.primitive == "dot_general"]


def test_a_branch_the_grid_decides_counts_only_at_the_points_that_take_it():
    from jax.experimental import pallas as pl

    def causal(i, j, a_ref, b_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

        @pl.when(j <= i)  # on and below the diagonal of a 4 x 4 grid: 4 + 3 + 2 + 1 = 10 points
        def _():
            o_ref[...] = jnp.dot(a_ref[...], b_ref[...])

            @pl.when(j == pl.num_programs(1) - 4)  # the first column, within: 4 points
            def _():
                o_ref[...] += jnp.dot(a_ref[...], b_ref[...])

        @pl.when(i > 3)  # no point of the grid
        def _():
            o_ref[...] = jnp.exp(o_ref[...])

    read = _blocked_product(causal)
    assert _dots(read) == [(10, 10 * _DOT), (4, 4 * _DOT)]  # not 16 and 16
    assert not read.on_path("exp")  # a branch no point takes never runs
    # the masked kernel that computes every block runs 16 products
    masked = _blocked_product(
        lambda i, j, a_ref, b_ref, o_ref: o_ref.__setitem__(
            ..., jnp.where(j <= i, jnp.dot(a_ref[...], b_ref[...]), 0.0)
        )
    )
    assert _dots(masked) == [(16, 16 * _DOT)]


def test_a_branch_chosen_by_data_or_by_a_loop_counter_counts_at_every_point():
    from jax.experimental import pallas as pl

    def by_data(i, j, a_ref, b_ref, flag_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

        @pl.when(flag_ref[0, 0] > 0)  # the data decides: which points take it is unknown
        def _():
            o_ref[...] = jnp.dot(a_ref[...], b_ref[...])

    read = _blocked_product(by_data, extra=(jnp.ones((1, 1)),))
    assert _dots(read) == [(16, 16 * _DOT)]

    def by_counter(i, j, a_ref, b_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

        def step(k, carry):
            @pl.when(k <= i)  # inside a loop body: the reader's rule, every step at every point
            def _():
                o_ref[...] += jnp.dot(a_ref[...], b_ref[...])

            return carry

        jax.lax.fori_loop(0, 2, step, 0)

    read = _blocked_product(by_counter)
    assert _dots(read) == [(16 * 2, 16 * 2 * _DOT)]


# ---- liveness by perturbation and fresh cases ------------------------------------------------

_W = jnp.arange(6.0).reshape(3, 2)
_XS = jnp.asarray(np.random.default_rng(0).standard_normal((4, 3)), jnp.float32)


def _dot_problems(fn):
    from jaxkoans.plugin import liveness

    dot = program.of(lambda x, w: x @ w, _XS, _W).primitive("dot_general")
    return liveness.problems(fn, {"dot_general": dot}, (_XS, _W), {}, 0)


def _by_hand(x, w):  # the same product without a dot
    return (x[:, :, None] * w[None]).sum(1)


def test_a_technique_that_carries_the_result_is_live():
    assert _dot_problems(jax.jit(lambda x, w: jnp.tanh(x @ w))) == []


@pytest.mark.parametrize(
    "fn, said",
    [
        (
            lambda x, w: jnp.where(jnp.isnan(x @ w), x @ w, _by_hand(x, w)),
            "does not change the TODO",
        ),
        (lambda x, w: 0.5 * (0.0 * (x @ w)) + _by_hand(x, w), "does not change the TODO"),
        (
            lambda x, w: jnp.zeros_like(x) @ w + _by_hand(x, w),
            "does not change with the TODO's inputs",
        ),
        (lambda x, w: jnp.ones((4, 3)) @ jnp.ones((3, 2)) + _by_hand(x, w), "does not change with"),
    ],
    ids=["selected-away-by-a-computed-where", "scaled-to-zero", "fed-zeros", "fed-constants"],
)
def test_a_technique_fed_nothing_or_selected_away_is_named(fn, said):
    (problem,) = _dot_problems(fn)
    assert said in problem


def test_a_technique_used_only_when_traced_is_never_bound_on_concrete_values():
    """A TODO that takes the technique's road only for tracers (the reader's trace) and another
    on the koan's concrete values: its run on its own inputs never binds the technique."""

    def sniffing(x, w):
        if isinstance(x, jax.core.Tracer):
            return x @ w
        return _by_hand(x, w)

    (problem,) = _dot_problems(sniffing)
    assert "never uses `dot_general`" in problem


def test_uses_that_cancel_one_another_do_not_carry_the_result():
    """A pair of products subtracted beside the work by hand: each alone seems to carry every
    element, both at once change nothing; the answer's uses at once change every element."""
    from jaxkoans.plugin import liveness

    def cancelling(x, w):
        return _by_hand(x, w) + (x @ w - (x[None] @ w)[0])

    _, carried = _shares(jax.jit(lambda x, w: jnp.tanh(x @ w)))
    assert carried == 1.0
    dot = program.of(lambda x, w: x @ w, _XS, _W).primitive("dot_general")
    answer = {"dot_general": 1.0, f"dot_general {liveness.TOGETHER}": 1.0}
    (problem,) = liveness.problems(cancelling, {"dot_general": dot}, (_XS, _W), {}, 0, answer)
    assert "cancel one another" in problem

    def scaled_pair(x, w):  # a linear combination that is zero: r(2u) - 2 r(u)
        return _by_hand(x, w) + ((2 * x) @ w - 2 * (x @ w))

    (problem,) = liveness.problems(scaled_pair, {"dot_general": dot}, (_XS, _W), {}, 0, answer)
    assert "cancel one another" in problem

    def ratio(x, w):  # two uses that a common scaling leaves as they were, honestly
        return (x @ w) / (jnp.abs(x) @ jnp.abs(w))

    assert liveness.problems(ratio, {"dot_general": dot}, (_XS, _W), {}, 0, answer) == []


def test_a_loop_the_contract_names_alone_is_the_technique_liveness_changes():
    """A contract naming only a scan: the scan's outputs are perturbed (a scan's sum less itself
    beside the work done outside it carries nothing)."""
    from jaxkoans.plugin import contracts, liveness

    assert contracts.perturbed({"on_path": ["scan", "dot_general"]}) == ["dot_general"]
    assert contracts.perturbed({"on_path": ["scan", "remat2"]}) == ["scan", "remat2"]
    assert contracts.perturbed({"on_path": ["while"]}) == []  # changed, it may never end

    def accumulated(x):
        return lax.scan(lambda c, r: (c + jnp.sin(r), None), jnp.zeros(3), x)[0]

    def cancelled(x):
        return jnp.sin(x).sum(0) + (accumulated(x) - accumulated(x))

    scan = program.of(accumulated, _XS).primitive("scan")
    carried: dict = {}
    assert liveness.problems(accumulated, {"scan": scan}, (_XS,), {}, 0, None, carried) == []
    (problem,) = liveness.problems(cancelled, {"scan": scan}, (_XS,), {}, 0, carried)
    assert "cancel one another" in problem


def test_a_technique_whose_output_is_an_integer_or_a_key_is_perturbed_too():
    """An index (argsort) or a key (fold_in) selected away by a computed where is named."""
    from jaxkoans.plugin import liveness

    def order(x):
        return x[jnp.argsort(x)]

    def selected_away(x):
        return jnp.where(jnp.isnan(x).any(), x[jnp.argsort(x)], -lax.top_k(-x, x.shape[0])[0])

    xs = jnp.asarray([3.0, 1.0, 2.0, 0.5])
    sort = program.of(order, xs).primitive("sort")
    assert liveness.problems(order, {"sort": sort}, (xs,), {}, 0) == []
    (problem,) = liveness.problems(selected_away, {"sort": sort}, (xs,), {}, 0)
    assert "does not change the TODO" in problem

    def noise(key, x):
        return x + jax.random.normal(jax.random.fold_in(key, 3), x.shape)

    def noise_by_hand(key, x):  # fold_in computed but another key used
        kept = jax.random.fold_in(key, 3)
        other = jax.random.split(key)[1]
        return x + jax.random.normal(jnp.where(jnp.isnan(x).any(), kept, other), x.shape)

    key = jax.random.key(0)
    fold = program.of(noise, key, xs).primitive("random_fold_in")
    assert liveness.problems(noise, {"random_fold_in": fold}, (key, xs), {}, 0) == []
    (problem,) = liveness.problems(noise_by_hand, {"random_fold_in": fold}, (key, xs), {}, 0)
    assert "does not change the TODO" in problem


def _shares(fn, answer=None):
    from jaxkoans.plugin import liveness

    dot = program.of(lambda x, w: x @ w, _XS, _W).primitive("dot_general")
    carried: dict = {}
    found = liveness.problems(fn, {"dot_general": dot}, (_XS, _W), {}, 0, answer, carried)
    return found, carried["dot_general"]


def test_the_share_of_the_result_a_technique_carries_is_measured_and_held_to_the_answers():
    # the answer: the product makes every element of the 4 x 2 result
    assert _shares(jax.jit(lambda x, w: jnp.tanh(x @ w))) == ([], 1.0)
    # the product of one row beside the same work by hand: 2 of 8 elements
    one_row = lambda x, w: _by_hand(x, w).at[:1].set(x[:1] @ w)  # noqa: E731
    assert _shares(one_row) == ([], 0.25)  # without the answer's share: any share is live
    (problem,), share = _shares(one_row, {"dot_general": 1.0})
    assert (
        share == 0.25
        and "changes 25% of the TODO's result where the answer's changes 100%" in problem
    )
    # a computed where that selects the product for half the rows
    half = lambda x, w: jnp.where(jnp.arange(4)[:, None] < 2, x @ w, _by_hand(x, w))  # noqa: E731
    (problem,), share = _shares(half, {"dot_general": 1.0})
    assert share == 0.5 and "a row, a block, a head" in problem
    # two uses that each make half the rows carry the whole result together
    halves = lambda x, w: jnp.concatenate([x[:2] @ w, x[2:] @ w])  # noqa: E731
    assert _shares(halves, {"dot_general": 1.0}) == ([], 1.0)


def test_a_diverged_answer_is_not_compared_and_a_smaller_move_keeps_it_finite():
    from jaxkoans.plugin import fresh

    def explicit_steps(x, dt):  # an explicit scheme: stable only for dt below 1
        return jax.lax.fori_loop(0, 3000, lambda i, x: x - dt * 2.0 * x, x)

    assert fresh.diverged(fresh.run(explicit_steps, (_XS, 0.99), {}, 3))  # dt moved past 1
    assert not fresh.diverged(fresh.run(explicit_steps, (_XS, 0.99), {}, 3, scale=0.005))
    base = fresh.run(explicit_steps, (_XS, 0.99), {}, 3, scale=0.0)
    assert fresh.far(fresh.run(explicit_steps, (_XS, 0.99), {}, 3), base)
    assert not fresh.far(fresh.run(explicit_steps, (_XS, 0.99), {}, 3, scale=0.005), base)
    mine = fresh.run(lambda x: x, (_XS,), {}, 3)
    far = [[1e35, *row[1:]] for row in mine]  # an answer's output past DIVERGED: not compared
    assert fresh.differs(mine, far) == ""
    assert "another result" in fresh.differs(mine, [[2 * row[0], *row[1:]] for row in mine])


def test_a_fresh_case_tells_a_lookup_of_the_tests_numbers_from_the_work():
    from jaxkoans.plugin import fresh

    def step(x, dt):  # the work
        return x + dt * jnp.sin(x)

    def looked_up(x, dt):  # right at the test's dt only
        return x + {0.1: 0.1}.get(round(dt, 6), 0.1) * jnp.sin(x)

    answer = fresh.run(step, (_XS, 0.1), {}, 7)
    assert fresh.differs(fresh.run(step, (_XS, 0.1), {}, 7), answer) == ""
    assert "another result" in fresh.differs(fresh.run(looked_up, (_XS, 0.1), {}, 7), answer)


def test_a_grown_case_tells_a_block_count_of_the_tests_width_from_the_work():
    from jaxkoans.plugin import fresh

    def block_max(x):  # the work: the max of every 4 neighbours
        return jnp.abs(x.reshape(*x.shape[:-1], -1, 4)).max(-1)

    def two_blocks(x):  # right at the test's width of 8 only
        return jnp.stack([jnp.abs(x[..., :4]).max(-1), jnp.abs(x[..., 4:]).max(-1)], -1)

    x = jnp.arange(24.0).reshape(3, 8)
    assert fresh.lengths((x,), {}) == [8, 3]
    grown, _ = fresh.grown((x,), {}, 8, 7)
    assert grown[0].shape == (3, 16)
    answer = fresh.run(block_max, (x,), {}, 7, length=8)
    assert (
        fresh.differs(fresh.run(two_blocks, (x,), {}, 7), fresh.run(block_max, (x,), {}, 7)) == ""
    )
    assert "output 0" in fresh.differs(fresh.run(two_blocks, (x,), {}, 7, length=8), answer)


def test_a_fresh_case_moves_a_count_and_the_length_it_names():
    from jaxkoans.plugin import fresh

    def segment_sums(x, ids, n):  # the work: a sum per segment, n of them
        return jax.ops.segment_sum(x, ids, num_segments=n)

    def four_segments(x, ids, n):  # right at the test's count of 4 only
        return jax.ops.segment_sum(x, ids, num_segments=4)

    ids = jnp.array([0, 1, 1, 3, 2, 0, 3, 1])
    x = jnp.arange(8.0)
    unmoved = fresh.run(segment_sums, (x, ids, 4), {}, 5)
    assert fresh.differs(fresh.run(four_segments, (x, ids, 4), {}, 5), unmoved) == ""
    answer = fresh.run(segment_sums, (x, ids, 4), {}, 5, ints=True)  # five segments asked
    mine = fresh.run(four_segments, (x, ids, 4), {}, 5, ints=True)
    assert "another result" in fresh.differs(mine, answer)
    assert fresh.moved((x, True, 3), {}, 5, ints=True)[0][1:] == (True, 4)  # a flag is no count
    grown, _ = fresh.grown((x, 8), {}, 8, 5, ints=True)
    assert grown[0].shape == (16,) and grown[1] == 16

    def steps_of(x, steps=4, rate=0.5, scaled=True):  # the work: `steps` steps of `rate`
        return x * (1.0 - rate) ** steps if scaled else x

    def four_of(x, steps=4, rate=0.5, scaled=True):  # the default's count written in
        return x * (1.0 - rate) ** 4

    assert fresh.with_defaults(steps_of, (x,), {"rate": 0.1}) == ((x,), {"rate": 0.1, "steps": 4})
    answer = fresh.run(steps_of, (x,), {}, 5, scale=0.0, ints=True)  # five steps asked
    assert "another result" in fresh.differs(
        fresh.run(four_of, (x,), {}, 5, scale=0.0, ints=True), answer
    )


def test_nan_by_design_is_not_divergence_and_drawn_values_stay_tame():
    from jaxkoans.plugin import fresh

    def skipped_marker(x):  # NaN where the step is skipped, by design
        return jnp.where(x > 0, x, jnp.nan)

    base = fresh.run(skipped_marker, (_XS,), {}, 3, scale=0.0)
    assert fresh.diverged(base) and not fresh.far(fresh.run(skipped_marker, (_XS,), {}, 3), base)
    more_nans = [[row[0], row[1] + 1, *row[2:]] for row in base]
    assert fresh.far(more_nans, base)

    def unrolled_power(w):  # an iteration that is tame only for a small w
        return jnp.linalg.matrix_power(w, 40)

    spec = (jax.ShapeDtypeStruct((6, 6), jnp.float32),)
    big = fresh.drawn(spec, {}, 9)
    small = fresh.drawn(spec, {}, 9, size=0.1)
    assert not fresh.tame(fresh.run(unrolled_power, *big, 9, scale=0.0), *big)
    assert fresh.tame(fresh.run(unrolled_power, *small, 9, scale=0.0), *small)


def test_work_that_grows_faster_than_the_answers_shows_on_the_grown_call():
    """A prefix sum by a dense triangular matmul (n^2) beside the answer's cumsum (n): within
    the bound at the test's size, past it once the grown call doubles n."""
    from jaxkoans.plugin import costs

    def answer(x):
        return jnp.cumsum(x, axis=-1)

    def dense(x):
        n = x.shape[-1]
        return x @ jnp.triu(jnp.ones((n, n), x.dtype))

    def held(n: int) -> list[str]:
        x = jnp.ones((4, n))
        mine, theirs = program.of(dense, x).costs(), program.of(answer, x).costs()
        return costs.exceeded(mine.as_dict(), theirs.as_dict(), {})

    assert held(8) == []  # the test's size: the slack hides it
    assert any("flops" in problem for problem in held(16))  # the grown call: n doubled


def test_a_collective_per_feature_is_counted_where_one_carries_them_all():
    from jaxkoans.plugin import costs

    mesh = jax.make_mesh((jax.device_count(),), ("i",))

    def standardized(per_feature: bool):
        def body(x):
            if per_feature:  # two collectives per feature
                mean = jnp.stack([lax.pmean(x[:, f].mean(), "i") for f in range(x.shape[1])])
                square = jnp.stack(
                    [lax.pmean((x[:, f] ** 2).mean(), "i") for f in range(x.shape[1])]
                )
            else:  # both statistics of every feature in one collective
                mean, square = lax.pmean((x.mean(0), (x**2).mean(0)), "i")
            return (x - mean) / jnp.sqrt(square - mean**2)

        return jax.shard_map(body, mesh=mesh, in_specs=jax.P("i"), out_specs=jax.P("i"))

    x = jax.device_put(jnp.ones((4 * mesh.size, 6)), jax.NamedSharding(mesh, jax.P("i")))
    one, many = (program.of(standardized(f), x).costs() for f in (False, True))
    assert one.collective_calls == 2 and many.collective_calls == 12  # one psum per leaf
    (problem,) = [
        p for p in costs.exceeded(many.as_dict(), one.as_dict(), {}) if "collectives run" in p
    ]
    assert "12, more than 1.5 x the answer's 2" in problem


def test_a_mesh_argument_is_moved_to_one_device_fewer():
    """A device count written into a TODO that takes a mesh: right on the test's mesh, wrong (or
    refused) on one device fewer."""
    from jaxkoans.plugin import fresh

    def row_sums(x, mesh, n=None):
        n = n or mesh.shape["i"]
        padded = jnp.pad(x, ((0, -x.shape[0] % n), (0, 0)))
        body = lambda b: lax.psum(b.sum(), "i")[None]  # noqa: E731
        return jax.shard_map(body, mesh=mesh, in_specs=jax.P("i"), out_specs=jax.P("i"))(padded)

    auto = (jax.sharding.AxisType.Auto,)
    mesh = jax.make_mesh((jax.device_count(),), ("i",), axis_types=auto)
    count = jax.device_count()
    written_in = lambda x, mesh: row_sums(x, mesh, n=count)  # noqa: E731
    x = jnp.ones((2 * count, 3))
    answer = fresh.run(row_sums, (x, mesh), {}, 1, ints=True)
    assert (
        fresh.differs(
            fresh.run(written_in, (x, mesh), {}, 1), fresh.run(row_sums, (x, mesh), {}, 1)
        )
        == ""
    )
    with pytest.raises(ValueError):  # the test's count of devices on one device fewer
        fresh.run(written_in, (x, mesh), {}, 1, ints=True)
    assert len(answer[0]) > 0


def _first_above(xs, threshold, to_the_end=False):
    n = xs.shape[0]

    def step(carry):
        i, found = carry
        return i + 1, jnp.where((xs[i] > threshold) & (found == n), i, found)

    def going(carry):
        searching = carry[1] == n
        return (carry[0] < n) & (jnp.isfinite(threshold) if to_the_end else searching)

    return jax.lax.while_loop(going, step, (0, n))[1]


def test_run_time_steps_tell_a_loop_that_stops_from_one_that_runs_to_its_end():
    from jaxkoans.plugin import costs, trips

    xs, counted = jnp.array([0.0, 0.0, 5.0] + [0.0] * 13), {}
    for name, fn in [("stops", _first_above), ("runs on", partial(_first_above, to_the_end=True))]:
        with trips.counting() as steps:
            assert int(jax.jit(fn)(xs, 1.0)) == 2
            jax.effects_barrier()
        counted[name] = sum(steps)
    assert counted == {"stops": 3, "runs on": 16}
    assert costs.more_steps(counted["stops"] + 1, counted["stops"]) == []
    assert "16 steps" in costs.more_steps(counted["runs on"], counted["stops"])[0]


def test_an_inner_loops_steps_are_counted_once():
    """A loop's body is re-made to carry its count: the loops inside it, counted when they were
    bound, are not counted again (3 outer steps of 4 inner ones each: 3 + 12), and their counts
    ride in the outer loop's carry to one call to the host."""
    from jaxkoans.plugin import trips

    def inner(x):  # the bound depends on x: a loop whose trip count the data decides
        return jax.lax.while_loop(lambda c: c[0] < 4 + 0 * x, lambda c: (c[0] + 1, c[1] * 2), (0, x))

    def outer(x):
        step = lambda c: (c[0] + 1, inner(c[1])[1])  # noqa: E731
        return jax.lax.while_loop(lambda c: c[0] < 3 + 0 * c[1], step, (0, x))

    with trips.counting() as steps:
        assert float(jax.jit(outer)(1.0)[1]) == 2.0**12
        jax.effects_barrier()
    assert steps == [15]


def test_values_drawn_on_the_host_are_those_drawn_on_the_device():
    """The smaller mesh's inputs are drawn as NumPy arrays and placed from the host (no reshard
    compiled, plugin/meshes.py): the same numbers, dtypes and keys as the device draw."""
    from jaxkoans.plugin import fresh

    specs = (
        jax.ShapeDtypeStruct((3, 2), jnp.float32),
        jax.ShapeDtypeStruct((4,), jnp.int32),
        jax.ShapeDtypeStruct((5,), jnp.bool_),
        jax.ShapeDtypeStruct((2,), jax.random.key(0).dtype),
    )
    host, device = (fresh.drawn(specs, {}, 11, host=on)[0] for on in (True, False))
    for mine, theirs in zip(host[:3], device[:3], strict=True):
        assert isinstance(mine, np.ndarray) and isinstance(theirs, jax.Array)
        assert mine.dtype == theirs.dtype
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_array_equal(jax.random.key_data(host[3]), jax.random.key_data(device[3]))


def test_a_draw_is_reused_for_the_grown_case_only_while_intact():
    """A learner's fresh case draws its inputs once (plugin/contracts.py); an array that the
    moved call deleted (donated) is drawn again for the grown one."""
    x = jnp.ones(3)
    assert not contracts._spent(((x, 2), {"y": jnp.zeros(2)}))
    x.delete()
    assert contracts._spent(((x, 2), {"y": jnp.zeros(2)}))


def test_a_scaled_case_is_kept_where_the_answer_scales_and_meets_a_threshold_written_in():
    """The floats scaled down by 2^-24: a norm scales with them (power 1), a dot and an argmax
    with powers 2 and 0, a norm's root with 0.5, a layer norm's eps is a scale of the problem (no case); a threshold
    written into a norm gives 0 there where the answer gives the norm."""
    from jaxkoans.plugin import fresh

    def norm(x, floor=0.0):
        squared = jnp.sum(x * x)
        nonzero = squared > floor
        return jnp.where(nonzero, jnp.sqrt(jnp.where(nonzero, squared, 1.0)), 0.0)

    def powers(f):
        return fresh.powers(
            fresh.scaled(f, (_XS[0],), {}, 1), fresh.run(f, (_XS[0],), {}, 1, 0, 0.0)
        )

    assert powers(norm) == [1]
    assert powers(lambda x: (x @ x, jnp.argmax(x))) == [2, 0]
    # a root of a norm (red team 7c: 08 root_sum's threshold met no scaled case)
    assert powers(lambda x: jnp.sqrt(jnp.sqrt(jnp.sum(x * x)))) == [0.5]
    assert powers(lambda x: (x - x.mean()) / jnp.sqrt(x.var() + 1e-5)) is None
    answer = fresh.unscaled(fresh.scaled(norm, (_XS[0],), {}, 1), [1])
    written_in = fresh.unscaled(fresh.scaled(lambda x: norm(x, 1e-12), (_XS[0],), {}, 1), [1])
    assert fresh.differs(written_in, answer).startswith("output 0: another result")
    assert fresh.differs(answer, fresh.run(norm, (_XS[0],), {}, 1, 0, 0.0)) == ""


def test_a_signature_key_leaves_out_addresses_and_the_runs_own_names():
    """A static argument's repr may carry a memory address or a name made as the koan runs (a
    kernel target with a uuid4 in it): the profile of the answer must be found again."""
    import uuid

    from jaxkoans.plugin import costs

    def key(name: str) -> str:
        return costs.signature_key(f"(ShapeDtypeStruct(shape=(4,), dtype=int32), '{name}')")

    assert key(f"koans_lookup_{uuid.uuid4().hex}") == key(f"koans_lookup_{uuid.uuid4().hex}")
    assert costs.signature_key("<function f at 0x7f01>") == costs.signature_key("<function f>")
    assert key("koans_lookup") != key("koans_count")  # a name the koan writes still tells


def test_a_contracts_exp_is_met_by_exp2_inside_the_loop():
    """FlashAttention-2 takes exp2 of scores scaled by log2(e): the same work as exp."""
    from jaxkoans.api import program

    def softmax_sum(xs):
        return jax.lax.fori_loop(0, 3, lambda i, c: c + jnp.sum(jnp.exp2(xs * i)), 0.0)

    read = program.of(jax.jit(softmax_sum), jnp.ones(4))
    assert read.in_loop("exp") and read.on_path("exp") and not read.anywhere("exp")
    assert read.primitive("exp").name == "exp2"
    assert not read.in_loop("log")


def test_a_profile_write_names_what_the_file_held_before_and_holds_no_more(tmp_path):
    """A koan whose answer failed in a regeneration loses its fresh cases: the write says so."""
    from jaxkoans.plugin import costs

    def entry(koan, moved):
        return {"koan": f"answers/01/test_x.py::{koan}", "todo": "f", "signature": "s",
                "costs": {"flops": 1, "fresh": {koan: moved}, "bold": {koan: moved}}}  # fmt: skip

    both = [entry("test_a", [[1.0, 0.0]]), entry("test_b", [[2.0, 0.0]])]
    assert costs.write(tmp_path, both) == []
    assert costs.write(tmp_path, both[:1]) == ["test_x.py::f s bold test_b", "test_x.py::f s fresh test_b"]
    assert costs.write(tmp_path, []) == ["test_x.py::f s", "test_x.py::f s bold test_a",
                                         "test_x.py::f s fresh test_a"]  # fmt: skip
