"""progress.py's subcommands, one module each (see jaxkoans/learner/cli.py)."""
