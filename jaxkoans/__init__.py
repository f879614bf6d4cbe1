"""jax-koans harness: blanks for koans, course data, the pytest plugin, progress."""

from jaxkoans.blanks import BlankError, TodoError, __, todo
from jaxkoans.expect import raises_exactly, warns_exactly

__all__ = ["BlankError", "TodoError", "__", "raises_exactly", "todo", "warns_exactly"]
