"""jax-koans harness: blanks for koans, course data, the pytest plugin, progress."""

from jaxkoans.api.blanks import BlankError, TodoError, __, todo
from jaxkoans.api.expect import raises_exactly, warns_exactly

__all__ = ["BlankError", "TodoError", "__", "raises_exactly", "todo", "warns_exactly"]
