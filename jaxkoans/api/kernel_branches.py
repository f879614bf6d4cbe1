"""How many grid points of a Pallas kernel take each branch of each `cond` (`pl.when`'s body).

The kernel body's scalar integer arithmetic on `program_id`, `num_programs` and literals is
evaluated at every grid point at once (a numpy array over the points), following jit bodies and
each branch of a cond for the points that take it. A cond whose index this decides counts each
branch at the points that pick it; an index that reads data (a Ref, a scalar-prefetch table, a
loop's carry) is unknown, and then every branch counts at every point that reaches the cond.
Loop bodies are not evaluated: a cond inside one is left to the reader's own rule.
"""

from __future__ import annotations

import math
import weakref

import numpy as np
from jax.extend import core as jex

MAX_POINTS = 1 << 16  # a larger grid is left to the reader's rule: every branch, every point

_CALLS = ("jit", "pjit", "closed_call", "core_call", "named_call")  # bodies mapped one to one


def _div(a, b):
    """lax.div: integers round toward zero (numpy's // rounds down)."""
    if not np.issubdtype(np.result_type(a, b), np.integer):
        return np.true_divide(a, b)
    b = np.where(b == 0, 1, b)
    q = np.floor_divide(a, b)
    return q + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)))


_NUMPY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": _div, "rem": np.fmod,
    "max": np.maximum, "min": np.minimum, "neg": np.negative, "abs": np.abs, "sign": np.sign,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal, "and": np.bitwise_and, "or": np.bitwise_or,
    "xor": np.bitwise_xor, "not": np.invert, "square": np.square,
    "shift_left": np.left_shift, "shift_right_arithmetic": np.right_shift,
    "clamp": lambda lo, x, hi: np.clip(x, lo, hi),
    "select_n": lambda which, *cases: np.choose(np.asarray(which, dtype=np.int32), cases),
    "convert_element_type": lambda x: x, "integer_pow": None,
}  # fmt: skip

_MEMO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # kernel -> {grid: counts}


def counts(kernel, grid: tuple) -> dict[tuple, list[int]] | None:
    """{route: [points taking each branch]} for each cond the evaluation reaches (route: the ids
    of the holding equations from the kernel body down to the cond, and each branch's index on
    the way); None for a grid it does not evaluate (too large, or sizes known only at run time)."""
    if not all(isinstance(g, int | np.integer) for g in grid):
        return None
    grid = tuple(int(g) for g in grid)
    points = math.prod(grid)
    if not 0 < points <= MAX_POINTS:
        return None
    memo = _MEMO.setdefault(kernel, {})
    if grid not in memo:
        coords = [c.reshape(-1).astype(np.int32) for c in np.indices(grid)] if grid else []
        found: dict[tuple, list[int]] | None = {}
        try:
            with np.errstate(all="ignore"):  # points that do not reach an equation may divide by 0
                _run(kernel, [None] * len(kernel.invars), np.ones(points, bool), (), found,
                     (coords, grid))  # fmt: skip
        except (TypeError, ValueError, KeyError, IndexError, AttributeError):
            found = None  # a kernel this evaluator misreads keeps the reader's rule
        memo[grid] = found
    return memo[grid]


def _run(jaxpr, values: list, reach, route: tuple, found: dict, where) -> list:
    """Evaluate `jaxpr`'s scalars at the points `reach` marks; record its conds in `found`."""
    env = dict(zip(jaxpr.invars, values, strict=True))

    def value(atom):
        if isinstance(atom, jex.Literal):
            return np.asarray(atom.val, dtype=atom.aval.dtype) if np.ndim(atom.val) == 0 else None
        return env.get(atom)

    coords, grid = where
    for eqn in jaxpr.eqns:
        name, params = eqn.primitive.name, eqn.params
        ins = [value(a) for a in eqn.invars]
        outs = [None] * len(eqn.outvars)
        if name == "program_id":
            outs = [coords[params["axis"]]]
        elif name == "num_programs":
            outs = [np.int32(grid[params["axis"]])]
        elif name == "cond":
            here = (*route, id(eqn))
            branches = params["branches"]
            index = ins[0]
            taken = []
            for b, branch in enumerate(branches):
                mine = (
                    reach if index is None else reach & (np.clip(index, 0, len(branches) - 1) == b)
                )
                taken.append(int(np.count_nonzero(mine)))
                _run(branch.jaxpr, ins[1:], mine, (*here, b), found, where)
            found[here] = taken
        elif name in _CALLS and "jaxpr" in params:
            body = getattr(params["jaxpr"], "jaxpr", params["jaxpr"])
            outs = _run(body, ins, reach, (*route, id(eqn)), found, where)
        elif name in _NUMPY and _scalars(eqn) and all(v is not None for v in ins):
            outs = [_apply(name, ins, params).astype(eqn.outvars[0].aval.dtype)]
        env.update(zip(eqn.outvars, outs, strict=True))
    return [value(v) for v in jaxpr.outvars]


def _scalars(eqn) -> bool:
    return len(eqn.outvars) == 1 and all(
        getattr(getattr(v, "aval", None), "shape", None) == () for v in (*eqn.invars, *eqn.outvars)
    )


def _apply(name: str, ins: list, params: dict):
    if name == "integer_pow":
        return np.asarray(np.power(ins[0], params["y"]))
    return np.asarray(_NUMPY[name](*ins))
