#!/usr/bin/env python3
"""JAX 进阶 Koans · 学习进度 / progress.

    python progress.py                 where you stand, and the next koan to work on
    python progress.py --chapter 03    one chapter only (--json: the same as JSON, --all: re-run all)
    python progress.py watch [KOAN]    re-run the koan you work on at every save (keys: h, n, r, v, q)
    python progress.py hint [KOAN]     the hint of the next (or named) koan, one level more each time
    python progress.py reveal KOAN     what a wrong answer hid, or an open blank's answer (revealed)
    python progress.py diff [KOAN]     your file against its answer, once the koan passes
    python progress.py reset KOAN      restore a pristine koan file (yours is kept in .jaxkoans/backups/)
    python progress.py doctor          is this machine ready for the course?
    python progress.py --lang en …     one language (zh or en): the summary, watch, hint, reveal

It runs the koans in a separate process and never modifies your files (only `reset` does, after
asking and keeping a copy). Its memory lives in .jaxkoans/.
"""

import sys
from pathlib import Path

if sys.version_info < (3, 12):  # noqa: UP036 (run by a 3.11 `python` too: say what to do)
    sys.exit(
        "需要 Python ≥ 3.12 / needs Python >= 3.12: "
        "run `bash setup.sh`, then `source .venv/bin/activate`"
    )

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jaxkoans.learner.cli import main

if __name__ == "__main__":
    sys.exit(main(description=__doc__))
