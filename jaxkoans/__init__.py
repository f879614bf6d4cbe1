"""jax-koans harness: blanks for koans, course data, the pytest plugin, progress."""

from jaxkoans.blanks import BlankError, TodoError, __, todo

__all__ = ["BlankError", "TodoError", "__", "todo"]
