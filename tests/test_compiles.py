"""plugin/compiles.py: while a TODO is judged, a program compiled before is not compiled again,
and nothing else changes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import compiler

from jaxkoans.plugin import compiles
from jaxkoans.plugin.liveness import fresh_traces


def _counts() -> tuple[int, int]:
    return compiles._STATS["hits"], compiles._STATS["compiles"]


def test_the_same_program_under_a_fresh_trace_context_is_compiled_once():
    x = jnp.arange(5.0)
    with compiles.shared():
        with fresh_traces():
            first = jnp.sin(x) * 3.0
        hits, made = _counts()
        with fresh_traces():  # JAX's own caches miss: the program is traced and lowered again
            second = jnp.sin(x) * 3.0
        assert _counts()[0] > hits and _counts()[1] == made
        with fresh_traces():  # another program is compiled, never served another's executable
            other = jnp.cos(x)
        assert _counts()[1] > made
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(other, np.cos(np.arange(5.0)), rtol=1e-6)


def test_a_program_with_host_callbacks_is_always_compiled_and_calls_its_own():
    seen = []

    def observed(tag):
        def f(x):
            jax.debug.callback(lambda v: seen.append((tag, float(np.asarray(v).sum()))), x)
            return x + 1

        return f

    ones = jnp.ones(3)
    with compiles.shared():
        for tag in ("a", "b"):
            hits = _counts()[0]
            with fresh_traces():
                jax.block_until_ready(jax.jit(observed(tag))(ones))
            jax.effects_barrier()
            assert _counts()[0] == hits
    assert seen == [("a", 3.0), ("b", 3.0)]


def test_the_compiler_is_put_back_after_the_block():
    original = compiler.compile_or_get_cached
    with compiles.shared():
        assert compiler.compile_or_get_cached is not original
        with compiles.shared():  # nested: one layer
            inner = compiler.compile_or_get_cached
        assert compiler.compile_or_get_cached is inner
    assert compiler.compile_or_get_cached is original
