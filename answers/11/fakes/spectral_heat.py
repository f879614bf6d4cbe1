"""Cheap fakes of chapter 11's test_spectral_heat.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def spectral_heat__dense_expm(u, t):
    """The matrix exponential of the assembled difference matrix: a dense N×N product."""
    return jax.scipy.linalg.expm(t * jnp.asarray(laplacian(u.shape[0], True))) @ u


def spectral_heat__difference_eigenvalues(u, t):
    """Decays each mode by the difference matrix's eigenvalue (2N·sin(πk/2N))², not (kπ)²."""
    n = u.shape[0]
    lam = (2 * n * jnp.sin(jnp.pi * jnp.arange(n) / (2 * n))) ** 2
    return idct(jnp.exp(-lam * t) * dct(u, norm="ortho"), norm="ortho")


def spectral_heat__many_implicit_steps(u, t):
    """Marches two thousand tridiagonal backward-Euler steps instead of transforming."""
    return tridiagonal_heat(u, t, steps=2000)


def spectral_heat__forgotten_pi(u, t):
    """Decays mode k by exp(-k²t), forgetting the π of cos(kπx)."""
    k = jnp.arange(u.shape[0])
    return idct(jnp.exp(-(k**2) * t) * dct(u, norm="ortho"), norm="ortho")
