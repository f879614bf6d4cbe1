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

    def tick(n):
        steps.append(int(n))
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

            hoisted, inner = _hoisted(body_jaxpr, tick)

            def body(*operands):  # the body's consts, the carry, the count
                *out, count = operands
                *out, = core.jaxpr_as_fun(hoisted)(*out)
                for steps_inside in out[len(out) - inner :]:
                    count = count + steps_inside
                return (*out[: len(out) - inner], count + 1)

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
            jax.debug.callback(tick, n)
            return out

        return ticking

    with rebinding({loops.while_p: counted}):
        yield steps


def _hoisted(closed, tick):
    """`closed` with the counts its own inner loops hand to `tick` returned as its last outputs
    instead of called back, and how many: a loop inside a loop adds its count to the outer one's
    rather than calling the host at each of its ends (a call cost 0.7 ms; 11,300 in 11
    newton_krylov). Loops inside a scan, a cond or a nested jit keep their calls."""
    jaxpr = closed.jaxpr
    ticks = [e for e in jaxpr.eqns if e.primitive.name == "debug_callback" and _calls(e, tick)]
    if not ticks:
        return closed, 0
    kept = [e for e in jaxpr.eqns if all(e is not t for t in ticks)]
    outvars = [*jaxpr.outvars, *(t.invars[0] for t in ticks)]
    return closed.replace(jaxpr=jaxpr.replace(eqns=kept, outvars=outvars)), len(ticks)


def _calls(equation, tick) -> bool:
    """Whether a debug_callback equation calls `tick` (held by the closure JAX wraps it in)."""
    cells = getattr(equation.params.get("callback"), "__closure__", None) or ()
    return any(cell.cell_contents is tick for cell in cells)
