"""How many steps a TODO's data-dependent loops take when it runs, which its program's text cannot
show (a loop that stops early and one that runs to its last step read the same): each loop carries
a step counter of its own and calls back to the host once, when it ends, with its count (a call
per step cost 51 s of chapter 11's 190). The run traces anew, so no trace cached before (a nested
jit) escapes the count.
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def counting():
    """While active, each `while` JAX traces counts its steps in its carry and hands the count to
    the host when it ends; yields the counts (a list: their sum is the steps taken, read after
    `jax.effects_barrier`)."""
    import jax
    import jax.numpy as jnp
    from jax._src import core  # jaxpr_as_fun: no public evaluator of a ClosedJaxpr in 0.12
    from jax._src.lax.control_flow import loops  # while_p: no public name in 0.12

    from jaxkoans.plugin.liveness import rebinding

    steps: list[int] = []
    remaking = [False]  # a loop's cond and body are re-made by evaluating their jaxprs, whose
    # inner loops were counted when they were first bound: counted again, each step of an inner
    # loop would be taken twice, a loop three deep three times

    def counted(bind):
        def ticking(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
            params = dict(cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
            if remaking[0]:
                return bind(*args, cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, **params)

            def cond(*operands):  # the cond's consts, the carry, the count
                return core.jaxpr_as_fun(cond_jaxpr)(*operands[:-1])

            def body(*operands):  # the body's consts, the carry, the count
                return (*core.jaxpr_as_fun(body_jaxpr)(*operands[:-1]), operands[-1] + 1)

            count = jax.ShapeDtypeStruct((), jnp.int32)
            remaking[0] = True
            try:
                counting_cond = jax.make_jaxpr(cond)(*cond_jaxpr.in_avals, count)
                counting_body = jax.make_jaxpr(body)(*body_jaxpr.in_avals, count)
            finally:
                remaking[0] = False
            *out, n = bind(
                *args, jnp.int32(0), cond_jaxpr=counting_cond, body_jaxpr=counting_body, **params
            )
            jax.debug.callback(lambda n: steps.append(int(n)), n)
            return out

        return ticking

    with rebinding({loops.while_p: counted}):
        yield steps
