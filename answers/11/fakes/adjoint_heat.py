"""Cheap fakes of chapter 11's test_adjoint_heat.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def simulate__explicit_euler(theta, u0, steps):
    """Skips the linear solve: steps forward explicitly, u ↦ u - DT·A(θ)u."""
    return lax.scan(lambda u, _: (u - DT * operator(theta, u), None), u0, length=steps)[0]


def simulate__unrolled_cg(theta, u0, steps):
    """Backpropagates through a fixed number of CG iterations per step (no custom_linear_solve)."""
    return simulate_unrolled(theta, u0, steps)


def simulate__python_loop_of_solves(theta, u0, steps):
    """The right solve, but a Python loop over time: one custom_linear_solve per step."""

    def matvec(u):
        return u + DT * operator(theta, u)

    u = u0
    for _ in range(steps):
        u = lax.custom_linear_solve(matvec, u, solve=cg_solve, symmetric=True)
    return u
