"""Cheap fakes of chapter 08's test_silent_replication.py TODO (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def first_replicated_layer__final_output_only(model, x):
    """Reads the sharding of the model's output only: it can say the last layer, never which."""
    out = jax.jit(model)(x)
    return LAYERS - 1 if out.sharding.is_fully_replicated else None


def first_replicated_layer__any_all_gather_is_layer_zero(model, x):
    """Sees an all-gather in the compiled HLO and blames the first layer."""
    hlo = jax.jit(model).lower(x).compile().as_text()
    return 0 if "all-gather" in hlo else None


def first_replicated_layer__last_replicated_layer(model, x):
    """Inspects every layer but keeps the last replicated one, not the first."""
    seen = {}

    def after(k, h):
        jax.debug.inspect_array_sharding(h, callback=lambda s: seen.__setitem__(k, s))

    jax.jit(lambda h: model(h, after=after)).lower(x).compile()
    found = [k for k in sorted(seen) if seen[k].is_fully_replicated]
    return found[-1] if found else None
