"""Cheap fakes of chapter 07's test_gpu_flash_attention.py TODO (parsed by jaxkoans.authoring.mutate, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def gpu_flash_attention_forward__whole_rows_no_loop(q, k, v, *, bq, bk, interpret=True):
    """One plain softmax over all the keys per query block: the [bq, Lk] scores built whole."""
    lq, d = q.shape
    lk = k.shape[0]

    def kernel(q_ref, k_ref, v_ref, o_ref):
        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) / jnp.sqrt(
            jnp.float32(d)
        )
        p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
        acc = jnp.dot(p.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32)
        o_ref[...] = (acc / jnp.sum(p, axis=-1, keepdims=True)).astype(o_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq,),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i: (i, 0)),
            pl.BlockSpec((lk, d), lambda i: (0, 0)),
            pl.BlockSpec((lk, d), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i: (i, 0)),
        compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=2),
        interpret=interpret,
    )(q, k, v)


def gpu_flash_attention_forward__tpu_style_grid(q, k, v, *, bq, bk, interpret=True):
    """The TPU kernel: the key blocks as a second grid axis, accumulators in scratch."""
    lq, d = q.shape
    lk = k.shape[0]

    def kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref):
        j = pl.program_id(1)

        @pl.when(j == 0)
        def _():
            m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
            l_ref[...] = jnp.zeros_like(l_ref)
            acc_ref[...] = jnp.zeros_like(acc_ref)

        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) / jnp.sqrt(
            jnp.float32(d)
        )
        m_new = jnp.maximum(m_ref[...], jnp.max(s, axis=-1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m_ref[...] - m_new)
        l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=-1, keepdims=True)
        acc_ref[...] = alpha * acc_ref[...] + jnp.dot(
            p.astype(v_ref.dtype), v_ref[...], preferred_element_type=jnp.float32
        )
        m_ref[...] = m_new

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)

    from jax.experimental.pallas import tpu as pltpu

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq, lk // bk),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
        scratch_shapes=[
            pltpu.VMEM((bq, 1), jnp.float32),
            pltpu.VMEM((bq, 1), jnp.float32),
            pltpu.VMEM((bq, d), jnp.float32),
        ],
        interpret=interpret,
    )(q, k, v)


def gpu_flash_attention_forward__whole_k_loaded_then_sliced(q, k, v, *, bq, bk, interpret=True):
    """The loop is there, but all of k and v are loaded into registers before it."""
    lq, d = q.shape
    lk = k.shape[0]

    def kernel(q_ref, k_ref, v_ref, o_ref):
        q_block, k_all, v_all = q_ref[...], k_ref[...], v_ref[...]

        def step(j, carry):
            m_prev, l_prev, acc = carry
            k_block = jax.lax.dynamic_slice_in_dim(k_all, j * bk, bk)
            v_block = jax.lax.dynamic_slice_in_dim(v_all, j * bk, bk)
            s = jnp.dot(q_block, k_block.T, preferred_element_type=jnp.float32) / jnp.sqrt(
                jnp.float32(d)
            )
            m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1, keepdims=True))
            p = jnp.exp(s - m_new)
            alpha = jnp.exp(m_prev - m_new)
            l_new = alpha * l_prev + jnp.sum(p, axis=-1, keepdims=True)
            acc = alpha * acc + jnp.dot(
                p.astype(v_block.dtype), v_block, preferred_element_type=jnp.float32
            )
            return m_new, l_new, acc

        init = (
            jnp.full((bq, 1), -jnp.inf, jnp.float32),
            jnp.zeros((bq, 1), jnp.float32),
            jnp.zeros((bq, d), jnp.float32),
        )
        _, l_final, acc = jax.lax.fori_loop(0, lk // bk, step, init)
        o_ref[...] = (acc / l_final).astype(o_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq,),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i: (i, 0)),
            pl.BlockSpec((lk, d), lambda i: (0, 0)),
            pl.BlockSpec((lk, d), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i: (i, 0)),
        compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=2),
        interpret=interpret,
    )(q, k, v)


def gpu_flash_attention_forward__bf16_accumulators(q, k, v, *, bq, bk, interpret=True):
    """The loop, but the matmuls accumulate in the input dtype (no preferred_element_type)."""
    lq, d = q.shape
    lk = k.shape[0]

    def kernel(q_ref, k_ref, v_ref, o_ref):
        q_block = q_ref[...]

        def step(j, carry):
            m_prev, l_prev, acc = carry
            k_block = k_ref[pl.ds(j * bk, bk), :]
            v_block = v_ref[pl.ds(j * bk, bk), :]
            s = jnp.dot(q_block, k_block.T).astype(jnp.float32) / jnp.sqrt(jnp.float32(d))
            m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1, keepdims=True))
            p = jnp.exp(s - m_new)
            alpha = jnp.exp(m_prev - m_new)
            l_new = alpha * l_prev + jnp.sum(p, axis=-1, keepdims=True)
            acc = alpha * acc + jnp.dot(p.astype(v_block.dtype), v_block).astype(jnp.float32)
            return m_new, l_new, acc

        init = (
            jnp.full((bq, 1), -jnp.inf, jnp.float32),
            jnp.zeros((bq, 1), jnp.float32),
            jnp.zeros((bq, d), jnp.float32),
        )
        _, l_final, acc = jax.lax.fori_loop(0, lk // bk, step, init)
        o_ref[...] = (acc / l_final).astype(o_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq,),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i: (i, 0)),
            pl.BlockSpec((lk, d), lambda i: (0, 0)),
            pl.BlockSpec((lk, d), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i: (i, 0)),
        compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=2),
        interpret=interpret,
    )(q, k, v)


def gpu_flash_attention_forward__fixed_shift(q, k, v, *, bq, bk, interpret=True):
    """Shifts every key block by the first block's row max, never updated (no rescale): right
    until a later block's scores exceed that shift by more than float32's exp range."""
    lq, d = q.shape
    lk, _ = k.shape

    def kernel(q_ref, k_ref, v_ref, o_ref):
        q_block = q_ref[...]

        def scores(j):
            k_block = k_ref[pl.ds(j * bk, bk), :]
            return jnp.dot(q_block, k_block.T, preferred_element_type=jnp.float32) / jnp.sqrt(
                jnp.float32(d)
            )

        shift = jnp.max(scores(0), axis=-1, keepdims=True)

        def step(j, carry):
            l_prev, acc = carry
            v_block = v_ref[pl.ds(j * bk, bk), :]
            p = jnp.exp(scores(j) - shift)
            l_new = l_prev + jnp.sum(p, axis=-1, keepdims=True)
            acc = acc + jnp.dot(p.astype(v_block.dtype), v_block, preferred_element_type=jnp.float32)
            return l_new, acc

        init = (jnp.zeros((bq, 1), jnp.float32), jnp.zeros((bq, d), jnp.float32))
        l_final, acc = jax.lax.fori_loop(0, lk // bk, step, init)
        o_ref[...] = (acc / l_final).astype(o_ref.dtype)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((lq, d), q.dtype),
        grid=(lq // bq,),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i: (i, 0)),
            pl.BlockSpec((lk, d), lambda i: (0, 0)),
            pl.BlockSpec((lk, d), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i: (i, 0)),
        compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=2),
        interpret=interpret,
    )(q, k, v)
