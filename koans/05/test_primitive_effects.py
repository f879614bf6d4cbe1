"""05 · 原语的副作用与执行顺序 / a primitive's effects and their order.

原语在抽象求值规则里声明副作用：用 def_effectful_abstract_eval 注册的规则返回 (aval, effects)，
effects 是 jax.extend.core.Effect 子类实例的集合。一种副作用能做什么，由几张“类型登记表”决定。
JAX 0.12 里有公开名字的是 mlir.lowerable_effects（jax.interpreters.mlir）和
control_flow_allowed_effects（jax.experimental.hijax）；ordered_effects 没有，所以第二个 koan
从私有模块 jax._src.effects 导入它，这个模块随时可能改变。这里的原语通过
mlir.emit_python_callback（io_callback 自己 lowering 用的函数）调用主机；0.12 的
jax.interpreters.mlir 导出了它，源码注明这个导出是为了公开 API 暂时保留的。

A primitive declares its side effects in its abstract evaluation rule: with
def_effectful_abstract_eval the rule returns (aval, effects), effects being a set of instances of
jax.extend.core.Effect subclasses. What an effect type may do is decided by registries of types.
In JAX 0.12 two of them have public names, mlir.lowerable_effects (jax.interpreters.mlir) and
control_flow_allowed_effects (jax.experimental.hijax); ordered_effects has none, so the second
koan imports it from jax._src.effects, a private module that may change without notice.
The primitives here lower to a host callback through mlir.emit_python_callback, the function
io_callback lowers with: jax.interpreters.mlir exports it in 0.12, its source marking the export
as kept for now for the sake of public APIs.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import effects as effects_lib  # ordered_effects: no public name in JAX 0.12
from jax.experimental.hijax import control_flow_allowed_effects
from jax.extend.core import Effect, Primitive
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo
from jax.interpreters import mlir

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api import program as program_reader


def same_aval(x):
    """The abstract value of an output shaped like x."""
    return jax.core.ShapedArray(x.shape, x.dtype)


def recorder(log, name):
    """A host function that appends (name, a copy of its operand) to log and returns the operand,
    as emit_python_callback wants it: a tuple of the results."""

    def record(v):
        log.append((name, np.array(v).tolist()))
        return (np.asarray(v),)

    return record


def unordered_lowering(ctx, x, *, log, name, side_effect):
    """Lowers the primitive to one host call of recorder(log, name), with no token."""
    results, _, _ = mlir.emit_python_callback(
        ctx, recorder(log, name), None, [x], ctx.avals_in, ctx.avals_out,
        has_side_effect=side_effect,
    )  # fmt: skip
    return results


def make_host_log(name, log, effect=None):
    """A primitive `name`(x) -> x that records x in log on the host: eagerly through its impl,
    under jit through a host callback. With `effect`, its abstract evaluation declares it."""
    prim = Primitive(name)
    prim.def_impl(lambda x: recorder(log, name)(x)[0])
    if effect is None:
        prim.def_abstract_eval(same_aval)
    else:
        prim.def_effectful_abstract_eval(lambda x: (same_aval(x), {effect}))
    lowering = partial(unordered_lowering, log=log, name=name, side_effect=effect is not None)
    mlir.register_lowering(prim, lowering)
    return prim


def effect_names(jaxpr):
    """The class names of the effects a (closed) jaxpr records, sorted."""
    return sorted(type(e).__name__ for e in jaxpr.effects)


def test_an_effect_keeps_an_unused_primitive_alive():
    """⚠️ 陷阱 / trap: 两个原语都在主机上记日志，结果都没人用：pure_log 用 def_abstract_eval，
    没有声明副作用；host_log 用 def_effectful_abstract_eval 声明了一个。jaxpr 记下哪些副作用
    （包在 jit 里时呢）？程序读取器认为谁在从输入到输出的路径上？声明了副作用还不够：
    lowering 只接受登记在 mlir.lowerable_effects 里的类型，lax.scan 只接受登记在
    control_flow_allowed_effects 里的类型；登记之前它们各抛出什么异常？登记之后，jit 运行时
    谁真的在主机上执行了？3 步的 scan 里它执行几次？
    Both primitives write to a host log and nobody uses either result: pure_log has a
    def_abstract_eval and declares no effect; host_log declares one with
    def_effectful_abstract_eval. Which effects does the jaxpr record (wrapped in jit)? Which of
    the two does the program reader put on the path from the inputs to the outputs? Declaring
    is not enough: lowering takes only the types registered in mlir.lowerable_effects, lax.scan
    only those in control_flow_allowed_effects. What does each raise before the registration,
    and once registered, which call really runs on the host under jit, and how many times does
    it run in a 3-step scan?
    """

    class HostLog(Effect):
        """Writing to a host-side log (a new type at every run, registered nowhere yet)."""

    log = []
    pure = make_host_log("pure_log", log)
    logged = make_host_log("host_log", log, HostLog())

    def f(x):
        pure.bind(x)  # result unused
        logged.bind(x)  # result unused
        return x * 2

    x = jnp.arange(3.0)
    np.testing.assert_allclose(f(x), 2 * x)  # eagerly, both impls run
    assert [name for name, _ in log] == ["pure_log", "host_log"]

    assert effect_names(jax.make_jaxpr(jax.jit(f))(x)) == __
    program = program_reader.of(f, x)
    assert (program.on_path("pure_log"), program.on_path("host_log")) == __

    with raises_exactly(__):
        jax.jit(f).lower(x)
    mlir.lowerable_effects.add_type(HostLog)
    log.clear()
    np.testing.assert_allclose(jax.jit(f)(x), 2 * x)
    jax.effects_barrier()
    assert log == __

    def three_steps(x):
        def step(carry, _):
            logged.bind(carry)
            return carry + 1, None

        return lax.scan(step, x, None, length=3)[0]

    with raises_exactly(__):
        jax.make_jaxpr(three_steps)(x)
    control_flow_allowed_effects.add_type(HostLog)
    log.clear()
    np.testing.assert_allclose(jax.jit(three_steps)(x), x + 3)
    jax.effects_barrier()
    assert len(log) == __


class OrderedHostLog(Effect):
    """Writing to a host-side log in program order."""


ORDERED_LOG = OrderedHostLog()


def ordered_log_lowering(ctx, x, *, log):
    """✍️ 有序副作用的 lowering 规则：和 unordered_lowering 一样用 mlir.emit_python_callback 在
    主机上调用 recorder(log, "ordered_log")，但要把 ORDERED_LOG 的 token 串过这次调用：从
    ctx.tokens_in 取出它，交给调用，再用 ctx.set_tokens_out 把调用返回的新 token 交出去
    （ctx.tokens_in.update_tokens(mlir.TokenSet({副作用: token}))）。返回结果值的列表。大约 5 行。
    The lowering rule of an ordered effect: like unordered_lowering, call recorder(log,
    "ordered_log") on the host with mlir.emit_python_callback, but thread ORDERED_LOG's token
    through the call: take it from ctx.tokens_in, hand it to the call, and pass on the new token
    the call returns with ctx.set_tokens_out (ctx.tokens_in.update_tokens(mlir.TokenSet({effect:
    token}))). Return the list of result values. About 5 lines.
    """
    todo("ordered_log_lowering: 把 token 串过调用 / thread the token through the call")


def token_path(lowered):
    """The operations that main's token argument passes through, in order, up to its return,
    each with the operations that make its other operands ("arg" for an argument of main):
    read from the lowered module by MLIR's own use lists ("?" where the path forks or ends)."""
    module = lowered.compiler_ir("stablehlo")
    main = next(op for op in module.body.operations if op.attributes["sym_name"].value == "main")
    block = main.regions[0].blocks[0]
    tokens = [a for a in block.arguments if stablehlo.TokenType.isinstance(a.type)]
    if len(tokens) != 1:
        return [f"{len(tokens)} token arguments"]

    def made_by(value):
        return "arg" if isinstance(value.owner, ir.Block) else value.owner.name

    value, path = tokens[0], []
    while True:
        users = [use.owner for use in value.uses]
        if len(users) != 1:
            return [*path, "?"]
        op = users[0]
        if op.name == "func.return":
            return [*path, op.name]
        others = [made_by(v) for v in op.operands if not stablehlo.TokenType.isinstance(v.type)]
        path.append(f"{op.name}({', '.join(others)})")
        following = [r for r in op.results if stablehlo.TokenType.isinstance(r.type)]
        if len(following) != 1:
            return [*path, "?"]
        value = following[0]


