"""Cheap fakes of chapter 11's test_exponential_integrator.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def exponential_step__inverse_formula(a, g, y, h):
    """exp(ha)·y + a⁻¹(exp(ha) - I)·g: needs a solve with the singular a."""
    e = jax.scipy.linalg.expm(h * a)
    return e @ y + jnp.linalg.solve(a, (e - jnp.eye(y.shape[0])) @ g)


def exponential_step__pseudo_inverse(a, g, y, h):
    """The pseudo-inverse in place of a⁻¹: drops the source's constant mode."""
    e = jax.scipy.linalg.expm(h * a)
    return e @ y + jnp.linalg.pinv(a) @ ((e - jnp.eye(y.shape[0])) @ g)


def exponential_step__source_ignored(a, g, y, h):
    """Propagates y with exp(ha) and forgets the source."""
    return jax.scipy.linalg.expm(h * a) @ y


def exponential_step__frozen_source(a, g, y, h):
    """exp(ha)·y + h·g: the source added once, as if nothing decayed during the step."""
    return jax.scipy.linalg.expm(h * a) @ y + h * g


def exponential_step__eigendecomposition(a, g, y, h):
    """The symmetric eigendecomposition with φ₁ per mode: not the matrix exponential."""
    lam, v = jnp.linalg.eigh(a)
    small = jnp.abs(lam) < 1e-9
    phi = jnp.where(small, h, jnp.expm1(lam * h) / jnp.where(small, 1.0, lam))
    return v @ (jnp.exp(lam * h) * (v.T @ y) + phi * (v.T @ g))


def exponential_step__explicit_substeps(a, g, y, h):
    """Ten thousand explicit Euler substeps: stable only below the step limit."""
    k = h / 10000
    return lax.fori_loop(0, 10000, lambda _, z: z + k * (a @ z + g), y)
