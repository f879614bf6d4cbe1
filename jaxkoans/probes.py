"""Instruments the koans read JAX with: its compilations, the collectives in compiled HLO, the
stage at which a program fails, and a fresh process to measure in. They measure; the lessons are
in the koans that use them."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys

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


@contextlib.contextmanager
def recording_jax_logs(level=logging.WARNING):
    """收集这段时间里 "jax" 日志器写出的消息，但不再往外传：pytest 的日志捕获和终端都看不到它们，
    失败报告也就不会把答案打印出来。
    Collects the messages the "jax" logger emits in the block without passing them on: neither
    pytest's log capture nor the terminal sees them, so a failure report cannot print the answer.
    """
    messages = []

    class Keep(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    logger, handler = logging.getLogger("jax"), Keep(level)
    saved_level, saved_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved_level)  # setLevel, not assignment: it clears logging's cache
        logger.propagate = saved_propagate


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


def run_python(*args, env=None, timeout=120):
    """在一个新的 Python 进程里运行 `python *args`（只用 CPU，不继承本进程的 JAX_* 设置，再加上
    env），有超时；返回它的标准输出，失败时带上它标准错误的结尾。
    Runs `python *args` in a fresh process (CPU only, none of this process's JAX_* settings,
    plus `env`) under a timeout; returns its stdout, or fails with the end of its stderr."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    environ |= {"JAX_PLATFORMS": "cpu", **(env or {})}
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=environ
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
