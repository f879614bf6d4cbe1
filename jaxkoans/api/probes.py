"""Instruments the koans read JAX with: its compilations, its logs, the stage at which a program
fails, a fresh process to measure in, and (from the program reader, jaxkoans/api/program.py) the
primitives, equations and pallas_call structure of a jaxpr and the collectives of compiled HLO.
They measure; the lessons are in the koans that use them."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys

import jax

# The instruments that read programs are the program reader's (one reader for koans and contracts).
from jaxkoans.api.program import HLO_COLLECTIVES as COLLECTIVES
from jaxkoans.api.program import collectives as collectives
from jaxkoans.api.program import equations as equations
from jaxkoans.api.program import pallas_call_structure as pallas_call_structure
from jaxkoans.api.program import primitives as primitives

__all__ = [
    "COLLECTIVES", "Deferred", "as_if_on", "collectives", "counting_compiles", "equations", "first_failing_stage",
    "pallas_call_structure", "primitives", "recording_jax_logs", "run_python",
]  # fmt: skip


class Deferred:
    """一个替身结果：它的工作要等到有人等它时才派发（它的 block_until_ready 方法、转成 NumPy、
    轮询 is_ready 直到它说好了），所以检查看得出代码等的是这个结果，还是一段固定的时间。
    A stand-in result whose work is dispatched only when someone waits for it (its
    block_until_ready method, a conversion to NumPy, polling is_ready until it says yes), so a
    check sees whether code waited for this result or for a fixed time (a sleep, a loop on the
    clock): no such wait ever sees it done, on any machine.
    """

    def __init__(self, work, *args):
        self.work, self.args, self.value, self.polls = work, args, None, 0

    @property
    def done(self) -> bool:
        """Whether the work ran (read by the checks; asking does not wait)."""
        return self.value is not None

    def block_until_ready(self):
        if self.value is None:
            self.value = jax.block_until_ready(self.work(*self.args))
        return self

    def __array__(self, dtype=None, copy=None):
        import numpy as np

        return np.asarray(self.block_until_ready().value, dtype)

    def is_ready(self) -> bool:
        """第一次轮询时它还在算，之后的轮询等它算完。/ The first poll finds it running; later ones wait for it."""
        self.polls += 1
        return self.polls > 1 and self.block_until_ready().done


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


def as_if_on(platform: str, f):
    """f 在 `platform` 上会算出的值，在这台机器上算：程序里每个 platform_index 都按 `platform` 选分支
    （lax.platform_dependent 的分支就这样在 CPU 上运行）。
    What f computes on `platform`, computed on this machine: every platform_index in its
    program picks `platform`'s branch (so lax.platform_dependent's branches run on a CPU).
    """
    from jax._src import core  # jaxpr_as_fun, eval of one equation: no public evaluator in 0.12

    def index(platforms) -> int:
        for i, names in enumerate(platforms):
            if names is None or platform in names:
                return i
        raise ValueError(f"the program has no branch for {platform}: {platforms}")

    def evaluate(jaxpr, consts, *args):
        env = {}

        def read(v):
            return v.val if isinstance(v, core.Literal) else env[v]

        for var, value in zip(jaxpr.constvars, consts, strict=True):
            env[var] = value
        for var, value in zip(jaxpr.invars, args, strict=True):
            env[var] = value
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            inner = eqn.params.get("jaxpr")
            if eqn.primitive.name == "platform_index":
                outs = [jax.numpy.int32(index(eqn.params["platforms"]))]
            elif eqn.primitive.name in ("pjit", "jit", "closed_call") and inner is not None:
                outs = evaluate(inner.jaxpr, inner.consts, *ins)
            elif eqn.primitive.name == "cond" and "branches_platforms" in eqn.params:
                branch = eqn.params["branches"][int(ins[0])]
                outs = evaluate(branch.jaxpr, branch.consts, *ins[1:])
            else:
                outs = eqn.primitive.bind(*ins, **eqn.params)
                outs = outs if eqn.primitive.multiple_results else [outs]
            for var, value in zip(eqn.outvars, outs, strict=True):
                env[var] = value
        return [read(v) for v in jaxpr.outvars]

    def run(*args):
        closed = jax.make_jaxpr(f)(*args)
        outs = evaluate(closed.jaxpr, closed.consts, *jax.tree.leaves(args))
        return jax.tree.unflatten(jax.tree.structure(jax.eval_shape(f, *args)), outs)

    return run
