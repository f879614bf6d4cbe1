"""02 · jaxpr → StableHLO → HLO：每一层看到什么 / what each level of the chain shows.

一个 jit 函数要经过三层表示：
- jaxpr（`jax.make_jaxpr(f)(x)`）：JAX 自己的中间表示，一条方程一个原语，Python 控制流已被展开；
- StableHLO（`jax.jit(f).lower(x).as_text()`）：交给编译器的 MLIR 程序，是 jaxpr 的逐条翻译，
  XLA 还没有优化过它；
- 编译后的 HLO（`.compile().as_text()`）：XLA 优化后的程序——公共子表达式消除、代数化简、
  融合，都在这里才发生。`lower(x).as_text(...)` 换一种方言，给出优化之前的 HLO。

A jitted function passes through three representations:
- the jaxpr (`jax.make_jaxpr(f)(x)`): JAX's own IR, one equation per primitive, Python
  control flow already unrolled;
- StableHLO (`jax.jit(f).lower(x).as_text()`): the MLIR program handed to the compiler, a
  translation of the jaxpr equation by equation, not yet optimized by XLA;
- the compiled HLO (`.compile().as_text()`): the program after XLA's optimizations: common
  subexpressions, algebraic simplification and fusion all happen only here.
  `lower(x).as_text(...)` in another dialect shows the HLO before optimization.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def entry_of(hlo_text):
    """编译后 HLO 的入口计算（ENTRY 那一段）。/ The entry computation of a compiled HLO text."""
    return hlo_text[hlo_text.index("ENTRY") :]


def test_xla_computation_is_gone_lower_the_jitted_function():
    """❌ 旧写法 / ✅ 推荐写法：老代码用 jax.xla_computation(f)(x) 取 HLO，它已经从 jax 里删除了。
    现在一律从 jit 出发：jax.jit(f).lower(x) 给出 Lowered，它的 as_text() 默认是 StableHLO，
    换一种方言就给出优化前的 HLO；再 .compile() 得到 XLA 优化后的程序。
    Old code got the HLO from jax.xla_computation(f)(x), which has been removed from jax.
    Everything now starts from jit: jax.jit(f).lower(x) gives a Lowered whose as_text() is
    StableHLO by default and, in another dialect, the HLO before optimization; .compile()
    then gives the program XLA optimized.
    """

    def f(x):
        return jnp.sin(x) * 2.0

    x = jnp.ones(3)
    with raises_exactly(__):
        jax.xla_computation(f)(x)

    lowered = jax.jit(f).lower(x)
    hlo = lowered.as_text(dialect=__)
    assert hlo.startswith("HloModule jit_f")
    assert "ENTRY" in hlo and "stablehlo." not in hlo
    assert lowered.as_text().startswith("module @jit_f")  # StableHLO is an MLIR module
    assert lowered.compile().as_text().startswith("HloModule jit_f, is_scheduled=true")


def test_jaxpr_unrolls_python_loops_and_keeps_dead_code():
    """jaxpr 忠实记录追踪到的每个原语：Python 循环被展开成重复的方程，没用到的结果也还在
    （绑定到 `_`），`jax.jit(f).trace(x).jaxpr` 里也一样。降级时 jit 先对 jaxpr 做一次死代码消除（DCE）：
    它看的是哪些方程和参数对输出有贡献，而不是优化计算本身。去掉没用到的参数的正是这一遍：
    让 jit 留下没用到的参数，这一遍就整个不做，死代码也跟着进了 StableHLO（XLA 编译时再删掉它）。
    The jaxpr records every primitive that was traced: a Python loop becomes repeated
    equations, and an unused result is still there (bound to `_`), in
    `jax.jit(f).trace(x).jaxpr` too. When lowering, jit first runs a dead-code elimination
    (DCE) over the jaxpr: it looks at which equations and arguments contribute to the outputs,
    not at optimizing the arithmetic. That same pass drops unused arguments: tell jit to keep
    them and the whole pass is skipped, so the dead code reaches StableHLO too (XLA removes
    it when compiling).
    """

    def f(x):
        jnp.cos(x)  # computed, never used
        for _ in range(3):
            x = jnp.sin(x) * 2.0
        return x

    x = jnp.linspace(0.0, 1.0, 8)
    jaxpr = jax.make_jaxpr(f)(x)
    assert [e.primitive.name for e in jaxpr.eqns] == __
    stablehlo = jax.jit(f).lower(x).as_text()
    assert ("stablehlo.cosine" in stablehlo) is __
    assert "cos" in [e.primitive.name for e in jax.jit(f).trace(x).jaxpr.eqns]

    def g(x, unused):
        return x * 2.0

    def main_signature(lowered):
        return lowered.as_text().split("func.func public @main(")[1].split(")")[0]

    assert main_signature(jax.jit(g).lower(x, x)).count("%arg") == 1  # the unused one is gone
    assert main_signature(jax.jit(g, __).lower(x, x)).count("%arg") == 2
    kept = jax.jit(f, __).lower(x)  # the same switch, on f
    assert "stablehlo.cosine" in kept.as_text()  # no DCE at all: the dead cos is lowered
    assert " cosine(" not in kept.compile().as_text()  # XLA's own DCE removes it
    np.testing.assert_allclose(jax.jit(f)(x), f(x), rtol=1e-6)


def test_xla_optimizes_only_in_the_compiled_hlo():
    """同一个 sin(x) 写了两遍，两次都有用（不是死代码）。降级只做上一个 koan 里的死代码消除，
    逐条翻译其余的方程；公共子表达式消除、代数化简、融合这些优化只由 XLA 在编译时完成。
    数一数每一层有几个 sine，编译后的入口里有几个 fusion。
    The same sin(x) written twice, both used (no dead code). Lowering does only the dead-code
    elimination of the previous koan and translates the remaining equations one by one;
    common-subexpression elimination, algebraic simplification and fusion happen only when XLA
    compiles. Count the sines at each level, and the fusions in the compiled entry.
    """

    def f(x):
        return jnp.sin(x) * 2.0 + jnp.sin(x) * 3.0

    x = jnp.linspace(0.0, 1.0, 8)
    lowered = jax.jit(f).lower(x)
    compiled = lowered.compile()
    sines = {
        "jaxpr": [e.primitive.name for e in jax.make_jaxpr(f)(x).eqns].count("sin"),
        "stablehlo": lowered.as_text().count("stablehlo.sine"),
        "hlo before optimization": lowered.as_text(dialect="hlo").count(" sine("),
        "compiled hlo": compiled.as_text().count(" sine("),
    }
    assert list(sines.values()) == __
    assert entry_of(compiled.as_text()).count(" fusion(") == __
    np.testing.assert_allclose(compiled(x), 5 * np.sin(x), rtol=1e-6)


def test_where_a_captured_array_goes():
    """闭包捕获的数组：在 jaxpr 里是常量（consts），在 StableHLO 里被整个写进程序文本
    （文本随数据变长），在编译后的 HLO 里是入口里的一条 constant 指令——它不是参数，
    所以 memory_analysis() 的参数字节数里没有它。把它作为参数传入时，它才算进参数。
    A captured array is a constant of the jaxpr, is written out in full inside the StableHLO
    text (which grows with the data), and becomes a constant instruction of the compiled
    entry: not a parameter, so memory_analysis() does not count it among the argument bytes.
    Passed as an argument, it is counted.
    """
    w = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    x = jnp.ones(1000)

    def baked(x):
        return x * w + 1.0

    def passed(x, w):
        return x * w + 1.0

    assert len(jax.make_jaxpr(baked)(x).consts) == 1
    baked_text = jax.jit(baked).lower(x).as_text()
    passed_text = jax.jit(passed).lower(x, w).as_text()
    assert len(baked_text) > len(passed_text) + 2 * w.nbytes  # two hex digits per byte
    baked_hlo = jax.jit(baked).lower(x).compile()
    passed_hlo = jax.jit(passed).lower(x, w).compile()
    assert "constant({...})" in entry_of(baked_hlo.as_text())
    assert baked_hlo.memory_analysis().argument_size_in_bytes == __
    assert passed_hlo.memory_analysis().argument_size_in_bytes == __

    # XLA even recognises an arange constant and computes it in the fusion (iota) instead.
    ramp = np.arange(1000, dtype=np.float32)
    ramp_hlo = jax.jit(lambda x: x * ramp).lower(x).compile().as_text()
    assert "iota()" in ramp_hlo and "constant({...})" not in ramp_hlo


def test_named_scope_labels_ops_at_every_level():
    """jax.named_scope 给一段代码起名：名字出现在 jaxpr 的 name_stack、StableHLO 的位置信息
    和编译后 HLO 的 op_name 元数据里（也是 profiler 显示的名字），格式是
    "jit(函数名)/外层/内层/原语"。在一大段 HLO 里找自己的代码，就靠它。
    jax.named_scope names a block of code: the name appears in the jaxpr's name stack, in the
    StableHLO locations and in the op_name metadata of the compiled HLO (what profilers show),
    as "jit(function)/outer/inner/primitive". It is how you find your code in a big HLO.
    """

    def layer(x):
        with jax.named_scope("block"):
            with jax.named_scope("attention"):
                scores = jnp.exp(x)
            return scores / scores.sum()

    x = jnp.linspace(0.0, 1.0, 8)
    jaxpr_text = jax.make_jaxpr(layer)(x).pretty_print(name_stack=True)
    assert "# [block/attention]" in jaxpr_text
    lowered = jax.jit(layer).lower(x)
    assert 'loc("jit(layer)/block/attention/exp"' in lowered.as_text(debug_info=True)
    op_names = re.findall(r'op_name="([^"]+)"', lowered.compile().as_text())
    assert "jit(layer)/block/attention/exp" in op_names
    # the other ops of the block / block 里的其余操作
    others = sorted({name for name in op_names if name.startswith("jit(layer)/block/")} - {
        "jit(layer)/block/attention/exp"
    })
    assert others == __
