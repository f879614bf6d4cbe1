"""04 · 闭包转换与自定义批处理规则 / closure conversion, and a batching rule of your own.

接受函数参数的 custom_vjp（求解器、积分器、“反向时重算”的包装）常常拿到一个闭包：用户的 f
捕获了正在被求导的参数。规则看不见这些被捕获的 tracer，于是它们要么泄漏，要么得不到余切。
jax.closure_convert 把 f 里捕获的 tracer 提出来，变成显式参数，规则就能对它们求余切。
custom_vmap 则让一个函数在 vmap 下不走逐原语的默认批处理，而走你写的规则：手里有更好的
整批算法时（一次矩阵乘代替一个三维的中间量），就用得上它。

A custom_vjp that takes a function argument (a solver, an integrator, a "recompute on the way
back" wrapper) is often handed a closure: the user's f captures the parameters being
differentiated. The rule cannot see those captured tracers, so they either leak or get no
cotangent. jax.closure_convert lifts the tracers f captures out into explicit arguments, and
the rule can return their cotangents. custom_vmap makes a function skip the default
primitive-by-primitive batching under vmap and run a rule you write instead: useful when you
know a better algorithm for the whole batch (one matrix product instead of a 3-D intermediate).
"""

import io
from contextlib import redirect_stdout
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import print_saved_residuals
from jax.custom_batching import custom_vmap

from jaxkoans import todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api import program as program_reader
from jaxkoans.api.probes import equations, primitives


@partial(jax.custom_vjp, nondiff_argnums=(0,))
def _recompute(f, x, *consts):
    """f(x, *consts)，反向时重算 f 而不存它的中间值（给定）。
    f(x, *consts), recomputed on the way back instead of keeping its intermediates (given)."""
    return f(x, *consts)


def _recompute_fwd(f, x, *consts):
    return f(x, *consts), (x, consts)  # only the inputs / 只存输入


def _recompute_bwd(f, residuals, g):
    x, consts = residuals
    _, f_vjp = jax.vjp(f, x, *consts)  # the forward pass again / 重跑一遍前向
    return f_vjp(g)  # cotangents of x and of every const / x 和每个 const 的余切


_recompute.defvjp(_recompute_fwd, _recompute_bwd)


def recompute_apply(f, x):
    """f(x)，反向时重算（经由 _recompute）。f 可以捕获被求导的值（比如参数 w）：用
    jax.closure_convert(f, x) 把它们提出来，变成 _recompute 的显式参数。2 行。

    f(x), recomputed on the way back (through _recompute). f may capture values being
    differentiated (the parameters w, say): lift them out with jax.closure_convert(f, x) into
    explicit arguments of _recompute. 2 lines.
    """
    todo("recompute_apply: jax.closure_convert, then _recompute / 先闭包转换，再调用 _recompute")


def _params():
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.normal(size=(6, 4)), jnp.float32)
    x = jnp.asarray(rng.normal(size=4), jnp.float32)
    return w, x


def _residual_lines(fun, *args):
    """print_saved_residuals 打印的每一行：反向传播要读的每个值和它的来历。
    Each line print_saved_residuals prints: every value the backward pass reads, and its origin."""
    out = io.StringIO()
    with redirect_stdout(out):
        print_saved_residuals(fun, *args)
    return out.getvalue().splitlines()


