"""Instruments the koans read JAX with: its compilations, the collectives in compiled HLO, the
structure of a pallas_call in a jaxpr, the stage at which a program fails, and a fresh process to
measure in. They measure; the lessons are
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


def _sub_jaxprs(params):
    """jaxprs nested in an equation's params (jit bodies, cond branches, custom_vjp calls)."""
    for value in params.values():
        for item in value if isinstance(value, tuple | list) else (value,):
            inner = getattr(item, "jaxpr", item)
            if hasattr(inner, "eqns"):
                yield inner


def primitives(jaxpr):
    """jaxpr 里出现的每个原语的名字（包括嵌套的 jaxpr）。
    Every primitive name in a jaxpr, nested jaxprs included."""
    names = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for sub in _sub_jaxprs(eqn.params):
            names |= primitives(sub)
    return names


def equations(primitive, fn, *args):
    """fn(*args) 的 jaxpr 里名为 primitive 的每个方程（包括嵌套的 jaxpr，按出现顺序）。
    Every equation of the primitive named `primitive` in fn(*args)'s jaxpr, nested jaxprs
    included, in order."""
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == primitive:
                found.append(eqn)
            for sub in _sub_jaxprs(eqn.params):
                walk(sub)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return found


def pallas_call_structure(fn, *args):
    """fn(*args) 的 jaxpr 里唯一的 pallas_call 的结构（可以在 jit 里）：grid、每个 BlockSpec 的
    块形状（先输入后输出）、scratch 的 (形状, dtype)、dimension_semantics（"parallel" 这样的
    字符串，pltpu 的枚举也读成它的值；没给就是空元组）、内核里的原语和内核外的原语。
    The structure of the one pallas_call in fn(*args)'s jaxpr (it may sit inside a jit): its
    grid, every BlockSpec's block shape (inputs, then outputs), the scratch (shape, dtype)s, the
    dimension_semantics (strings such as "parallel"; pltpu's enums read as their value; () when
    none is given), the primitives inside the kernel and those outside it."""
    calls, outside = [], set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                calls.append(eqn)
                continue
            outside.add(eqn.primitive.name)
            for sub in _sub_jaxprs(eqn.params):
                walk(sub)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    assert len(calls) == 1, f"expected one pallas_call, found {len(calls)}"
    mapping, params = calls[0].params["grid_mapping"], calls[0].params["compiler_params"]
    semantics = getattr(params, "dimension_semantics", None) or ()
    return {
        "grid": tuple(mapping.grid),
        "blocks": [
            tuple(getattr(d, "block_size", d) for d in b.block_shape)
            for b in mapping.block_mappings
        ],
        "scratch": [(tuple(a.shape), a.dtype) for a in mapping.scratch_avals],
        "semantics": tuple(getattr(s, "value", s) for s in semantics),
        "kernel_ops": primitives(calls[0].params["jaxpr"]),
        "outside_ops": outside,
    }


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
