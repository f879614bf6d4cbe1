"""Cheap fakes of chapter 06's test_sharded_train_step.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def shard_batch__replicated(mesh, x, y):
    """The whole batch on every device: right losses, but no data parallelism."""
    sharding = NamedSharding(mesh, P())
    return jax.device_put(x, sharding), jax.device_put(y, sharding)


def shard_batch__split_over_every_device(mesh, x, y):
    """Splits the examples over both mesh axes: the two model-parallel devices see different ones."""
    sharding = NamedSharding(mesh, P(("data", "model")))
    return jax.device_put(x, sharding), jax.device_put(y, sharding)
