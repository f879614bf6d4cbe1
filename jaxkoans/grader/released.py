"""What `release` changes in the course's own files, as functions of their text: no authors'
`[shortcuts]` or `[giveaways]` in chapter.toml, no answer blob id in `koans/.shipped.json`, and
`koans/course.toml`'s line that tells `diff` where the answers are. `tamper.harness_entries`
digests these files in their released form, so a copy of a release shows no harness change.
"""

from __future__ import annotations

import json
import re
import tomllib

AUTHORS_TABLES = ("shortcuts", "giveaways")
ANSWERS_LINE = re.compile(r'^answers = ".*"\n?', re.MULTILINE)
_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_\-\"]+)[^\]]*\]\]?\s*(#.*)?$")


def strip_chapter(text: str) -> str:
    """chapter.toml without its [shortcuts] and [giveaways] tables (sub-tables included); the
    rest byte for byte. Raises ValueError where the text cut by lines parses otherwise."""
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        header = _HEADER.match(line)
        if header:
            skipping = header.group(1).strip('"') in AUTHORS_TABLES
        if not skipping:
            kept.append(line)
    out = "".join(kept)
    if out == text:
        return text
    want = {k: v for k, v in tomllib.loads(text).items() if k not in AUTHORS_TABLES}
    if tomllib.loads(out) != want:
        raise ValueError("chapter.toml: [shortcuts]/[giveaways] are not whole tables by lines")
    return out


def strip_manifest(text: str) -> str:
    """koans/.shipped.json with every answer blob id null (the blanks' kinds stay)."""
    document = json.loads(text)
    for entry in document.get("files", {}).values():
        if "answer" in entry:
            entry["answer"] = None
    return json.dumps(document, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def course_toml(text: str, answers: str) -> str:
    escaped = answers.replace("\\", "\\\\").replace('"', '\\"')
    return ANSWERS_LINE.sub("", text).rstrip("\n") + f'\nanswers = "{escaped}"\n'


def released_text(rel: str, text: str, answers: str | None = None) -> str:
    """The release's form of the course's file `rel`; with `answers` None, course.toml loses
    any `answers` line (to compare a release with the course)."""
    if rel.startswith("koans/") and rel.endswith("/chapter.toml"):
        return strip_chapter(text)
    if rel == "koans/.shipped.json":
        return strip_manifest(text)
    if rel == "koans/course.toml":
        return ANSWERS_LINE.sub("", text) if answers is None else course_toml(text, answers)
    return text


RELEASED = ("koans/course.toml", "koans/.shipped.json")


def changed_by_release(rel: str) -> bool:
    return rel in RELEASED or (rel.startswith("koans/") and rel.endswith("/chapter.toml"))
