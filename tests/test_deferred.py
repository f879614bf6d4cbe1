"""probes.Deferred, chapter 02's stand-in result: only a wait for it runs its work."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans.api.probes import Deferred


def _counted():
    calls = []

    def work(x):
        calls.append(x)
        return jnp.asarray(x) * 2

    return calls, work


def test_nothing_runs_until_someone_waits():
    calls, work = _counted()
    result = Deferred(work, 3.0)
    assert not result.done and calls == []
    assert result.is_ready() is False and not result.done  # one poll does not wait
    assert jax.block_until_ready(result) is result and result.done
    assert result.block_until_ready() is result and calls == [3.0]  # the work runs once


def test_each_way_of_waiting_runs_the_work():
    for wait in (
        lambda r: r.block_until_ready(),
        lambda r: jax.block_until_ready([r]),
        np.asarray,
        lambda r: [r.is_ready() for _ in range(2)],  # a poll loop's second poll
    ):
        calls, work = _counted()
        result = Deferred(work, 1.5)
        wait(result)
        assert result.done and calls == [1.5]
        np.testing.assert_array_equal(np.asarray(result, np.float64), 3.0)
