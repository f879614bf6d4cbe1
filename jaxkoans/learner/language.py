"""The learner's tools speak Chinese and English: a status line says both, or the one language
`--lang` chose; hints come in one language, the learner's locale by default."""

from __future__ import annotations

import locale
import os
import re

SPOKEN: str | None = None  # "zh" or "en" once a command's --lang chose it; None: both
CJK = re.compile("[\u3000-\u9fff\uff00-\uffef]")  # CJK punctuation, ideographs, full width


def default_language() -> str:
    for variable in ("LC_ALL", "LC_MESSAGES", "LANG"):
        if os.environ.get(variable):
            return "zh" if os.environ[variable].lower().startswith("zh") else "en"
    code = locale.getlocale()[0] or ""
    return "zh" if code.lower().startswith("zh") else "en"


def say(zh: str, en: str) -> str:
    """`zh / en`, or the one language --lang chose."""
    return {"zh": zh, "en": en}.get(SPOKEN or "", f"{zh} / {en}")


def lines_of(text: str) -> list[str]:
    """A bilingual text's lines (a koan's docstring: Chinese lines, then English ones), or the
    lines of the one language --lang chose: a line with a CJK character is Chinese (a text
    that mixes both in each line is kept whole)."""
    lines = text.splitlines()
    chosen = [line for line in lines if bool(CJK.search(line)) == (SPOKEN == "zh")]
    return chosen if SPOKEN and chosen else lines
