"""jax-koans harness: blanks for koans, course data, the pytest plugin, progress."""

import importlib

# What a koan file imports, loaded on first use: `progress.py` needs none of it (nor pytest).
_EXPORTS = {
    "BlankError": "jaxkoans.api.blanks",
    "TodoError": "jaxkoans.api.blanks",
    "__": "jaxkoans.api.blanks",
    "todo": "jaxkoans.api.blanks",
    "raises_exactly": "jaxkoans.api.expect",
    "warns_exactly": "jaxkoans.api.expect",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'jaxkoans' has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(_EXPORTS[name]), name)
    return value  # kept here too, so the grader's run guard sees it as it saw it before
