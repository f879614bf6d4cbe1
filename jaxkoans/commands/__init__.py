"""progress.py's subcommands, one module each (see jaxkoans/cli.py)."""
