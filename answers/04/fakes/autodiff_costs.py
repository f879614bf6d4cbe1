"""Cheap fakes of chapter 04's test_autodiff_costs.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def budget_policy__names_of_the_asserts(max_size):
    """The names the asserts compare against, whatever the budget."""
    return jax.checkpoint_policies.save_only_these_names("g", "s")


def budget_policy__every_small_value(max_size):
    """Any equation whose input fits, named or not: dot and sin outputs are kept too."""
    return lambda prim, *avals, **params: avals[0].size <= max_size


def budget_policy__strict_budget(max_size):
    """Fewer than max_size elements: a value of exactly max_size is recomputed."""
    return lambda prim, *avals, **params: prim.name == "name" and avals[0].size < max_size


def budget_policy__all_names(max_size):
    """Every named value, whatever its size."""
    return lambda prim, *avals, **params: prim.name == "name"


def jacobian__always_forward(f, x):
    """jacfwd for every shape: 256 JVPs for the wide Jacobian."""
    return jax.jacfwd(f)(x)


def jacobian__always_reverse(f, x):
    """jacrev for every shape (jax.jacobian is jacrev): 256 VJPs for the tall Jacobian."""
    return jax.jacrev(f)(x)


def jacobian__flipped(f, x):
    """The comparison the wrong way round: the expensive mode for both shapes."""
    m = jax.eval_shape(f, x).size
    return jax.jacrev(f)(x) if x.size <= m else jax.jacfwd(f)(x)


def jacobian__both_modes(f, x):
    """Both modes averaged, to be safe: the flops of both are paid."""
    return (jax.jacfwd(f)(x) + jax.jacrev(f)(x)) / 2


def budget_policy__sizes_from_the_docstring(max_size):
    """The named values' sizes read off block's docstring (B, D of this file), not off avals."""
    sizes = {"h": 4 * B * D, "g": B * D, "s": B}
    return lambda prim, *avals, **params: prim.name == "name" and sizes[params["name"]] <= max_size


def budget_policy__table_of_the_cases(max_size):
    """A table of the parametrized cases: which names each max_size keeps."""
    table = {4: "s", 32: "gs", 127: "gs", 128: "hgs"}
    return lambda prim, *avals, **params: (
        prim.name == "name" and params["name"] in table.get(max_size, "hgs")
    )


def jacobian__by_input_size_alone(f, x):
    """A threshold on n alone (right for 4 and 256 inputs), never looking at m."""
    return jax.jacfwd(f)(x) if x.size < 10 else jax.jacrev(f)(x)


def jacobian__by_output_size_alone(f, x):
    """A threshold on m alone (right for 4 and 256 outputs), never comparing it with n."""
    m = jax.eval_shape(f, x).size
    return jax.jacfwd(f)(x) if m > 48 else jax.jacrev(f)(x)
