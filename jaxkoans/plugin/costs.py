"""What a TODO's program may cost against its answer's: the profiles and the bounds.

`python -m jaxkoans.authoring.programs --costs` runs a chapter's answers and writes, per TODO
and argument signature, the answer's cost profile (`Program.costs`, jaxkoans/api/program.py) to
`koans/NN/costs.json`. A koan's TODO is then held to it: by default each dimension below may be
at most `factor` times the answer's plus `slack`; a contract's `costs` table sets another factor
for a dimension, or frees it with a string that says why (`largest_intermediate = "…"`). A
different correct program with the same costs passes; the same numbers bought by more work
(a dense loop beside the kernel, a gather done by an all-reduce, rows one at a time, a second
algorithm) do not, nor a holder the contract names that does almost none of the work its answer
does inside it (`LEAST`).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

FILE = "costs.json"
# dimension -> (factor, slack): the TODO's figure may be at most factor x the answer's + slack
BOUNDS = {
    "flops": (4.0, 1024),
    "outside_flops": (2.0, 256),  # only where the answer works inside kernels or on the host
    "opaque_calls": (1.0, 0),
    "collective_bytes": (1.5, 0),
    "serial_steps": (1.0, 0),
    "largest_intermediate": (4.0, 1024),
    "equations": (2.0, 32),  # a loop unrolled in Python beside a one-step scan
    "collective_calls": (1.5, 1),  # a collective per feature where one carries them all
    "host_bytes": (2.0, 0),  # the whole array sent to a callback to reduce it on the host
}
WORDS = {
    "flops": ("浮点运算", "flops"),
    "outside_flops": (
        "内核与主机之外（设备上）的浮点运算",
        "flops outside the kernels and the host",
    ),
    "opaque_calls": ("回调、FFI 与自定义原语的调用次数", "callback, FFI and custom primitive calls run"),
    "collective_bytes": ("每个设备的集合通信字节数", "bytes of collectives per device"),
    "serial_steps": ("串行的循环步数", "serial loop steps"),
    "largest_intermediate": ("最大的中间数组（字节）", "bytes of the largest intermediate"),
    "equations": ("程序的大小（方程数）", "the program's size (equations)"),
    "collective_calls": ("集合通信的次数", "collectives run"),
    "host_bytes": ("交给主机回调的字节数", "bytes handed to host callbacks"),
}


# a profile's per-koan figures (each koan calls the TODO on its own data): its fresh cases, its
# loops' steps, the share of the result its technique carries (plugin/liveness.py), how its
# fresh case was moved where the usual move makes the answer diverge (fresh.MOVES)
PER_KOAN = ("fresh", "grown", "steps", "carried", "scale", "ints", "drawn", "mesh", "scaled",
            "bold", "signs", "names", "layout", "floors")  # fmt: skip
# a TODO's data-dependent loops may take at most factor x the answer's steps + slack when run
# (plugin/trips.py): another honest stopping test (a do-while, a flag set in the body) takes one
# step more each time a loop runs, which doubles a run of one step; a loop that always runs to
# its end takes many
STEPS = (2.0, 1)


def more_steps(mine: int | None, answer: int | None) -> list[str]:
    """Why `mine` steps of data-dependent loops are more than the answer's allow, in words."""
    if mine is None or answer is None:
        return []
    factor, slack = STEPS
    if mine <= factor * answer + slack:
        return []
    return [
        f"数据决定的循环运行了 {mine} 步，参考答案只需 {answer} 步 / its data-dependent loops ran "
        f"{mine} steps where the answer's stop after {answer}: a loop that does not stop when its "
        "test holds does the work the technique saves"
    ]


def signature_key(signature: str) -> str:
    """A short stable name for a call's argument signature (shapes, dtypes, shardings, static
    arguments without the memory addresses their reprs carry, `<function f at 0x7f…>`, or the
    run's own names, a kernel target `koans_lookup_<uuid4 hex>`)."""
    stable = re.sub(r" at 0x[0-9a-fA-F]+|[0-9a-f]{16,}", "", signature)
    return hashlib.sha256(stable.encode()).hexdigest()[:16]


def koan_key(nodeid: str) -> str:
    """A koan's name with its case (`test_x[case]`): a gate's variant of the file keeps it."""
    return nodeid.split("::", 1)[-1]


def figures(profile: dict) -> dict[str, int]:
    """The bounded dimensions of a profile (`Costs.as_dict()`)."""
    flops = profile["flops"]
    return {
        "flops": sum(flops.values()),
        "outside_flops": flops.get("outside", 0),
        "technique_flops": flops.get("technique", 0),
        "technique_steps": profile.get("technique_steps"),  # None in a profile written before
        "opaque_calls": profile["opaque_calls"],
        "collective_bytes": sum(profile["collective_bytes"].values()),
        "serial_steps": profile["serial_steps"],
        "largest_intermediate": profile["largest_intermediate"],
        "equations": profile.get("equations"),  # None in a profile written before it was kept
        "collective_calls": profile.get("collective_calls"),
        "host_bytes": profile.get("host_bytes"),
    }


