"""The authors' tools: `python -m jaxkoans.authoring check [--chapter NN]` (the static gate,
without JAX, in seconds). The gates that run koans are `python -m jaxkoans.authoring.mutate`,
`… shortcuts` and `… giveaways` (CONTRIBUTING.md)."""
