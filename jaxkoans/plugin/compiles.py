"""One compile per program while a TODO is judged: the judge's runs (fresh cases, liveness, trips)
trace anew, so JAX's caches miss. While `shared()` is active, a program compiled before in it,
byte for byte (JAX's persistent-cache key and the devices it loads on), returns that executable;
one with host callbacks compiles anew, as in JAX's persistent cache. The koans' own compiles never
pass here: what a koan observes of compilation is unchanged.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict

LIMIT = 4096  # executables kept, the oldest dropped first
_KEPT: OrderedDict = OrderedDict()
_STATS = {"hits": 0, "compiles": 0}


@contextlib.contextmanager
def shared():
    """While the block runs, a program compiled before (in any such block) is not compiled again."""
    from jax._src import cache_key, compiler  # the compile step and its key: no public hook

    original = compiler.compile_or_get_cached
    if getattr(original, "_jaxkoans_shared", False):  # nested: the outer block shares already
        yield
        return

    def compile_or_reuse(backend, computation, devices, options, host_callbacks, *rest, **named):
        def build():
            return original(backend, computation, devices, options, host_callbacks, *rest, **named)

        profiler = named.get("pgle_profiler", rest[1] if len(rest) > 1 else None)
        if host_callbacks or profiler is not None:
            return build()
        try:
            loads_on = rest[0] if rest else named["executable_devices"]
            key = (cache_key.get(computation, devices, options, backend), tuple(d.id for d in loads_on))  # fmt: skip
        except Exception:  # a program JAX cannot key: compiled as usual
            return build()
        if key in _KEPT:
            _KEPT.move_to_end(key)
            _STATS["hits"] += 1
            return _KEPT[key]
        _KEPT[key] = executable = build()
        _STATS["compiles"] += 1
        if len(_KEPT) > LIMIT:
            _KEPT.popitem(last=False)
        return executable

    compile_or_reuse._jaxkoans_shared = True
    compiler.compile_or_get_cached = compile_or_reuse
    try:
        yield
    finally:
        compiler.compile_or_get_cached = original
