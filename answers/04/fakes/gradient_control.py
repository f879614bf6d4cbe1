"""Cheap fakes of chapter 04's test_gradient_control.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def straight_through_round__plain_round(x):
    """Rounds and nothing else: the derivative is 0 almost everywhere."""
    return jnp.round(x)


def straight_through_round__stopped_round(x):
    """The whole rounding stopped: right value, no gradient at all."""
    return lax.stop_gradient(jnp.round(x))


def straight_through_round__identity(x):
    """The derivative is 1, but the value is never rounded."""
    return x


def straight_through_round__custom_jvp_rule(x):
    """A custom_jvp rule: right value and derivative, not the stop_gradient technique."""

    @jax.custom_jvp
    def ste(x):
        return jnp.round(x)

    ste.defjvp(lambda primals, tangents: (ste(primals[0]), tangents[0]))
    return ste(x)
