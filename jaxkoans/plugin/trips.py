"""How many steps a TODO's data-dependent loops take when it runs: the serial work a program's
text cannot show.

The program reader counts a `while` whose trip count depends on the data once (it cannot know
more). Run, each step of such a loop calls back to the host, so a loop that stops when its test
holds and one that always runs to its last step differ here though their programs read the same.
The run re-traces the TODO under a fresh `jax.make_user_context` value, so no trace cached
before (a nested jit) escapes the count.
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def counting():
    """While active, each `while` JAX traces ticks a host counter once per step; yields the
    counter (a list: its length is the steps taken, read after `jax.effects_barrier`)."""
    import jax
    from jax._src import core  # jaxpr_as_fun: no public evaluator of a ClosedJaxpr in 0.12
    from jax._src.lax.control_flow import loops  # while_p: no public name in 0.12

    from jaxkoans.plugin.liveness import rebinding

    steps: list[int] = []

    def counted(bind):
        def ticking(*args, body_jaxpr, **params):
            def body(*carry):
                jax.debug.callback(lambda _: steps.append(1), 0)
                return core.jaxpr_as_fun(body_jaxpr)(*carry)

            ticked = jax.make_jaxpr(body)(*body_jaxpr.in_avals)
            return bind(*args, body_jaxpr=ticked, **params)

        return ticking

    with rebinding({loops.while_p: counted}):
        yield steps
