"""The instruments in jaxkoans.api.probes, on programs whose answer is known."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from jaxkoans.api.probes import (
    collectives,
    counting_compiles,
    equations,
    first_failing_stage,
    pallas_call_structure,
    primitives,
    run_python,
)


def test_counting_compiles_sees_one_compile_per_new_shape():
    def double(x):
        return 2 * x

    f, three, four = jax.jit(double), jnp.ones(3), jnp.ones(4)
    with counting_compiles() as names:
        f(three)
        f(three)
        f(four)
    assert names == ["jit(double)", "jit(double)"]


def test_collectives_reads_types_without_layouts():
    hlo = (
        "  %ar = f32[16,32]{1,0} all-reduce(f32[16,32]{1,0} %x), replica_groups={}\n"
        "  ROOT %ag = f32[96]{0} all-gather-start(f32[12]{0} %y), dimensions={0}\n"
    )
    assert collectives(hlo) == {"all-reduce": ["f32[16,32]"], "all-gather": ["f32[96]"]}
    assert collectives("  %a = f32[2]{0} add(f32[2]{0} %x, f32[2]{0} %y)") == {}


def test_first_failing_stage_names_the_stage():
    assert first_failing_stage(jnp.sin, jnp.ones(2)) is None
    assert first_failing_stage(lambda x: x[jnp.nonzero(x)], jnp.ones(2)) == "lower"


def test_run_python_starts_clean_of_our_jax_settings(monkeypatch):
    monkeypatch.setenv("JAX_ENABLE_X64", "1")
    code = "import os; print(os.environ.get('JAX_ENABLE_X64'), os.environ['JAX_PLATFORMS'], os.environ['EXTRA'])"
    assert run_python("-c", code, env={"EXTRA": "yes"}).split() == ["None", "cpu", "yes"]


def test_run_python_fails_with_the_child_s_error():
    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        run_python("-c", "1 / 0")


def _exp_kernel_then_sin(x, *, semantics):
    """A pallas_call inside a jit with a jnp op after it: (8, 16) blocks and an (8, 16) scratch."""

    def kernel(x_ref, o_ref, acc_ref):
        acc_ref[...] = jnp.exp(x_ref[...])
        o_ref[...] = acc_ref[...] * 2

    call = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // 8, x.shape[1] // 16),
        in_specs=[pl.BlockSpec((8, 16), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((8, 16), lambda i, j: (i, j)),
        scratch_shapes=[pltpu.VMEM((8, 16), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=semantics) if semantics else None,
        interpret=True,
    )
    return jnp.sin(jax.jit(call)(x))


def test_pallas_call_structure_reads_grid_blocks_scratch_and_where_the_ops_are():
    x = jnp.ones((16, 48), jnp.float32)
    kernel = pallas_call_structure(
        lambda x: _exp_kernel_then_sin(x, semantics=("parallel", pltpu.ARBITRARY)), x
    )
    assert kernel["grid"] == (2, 3)
    assert kernel["blocks"] == [(8, 16), (8, 16)]
    assert kernel["scratch"] == [((8, 16), jnp.float32)]
    assert kernel["semantics"] == ("parallel", "arbitrary")
    assert {"exp", "mul"} <= kernel["kernel_ops"] and "sin" not in kernel["kernel_ops"]
    assert "sin" in kernel["outside_ops"] and not {"exp", "mul"} & kernel["outside_ops"]
    assert "pallas_call" not in kernel["outside_ops"]
    assert (
        pallas_call_structure(lambda x: _exp_kernel_then_sin(x, semantics=None), x)["semantics"]
        == ()
    )


def test_pallas_call_structure_wants_exactly_one_pallas_call():
    x = jnp.ones((16, 48), jnp.float32)
    with pytest.raises(AssertionError, match="found 0"):
        pallas_call_structure(jnp.sin, x)
    with pytest.raises(AssertionError, match="found 2"):
        pallas_call_structure(
            lambda x: _exp_kernel_then_sin(_exp_kernel_then_sin(x, semantics=None), semantics=None),
            x,
        )


def test_primitives_looks_inside_nested_jaxprs():
    jaxpr = jax.make_jaxpr(lambda x: jax.jit(jnp.cos)(x) + 1)(1.0)
    assert {"jit", "cos", "add"} <= primitives(jaxpr.jaxpr)


def test_equations_finds_a_primitive_in_order_inside_nested_jaxprs():
    def f(x):
        y = jnp.sin(x)
        return jax.lax.cond(x > 0, lambda v: jnp.sin(2 * v), jnp.cos, y) + jax.jit(jnp.sin)(y)

    found = equations("sin", f, 1.0)
    assert len(found) == 3 and all(e.primitive.name == "sin" for e in found)
    assert found[0].invars[0].aval.shape == () and equations("tan", f, 1.0) == []
