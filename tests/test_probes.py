"""The instruments in jaxkoans.probes, on programs whose answer is known."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from jaxkoans.probes import collectives, counting_compiles, first_failing_stage, run_python


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
