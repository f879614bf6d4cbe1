"""Cheap fakes of chapter 04's test_second_order.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def hvp__dense_hessian(f, x, v):
    """The library: the whole n×n jax.hessian, then a matrix-vector product."""
    return jax.hessian(f)(x) @ v


def hvp__private_hessian(f, x, v):
    """jax.hessian by its private module path."""
    from jax._src.api import hessian

    return hessian(f)(x) @ v


def hvp__jacfwd_of_grad(f, x, v):
    """Forward-over-reverse, but the full Jacobian of the gradient: n JVPs and an n×n matrix."""
    return jax.jacfwd(jax.grad(f))(x) @ v


def hvp__finite_differences(f, x, v):
    """A central difference of the gradient along v: two gradients, no second-order autodiff."""
    eps = 1e-5
    g = jax.grad(f)
    return (g(x + eps * v) - g(x - eps * v)) / (2 * eps)


def hvp__gradient_times_v(f, x, v):
    """First order only: the gradient scaled elementwise by v."""
    return jax.grad(f)(x) * v


def hvp__reverse_over_reverse(f, x, v):
    """The gradient of v·∇f: the right H·v, but a loop in f runs four times instead of two."""
    return jax.grad(lambda x: jnp.vdot(jax.grad(f)(x), v))(x)


def hvp__reverse_over_forward(f, x, v):
    """The gradient of the JVP: the right H·v, but it keeps about twice the temporary memory."""
    return jax.grad(lambda x: jax.jvp(f, (x,), (v,))[1])(x)