def test_an_ordered_effect_threads_a_token_through_its_calls():
    """✍️ 实现 ordered_log_lowering。登记在 ordered_effects 里的副作用是“有序”的：jit 给编译后的
    程序加一个 token 参数和一个 token 结果，每个带这种副作用的调用都要接过当前的 token、交出
    一个新的，这条数据依赖链让编译器既不能删掉调用，也不能调换它们的顺序（连续两次运行之间也是）。
    两个结果没人用的调用都要执行，并且按程序的顺序。
    Write ordered_log_lowering. An effect registered in ordered_effects is ordered: jit gives
    the compiled program one token argument and one token result, and every call with that
    effect takes the current token and hands on a new one. That chain of data dependencies
    keeps the compiler from deleting the calls or swapping them, across consecutive runs too.
    Both calls, whose results nobody uses, must run, in program order.
    """
    effects_lib.ordered_effects.add_type(OrderedHostLog)
    mlir.lowerable_effects.add_type(OrderedHostLog)
    log = []
    prim = Primitive("ordered_log")
    prim.def_effectful_abstract_eval(lambda x: (same_aval(x), {ORDERED_LOG}))
    mlir.register_lowering(prim, partial(ordered_log_lowering, log=log))

    def f(x):
        prim.bind(x + 1.0)  # result unused
        prim.bind(x * 2.0)  # result unused
        return x - 1.0

    assert effect_names(jax.make_jaxpr(f)(jnp.zeros(3))) == ["OrderedHostLog"]
    lowered = jax.jit(f).lower(jnp.zeros(3))
    calls = ["stablehlo.custom_call(stablehlo.add)", "stablehlo.custom_call(stablehlo.multiply)"]
    assert token_path(lowered) == [*calls, "func.return"], (
        "token 要按顺序串过两次调用 / the token passes through both calls in order"
    )

    run = jax.jit(f)
    for x in (jnp.arange(3.0), jnp.array([5.0, -1.0, 0.5])):
        np.testing.assert_allclose(run(x), x - 1.0)
    jax.effects_barrier()
    want = [[1.0, 2.0, 3.0], [0.0, 2.0, 4.0], [6.0, 0.0, 1.5], [10.0, -2.0, 1.0]]
    assert log == [("ordered_log", row) for row in want]
