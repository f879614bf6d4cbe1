"""Cheap fakes of chapter 05's test_ffi_kernel.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def leaky_sum_fwd__jnp_forward(x, decay):
    """The forward pass as a jnp scan instead of the kernel."""
    return leaky_sum_jnp(x, decay), None


def leaky_sum_bwd__jnp_backward(decay, residuals, ct):
    """The backward pass as a reversed jnp scan instead of the kernel run backwards."""
    return (leaky_sum_jnp(ct, decay, reverse=True),)


def leaky_sum_bwd__same_direction(decay, residuals, ct):
    """The kernel again, but reverse not flipped: the recurrence is not transposed."""
    return (_kernel(ct, decay, reverse=False),)


def leaky_sum_fwd__jnp_forward_cast(x, decay):
    """The forward pass as a jnp scan cast back to the kernel's dtype: no kernel call at all."""
    return leaky_sum_jnp(x, decay).astype(x.dtype), None


def leaky_sum_bwd__jnp_backward_cast(decay, residuals, ct):
    """The backward pass as a reversed jnp scan cast to ct's dtype: the kernel is never run."""
    return (leaky_sum_jnp(ct, decay, reverse=True).astype(ct.dtype),)
