"""The learner's blanks: `__` for a value or expression, `todo()` for code to write.

Both fail loudly the moment they are used, so a koan fails *because of* its blank and the
harness can say so (see `classify.py`), even when JAX would otherwise trip over the blank
deep inside its own code.
"""

from __future__ import annotations


class BlankError(Exception):
    """An unfilled `__` was used. / 使用了未填写的 `__`。"""


class TodoError(NotImplementedError):
    """A `todo()` stub was called. / 调用了尚未实现的 `todo()`。"""


def _refuse(*_args, **_kwargs):
    raise BlankError("✍️ 填空 / fill in the blank: replace `__` with your answer")


class _Blank:
    """The type of `__`: every operation on it raises BlankError, except repr."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "__"

    __str__ = __repr__

    def __getattr__(self, name: str):
        _refuse()

    # Comparisons, truth, arithmetic, conversion, iteration, calls, indexing: all refuse.
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __bool__ = __len__ = __iter__ = __contains__ = __call__ = _refuse
    __getitem__ = __setitem__ = __hash__ = _refuse
    __int__ = __float__ = __complex__ = __index__ = _refuse
    # No __jax_array__: JAX rejects an object that merely has one ("Triggering __jax_array__()
    # during abstractification") before calling it; without it, JAX's probes reach
    # __getattr__ or __array__ and the BlankError itself surfaces.
    __array__ = __dlpack__ = _refuse
    __neg__ = __pos__ = __abs__ = __invert__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __matmul__ = __rmatmul__ = __truediv__ = __rtruediv__ = _refuse
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __rpow__ = _refuse
    __and__ = __rand__ = __or__ = __ror__ = __xor__ = __rxor__ = _refuse


__ = _Blank()


def todo(what: str = "") -> None:
    """Marks a function body the learner writes. / 标记学员需要实现的函数体。"""
    __tracebackhide__ = True
    raise TodoError(f"✍️ TODO: {what}" if what else "✍️ TODO")
