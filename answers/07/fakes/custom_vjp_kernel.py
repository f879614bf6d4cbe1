"""Cheap fakes of chapter 07's test_custom_vjp_kernel.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def silu_fwd__saves_the_output(x):
    """Saves the output instead of x as the residual, so the backward differentiates at silu(x)."""
    y = silu_pallas(x)
    return y, y


def silu_bwd__drops_the_cotangent(x, g):
    """Returns d silu / dx itself, never multiplied by the incoming cotangent g."""
    return (_elementwise(_silu_grad_kernel, x),)


def silu_both_modes_jvp__tangent_into_the_kernel(primals, tangents):
    """Feeds the tangent into the kernel, which grad cannot transpose."""
    (x,), (t,) = primals, tangents
    return silu_both_modes(x), _elementwise(_silu_bwd_kernel, x, t)


def silu_both_modes_jvp__jnp_derivative(primals, tangents):
    """Skips the derivative kernel: the tangent from the jnp SiLU's jvp."""
    (x,), (t,) = primals, tangents
    return silu_both_modes(x), jax.jvp(jax.nn.silu, (x,), (t,))[1]


def silu_fwd__jnp_forward(x):
    """Computes the forward pass with jnp: no kernel runs in the forward pass."""
    return jax.nn.silu(x), x


def silu_bwd__jnp_backward(x, g):
    """Pulls g back through the jnp SiLU: no kernel runs in the backward pass."""
    return jax.vjp(jax.nn.silu, x)[1](g)
