"""Which koans of a graded file run only the course's own code.

The graded file is the pristine file with the student's fills put in (`fills.take`). A koan
whose run reaches no fill but literal predictions (`3`, `(8, 4)`, `"all-reduce"`, `jnp.int8`,
`ValueError`) runs nothing the student wrote: its code is the course's, as every answer run has
it, so it needs no process of its own to keep its neighbours honest. The grade runs such koans
in one long-lived process per worker (`run_guard._ForkEachKoan`), which keeps JAX's compiled
programs from one koan to the next as `pytest answers` does. Everything else (a TODO body, a
fix region, a helper, a fill that computes, any edit the tamper check flagged) keeps its own
forked process, except where the koans before it in that process reached nothing it does not
reach itself (`student_code_reached`): the chain of a capstone's koans keeps its programs too.
"""

from __future__ import annotations

import ast
import builtins

from jaxkoans.course import koan_model, predictions
from jaxkoans.course.koan_model import MODULE

PREDICTION_NAMES = (predictions.DTYPE, predictions.EXCEPTION)


def student_code_reached(
    pristine_text: str, graded_text: str, koans: list[str], kinds: dict[tuple[int, int], str]
) -> dict[str, frozenset[str]]:
    """koan -> the student's code its run can reach (`KoanFile.reached` with its fixtures): the
    top-level definitions of the graded file that differ from the pristine ones (but for
    literal predictions), and `MODULE` where the module-level code differs (it runs before
    every koan). Empty: the koan runs only course code and literal predictions. A koan left
    out (a file that does not parse) reaches what no one can say.

    `kinds`: the pristine file's prediction blanks, (line, column) -> kind (predictions.py)."""
    pristine, graded = koan_model.parse(pristine_text), koan_model.parse(graded_text)
    if pristine.tree is None or graded.tree is None:
        return {}
    p_defs, g_defs = pristine.top_level, graded.top_level
    trusted = _Trusted(kinds, graded.tree)
    same_module = trusted.same(_module_code(pristine.tree), _module_code(graded.tree))
    module = set() if same_module else {MODULE}
    changed = {name for name, node in g_defs.items() if not trusted.same(p_defs.get(name), node)}
    autouse = {name for name, node in g_defs.items() if _autouse(node)}
    return {
        koan: frozenset(((set(graded.reached(koan, fixtures=True)) | autouse) & changed) | module)
        for koan in koans
        if koan in g_defs
    }


def _module_code(tree: ast.Module) -> ast.Module:
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return ast.Module([n for n in tree.body if not isinstance(n, kinds)], [])


def _autouse(node: ast.AST) -> bool:
    """A fixture that runs for every koan of the file."""
    return any(
        isinstance(keyword.value, ast.Constant) and keyword.value.value is not False
        for decorator in getattr(node, "decorator_list", ())
        if isinstance(decorator, ast.Call)
        for keyword in decorator.keywords
        if keyword.arg == "autouse"
    )


class _Trusted:
    """Compares a pristine node with its graded twin: the same, but for blanks holding
    literal predictions."""

    def __init__(self, kinds: dict[tuple[int, int], str], graded: ast.Module) -> None:
        self.kinds = kinds
        self.modules = predictions.imported_names(graded)

    def same(self, p: ast.AST | None, g: ast.AST | None) -> bool:
        if p is None or g is None:
            return p is g
        if isinstance(p, ast.Name) and p.id == "__":
            return self.literal(g, self.kinds.get((p.lineno, p.col_offset)))
        if type(p) is not type(g):
            return False
        for field in p._fields:
            if field == "ctx":
                continue
            a, b = getattr(p, field, None), getattr(g, field, None)
            if isinstance(a, list) and isinstance(b, list):
                if len(a) != len(b) or not all(
                    self.same_value(x, y) for x, y in zip(a, b, strict=True)
                ):
                    return False
            elif not self.same_value(a, b):
                return False
        return True

    def same_value(self, a: object, b: object) -> bool:
        if isinstance(a, ast.AST) or isinstance(b, ast.AST):
            return isinstance(a, ast.AST) and isinstance(b, ast.AST) and self.same(a, b)
        return a == b and type(a) is type(b)

    def literal(self, node: ast.AST, kind: str | None) -> bool:
        """A value written down, or (where the blank asks for one) a dtype or exception named
        through the file's imports; never a call or a name of the koan's own."""
        if isinstance(node, ast.Call):
            return False  # float("nan") is a literal for a prediction, but no call runs here
        if predictions.is_prediction(predictions.ARITHMETIC, node, None):
            return True  # literals and arithmetic on them
        if kind not in PREDICTION_NAMES:
            return False
        if isinstance(node, ast.Name):  # a builtin class: ValueError, float
            return isinstance(getattr(builtins, node.id, None), type)
        name = predictions.dotted(node)  # jnp.int8, jax.errors.…: through the file's imports
        return (
            isinstance(node, ast.Attribute)
            and name is not None
            and name.split(".")[0] in self.modules
        )
