"""The authors' tools: `python -m jaxkoans.authoring check [--chapter NN]` (the static gate and
what the gates' record no longer covers, without JAX, in seconds) and `python -m
jaxkoans.authoring stamp [--chapter NN] [--full]` (every gate that runs koans, the manifest and
tests/gate_record.toml: authoring/gates.py). The gates themselves are `mutate.py`, `shortcuts.py`
and `giveaways.py` (CONTRIBUTING.md)."""
