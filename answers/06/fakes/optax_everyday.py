"""Cheap fakes of chapter 06's test_optax_everyday.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def schedule__warmup_only():
    """A linear warm-up and then a constant PEAK: no cosine decay."""
    return optax.linear_schedule(init_value=0.0, end_value=PEAK, transition_steps=WARMUP)


def schedule__decay_steps_after_the_warmup():
    """Counts the decay from the end of the warm-up: END is reached WARMUP steps too late."""
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=PEAK,
        warmup_steps=WARMUP,
        decay_steps=TOTAL + WARMUP,
        end_value=END,
    )


def make_optimizer__no_clipping():
    """AdamW with the schedule and the mask, but the gradients are never clipped."""
    return optax.adamw(schedule(), weight_decay=WEIGHT_DECAY, mask=decay_mask)


def make_optimizer__decay_everything():
    """Clips, then AdamW without the mask: biases and scales decay too."""
    return optax.chain(
        optax.clip_by_global_norm(MAX_NORM), optax.adamw(schedule(), weight_decay=WEIGHT_DECAY)
    )


def make_optimizer_with_hyperparams__plain_adamw():
    """The same AdamW without inject_hyperparams: its state holds no hyperparameters to read or set."""
    return optax.adamw(schedule(), weight_decay=WEIGHT_DECAY)


def make_optimizer_with_hyperparams__constant_learning_rate():
    """Injects the hyperparameters but with the peak rate throughout: no warm-up, no decay."""
    return optax.inject_hyperparams(optax.adamw)(learning_rate=PEAK, weight_decay=WEIGHT_DECAY)


def schedule__linear_decay():
    """Warm-up, then a straight line down to END: the same value at the decay's midpoint."""
    warmup = optax.linear_schedule(0.0, PEAK, WARMUP)
    decay = optax.linear_schedule(PEAK, END, TOTAL - WARMUP)
    return optax.join_schedules([warmup, decay], [WARMUP])
