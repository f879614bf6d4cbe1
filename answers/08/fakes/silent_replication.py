"""Cheap fakes of chapter 08's test_silent_replication.py TODO (parsed, never imported).

Each is a route a learner tries instead of inspect_array_sharding inside serve's jit."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def replicated_layers__output_sharding_only(serve, x):
    """Reads the sharding of serve's output: out_shardings keeps it split, so it says ()."""
    out = serve(x)
    return (LAYERS - 1,) if out.sharding.is_fully_replicated else ()


def replicated_layers__every_layer_returned(serve, x):
    """Keeps every layer's output through after and reads .sharding: they are serve's tracers."""
    outputs = {}
    serve(x, after=lambda k, h: outputs.__setitem__(k, h))
    return tuple(k for k in sorted(outputs) if outputs[k].sharding.is_fully_replicated)


def replicated_layers__returned_from_an_outer_jit(serve, x):
    """Returns the layers from a jit around serve: the values escape serve's own jit."""
    outputs = []

    def every_layer(h):
        serve(h, after=lambda k, v: outputs.append(v))
        return list(outputs)

    layers = jax.jit(every_layer)(x)
    return tuple(k for k, o in enumerate(layers) if o.sharding.is_fully_replicated)


def replicated_layers__eager_layers(serve, x):
    """Runs serve with jit switched off and reads each layer's concrete sharding."""
    seen = {}
    with jax.disable_jit():
        serve(x, after=lambda k, h: seen.__setitem__(k, h.sharding.is_fully_replicated))
    return tuple(k for k in sorted(seen) if seen[k])


def replicated_layers__debug_callback_values(serve, x):
    """Hands each layer to jax.debug.callback and reads the sharding of what arrives."""
    seen = {}

    def after(k, h):
        jax.debug.callback(lambda v: seen.__setitem__(k, v.sharding.is_fully_replicated), h)

    jax.block_until_ready(serve(x, after=after))
    return tuple(k for k in sorted(seen) if seen[k])


def replicated_layers__abstract_sharding(serve, x):
    """Reads jax.typeof(h).sharding at trace time: an Auto mesh's abstract spec, not XLA's."""
    seen = {}
    serve(x, after=lambda k, h: seen.__setitem__(k, jax.typeof(h).sharding.is_fully_replicated))
    return tuple(k for k in sorted(seen) if seen[k])


def replicated_layers__seed_recovered(serve, x):
    """Finds the seed whose generator gives the same outputs, then reads its tokens layers."""
    out = np.asarray(serve(x))
    for seed in range(64):
        if np.allclose(np.asarray(make_serve(seed)(x)), out):
            rng = np.random.default_rng(seed)
            kinds = ["mix"] + [KINDS[i] for i in rng.integers(len(KINDS), size=LAYERS - 1)]
            return tuple(k for k, kind in enumerate(kinds) if kind == "tokens")
    return ()


def replicated_layers__generator_copied(serve, x):
    """Copies the generator's draws and guesses: every tokens layer from the first one on."""
    out = np.asarray(serve(x))
    for seed in range(64):
        rng = np.random.default_rng(seed)
        kinds = ["mix"] + [KINDS[i] for i in rng.integers(len(KINDS), size=LAYERS - 1)]
        weights = (rng.normal(size=(LAYERS, D, D)) / np.sqrt(D)).astype(np.float32)
        h = np.asarray(x)
        for kind, w in zip(kinds, weights, strict=True):
            if kind == "mix":
                h = np.tanh(h @ w)
            elif kind == "norm":
                h = h - h.mean(-1, keepdims=True)
            elif kind == "center":
                h = h - h.mean(1, keepdims=True)
            elif kind == "time":
                h = np.cumsum(h, axis=0) / T
            elif kind == "flip":
                h = h[:, ::-1]
            else:
                h = np.tanh(h.reshape(-1, D) @ w).reshape(h.shape)
        if np.allclose(h, out, atol=1e-5):
            first = kinds.index("tokens") if "tokens" in kinds else LAYERS
            return tuple(range(first, LAYERS))
    return ()


def replicated_layers__last_layer_dropped(serve, x):
    """Inspects every layer but drops the last replicated one."""
    seen = {}

    def after(k, h):
        jax.debug.inspect_array_sharding(h, callback=lambda s: seen.__setitem__(k, s))

    serve(x, after=after)
    return tuple(k for k in sorted(seen) if seen[k].is_fully_replicated)[:-1]
