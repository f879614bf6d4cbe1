"""Cheap fakes of chapter 06's test_fp8.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def quantize_mx__plain_cast(x):
    """No scaling at all: every block's scale is 1, the values above 448 are lost."""
    scales = jnp.ones((*x.shape[:-1], x.shape[-1] // BLOCK), jnp.float32)
    return x.astype(jnp.float8_e4m3fn), scales.astype(jnp.float8_e8m0fnu)


def quantize_mx__one_scale(x):
    """One power-of-two scale for the whole tensor, repeated for every block."""
    scale = jnp.exp2(jnp.ceil(jnp.log2(jnp.max(jnp.abs(x)) / 448.0)))
    scales = jnp.full((*x.shape[:-1], x.shape[-1] // BLOCK), scale)
    return (x / scale).astype(jnp.float8_e4m3fn), scales.astype(jnp.float8_e8m0fnu)


def quantize_mx__exact_ratio(x):
    """Each block scaled by max|block| / 448 itself: the e8m0 cast rounds it to another power of two."""
    blocks = x.reshape(*x.shape[:-1], x.shape[-1] // BLOCK, BLOCK)
    scales = jnp.max(jnp.abs(blocks), axis=-1, keepdims=True) / 448.0
    values = (blocks / scales).astype(jnp.float8_e4m3fn).reshape(x.shape)
    return values, scales[..., 0].astype(jnp.float8_e8m0fnu)


def quantize_mx__floor(x):
    """floor instead of ceil: the scale is too small and a block's largest values overflow to NaN."""
    blocks = x.reshape(*x.shape[:-1], x.shape[-1] // BLOCK, BLOCK)
    amax = jnp.max(jnp.abs(blocks), axis=-1, keepdims=True)
    scales = jnp.exp2(jnp.floor(jnp.log2(amax / 448.0)))
    values = (blocks / scales).astype(jnp.float8_e4m3fn).reshape(x.shape)
    return values, scales[..., 0].astype(jnp.float8_e8m0fnu)


def delayed_scaling_quantize__current_amax(x, amax_history):
    """Just-in-time scaling: the scale from this step's own max|x|, the history only recorded."""
    scale = jnp.max(jnp.abs(x)) / E4M3_MAX
    values = jnp.clip(x / scale, -E4M3_MAX, E4M3_MAX).astype(jnp.float8_e4m3fn)
    return values, scale, jnp.roll(amax_history, 1).at[0].set(jnp.max(jnp.abs(x)))


def delayed_scaling_quantize__latest_amax_only(x, amax_history):
    """The scale from the last step's amax alone instead of the window's maximum."""
    scale = amax_history[0] / E4M3_MAX
    values = jnp.clip(x / scale, -E4M3_MAX, E4M3_MAX).astype(jnp.float8_e4m3fn)
    return values, scale, jnp.roll(amax_history, 1).at[0].set(jnp.max(jnp.abs(x)))


def delayed_scaling_quantize__no_saturation(x, amax_history):
    """No clip: on the jump the values above 448 become NaN."""
    scale = jnp.max(amax_history) / E4M3_MAX
    values = (x / scale).astype(jnp.float8_e4m3fn)
    return values, scale, jnp.roll(amax_history, 1).at[0].set(jnp.max(jnp.abs(x)))


def delayed_scaling_quantize__history_not_moved(x, amax_history):
    """Overwrites slot 0 without moving the history back: older amax values are lost."""
    scale = jnp.max(amax_history) / E4M3_MAX
    values = jnp.clip(x / scale, -E4M3_MAX, E4M3_MAX).astype(jnp.float8_e4m3fn)
    return values, scale, amax_history.at[0].set(jnp.max(jnp.abs(x)))


def delayed_scaling_quantize__unit_history(x, amax_history):
    """Scales as if every recorded amax were 1: the history only recorded, never read."""
    scale = jnp.float32(1.0 / E4M3_MAX)
    values = jnp.clip(x / scale, -E4M3_MAX, E4M3_MAX).astype(jnp.float8_e4m3fn)
    return values, scale, jnp.roll(amax_history, 1).at[0].set(jnp.max(jnp.abs(x)))
