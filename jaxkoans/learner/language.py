"""The learner's tools speak Chinese and English: a status line says both, or the one language
`--lang` chose; hints come in one language, the learner's locale by default."""

from __future__ import annotations

import locale
import os

SPOKEN: str | None = None  # "zh" or "en" once a command's --lang chose it; None: both


def default_language() -> str:
    for variable in ("LC_ALL", "LC_MESSAGES", "LANG"):
        if os.environ.get(variable):
            return "zh" if os.environ[variable].lower().startswith("zh") else "en"
    code = locale.getlocale()[0] or ""
    return "zh" if code.lower().startswith("zh") else "en"


def say(zh: str, en: str) -> str:
    """`zh / en`, or the one language --lang chose."""
    return {"zh": zh, "en": en}.get(SPOKEN or "", f"{zh} / {en}")
