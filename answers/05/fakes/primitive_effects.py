"""Cheap fakes of chapter 05's test_primitive_effects.py TODO (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def ordered_log_lowering__no_token(ctx, x, *, log):
    """Koan 1's unordered lowering: an effectful host call, but no token threads it."""
    results, _, _ = mlir.emit_python_callback(
        ctx, recorder(log, "ordered_log"), None, [x], ctx.avals_in, ctx.avals_out,
        has_side_effect=True,
    )  # fmt: skip
    return results


def ordered_log_lowering__value_without_the_call(ctx, x, *, log):
    """Returns the operand, which is the right value, and never calls the host."""
    return [x]


def ordered_log_lowering__token_in_but_not_out(ctx, x, *, log):
    """Hands the token to the call but never passes the new one on: every call forks from the
    same token, so nothing orders them."""
    results, _, _ = mlir.emit_python_callback(
        ctx, recorder(log, "ordered_log"), ctx.tokens_in.get(ORDERED_LOG), [x], ctx.avals_in,
        ctx.avals_out, has_side_effect=True,
    )  # fmt: skip
    return results


def ordered_log_lowering__tokens_passed_on_untouched(ctx, x, *, log):
    """Sets the tokens out to the tokens in and calls the host beside them."""
    ctx.set_tokens_out(ctx.tokens_in)
    results, _, _ = mlir.emit_python_callback(
        ctx, recorder(log, "ordered_log"), None, [x], ctx.avals_in, ctx.avals_out,
        has_side_effect=True,
    )  # fmt: skip
    return results


def ordered_log_lowering__pure_call(ctx, x, *, log):
    """A host call that declares no side effect and takes no token: XLA may delete it."""
    results, _, _ = mlir.emit_python_callback(
        ctx, recorder(log, "ordered_log"), None, [x], ctx.avals_in, ctx.avals_out,
        has_side_effect=False,
    )  # fmt: skip
    return results


def ordered_log_lowering__debug_callback(ctx, x, *, log):
    """jax.debug.callback inlined by lower_fun: it logs, but under its own unordered effect."""

    def tap(v):
        jax.debug.callback(lambda a: recorder(log, "ordered_log")(a), v)
        return v

    return mlir.lower_fun(tap, multiple_results=False)(ctx, x)


def ordered_log_lowering__token_through_a_host_call_that_records_nothing(ctx, x, *, log):
    """Threads the token as the answer does, through a host function that returns the operand
    and records nothing."""
    token = ctx.tokens_in.get(ORDERED_LOG)
    results, token, _ = mlir.emit_python_callback(
        ctx, lambda v: (np.asarray(v),), token, [x], ctx.avals_in, ctx.avals_out,
        has_side_effect=True,
    )  # fmt: skip
    ctx.set_tokens_out(ctx.tokens_in.update_tokens(mlir.TokenSet({ORDERED_LOG: token})))
    return results


def ordered_log_lowering__token_through_an_empty_call_beside_the_real_one(ctx, x, *, log):
    """Threads the token through a host call of nothing and records x in an unordered call
    beside it: the chain exists, but the calls that log are not on it."""
    import dataclasses

    empty = dataclasses.replace(ctx, avals_in=[], avals_out=[])
    _, token, _ = mlir.emit_python_callback(
        empty, lambda: (), ctx.tokens_in.get(ORDERED_LOG), [], [], [], has_side_effect=True
    )
    ctx.set_tokens_out(ctx.tokens_in.update_tokens(mlir.TokenSet({ORDERED_LOG: token})))
    results, _, _ = mlir.emit_python_callback(
        ctx, recorder(log, "ordered_log"), None, [x], ctx.avals_in, ctx.avals_out,
        has_side_effect=True,
    )  # fmt: skip
    return results
