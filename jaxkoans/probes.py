"""Instruments the koans read JAX with: its compilations, the collectives in compiled HLO, and
the stage at which a program fails. They measure; the lessons are in the koans that use them."""

from __future__ import annotations

import contextlib
import re

import jax

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


@contextlib.contextmanager
def counting_compiles():
    """收集这段时间里每一次 XLA 编译的函数名（jax.monitoring 事件）。
    Collects the function name of every XLA compilation in the block (jax.monitoring).
    """
    names = []

    def on_duration(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            names.append(kwargs.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    try:
        yield names
    finally:
        jax.monitoring.unregister_event_duration_listener(on_duration)


def collectives(hlo_text):
    """编译后 HLO 里的集合通信：{指令: [结果类型, ...]}，例如 {"all-reduce": ["f32[16,32]"]}
    （类型去掉布局 {1,0}；合并成元组的算一条）。
    The compiled HLO's collectives: {instruction: [result type, ...]} (types without their
    {1,0} layout; a tuple counts once)."""
    found = {}
    for kind in COLLECTIVES:
        types = re.findall(rf"^\s*(?:ROOT )?%\S+ = (.*?) {kind}(?:-start)?\(", hlo_text, re.M)
        if types:
            found[kind] = [re.sub(r"\{[\d,]*\}", "", t) for t in types]
    return found


def first_failing_stage(f, *args):
    """jit(f)(*args) 在 lower / compile / execute 哪一步先报错；都不报错返回 None。
    Which of lower / compile / execute raises first for jit(f)(*args); None if none does."""
    try:
        lowered = jax.jit(f).lower(*args)
    except Exception:
        return "lower"
    try:
        compiled = lowered.compile()
    except Exception:
        return "compile"
    try:
        jax.block_until_ready(compiled(*args))
    except Exception:
        return "execute"
    return None
