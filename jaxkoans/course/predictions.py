"""A prediction blank takes a prediction: which blanks ask for one, and which fills are one.

A blank whose answer is a literal, a dtype or an exception class asks the learner to predict
what JAX does. A fill that computes instead (`carry + 0`, `int(carry)`, a name of the koan's
scope) would pass without a prediction, so it is refused with its own message in pytest, watch,
progress and grade. The kinds are read from the answers by the authoring tools and shipped in
`koans/.shipped.json`, so a copy without `answers/` knows them too.
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
from pathlib import Path

from jaxkoans.course.koan_model import imports_in

# The kinds that ask a prediction. LITERAL: the answer is a plain literal, and so must the
# fill be (`6 * 7` beside `assert 6 * 7 == __` copies, it does not predict); ARITHMETIC: the
# answer itself is arithmetic of literals (`1024 + 512`, `[[1 / 3] * 3]`), and so may the fill be.
LITERAL, ARITHMETIC, DTYPE, EXCEPTION = "literal", "arithmetic", "dtype", "exception"
CODE = "code"

MESSAGE = (
    "这个空要的是你的预测（一个字面值），而不是一段计算：写出你认为 JAX 会给出的值本身。\n"
    "This blank asks for your prediction, not a computation: write the value itself, as you\n"
    "expect JAX to give it."
)
WHAT_IT_TAKES = {
    LITERAL: "一个字面值 / a literal (number, string, tuple, list, dict, None, True …)",
    ARITHMETIC: "字面值及其算术 / literals and arithmetic on them (no names, no calls)",
    DTYPE: "一个 dtype 的名字 / a dtype by name (jnp.float32, np.int8, 'bfloat16')",
    EXCEPTION: "一个异常类的名字 / an exception class by name (ValueError, jax.errors.…)",
}


CONSTANT_NAMES = ("inf", "nan", "pi", "e")  # jnp.inf, np.nan, math.pi: values, not computations
NUMBER_TYPES = ("float", "int", "complex", "bool")  # float("inf") is still a literal


class NotAPrediction(AssertionError):
    """Raised in place of running a koan whose prediction blank holds a computation."""

    def __init__(self, refused: list) -> None:
        self.refused = refused  # fills.BlankFill, with .kind set by refusals()
        super().__init__(MESSAGE)


def _literal(node: ast.AST) -> bool:
    """Literals and arithmetic of literals only: `3`, `-2.5`, `(8, 4)`, `1024 + 512`,
    `[[1 / 3] * 3]`, `-jnp.inf`, `float("nan")`; no name of the koan, no call that computes."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return _literal(node.operand)
    if isinstance(node, ast.BinOp):
        return _literal(node.left) and _literal(node.right)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_literal(element) for element in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _literal(k) for k in node.keys) and all(map(_literal, node.values))
    if isinstance(node, ast.Attribute):
        return node.attr in CONSTANT_NAMES and isinstance(node.value, ast.Name)
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in NUMBER_TYPES
            and not node.keywords and all(isinstance(a, ast.Constant) for a in node.args))  # fmt: skip


def is_plain(node: ast.AST) -> bool:
    """What ast.literal_eval reads: constants and containers of them, a sign, a complex."""
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _is_dict_call(node: ast.AST) -> bool:
    """`dict(x=0, y=1)`: the builtin called with keywords only, a dict written down."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict"
            and not node.args and all(k.arg is not None for k in node.keywords))  # fmt: skip


class _LiteralDicts(ast.NodeTransformer):  # each `dict(x=0, …)` written as `{"x": 0, …}`
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not _is_dict_call(node):
            return node
        return ast.Dict(keys=[ast.Constant(k.arg) for k in node.keywords], values=[k.value for k in node.keywords])


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` of a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def kind_of_answer(node: ast.expr, context) -> str:
    """The kind of a blank from its answer's node; `context` resolves the answer file's names
    (course/file_context.py's Context)."""
    if is_plain(node):
        return LITERAL
    if _literal(node):
        return ARITHMETIC
    value = context.resolve(name) if (name := dotted(node)) is not None else None
    if isinstance(value, type) and issubclass(value, BaseException):
        return EXCEPTION
    return DTYPE if name is not None and _is_dtype(value) else CODE


def _is_dtype(value) -> bool:
    import numpy as np

    if value is None or isinstance(value, (bool, int, float, str)):
        return False
    if isinstance(value, type) and issubclass(value, np.generic):
        return True
    if isinstance(value, np.dtype):
        return True
    scalar_type = getattr(value, "dtype", None)  # jnp.float32 is a _ScalarMeta with a dtype
    return isinstance(value, type) and isinstance(scalar_type, np.dtype)


def of_file(koan_text: str, answer: Path) -> dict[str, str]:
    """{"line:column" of each shipped `__`: its kind} for the blanks that ask a prediction."""
    from jaxkoans.course import fills
    from jaxkoans.course.file_context import Context

    answer_text = answer.read_text(encoding="utf-8")
    context = Context.of(answer_text)
    kinds = ((fill.blank, kind_of_answer(fill.node, context)) for fill in fills.take(koan_text, answer_text).blanks)
    return {f"{line}:{column}": kind for (line, column), kind in kinds if kind != CODE}


@functools.lru_cache(maxsize=64)
def _bound_otherwise(tree: ast.Module) -> frozenset[str]:
    """Names the file binds other than by an import: assignments, defs, parameters, loops."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return frozenset(names)


def is_prediction(kind: str, node: ast.expr, tree: ast.Module) -> bool:
    """True when the learner's fill `node` (in their file's `tree`) is a prediction of `kind`."""
    if kind in (LITERAL, ARITHMETIC) and any(_is_dict_call(n) for n in ast.walk(node)):
        if "dict" in _bound_otherwise(tree):
            return False  # not the builtin
        node = _LiteralDicts().visit(copy.deepcopy(node))
    if kind == LITERAL:
        return is_plain(node)
    if kind == ARITHMETIC:
        return _literal(node)
    if kind == DTYPE and isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if kind in (DTYPE, EXCEPTION):
        name = dotted(node)
        if name is None:
            return False
        root = name.split(".")[0]
        if root in _bound_otherwise(tree):
            return False  # a variable of the koan that holds the answer, not its name
        return root in imports_in(tree) or hasattr(builtins, root)
    return True


def refusals(taken, kinds: dict[tuple[int, int], str]) -> list[tuple[object, str]]:
    """(fills.BlankFill, kind) of each learner's fill that computes where a prediction is asked."""
    if not kinds or taken.tree is None:
        return []
    return [(fill, kinds[fill.blank]) for fill in taken.blanks
            if fill.blank in kinds and not _safely(is_prediction, kinds[fill.blank], fill.node, taken.tree)]  # fmt: skip


def _safely(check, *args) -> bool:
    """A fill nested too deeply to walk is no literal."""
    try:
        return check(*args)
    except RecursionError:
        return False
