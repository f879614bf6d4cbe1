"""Which koans of a graded file run only the course's own code (docs/sandbox.md).

A koan whose run reaches no fill but literal predictions (`3`, `"all-reduce"`, `jnp.int8`) runs
nothing the student wrote, so the guard runs it in a shared process per worker, keeping JAX's
compiled programs as `pytest answers` does; a koan reaching only what the koans before it in a
process reached joins their chain (`run_guard._ForkEachKoan`).
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
    """koan -> the top-level definitions of the graded file its run reaches (`KoanFile.reached`,
    fixtures too) that differ from the pristine ones but for literal predictions, and `MODULE`
    where the module-level code differs. Empty: course code only; left out: unknown. `kinds`:
    the pristine file's prediction blanks, (line, column) -> kind."""
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
    """Is a pristine node the same as its graded twin but for blanks holding literal predictions?"""

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
        fields = [(getattr(p, f, None), getattr(g, f, None)) for f in p._fields if f != "ctx"]
        return all(self.same_value(a, b) for a, b in fields)

    def same_value(self, a: object, b: object) -> bool:
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(map(self.same_value, a, b))
        if isinstance(a, ast.AST) or isinstance(b, ast.AST):
            return isinstance(a, ast.AST) and isinstance(b, ast.AST) and self.same(a, b)
        return a == b and type(a) is type(b)

    def literal(self, node: ast.AST, kind: str | None) -> bool:
        """A value written down, or (where the blank asks for one) a builtin class or a dtype or
        exception named through the file's imports; never a call nor a name of the koan's."""
        if isinstance(node, ast.Call):
            return False  # float("nan") is a literal for a prediction, but no call runs here
        if predictions.is_prediction(predictions.ARITHMETIC, node, None):
            return True  # literals and arithmetic on them
        if kind not in PREDICTION_NAMES:
            return False
        if isinstance(node, ast.Name):  # a builtin class: ValueError, float
            return isinstance(getattr(builtins, node.id, None), type)
        name = predictions.dotted(node)  # jnp.int8, jax.errors.…: through the file's imports
        return isinstance(node, ast.Attribute) and (name or ".").split(".")[0] in self.modules
