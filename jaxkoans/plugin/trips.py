"""How many steps a TODO's data-dependent loops take when it runs, which its program's text cannot
show (a loop that stops early and one that runs to its last step read the same): each step calls
back to the host. The run traces anew, so no trace cached before (a nested jit) escapes the count.
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
