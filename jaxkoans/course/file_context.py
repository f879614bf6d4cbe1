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

WORDLIKE = re.compile(r"^[A-Za-z_][\w.\-]{0,40}$")


@dataclass
class Context:
    """What a fill's alternatives may be drawn from: its file's strings and imports."""

    strings: tuple[str, ...] = ()
    imports: dict[str, str] = field(default_factory=dict)  # name in the file -> module

    @classmethod
    def of(cls, source: str) -> Context:
        tree = ast.parse(source)
        strings = sorted(
            {
                n.value
                for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
                if WORDLIKE.match(n.value)
            }
        )
        imports: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    imports[(alias.asname or alias.name).split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"
        return cls(tuple(strings), imports)

    def resolve(self, expression: str):
        """The object `expression` (a dotted name) denotes in the file, or None."""
        parts = expression.split(".")
        try:
            if parts[0] in self.imports:
                target = self.imports[parts[0]]
                module, _, name = target.partition(":")
                value = importlib.import_module(module)
                if name:
                    try:
                        value = getattr(value, name)
                    except AttributeError:
                        value = importlib.import_module(f"{module}.{name}")
            elif hasattr(builtins, parts[0]):
                value = getattr(builtins, parts[0])
            else:
                return None
            for part in parts[1:]:
                value = getattr(value, part)
            return value
        except (ImportError, AttributeError, ValueError):
            return None
