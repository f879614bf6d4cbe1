"""Cheap fakes of chapter 07's test_hardware.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def matmul_bf16__accumulates_in_the_bf16_output(x, y, *, bm, bn, bk, interpret=True):
    """Declares the float32 scratch but accumulates in the bf16 output block."""
    m, k = x.shape
    _, n = y.shape

    def kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(
            o_ref.dtype
        )

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
        interpret=interpret,
    )(x, y)


def matmul_bf16__no_scratch_float32_output(x, y, *, bm, bn, bk, interpret=True):
    """Skips the scratch: accumulates in a float32 output and casts to bf16 outside the kernel."""
    m, k = x.shape
    _, n = y.shape

    def kernel(x_ref, y_ref, o_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
        interpret=interpret,
    )(x, y).astype(x.dtype)


def h100_mesh__no_abstract_device():
    """A plain 1-device AbstractMesh with no abstract_device: the lowering cannot pick a GPU."""
    return AbstractMesh((1,), ("x",))


def mosaic_gpu_double__triton_pallas_call(shape):
    """Writes the kernel as a plain pallas_call, which lowers for CUDA through Triton instead."""
    x = jax.ShapeDtypeStruct(shape, jnp.float32)
    return pl.pallas_call(_double_kernel, out_shape=x)


def mosaic_gpu_double__pallas_call_with_mosaic_params(shape):
    """A pallas_call with plgpu.CompilerParams: in JAX 0.12.0.1 it has no CUDA lowering rule."""
    x = jax.ShapeDtypeStruct(shape, jnp.float32)
    return pl.pallas_call(_double_kernel, out_shape=x, compiler_params=plgpu.CompilerParams())


def double_through_smem__directly_in_gmem(x_gmem, o_gmem, x_smem, barrier):
    """Doubles straight from GMEM into GMEM: no SMEM, no copies, no barrier."""
    o_gmem[...] = x_gmem[...] * 2.0


def double_through_smem__no_barrier_wait(x_gmem, o_gmem, x_smem, barrier):
    """Reads SMEM without waiting for the TMA copy to arrive."""
    plgpu.copy_gmem_to_smem(x_gmem, x_smem, barrier)
    x_smem[...] = x_smem[...] * 2.0
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(x_smem, o_gmem)
    plgpu.wait_smem_to_gmem(0)


def double_through_smem__no_commit(x_gmem, o_gmem, x_smem, barrier):
    """Hands the written SMEM to the copy back without commit_smem's fence."""
    plgpu.copy_gmem_to_smem(x_gmem, x_smem, barrier)
    plgpu.barrier_wait(barrier)
    x_smem[...] = x_smem[...] * 2.0
    plgpu.copy_smem_to_gmem(x_smem, o_gmem)
    plgpu.wait_smem_to_gmem(0)


def double_through_smem__no_final_wait(x_gmem, o_gmem, x_smem, barrier):
    """Ends the kernel without waiting for the copy back to GMEM."""
    plgpu.copy_gmem_to_smem(x_gmem, x_smem, barrier)
    plgpu.barrier_wait(barrier)
    x_smem[...] = x_smem[...] * 2.0
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(x_smem, o_gmem)


def double_through_smem__writes_gmem_from_registers(x_gmem, o_gmem, x_smem, barrier):
    """Copies in through SMEM, but stores the result straight into GMEM."""
    plgpu.copy_gmem_to_smem(x_gmem, x_smem, barrier)
    plgpu.barrier_wait(barrier)
    o_gmem[...] = x_smem[...] * 2.0


def double_through_smem__loads_smem_through_registers(x_gmem, o_gmem, x_smem, barrier):
    """Fills SMEM with an ordinary load and store instead of the TMA copy and its barrier."""
    x_smem[...] = x_gmem[...] * 2.0
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(x_smem, o_gmem)
    plgpu.wait_smem_to_gmem(0)
