"""What a koan file's names denote: its strings and imports, read from its source.

The mutation gate draws a fill's wrong alternatives from it, and the manifest (predictions.py)
and the give-away check resolve an answer's dotted names through it.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from dataclasses import dataclass, field

from jaxkoans.course.koan_model import imports_in

WORDLIKE = re.compile(r"^[A-Za-z_][\w.\-]{0,40}$")


@dataclass
class Context:
    """What a fill's alternatives may be drawn from: its file's strings and imports."""

    strings: tuple[str, ...] = ()
    imports: dict[str, str] = field(default_factory=dict)  # name in the file -> dotted path

    @classmethod
    def of(cls, source: str) -> Context:
        tree = ast.parse(source)
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        return cls(tuple(sorted(s for s in strings if WORDLIKE.match(s))), dict(imports_in(tree)))

    def resolve(self, expression: str):
        """The object `expression` (a dotted name) denotes in the file, or None."""
        parts = expression.split(".")
        try:
            if parts[0] in self.imports:
                target = self.imports[parts[0]]
                module, _, name = target.rpartition(".")
                try:  # `from a import b`: a's attribute b, else its submodule
                    value = getattr(importlib.import_module(module), name) if module else None
                except (ImportError, AttributeError):
                    value = None
                value = importlib.import_module(target) if value is None else value
            elif hasattr(builtins, parts[0]):
                value = getattr(builtins, parts[0])
            else:
                return None
            for part in parts[1:]:
                value = getattr(value, part)
            return value
        except (ImportError, AttributeError, ValueError):
            return None
