"""Cheap fakes of chapter 07's test_kernels.py TODOs (parsed by jaxkoans.authoring.mutate, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def add_relu__relu_outside_the_kernel(x, y, *, bm, bn):
    """The kernel only adds; the relu is jnp code around the pallas_call."""

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    m, n = x.shape
    spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))
    total = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(m // bm, n // bn),
        in_specs=[spec, spec],
        out_specs=spec,
        interpret=True,
    )(x, y)
    return jnp.maximum(total, 0.0)


def add_relu__one_whole_array_block(x, y, *, bm, bn):
    """Skips the tiling: one program, the whole array as its block."""

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.maximum(x_ref[...] + y_ref[...], 0.0)

    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(
        x, y
    )


def matmul__no_accumulation_over_k(x, y, *, bm, bn, bk):
    """Overwrites the output block at every k step instead of accumulating into it."""

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        interpret=True,
    )(x, y)


def matmul__whole_k_per_block(x, y, *, bm, bn, bk):
    """Skips the K axis of the grid: each program takes whole rows of x and columns of y."""

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // bm, n // bn),
        in_specs=[
            pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
            pl.BlockSpec((k, bn), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        interpret=True,
    )(x, y)


def row_softmax__no_max_subtraction(x, *, bm):
    """Skips the stabilisation: exp of the raw scores, which overflows for large inputs."""

    def kernel(x_ref, o_ref):
        e = jnp.exp(x_ref[...])
        o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)

    m, n = x.shape
    spec = pl.BlockSpec((bm, n), lambda i: (i, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(m // bm,),
        in_specs=[spec],
        out_specs=spec,
        interpret=True,
    )(x)


def row_softmax__max_outside_the_kernel(x, *, bm):
    """Subtracts the row max with jnp before the pallas_call; the kernel only exponentiates."""

    def kernel(x_ref, o_ref):
        e = jnp.exp(x_ref[...])
        o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)

    m, n = x.shape
    spec = pl.BlockSpec((bm, n), lambda i: (i, 0))
    shifted = x - jnp.max(x, axis=-1, keepdims=True)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(m // bm,),
        in_specs=[spec],
        out_specs=spec,
        interpret=True,
    )(shifted)


def layer_norm__statistics_outside_the_kernel(x, gamma, beta, *, bm, eps=1e-5):
    """Computes mean and variance with jnp outside; the kernel only scales and shifts."""

    def kernel(x_ref, g_ref, b_ref, o_ref):
        o_ref[...] = x_ref[...] * g_ref[...] + b_ref[...]

    m, n = x.shape
    mean = jnp.mean(x, axis=-1, keepdims=True)
    normalized = (x - mean) * jax.lax.rsqrt(jnp.var(x, axis=-1, keepdims=True) + eps)
    row_spec = pl.BlockSpec((bm, n), lambda i: (i, 0))
    vec_spec = pl.BlockSpec((n,), lambda i: (0,))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(m // bm,),
        in_specs=[row_spec, vec_spec, vec_spec],
        out_specs=row_spec,
        interpret=True,
    )(normalized, gamma, beta)


def layer_norm__forgets_gamma_and_beta(x, gamma, beta, *, bm, eps=1e-5):
    """Normalises the rows but never applies gamma and beta (passes them in unused)."""

    def kernel(x_ref, g_ref, b_ref, o_ref):
        v = x_ref[...]
        mean = jnp.mean(v, axis=-1, keepdims=True)
        var = jnp.mean((v - mean) ** 2, axis=-1, keepdims=True)
        o_ref[...] = (v - mean) * jax.lax.rsqrt(var + eps)

    m, n = x.shape
    row_spec = pl.BlockSpec((bm, n), lambda i: (i, 0))
    vec_spec = pl.BlockSpec((n,), lambda i: (0,))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(m // bm,),
        in_specs=[row_spec, vec_spec, vec_spec],
        out_specs=row_spec,
        interpret=True,
    )(x, gamma, beta)


def row_softmax__sums_in_the_input_dtype(x, *, bm, interpret=True):
    """Right in float32, but bfloat16 rows are summed in bfloat16 (no astype(jnp.float32))."""

    def kernel(x_ref, o_ref):
        v = x_ref[...]
        e = jnp.exp(v - jnp.max(v, axis=-1, keepdims=True))
        o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)

    m, n = x.shape
    spec = pl.BlockSpec((bm, n), lambda i: (i, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(m // bm,),
        in_specs=[spec],
        out_specs=spec,
        interpret=interpret,
    )(x)


def matmul__k_axis_parallel(x, y, *, bm, bn, bk, interpret=True):
    """Every grid axis "parallel", K included: two cores accumulate into one output block."""
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, y_ref, o_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",) * 3),
        interpret=interpret,
    )(x, y)
