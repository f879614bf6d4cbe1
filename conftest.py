"""Every pytest run in this repository goes through the course's harness (jaxkoans.plugin)."""

pytest_plugins = ["jaxkoans.plugin", "pytester"]