def exceeded(mine: dict, answer: dict | None, overrides: dict) -> list[str]:
    """What `mine` (a Program's `Costs.as_dict()`) spends beyond the answer's profile, in words."""
    if answer is None:
        return []
    mine, theirs = figures(mine), figures(answer)
    problems = []
    for dimension, (factor, slack) in BOUNDS.items():
        wanted = overrides.get(dimension, factor)
        if isinstance(wanted, str) or theirs[dimension] is None:
            continue  # freed by the contract, with its reason (or not in the answer's profile)
        if dimension == "outside_flops":  # where the answer works in kernels or on the host
            if not any(v for place, v in answer["flops"].items() if place in ("kernel", "host")):
                continue
            slack += int(0.05 * theirs["flops"])
        limit = wanted * theirs[dimension] + slack
        if mine[dimension] > limit:
            zh, en = WORDS[dimension]
            problems.append(
                f"{zh} {mine[dimension]} 超过参考答案的 {wanted:g} 倍（{theirs[dimension]}）/ "
                f"{en}: {mine[dimension]}, more than {wanted:g} x the answer's "
                f"{theirs[dimension]}: the result is bought with work the technique saves"
            )
    return problems + _held_too_little(mine, theirs, overrides)


# The holder a contract names (a custom_root's solve, a scan's body, a shard_map: Program.costs'
# "technique" place) must do at least this share of the work the answer does inside it, less a
# slack: a holder around an identity, its result found outside and handed in, does none. Work
# moved out of it (an LSTM's input projection hoisted out of the scan) is honest; a quarter is
# far below any such share.
LEAST = (0.25, 64)


def _held_too_little(mine: dict, theirs: dict, overrides: dict) -> list[str]:
    """The holder the contract names does next to none of the answer's work inside it: a
    quarter of its flops less a slack, or no loop where the answer's holds one (a while of
    data-dependent steps is counted once, so one step inside beside the loop outside would
    meet the flops)."""
    factor, slack = LEAST
    if isinstance(overrides.get("technique_flops"), str):
        return []
    done, due = mine["technique_flops"], theirs["technique_flops"]
    problems = []
    if done < factor * due - slack:
        problems.append(
            f"契约所说的技巧（scan、custom_root、shard_map 等）内部只做了 {done} 次浮点运算，不到参考"
            f"答案（{due}）的 {factor:g} 倍 / the holder the contract names (a scan, a custom_root, "
            f"a shard_map …) does {done} flops inside it, less than {factor:g} x the answer's "
            f"{due}: the work is done outside it and its result handed in"
        )
    if theirs["technique_steps"] and not mine["technique_steps"]:
        problems.append(
            f"契约所说的技巧内部没有循环，参考答案在那里跑 {theirs['technique_steps']} 步 / the holder "
            f"the contract names runs no loop inside it where the answer's runs "
            f"{theirs['technique_steps']} steps: the loop runs outside it and its result is handed in"
        )
    return problems


def profiles_for(chapter_dir: Path, filename: str) -> dict[str, dict]:
    """{TODO: {signature key: the answer's profile}} of one koan file."""
    try:
        data = json.loads((chapter_dir / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    prefix = f"{filename}::"
    return {k[len(prefix) :]: v for k, v in data.items() if k.startswith(prefix)}


def _held(profiles: dict) -> set[tuple]:
    """What a costs.json holds, down to each koan's case: (TODO, signature, case, koan)."""
    return {
        (todo, signature, *each)
        for todo, by_signature in profiles.items()
        for signature, profile in by_signature.items()
        for each in [("",)] + [(k, koan) for k in PER_KOAN for koan in profile.get(k) or {}]
    }


def write(chapter_dir: Path, entries: list[dict]) -> list[str]:
    """Write the answers' profiles of one chapter from programs' log entries; what the file held
    before and holds no more (a koan whose answer failed in this run loses its fresh cases
    silently otherwise), in words."""
    try:
        before = json.loads((chapter_dir / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        before = {}
    found: dict[str, dict] = {}
    for entry in entries:
        if "costs" not in entry:
            continue
        filename = entry["koan"].split("::")[0].rsplit("/", 1)[-1].split("__")[0]
        filename = filename if filename.endswith(".py") else f"{filename}.py"
        todo = found.setdefault(f"{filename}::{entry['todo']}", {})
        per_koan = {k: {} for k in PER_KOAN}
        known = todo.setdefault(entry["signature"], {**entry["costs"], **per_koan})
        for k in PER_KOAN:  # each koan's own call: moved, grown, its loops' steps
            known[k] |= entry["costs"].get(k) or {}
    for todo in found.values():  # one grown and one mesh case per TODO: each costs a compile
        for case in ("grown", "mesh"):
            kept = False
            for signature in sorted(todo):
                cases = todo[signature][case]
                for koan in sorted(cases):
                    if kept:
                        del cases[koan]
                    kept = True
    text = json.dumps(dict(sorted(found.items())), indent=1, sort_keys=True) + "\n"
    (chapter_dir / FILE).write_text(text, encoding="utf-8")
    gone = _held(before) - _held(json.loads(text))
    return [" ".join(filter(None, (t, s, *rest))) for t, s, *rest in sorted(gone)]
