"""Cheap fakes of chapter 01's test_capstone_masked_lstm.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def length_mask__one_step_too_many(lengths, total_steps):
    """Off by one: step t = length counts as valid."""
    return jnp.arange(total_steps)[None, :] <= lengths[:, None]


def masked_lstm__runs_through_the_padding(params, xs, lengths):
    """Scans every step as if none were padded; only the outputs are masked."""
    batch, total_steps, _ = xs.shape
    mask = length_mask(lengths, total_steps)

    def step(carry, inputs):
        x_t, m_t = inputs
        carry, y = lstm_cell(params, carry, x_t)
        return carry, jnp.where(m_t[:, None], y, 0.0)

    carry, ys = lax.scan(step, initial_carry((batch,)), (jnp.swapaxes(xs, 0, 1), mask.T))
    return carry, jnp.swapaxes(ys, 0, 1)


def masked_lstm__multiplies_by_the_mask(params, xs, lengths):
    """Masks by multiplication, m·new + (1 - m)·old: NaN padding gives NaN·0 = NaN."""
    batch, total_steps, _ = xs.shape
    mask = length_mask(lengths, total_steps).astype(xs.dtype)

    def step(carry, inputs):
        x_t, m_t = inputs
        new_carry, y = lstm_cell(params, carry, x_t)
        m = m_t[:, None]
        carry = jax.tree.map(lambda new, old: m * new + (1 - m) * old, new_carry, carry)
        return carry, m * y

    carry, ys = lax.scan(step, initial_carry((batch,)), (jnp.swapaxes(xs, 0, 1), mask.T))
    return carry, jnp.swapaxes(ys, 0, 1)


def masked_lstm__where_on_the_outputs_only(params, xs, lengths):
    """where on carry and output, but NaN inputs still reach lstm_cell: the gradient is 0·NaN."""
    batch, total_steps, _ = xs.shape
    mask = length_mask(lengths, total_steps)

    def step(carry, inputs):
        x_t, m_t = inputs
        new_carry, y = lstm_cell(params, carry, x_t)
        m = m_t[:, None]
        carry = jax.tree.map(lambda new, old: jnp.where(m, new, old), new_carry, carry)
        return carry, jnp.where(m, y, 0.0)

    carry, ys = lax.scan(step, initial_carry((batch,)), (jnp.swapaxes(xs, 0, 1), mask.T))
    return carry, jnp.swapaxes(ys, 0, 1)
