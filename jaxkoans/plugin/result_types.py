"""What an untraced TODO (`traced = false`: judged by its result alone) returns is of a type a
library or the course defines, checked as it returns (`sys.monitoring`'s PY_RETURN), before any
assert sees it: a `float` subclass whose `__sub__` returns 0.0 passes `abs(result - x) < 1e-12`.
The value is walked into containers, dataclasses and namespaces; every type met must be found
under its own name in its own module outside the koan files, or be a class of the file as
shipped. A type the learner's code defines fails the koan, and grade reads it as evidence.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import os
import sys
import types

from jaxkoans.course import koan_model
from jaxkoans.plugin.contracts import _code_of, contracted

TOOL = 5  # sys.monitoring: 3 is the grade guard's, 4 contracts'; 5 (optimizer) is unused here
LIMIT = 10_000  # values walked per result
HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class statement or type() made it


class ForeignResult(AssertionError):
    """An untraced TODO returned a value of a type the learner's code defines."""

    def __init__(self, function: str, what: str) -> None:
        self.function, self.what = function, what
        super().__init__(
            f"TODO {function} 返回的值的类型是你的代码定义的（{what}）：它的运算可以任意改写，"
            "检查不能相信它。请返回内置或 JAX/NumPy 的类型。\n"
            f"TODO {function} returned a value of a type your code defines ({what}): its "
            "operators can say anything, so no check can trust it. Return a builtin, NumPy or "
            "JAX type."
        )


def _library_type(cls: type, own: set[type]) -> bool:
    """Defined by a library under its own name, or a class of the koan file as shipped."""
    if cls in own or not cls.__flags__ & HEAP_TYPE:
        return True  # a type written in C (NoneType, float, jaxlib's): no Python code makes one
    found = module = sys.modules.get(getattr(cls, "__module__", None) or "")
    for part in (getattr(cls, "__qualname__", "") or "<>").split("."):
        found = getattr(found, part, None)
    if found is not cls or module is None:
        return False
    origin = getattr(module, "__file__", None) or ""
    return not (os.path.basename(origin).startswith("test_") or "/koans/" in origin or "/answers/" in origin)  # fmt: skip


def foreign(value, own: set[type]) -> str | None:
    """The first type in `value` that is not a library's (`own`: the shipped file's classes)."""
    stack, seen = [value], 0
    while stack and seen < LIMIT:
        value = stack.pop()
        seen += 1
        cls = type(value)
        if not _library_type(cls, own):
            bases = ", ".join(b.__qualname__ for b in cls.__mro__[1:-1]) or "object"
            return f"{cls.__qualname__}({bases})"
        if isinstance(value, (tuple, list, set, frozenset)):
            stack += list(value)
        elif isinstance(value, dict):
            stack += [*value.keys(), *value.values()]
        elif isinstance(value, types.SimpleNamespace):
            stack += list(vars(value).values())
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            stack += [getattr(value, f.name, None) for f in dataclasses.fields(value)]
    return None


def _shipped_classes(module, shipped: str | None) -> set[type]:
    """The koan module's classes that the file as shipped defines outside its fix regions."""
    model = koan_model.parse(shipped or "")
    return {
        value
        for name, node in model.top_level.items()
        if isinstance(node, ast.ClassDef)
        and not any(b <= node.lineno <= e for b, e in model.regions)
        and isinstance(value := vars(module).get(name), type)
    }


@contextlib.contextmanager
def checking(item, chapter, filename: str, shipped: str | None):
    """While the block runs, each return of `item`'s module's untraced TODOs is checked."""
    module = getattr(item, "module", None)
    names = contracted(chapter, filename, traced=False) if module is not None else ()
    codes = {code: name for name in names if (code := _code_of(getattr(module, name, None)))}
    if not codes:
        yield
        return
    own, found = _shipped_classes(module, shipped), []
    monitoring = sys.monitoring

    def on_return(code, offset, value):
        what = foreign(value, own) if code in codes else None
        if what:
            found.append((codes[code], what))
            raise ForeignResult(codes[code], what)

    if monitoring.get_tool(TOOL) is None:
        monitoring.use_tool_id(TOOL, "jaxkoans result types")
    monitoring.register_callback(TOOL, monitoring.events.PY_RETURN, on_return)
    for code in codes:
        monitoring.set_local_events(TOOL, code, monitoring.events.PY_RETURN)
    try:
        yield
    finally:
        for code in codes:
            monitoring.set_local_events(TOOL, code, 0)
        monitoring.register_callback(TOOL, monitoring.events.PY_RETURN, None)
        if found:
            what = [f"{name} returned {kind}: a type the learner's code defines" for name, kind in found]  # fmt: skip
            item.user_properties.append(("grade_violation", what[:5]))
            if sys.exc_info()[0] is None or not isinstance(sys.exc_info()[1], ForeignResult):
                raise ForeignResult(*found[0])
