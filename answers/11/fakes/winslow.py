"""Cheap fakes of chapter 11's test_winslow.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def signed_areas__unsigned(p):
    """Takes the absolute value: a flipped element looks like a good one."""
    e1, e2 = corner_edges(p)
    return 0.5 * jnp.abs(cross(e1, e2))


def signed_areas__half_the_cell(p):
    """Gives each triangle half of its cell's area (½ of the diagonals' cross product)."""
    a, b, c, d = p[:-1, :-1], p[1:, :-1], p[1:, 1:], p[:-1, 1:]
    half = 0.25 * cross(c - a, d - b)
    return jnp.stack([half, half], axis=-1)


def untangle__moves_the_boundary(p, iters=200, learning_rate=1e-3, delta=1e-2 / M**2):
    """Skips the interior mask: Adam moves the boundary nodes too."""
    optimizer = optax.adam(learning_rate)

    @jax.jit
    def run(p):
        def step(carry, _):
            p, state = carry
            energy, grad = jax.value_and_grad(winslow)(p, delta)
            updates, state = optimizer.update(grad, state)
            return (optax.apply_updates(p, updates), state), energy

        (p, _), energies = lax.scan(step, (p, optimizer.init(p)), length=iters)
        return p, energies

    return run(p)


def untangle__plain_winslow(p, iters=200, learning_rate=1e-3, delta=1e-2 / M**2):
    """Minimises the plain functional (delta ignored), which rewards flipped elements."""
    optimizer = optax.adam(learning_rate)
    mask = interior_mask(p.shape[0] - 1)

    @jax.jit
    def run(p):
        def step(carry, _):
            p, state = carry
            energy, grad = jax.value_and_grad(winslow)(p)
            updates, state = optimizer.update(grad * mask, state)
            return (optax.apply_updates(p, updates), state), energy

        (p, _), energies = lax.scan(step, (p, optimizer.init(p)), length=iters)
        return p, energies

    return run(p)
