"""One koan back to as shipped, in the learner's own file: its blanks, the TODO functions it
reaches, the blanks of the helpers it reaches and the fix regions inside it. Every other line of
the file stays the learner's."""

from __future__ import annotations

import ast

from jaxkoans.course import fills, koan_model


def reset_koan(shipped: str, current: str, koan: str) -> tuple[str, list[str]]:
    """(the learner's text with koan `koan` as shipped, the helper of each of its helpers'
    blanks put back: chapter 07's debug-print koan fills its blank in copy_by_blocks). Raises
    SyntaxError when the learner's file does not parse."""
    taken = fills.take(shipped, current)
    mine, theirs = koan_model.parse(current), koan_model.parse(shipped)
    lines = [line.encode("utf-8") for line in current.split("\n")]
    edits: list[tuple[tuple[int, int], tuple[int, int], bytes]] = []  # 0-based (line, byte col)
    helpers = {name: theirs.definitions[name] for name in theirs.reached(koan)[1:]}
    helper_blanks = []
    for fill in taken.blanks:
        held = [name for name, (start, end) in helpers.items() if start <= fill.blank[0] <= end]
        if fill.owner == koan or held:
            node = fill.node
            edits.append(((node.lineno - 1, node.col_offset), (node.end_lineno - 1, node.end_col_offset), b"__"))
            helper_blanks += held[:1] if fill.owner != koan else []
    todo_names = {t.name for t in theirs.todos}
    inside = ast.walk(theirs.top_level[koan]) if koan in theirs.top_level else ()
    nested = {n.name for n in inside if isinstance(n, koan_model.FUNCTIONS)} - {koan}
    reached = set(theirs.reached(koan)) | nested  # a TODO can live inside the koan
    for name in sorted(todo_names & reached):
        mine_body, shipped_body = mine.body_of(name), theirs.body_of(name)
        if mine_body is None or shipped_body is None:
            continue
        text = "\n".join(theirs.lines[shipped_body[0] : shipped_body[1]]).encode("utf-8")
        start, end = mine_body
        if end - 1 >= len(lines) or start >= end:
            continue
        edits.append(((start, 0), (end - 1, len(lines[end - 1])), text))
    span = mine.spans.get(koan)
    shipped_regions = [(b, e) for b, e in theirs.regions if theirs.owner(b) == koan]
    own_regions = [(b, e) for b, e in mine.regions if span and span[0] <= b <= span[1]]
    for (sb, se), (mb, me) in zip(shipped_regions, own_regions, strict=False):
        text = "\n".join(theirs.lines[sb : se - 1]).encode("utf-8")
        if me - 1 > mb:
            edits.append(((mb, 0), (me - 2, len(lines[me - 2])), text))
    for (sl, sc), (el, ec), text in sorted(edits, reverse=True):
        head, tail = lines[sl][:sc], lines[el][ec:]
        lines[sl : el + 1] = (head + text + tail).split(b"\n")
    return b"\n".join(lines).decode("utf-8"), helper_blanks
