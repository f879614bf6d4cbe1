"""Cheap fakes of chapter 07's test_flash_attention_backward.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def flash_attention_dq__zeros(q, k, v, do, lse, delta, *, bq, bk):
    """Returns zeros."""
    return jnp.zeros_like(q)


def flash_attention_dq__jnp_reference(q, k, v, do, lse, delta, *, bq, bk):
    """The reference's dQ with jnp (jax.vjp), no kernel."""
    _, pullback = jax.vjp(reference_attention, q, k, v)
    return pullback(do)[0]


def flash_attention_dq__whole_key_row_in_one_block(q, k, v, do, lse, delta, *, bq, bk):
    """All the keys in one block: the whole [bq, Lk] row of scores at once."""
    lq, d = q.shape
    lk, _ = k.shape
    bk = lk
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, acc_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s - lse_ref[...])
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        acc_ref[...] += jnp.dot(ds, k_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dq_ref[...] = acc_ref[...].astype(dq_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq, lk // bk),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_dq__without_delta(q, k, v, do, lse, delta, *, bq, bk):
    """Forgets Δ: ds = p ∘ dp."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, acc_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s - lse_ref[...])
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * dp
        acc_ref[...] += jnp.dot(ds, k_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dq_ref[...] = acc_ref[...].astype(dq_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq, lk // bk),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_dq__without_lse(q, k, v, do, lse, delta, *, bq, bk):
    """Recomputes p = exp(s) without the saved log-sum-exp."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, acc_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s)
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        acc_ref[...] += jnp.dot(ds, k_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dq_ref[...] = acc_ref[...].astype(dq_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq, lk // bk),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_dq__normalises_within_the_block(q, k, v, do, lse, delta, *, bq, bk):
    """Recomputes the probabilities with a softmax over the key block alone, not from lse."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, acc_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jax.nn.softmax(s, axis=-1)
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        acc_ref[...] += jnp.dot(ds, k_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dq_ref[...] = acc_ref[...].astype(dq_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq, lk // bk),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_dq__no_scale(q, k, v, do, lse, delta, *, bq, bk):
    """Forgets the 1/√D of dQ = dS K / √D."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, acc_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s - lse_ref[...])
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        acc_ref[...] += jnp.dot(ds, k_ref[...], preferred_element_type=jnp.float32)

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dq_ref[...] = acc_ref[...].astype(dq_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq, lk // bk),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_dq__softmax_outside_the_kernel(q, k, v, do, lse, delta, *, bq, bk):
    """Builds the [Lq, Lk] probabilities with jnp and hands the kernel (bq, bk) blocks of them."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    probs = jnp.exp(q @ k.T * scale - lse)

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, acc_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        p = lse_ref[...]
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        acc_ref[...] += jnp.dot(ds, k_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dq_ref[...] = acc_ref[...].astype(dq_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq, lk // bk),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, bk), lambda i, j: (i, j)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, probs, delta)


def flash_attention_dkdv__zeros(q, k, v, do, lse, delta, *, bq, bk):
    """Returns zeros."""
    return jnp.zeros_like(k), jnp.zeros_like(v)


def flash_attention_dkdv__jnp_reference(q, k, v, do, lse, delta, *, bq, bk):
    """The reference's dK and dV with jnp (jax.vjp), no kernel."""
    _, pullback = jax.vjp(reference_attention, q, k, v)
    return pullback(do)[1:]


def flash_attention_dkdv__whole_query_column_in_one_block(q, k, v, do, lse, delta, *, bq, bk):
    """All the queries in one block: the whole [Lq, bk] column of scores at once."""
    lq, d = q.shape
    lk, _ = k.shape
    bq = lq
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_acc, dv_acc):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            dk_acc[...] = jnp.zeros_like(dk_acc)
            dv_acc[...] = jnp.zeros_like(dv_acc)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s - lse_ref[...])
        dv_acc[...] += jnp.dot(p.T, do_ref[...], preferred_element_type=jnp.float32)
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        dk_acc[...] += jnp.dot(ds.T, q_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dk_ref[...] = dk_acc[...].astype(dk_ref.dtype)
            dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((lk, d), k.dtype),
            jax.ShapeDtypeStruct((lk, d), v.dtype),
        ),
        grid=(lk // bk, lq // bq),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
        ],
        out_specs=[
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
        ],
        scratch_shapes=[pltpu.VMEM((bk, d), jnp.float32), pltpu.VMEM((bk, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_dkdv__without_delta(q, k, v, do, lse, delta, *, bq, bk):
    """Forgets Δ: ds = p ∘ dp."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_acc, dv_acc):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            dk_acc[...] = jnp.zeros_like(dk_acc)
            dv_acc[...] = jnp.zeros_like(dv_acc)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s - lse_ref[...])
        dv_acc[...] += jnp.dot(p.T, do_ref[...], preferred_element_type=jnp.float32)
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * dp
        dk_acc[...] += jnp.dot(ds.T, q_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dk_ref[...] = dk_acc[...].astype(dk_ref.dtype)
            dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((lk, d), k.dtype),
            jax.ShapeDtypeStruct((lk, d), v.dtype),
        ),
        grid=(lk // bk, lq // bq),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
        ],
        out_specs=[
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
        ],
        scratch_shapes=[pltpu.VMEM((bk, d), jnp.float32), pltpu.VMEM((bk, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_dkdv__without_lse(q, k, v, do, lse, delta, *, bq, bk):
    """Recomputes p = exp(s) without the saved log-sum-exp."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_acc, dv_acc):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            dk_acc[...] = jnp.zeros_like(dk_acc)
            dv_acc[...] = jnp.zeros_like(dv_acc)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s)
        dv_acc[...] += jnp.dot(p.T, do_ref[...], preferred_element_type=jnp.float32)
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        dk_acc[...] += jnp.dot(ds.T, q_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dk_ref[...] = dk_acc[...].astype(dk_ref.dtype)
            dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((lk, d), k.dtype),
            jax.ShapeDtypeStruct((lk, d), v.dtype),
        ),
        grid=(lk // bk, lq // bq),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
        ],
        out_specs=[
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
        ],
        scratch_shapes=[pltpu.VMEM((bk, d), jnp.float32), pltpu.VMEM((bk, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_dkdv__normalises_within_the_block(q, k, v, do, lse, delta, *, bq, bk):
    """Normalises the probabilities over the query block's keys in this block alone, not from lse."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_acc, dv_acc):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            dk_acc[...] = jnp.zeros_like(dk_acc)
            dv_acc[...] = jnp.zeros_like(dv_acc)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jax.nn.softmax(s, axis=-1)
        dv_acc[...] += jnp.dot(p.T, do_ref[...], preferred_element_type=jnp.float32)
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        dk_acc[...] += jnp.dot(ds.T, q_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dk_ref[...] = dk_acc[...].astype(dk_ref.dtype)
            dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((lk, d), k.dtype),
            jax.ShapeDtypeStruct((lk, d), v.dtype),
        ),
        grid=(lk // bk, lq // bq),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
        ],
        out_specs=[
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
        ],
        scratch_shapes=[pltpu.VMEM((bk, d), jnp.float32), pltpu.VMEM((bk, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_dkdv__dv_from_the_scores(q, k, v, do, lse, delta, *, bq, bk):
    """dV from the unnormalised scores' exp shifted by the block max, not the probabilities."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_acc, dv_acc):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            dk_acc[...] = jnp.zeros_like(dk_acc)
            dv_acc[...] = jnp.zeros_like(dv_acc)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s - lse_ref[...])
        dv_acc[...] += jnp.dot(
            jnp.exp(s - jnp.max(s, axis=-1, keepdims=True)).T,
            do_ref[...],
            preferred_element_type=jnp.float32,
        )
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        dk_acc[...] += jnp.dot(ds.T, q_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dk_ref[...] = dk_acc[...].astype(dk_ref.dtype)
            dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((lk, d), k.dtype),
            jax.ShapeDtypeStruct((lk, d), v.dtype),
        ),
        grid=(lk // bk, lq // bq),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
        ],
        out_specs=[
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
        ],
        scratch_shapes=[pltpu.VMEM((bk, d), jnp.float32), pltpu.VMEM((bk, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_dkdv__no_scale(q, k, v, do, lse, delta, *, bq, bk):
    """Forgets the 1/√D of dK = dSᵀ Q / √D."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_acc, dv_acc):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            dk_acc[...] = jnp.zeros_like(dk_acc)
            dv_acc[...] = jnp.zeros_like(dv_acc)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s - lse_ref[...])
        dv_acc[...] += jnp.dot(p.T, do_ref[...], preferred_element_type=jnp.float32)
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        dk_acc[...] += jnp.dot(ds.T, q_ref[...], preferred_element_type=jnp.float32)

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dk_ref[...] = dk_acc[...].astype(dk_ref.dtype)
            dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((lk, d), k.dtype),
            jax.ShapeDtypeStruct((lk, d), v.dtype),
        ),
        grid=(lk // bk, lq // bq),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
        ],
        out_specs=[
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
        ],
        scratch_shapes=[pltpu.VMEM((bk, d), jnp.float32), pltpu.VMEM((bk, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_dkdv__dk_and_dv_swapped(q, k, v, do, lse, delta, *, bq, bk):
    """Writes dV's accumulator to dk and dK's to dv."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_acc, dv_acc):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            dk_acc[...] = jnp.zeros_like(dk_acc)
            dv_acc[...] = jnp.zeros_like(dv_acc)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s - lse_ref[...])
        dv_acc[...] += jnp.dot(p.T, do_ref[...], preferred_element_type=jnp.float32)
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        dk_acc[...] += jnp.dot(ds.T, q_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dk_ref[...] = dv_acc[...].astype(dk_ref.dtype)
            dv_ref[...] = dk_acc[...].astype(dv_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((lk, d), k.dtype),
            jax.ShapeDtypeStruct((lk, d), v.dtype),
        ),
        grid=(lk // bk, lq // bq),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
        ],
        out_specs=[
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
        ],
        scratch_shapes=[pltpu.VMEM((bk, d), jnp.float32), pltpu.VMEM((bk, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_bwd__reference_vjp(bq, bk, residuals, g):
    """The VJP of the jnp reference (test_flash_attention.py's backward)."""
    q, k, v, _, _ = residuals
    _, pullback = jax.vjp(reference_attention, q, k, v)
    return pullback(g)


def flash_attention_bwd__zeros(bq, bk, residuals, g):
    """Returns zeros."""
    q, k, v, _, _ = residuals
    return jnp.zeros_like(q), jnp.zeros_like(k), jnp.zeros_like(v)


def flash_attention_bwd__lse_recomputed_with_jnp(bq, bk, residuals, g):
    """Ignores the saved lse and recomputes it from the whole [Lq, Lk] scores with jnp."""
    q, k, v, o, lse = residuals
    delta = jnp.sum(g * o, axis=-1, keepdims=True)
    lse = jax.nn.logsumexp(q @ k.T / jnp.sqrt(q.shape[-1]), axis=-1, keepdims=True)
    dq = flash_attention_dq(q, k, v, g, lse, delta, bq=bq, bk=bk)
    dk, dv = flash_attention_dkdv(q, k, v, g, lse, delta, bq=bq, bk=bk)
    return dq, dk, dv


def flash_attention_bwd__ignores_the_cotangent(bq, bk, residuals, g):
    """Pulls back ones instead of the cotangent g."""
    q, k, v, o, lse = residuals
    g = jnp.ones_like(o)
    delta = jnp.sum(g * o, axis=-1, keepdims=True)
    dq = flash_attention_dq(q, k, v, g, lse, delta, bq=bq, bk=bk)
    dk, dv = flash_attention_dkdv(q, k, v, g, lse, delta, bq=bq, bk=bk)
    return dq, dk, dv


def flash_attention_bwd__delta_zero(bq, bk, residuals, g):
    """Skips Δ (zeros)."""
    q, k, v, _, lse = residuals
    delta = jnp.zeros_like(lse)
    dq = flash_attention_dq(q, k, v, g, lse, delta, bq=bq, bk=bk)
    dk, dv = flash_attention_dkdv(q, k, v, g, lse, delta, bq=bq, bk=bk)
    return dq, dk, dv


def flash_attention_bwd__delta_from_the_cotangent_alone(bq, bk, residuals, g):
    """Δ as the row sum of g, forgetting the output o."""
    q, k, v, _, lse = residuals
    delta = jnp.sum(g, axis=-1, keepdims=True)
    dq = flash_attention_dq(q, k, v, g, lse, delta, bq=bq, bk=bk)
    dk, dv = flash_attention_dkdv(q, k, v, g, lse, delta, bq=bq, bk=bk)
    return dq, dk, dv


def flash_attention_bwd__dkdv_from_the_reference(bq, bk, residuals, g):
    """dQ from the kernel, dK and dV from the jnp reference's VJP."""
    q, k, v, o, lse = residuals
    delta = jnp.sum(g * o, axis=-1, keepdims=True)
    dq = flash_attention_dq(q, k, v, g, lse, delta, bq=bq, bk=bk)
    dk, dv = jax.vjp(reference_attention, q, k, v)[1](g)[1:]
    return dq, dk, dv


def flash_attention_bwd__dq_from_the_reference(bq, bk, residuals, g):
    """dK and dV from the kernel, dQ from the jnp reference's VJP."""
    q, k, v, o, lse = residuals
    delta = jnp.sum(g * o, axis=-1, keepdims=True)
    dq = jax.vjp(reference_attention, q, k, v)[1](g)[0]
    dk, dv = flash_attention_dkdv(q, k, v, g, lse, delta, bq=bq, bk=bk)
    return dq, dk, dv


def flash_attention_dq__scores_accumulate_in_the_input_dtype(q, k, v, do, lse, delta, *, bq, bk, interpret=True):
    """The score matmul without preferred_element_type: Mosaic refuses its bfloat16 accumulator."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, acc_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        s = jnp.dot(q_ref[...], k_ref[...].T) * scale
        p = jnp.exp(s - lse_ref[...])
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        acc_ref[...] += jnp.dot(ds, k_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dq_ref[...] = acc_ref[...].astype(dq_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq, lk // bk),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=interpret,
    )(q, k, v, do, lse, delta)


def flash_attention_dq__always_interpreted(q, k, v, do, lse, delta, *, bq, bk, interpret=True):
    """Ignores interpret: never lowered for TPU."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, acc_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s - lse_ref[...])
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        acc_ref[...] += jnp.dot(ds, k_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dq_ref[...] = acc_ref[...].astype(dq_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq, lk // bk),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (i, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
        scratch_shapes=[pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)


def flash_attention_dkdv__scores_accumulate_in_the_input_dtype(q, k, v, do, lse, delta, *, bq, bk, interpret=True):
    """The score matmul without preferred_element_type: Mosaic refuses its bfloat16 accumulator."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_acc, dv_acc):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            dk_acc[...] = jnp.zeros_like(dk_acc)
            dv_acc[...] = jnp.zeros_like(dv_acc)

        s = jnp.dot(q_ref[...], k_ref[...].T) * scale
        p = jnp.exp(s - lse_ref[...])
        dv_acc[...] += jnp.dot(p.T, do_ref[...], preferred_element_type=jnp.float32)
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        dk_acc[...] += jnp.dot(ds.T, q_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dk_ref[...] = dk_acc[...].astype(dk_ref.dtype)
            dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((lk, d), k.dtype),
            jax.ShapeDtypeStruct((lk, d), v.dtype),
        ),
        grid=(lk // bk, lq // bq),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
        ],
        out_specs=[
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
        ],
        scratch_shapes=[pltpu.VMEM((bk, d), jnp.float32), pltpu.VMEM((bk, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=interpret,
    )(q, k, v, do, lse, delta)


def flash_attention_dkdv__always_interpreted(q, k, v, do, lse, delta, *, bq, bk, interpret=True):
    """Ignores interpret: never lowered for TPU."""
    lq, d = q.shape
    lk, _ = k.shape
    scale = 1.0 / float(np.sqrt(d))

    def kernel(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_acc, dv_acc):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            dk_acc[...] = jnp.zeros_like(dk_acc)
            dv_acc[...] = jnp.zeros_like(dv_acc)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        p = jnp.exp(s - lse_ref[...])
        dv_acc[...] += jnp.dot(p.T, do_ref[...], preferred_element_type=jnp.float32)
        dp = jnp.dot(do_ref[...], v_ref[...].T, preferred_element_type=jnp.float32)
        ds = p * (dp - delta_ref[...])
        dk_acc[...] += jnp.dot(ds.T, q_ref[...], preferred_element_type=jnp.float32) * scale

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            dk_ref[...] = dk_acc[...].astype(dk_ref.dtype)
            dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((lk, d), k.dtype),
            jax.ShapeDtypeStruct((lk, d), v.dtype),
        ),
        grid=(lk // bk, lq // bq),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bq, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
            pl.BlockSpec((bq, 1), lambda i, j: (j, 0)),
        ],
        out_specs=[
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (i, 0)),
        ],
        scratch_shapes=[pltpu.VMEM((bk, d), jnp.float32), pltpu.VMEM((bk, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=True,
    )(q, k, v, do, lse, delta)
