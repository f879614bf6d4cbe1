"""What a TODO is judged by, in words: shown where a TODO is not yet written or breaks its contract.

Two lines, `评判：…。` and `Judged: ….`, naming no primitive, said from the same contract
(chapter.toml) and answer's profile (costs.json) the judge (plugin/contracts.py) holds it to.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from jaxkoans.plugin import contracts, costs

ZH, EN = "评判：", "Judged:"
WIDTH = 100  # columns of a wrapped line, its indentation included (CJK characters count 2)
# a name in code: dotted, snake_case, called, or capitalised inside (PartitionSpec, nnx.Linear)
_CODE = re.compile(r"[A-Za-z_][\w.]*\(\)|\b\w+[._]\w[\w.]*|\b[A-Za-z]+[a-z][A-Z]\w*")


def sentence(
    contract: dict,
    profiles: dict | None = None,
    docstring: str = "",
    solution: frozenset = frozenset(),
) -> tuple[str, str]:
    """(Chinese line, English line) saying what binds for a TODO with `contract` and its
    answer's `profiles` ({signature key: profile}, costs.profiles_for). For a `traced = false`
    contract, the clauses of its `why` that name nothing in code and no name of the `solution`
    (the answer's body) that `docstring` does not: nothing the TODO's own text does not give."""
    runs = list((profiles or {}).values())
    moved = any(isinstance(v, list) for p in runs for v in (p.get("fresh") or {}).values())
    grown = any(isinstance((v or {}).get("print"), list)
                for p in runs for v in (p.get("grown") or {}).values())  # fmt: skip
    if contract.get("traced", True) is False:
        renamed = any(v for p in runs for v in (p.get("names") or {}).values())
        return _untraced(contract.get("why", ""), docstring, solution, moved, renamed, grown)
    counts = any(v for p in runs for v in (p.get("ints") or {}).values())
    meshes = [v for p in runs for v in (p.get("mesh") or {}).values()
              if isinstance((v or {}).get("print"), list)]  # fmt: skip
    mesh = ("同一个网格、新的数值", "new values on its own mesh") if any(
        v.get("same") for v in meshes
    ) else ("更小的网格", "a smaller mesh")
    scaled = any(v for p in runs for v in (p.get("scaled") or {}).values())
    bold = any(isinstance((v or {}).get("print"), list)
               for p in runs for v in (p.get("bold") or {}).values())  # fmt: skip
    zh, en = [], []
    cases = [  # (zh, en) of each kind of fresh case the answer's profile holds
        *([("数值略作移动" + ("、计数加一" if counts else ""),
            "its numbers moved a little" + (", its counts one up" if counts else ""))]
          if moved else []),
        *([("同一个调用再把轴加倍", "the same call with its axes doubled")]
          if grown else []),
        *([mesh] if meshes else []),
        *([("浮点数缩小 2^24 倍", "its floats scaled down by 2^-24")] if scaled else []),
        *([("浮点数放大 32 倍", "its floats scaled up by 32")] if bold else []),
    ]  # fmt: skip
    if cases:
        zh.append(f"在测试没见过的输入上（{'；'.join(z for z, _ in cases)}）结果必须与参考答案相同")
        en.append(
            f"its results on inputs the test never showed ({'; '.join(e for _, e in cases)}) "
            "must be the answer's"
        )
    if runs:
        freed = {d for d, v in contract.get("costs", {}).items() if isinstance(v, str)}
        kernels = any(v for p in runs for place, v in p["flops"].items() if place != "outside")
        bound = [d for d in costs.BOUNDS if d not in freed]
        bound = [d for d in bound if d != "outside_flops" or kernels]
        zh.append(f"代价（{'、'.join(costs.WORDS[d][0] for d in bound)}）最多是参考答案的几倍")
        en.append(
            f"its costs ({', '.join(costs.WORDS[d][1] for d in bound)}) at most a few times "
            "the answer's"
        )
    if any(v is not None for p in runs for v in (p.get("steps") or {}).values()):
        zh.append("由数据决定步数的循环，跑的步数不能比参考答案多太多")
        en.append("its data-dependent loops may run only about the answer's steps")
    techniques = contracts.perturbed(contract)
    if techniques and contract.get("liveness", True) is not False:
        zh.append("它的技术必须随输入变化，并真正带出结果")
        en.append("its technique must vary with the inputs and carry the result")
    if contract.get("fresh"):
        zh.append(f"在新的随机输入上必须与 {contract['fresh']} 一致")
        en.append(f"on new random inputs it must agree with {contract['fresh']}")
    if not zh:
        zh.append("它的 koan 的断言，和它构建的程序里有什么")
        en.append("by its koans' asserts and by what the program it builds holds")
    return ZH + "；".join(zh) + "。", f"{EN} " + "; ".join(en) + "."


def _untraced(
    why: str, docstring: str, solution: frozenset, replayed: bool = False, renamed: bool = False,
    longer: bool = False,
) -> tuple[str, str]:
    """The lines of a TODO that builds no program to read: its koans' asserts judge it, and
    where it is `replayed` (contracts._replayed) its results on the values moved (`renamed`:
    and its dicts' keys renamed; `longer`: and its callables' calls grown along a length)."""
    known = docstring.replace(" ", "")
    kept = []
    for clause in _clauses(why):
        names = _CODE.findall(clause) + [w for w in re.findall(r"\w+", clause) if w in solution]
        if all(n.replace(" ", "") in known for n in names):
            kept.append(clause)
    zh = ZH + "只看调用它的 koan 的断言；不重新追踪、不读它的程序，也不比代价"
    en = f"{EN} by its koans' asserts; no program of it is read, nor its costs"
    if replayed:
        zh = (
            f"{ZH}看调用它的 koan 的断言，以及同一个调用的数值略作移动（计数加一"
            f"{'、字典的键改名' if renamed else ''}）后的结果"
            f"{'，以及数组加长的调用的结果' if longer else ''}："
            "必须与参考答案相同；不读它的程序，也不比代价"
        )
        en = (
            f"{EN} by its koans' asserts and by its results on the same calls with their numbers "
            f"moved (counts one up{', dict keys renamed' if renamed else ''})"
            f"{' and on calls with their arrays grown' if longer else ''}, which must be the "
            "answer's; no program of it is read, nor its costs"
        )
    if kept:
        return zh + "（原因见下一行）。", f"{en}: {'; '.join(kept)}."
    return zh + "：它不构建可读的 JAX 程序。", f"{en}: it builds no JAX program to read."


def _clauses(why: str) -> list[str]:
    """`why` split at its top-level "; " and ". " (not inside brackets)."""
    found, depth, current = [], 0, ""
    for i, char in enumerate(why):
        depth += (char in "([") - (char in ")]")
        if depth == 0 and char in ";." and why[i + 1 : i + 2] in (" ", ""):
            found.append(current)
            current = ""
            continue
        current += char
    return [c.strip() for c in [*found, current] if c.strip()]


def wrapped(lines: tuple[str, str], indent: str) -> list[str]:
    """The two lines wrapped at WIDTH columns under `indent` (Chinese after its punctuation)."""
    out = []
    for line in lines:
        room, current, width, last_break = WIDTH - len(indent), "", 0, -1
        for char in line:
            current += char
            width += 2 if ord(char) > 0x2E7F else 1
            if char in " ，；、）：" and width <= room:
                last_break = len(current)
            if width > room and last_break > 0:
                out.append(indent + current[:last_break].rstrip())
                current = current[last_break:].lstrip()
                width = sum(2 if ord(c) > 0x2E7F else 1 for c in current)
                last_break = -1
        out.append(indent + current.rstrip())
    return out


def solution_names(checkout, koan_file: Path, name: str) -> frozenset:
    """The names (variables, attributes, calls) in the answer's body of TODO `name`."""
    from jaxkoans.course import koan_model

    answer = checkout.answer_of(koan_file)
    tree = koan_model.read(answer).tree if answer.is_file() else None
    defs, named = ast.FunctionDef | ast.AsyncFunctionDef, []
    if tree is not None:  # at the top level, else at any depth; the last definition counts
        named = [n for n in tree.body if isinstance(n, defs) and n.name == name]
        named = named or [n for n in ast.walk(tree) if isinstance(n, defs) and n.name == name]
    found = set()
    for node in named[-1:]:
        for sub in ast.walk(ast.Module(body=node.body[1:], type_ignores=[])):
            if isinstance(sub, ast.Name):
                found.add(sub.id)
            elif isinstance(sub, ast.Attribute):
                found.add(sub.attr)
    return frozenset(found)