def test_closure_convert_hoists_what_a_rule_closes_over():
    """✍️ 实现 recompute_apply。直接把闭包 f 交给 _recompute，对 x 求导没问题，对 f 捕获的 w
    求导时 w 的 tracer 泄漏（UnexpectedTracerError）。closure_convert 之后，w 成了 custom_vjp_call
    的一个显式输入，梯度对 w 和 x 都和不加规则的参照一致；反向传播只读两个参数，不像参照那样另存
    tanh 的导数 1 − y²——直接调用 f 或套 jax.checkpoint 的写法，jaxpr 里都没有 custom_vjp_call。
    Write recompute_apply. Handing the closure f to _recompute directly works for the gradient by
    x, but by the w that f captures, w's tracer leaks (UnexpectedTracerError). After
    closure_convert, w is an explicit input of the custom_vjp_call, and the gradients by w and by
    x equal the plain reference's; the backward pass reads the two arguments only, where the
    reference also keeps tanh's derivative 1 − y². Calling f directly, or wrapping it in
    jax.checkpoint, leaves no custom_vjp_call in the jaxpr.
    """
    w, x = _params()

    def naive(w, x):
        return jnp.sum(_recompute(lambda x: jnp.tanh(w @ x), x))

    def loss(w, x):
        return jnp.sum(recompute_apply(lambda x: jnp.tanh(w @ x), x))

    def reference(w, x):
        return jnp.sum(jnp.tanh(w @ x))

    np.testing.assert_allclose(
        jax.grad(naive, 1)(w, x), jax.grad(reference, 1)(w, x), rtol=1e-5, atol=1e-6
    )
    with pytest.raises(jax.errors.UnexpectedTracerError):
        jax.grad(naive, 0)(w, x)

    for got, want in zip(
        jax.jit(jax.grad(loss, (0, 1)))(w, x), jax.grad(reference, (0, 1))(w, x), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    (call,) = equations("custom_vjp_call", loss, w, x)
    assert [v.aval.shape for v in call.invars] == [(4,), (6, 4)]  # x, then the hoisted w
    lines = _residual_lines(loss, w, x)
    assert len(lines) == 2 and all("from the argument" in line for line in lines), lines
    assert len(_residual_lines(reference, w, x)) == 3  # the plain version keeps tanh's 1 - y²


def sqdist_reference(x, ys):
    """x（[D]）到 ys 每一行（[N, D]）的平方距离，[N]。
    Squared distances from x ([D]) to every row of ys ([N, D]), shape [N]."""
    return jnp.sum((x - ys) ** 2, axis=-1)


@custom_vmap
def sqdist(x, ys):
    """sqdist_reference，带自己的批处理规则 / sqdist_reference with its own batching rule."""
    return sqdist_reference(x, ys)


def sqdist_rule(axis_size, in_batched, xs, ys):
    """sqdist 的批处理规则：返回 (批处理后的输出, 输出是否带批轴)。in_batched 是两个布尔值，说明
    xs、ys 各自有没有前导的批轴（长度 axis_size）。
    - 只有 xs 有批轴时（一批查询对同一组 ys）：用 |x|² − 2·x·y + |y|² 展开，中间只有一次
      [B, D] × [D, N] 的矩阵乘，不造 [B, N, D] 的差。
    - 其余情形：对 sqdist_reference 做 jax.vmap（in_axes 按 in_batched 给 0 或 None）。
    大约 6 行。

    The batching rule of sqdist: return (the batched output, whether it has a batch axis).
    in_batched holds two booleans saying whether xs and ys each carry a leading batch axis (of
    length axis_size).
    - When only xs is batched (a batch of queries against one set of ys): expand
      |x|² − 2·x·y + |y|², one [B, D] × [D, N] matrix product and no [B, N, D] difference.
    - Otherwise: jax.vmap of sqdist_reference (in_axes 0 or None as in_batched says).
    About 6 lines.
    """
    todo("sqdist_rule: a matrix product when only xs is batched / 只有 xs 带批轴时用矩阵乘")


sqdist.def_vmap(sqdist_rule)


def _largest_intermediate(fn, *args):
    """fn 的程序里结果真正用到的最大中间值的元素个数（嵌套的 jit 里也算）/ the element count of
    the largest intermediate fn's result depends on, nested programs included."""
    return program_reader.of(fn, *args).largest_live()


def test_write_a_batching_rule_with_custom_vmap():
    """✍️ 实现 sqdist_rule。默认的批处理把 x − ys 批成 [B, N, D] 的差再求和；你的规则在“一批查询、
    同一组 ys”时换成一次矩阵乘：vmap 后的 jaxpr 里有 dot_general，最大的中间值小于 B·N·D 个元素。
    ys 也带批轴时规则照样给出正确结果。不在 vmap 下，sqdist 是一个 custom_vmap_call，规则不运行。
    Write sqdist_rule. The default batching turns x − ys into a [B, N, D] difference and sums it;
    your rule, for "a batch of queries against one ys", does one matrix product instead: the
    jaxpr under vmap has a dot_general and no intermediate of B·N·D elements. With ys batched too
    the rule still gives the right values. Outside vmap, sqdist is one custom_vmap_call and the
    rule does not run.
    """
    b, n, d = 8, 32, 16
    rng = np.random.default_rng(1)
    xs = jnp.asarray(rng.normal(size=(b, d)), jnp.float32)
    ys = jnp.asarray(rng.normal(size=(n, d)), jnp.float32)
    many_ys = jnp.asarray(rng.normal(size=(b, n, d)), jnp.float32)

    assert primitives(jax.make_jaxpr(sqdist)(xs[0], ys).jaxpr) >= {"custom_vmap_call"}
    queries = jax.vmap(sqdist, in_axes=(0, None))
    default = jax.vmap(sqdist_reference, in_axes=(0, None))
    assert _largest_intermediate(default, xs, ys) == b * n * d  # the default batching
    assert "dot_general" not in primitives(jax.make_jaxpr(default)(xs, ys).jaxpr)

    np.testing.assert_allclose(jax.jit(queries)(xs, ys), default(xs, ys), rtol=1e-4, atol=1e-4)
    program = jax.make_jaxpr(queries)(xs, ys).jaxpr
    assert program_reader.read(program).on_path("dot_general")  # used, not kept beside
    assert "custom_vmap_call" not in primitives(program)  # the rule ran while tracing
    assert _largest_intermediate(queries, xs, ys) < b * n * d

    for in_axes, args in (((0, 0), (xs, many_ys)), ((None, 0), (xs[0], many_ys))):
        np.testing.assert_allclose(
            jax.vmap(sqdist, in_axes=in_axes)(*args),
            jax.vmap(sqdist_reference, in_axes=in_axes)(*args),
            rtol=1e-4,
            atol=1e-4,
        )
