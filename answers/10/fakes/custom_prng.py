"""Cheap fakes of chapter 10's test_custom_prng.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def fmix_random_bits__threefry_underneath(key, bit_width, shape):
    """Hands the key data to the default threefry2x32 and lets it make the bits."""
    dtype = jnp.dtype(f"uint{bit_width}")
    return jax.random.bits(jax.random.wrap_key_data(key, impl="threefry2x32"), shape, dtype)


def fmix_random_bits__numpy_reference(key, bit_width, shape):
    """The file's numpy reference: right eagerly, but key is a tracer under jit."""
    return jnp.asarray(reference_bits(key, bit_width, shape))


def fmix_random_bits__always_32_bits(key, bit_width, shape):
    """Right words, but bit_width ignored: uint32 whatever width was asked."""
    counter = jnp.arange(int(np.prod(shape)), dtype=jnp.uint32)
    return mix32(key[0] ^ mix32(key[1] + counter)).reshape(shape)


def fmix_random_bits__high_bits_kept(key, bit_width, shape):
    """Keeps the high bit_width bits instead of the low ones."""
    counter = jnp.arange(int(np.prod(shape)), dtype=jnp.uint32)
    words = mix32(key[0] ^ mix32(key[1] + counter)).reshape(shape)
    return (words >> (32 - bit_width)).astype(jnp.dtype(f"uint{bit_width}"))


def fmix_random_bits__one_mix(key, bit_width, shape):
    """A single mix32 of k0 ^ (k1 + i): cheaper, and a different stream."""
    counter = jnp.arange(int(np.prod(shape)), dtype=jnp.uint32)
    words = mix32(key[0] ^ (key[1] + counter)).reshape(shape)
    return words.astype(jnp.dtype(f"uint{bit_width}"))


def fmix_random_bits__counter_by_cumsum(key, bit_width, shape):
    """Builds the counter with a cumulative sum: the same words, but a scan across the devices."""
    counter = jnp.cumsum(jnp.ones(int(np.prod(shape)), jnp.uint32)) - jnp.uint32(1)
    words = mix32(key[0] ^ mix32(key[1] + counter)).reshape(shape)
    return words.astype(jnp.dtype(f"uint{bit_width}"))


def fmix_random_bits__chained_stream(key, bit_width, shape):
    """A sequential stream, each word the mix of the previous one: not counter-based."""
    n = int(np.prod(shape))
    _, words = jax.lax.scan(
        lambda x, _: (mix32(x ^ key[0]), mix32(x ^ key[0])), mix32(key[1]), None, length=n
    )
    return words.reshape(shape).astype(jnp.dtype(f"uint{bit_width}"))
