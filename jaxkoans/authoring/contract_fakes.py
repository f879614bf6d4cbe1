"""Fakes generated from a TODO's technique contract: the shortcuts a contract exists to refuse
(`FAMILIES`, each around a reference body), run by the shortcut gate (authoring/shortcuts.py).
"""

from __future__ import annotations

import ast
import textwrap

FAMILIES = ("dead", "zero", "callback", "nested_jit", "idle_loop", "reads_closure",
            "reads_frame", "guard_off", "selected_away", "on_zeros", "one_row", "only_tested")  # fmt: skip
ASKS = ("on_path", "in_loop", "absent", "max_intermediate")


def asks_of_program(contract: dict) -> bool:
    return contract.get("traced", True) and any(contract.get(k) for k in ASKS)


def _define(name: str, fn: ast.FunctionDef, body: str) -> str:
    signature = ast.unparse(fn.args)
    return f"def {name}({signature}):\n" + textwrap.indent(textwrap.dedent(body), "    ")


def arguments(fn: ast.FunctionDef, skip: tuple[str, ...] = ()) -> str:
    """The text that passes `fn`'s own parameters (less those named `skip`) on."""
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args) if p.arg not in skip]
    names += [f"*{a.vararg.arg}"] if a.vararg else []
    names += [f"{k.arg}={k.arg}" for k in a.kwonlyargs]
    names += [f"**{a.kwarg.arg}"] if a.kwarg else []
    return ", ".join(names)


def families(
    fn: ast.FunctionDef, answer_body: str, reference: tuple[str, str]
) -> list[tuple[str, str]]:
    """(label, body) of each family for TODO `fn`, whose answer body is `answer_body`, against
    `reference` (label, body)."""
    ref_label, ref_body = reference
    args = arguments(fn)
    prelude = "\n".join(["import jax as _jax", "import numpy as _np",
                          _define("_technique", fn, answer_body), _define("_reference", fn, ref_body)])  # fmt: skip
    positional = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    keywords = [a.arg for a in fn.args.kwonlyargs]
    values = ", ".join(positional + keywords)
    packed = f"(({', '.join(positional)},), {{{', '.join(f'{k!r}: {k}' for k in keywords)}}})"
    flat = (
        f"_flat, _tree = _jax.tree.flatten({packed})\n"
        "_arrays = [i for i, v in enumerate(_flat) if hasattr(v, 'shape') and hasattr(v, 'dtype')]\n"
        "def _host(*values):\n"
        "    full = list(_flat)\n"
        "    for i, v in zip(_arrays, values):\n"
        "        full[i] = v\n"
        "    _args, _kwargs = _jax.tree.unflatten(_tree, full)\n"
        "    return _jax.tree.map(_np.asarray, _reference(*_args, **_kwargs))\n"
    )
    bodies = {
        "dead": f"_ = _technique({args})\nreturn _reference({args})",
        "zero": f"return _jax.tree.map(lambda r, t: r + 0 * t, _reference({args}), _technique({args}))",
        "callback": (
            flat
            + f"_shape = _jax.eval_shape(lambda: _reference({args}))\n"
            + "return _jax.pure_callback(_host, _shape, *[_flat[i] for i in _arrays], vmap_method='sequential')"
        ),
        "nested_jit": f"return _jax.jit(lambda: _reference({args}))()",
        "idle_loop": f"return _jax.lax.while_loop(lambda c: False, lambda c: c, _reference({args}))",
        "reads_closure": f"_ = [getattr(v, '__closure__', None) for v in ({values},)]\nreturn _reference({args})",
        "reads_frame": f"import sys as _sys\n_ = _sys._getframe(1).f_locals\nreturn _reference({args})",
        "guard_off": f"with _jax.transfer_guard('allow'):\n    return _reference({args})",
        "selected_away": (
            "def _pick(r, t):\n"
            "    if not _jax.numpy.issubdtype(_jax.numpy.result_type(t), _jax.numpy.floating):\n"
            "        return r\n"
            "    return _jax.numpy.where(_jax.numpy.isnan(t), t, r)\n"
            f"return _jax.tree.map(_pick, _reference({args}), _technique({args}))"
        ),
        "on_zeros": (
            "def _zero(v):\n"
            "    floating = hasattr(v, 'dtype') and _jax.numpy.issubdtype(v.dtype, _jax.numpy.floating)\n"
            "    return _jax.numpy.zeros_like(v) if floating else v\n"
            f"_za, _zk = _jax.tree.map(_zero, {packed})\n"
            f"_t = _technique(*_za, **_zk)\n"
            f"return _jax.tree.map(lambda r, t: r + t if hasattr(t, 'dtype') else r, _reference({args}), _t)"
        ),
        # the technique makes the first row of each output, other work the rest
        "one_row": (
            "def _first(r, t):\n"
            "    if not getattr(r, 'ndim', 0) or getattr(t, 'shape', None) != r.shape:\n"
            "        return r\n"
            "    return r.at[0].set(t[0])\n"
            f"return _jax.tree.map(_first, _reference({args}), _technique({args}))"
        ),
        # right only at the shapes of its first call (a size written in): elsewhere off by 1 % (an
        # integer by one)
        # (the first call's shapes kept on a module that outlives the call, per variant)
        "only_tested": (
            f"_key = repr(_jax.tree.map(lambda v: (_np.shape(v), str(getattr(v, 'dtype', type(v)))), {packed}))\n"
            "try:\n"
            "    _firsts = _np._jaxkoans_only_tested\n"
            "except AttributeError:\n"
            "    _firsts = _np._jaxkoans_only_tested = {}\n"
            f"_first = _firsts.setdefault(__name__ + '::{fn.name}', _key)\n"
            f"_out = _technique({args})\n"
            "def _off(o):\n"
            "    if not hasattr(o, 'dtype') or o.dtype == bool:\n"
            "        return o\n"
            "    floating = _jax.numpy.issubdtype(o.dtype, _jax.numpy.floating)\n"
            "    return o * 1.01 if floating else o + 1\n"
            "return _out if _key == _first else _jax.tree.map(_off, _out)"
        ),
    }
    return [(f"contract_{name}_{ref_label}", prelude + "\n" + bodies[name]) for name in FAMILIES]
