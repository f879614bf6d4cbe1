"""Every pytest run in this repository goes through the course's harness (jaxkoans.plugin.hooks)."""

import sys

if sys.version_info < (3, 12) or __import__("importlib").util.find_spec("jax") is None:
    raise SystemExit(
        "jax-koans 需要课程的虚拟环境 / needs the course's environment: "
        "run `bash setup.sh`, then `source .venv/bin/activate` (Python ≥ 3.12 with JAX 0.12)."
    )

pytest_plugins = ["jaxkoans.plugin.hooks", "pytester"]
