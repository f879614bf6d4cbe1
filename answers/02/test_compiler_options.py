"""02 · 给 XLA 传选项、读它的转储 / options for XLA, and reading what it dumps.

`jax.jit(f, compiler_options={...})` 把 XLA 的调试选项（`XLA_FLAGS` 里那些 `--xla_...`，去掉
前导的 `--`）只交给这一个程序的编译：关掉一个优化遍（pass）、把编译过程转储到一个目录。转储里有
`as_text()` 给不了的东西：每个优化遍前后的模块。这些都不需要新进程。

`jax.jit(f, compiler_options={...})` hands XLA's debug options (the `--xla_...` of
`XLA_FLAGS`, without the leading `--`) to the compilation of this one program only: switch off
one optimisation pass, dump the compilation into a directory. The dump holds what `as_text()`
cannot give: the module before and after each pass. None of this needs a new process.
"""

import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import counting_compiles, run_python

# ---- 给定代码 / given code -------------------------------------------------------------


def f(x):
    return jnp.exp(jnp.negative(jnp.negative(jnp.sin(x)))) + jnp.cos(x)


def entry_ops(hlo_text):
    """HLO 文本入口计算里每条 f32[64,64] 指令的操作码，按顺序。
    The opcode of every f32[64,64] instruction of the entry computation, in order."""
    entry = hlo_text[hlo_text.index("ENTRY") :]
    return re.findall(r"= f32\[64,64\]\{1,0\} ([\w-]+)\(", entry)


def machine_code(lowered, dump_dir):
    """编译 lowered，让 XLA 把编译过程转储进 dump_dir，返回每个内核的目标代码（字节），按内核名。
    Compile lowered with XLA dumping into dump_dir; the object code (bytes) of each kernel, by
    kernel name."""
    lowered.compile(compiler_options={"xla_dump_to": str(dump_dir)})
    prefix = ".obj-file.__compute_module_"
    return {
        name.split(prefix)[1].removesuffix(".o"): (dump_dir / name).read_bytes()
        for name in os.listdir(dump_dir)
        if prefix in name
    }


# A fresh process at XLA's own LLVM level (the course compiles at level 0 to save time, which
# would hide an option that sets that level): it loads this file and prints each kernel of
# without_fusion(f) whose machine code is not what jit builds for that op alone.
SAME_CODE = """
import importlib.util, sys
from pathlib import Path
import jax, jax.numpy as jnp
spec = importlib.util.spec_from_file_location("koan", sys.argv[1])
koan = importlib.util.module_from_spec(spec)
spec.loader.exec_module(koan)
x, out = jnp.linspace(0.0, 1.0, 64 * 64).reshape(64, 64), Path(sys.argv[2])
built = koan.machine_code(koan.without_fusion(koan.f).lower(x), out / "unfused")
ops = [("sine", jnp.sin, x), ("cosine", jnp.cos, x), ("exponential", jnp.exp, x)]
for name, op, *args in [*ops, ("add", jnp.add, x, x)]:
    alone = koan.machine_code(jax.jit(op).lower(*args), out / name)
    if built["wrapped_" + name] != alone["wrapped_" + name]:
        print(name)
"""


# ---- 你来实现 / your code ---------------------------------------------------------------


def without_fusion(fn):
    """返回 jax.jit(fn)，但让 XLA 编译它时跳过名为 fusion 的那个优化遍，别的遍照常运行。约 1 行。
    Return jax.jit(fn), compiled by XLA with the pass named fusion skipped and every other pass
    run as usual. About 1 line.
    """
    return jax.jit(fn, compiler_options={"xla_disable_hlo_passes": "fusion"})


def hlo_before_fusion(fn, x, dump_dir):
    """编译 jax.jit(fn)(x)，让 XLA 把名字匹配 fusion 的优化遍前后的模块转储进 dump_dir，返回
    fusion 遍运行之前那一刻的 HLO 文本（读转储的文件）。约 5 行。
    Compile jax.jit(fn)(x) with XLA dumping into dump_dir the module around the passes whose
    names match fusion, and return the HLO text just before the fusion pass ran (read it from
    the dumped file). About 5 lines.
    """
    options = {"xla_dump_to": str(dump_dir), "xla_dump_hlo_pass_re": "fusion"}
    jax.jit(fn, compiler_options=options).lower(x).compile()
    (name,) = [n for n in os.listdir(dump_dir) if n.endswith(".before_fusion.txt")]
    with open(os.path.join(dump_dir, name)) as file:
        return file.read()


# ---- 检查 / checks ----------------------------------------------------------------------


def test_compiler_options_switch_off_one_xla_pass(tmp_path):
    """关掉融合遍，编译出来的程序里每个逐元素运算单独成为一个内核（fusion 里只包着一条指令），
    每个内核都把输入从内存读一遍、把结果写一遍。cost_analysis 量出一共访问了多少个 x 那么大的数组。
    别的遍照常运行：每个内核的机器码和 jit 单独编译那一个运算时生成的逐字节相同。
    XLA 不认识的选项名（比如拼错的）不会被悄悄忽略：它是哪一种异常？
    With the fusion pass off, every elementwise op of the compiled program is a kernel of its
    own (a fusion wrapping one instruction), and each reads its inputs from memory and writes
    its result back. cost_analysis measures how many arrays the size of x are accessed in all.
    Every other pass runs as usual: each kernel's machine code is, byte for byte, what jit builds
    for that one op on its own.
    An option name XLA does not know (a misspelt one, say) is not silently ignored: which
    exception is it?
    """
    x = jnp.linspace(0.0, 1.0, 64 * 64).reshape(64, 64)
    fused = jax.jit(f).lower(x).compile()
    unfused = without_fusion(f).lower(x).compile()
    assert entry_ops(fused.as_text()) == ["parameter", "fusion"]
    assert entry_ops(unfused.as_text()) == ["parameter"] + ["fusion"] * 4
    wrapped = re.findall(r"%wrapped_(\w+) = ", unfused.as_text())
    assert sorted(wrapped) == ["add", "cosine", "exponential", "sine"]
    assert fused.cost_analysis()["bytes accessed"] == 2 * x.nbytes
    assert unfused.cost_analysis()["bytes accessed"] == 9 * x.nbytes
    np.testing.assert_allclose(unfused(x), fused(x), rtol=1e-6)
    # every other pass as usual: no other option may change how a kernel's code is built
    changed = run_python("-c", SAME_CODE, __file__, str(tmp_path), env={"XLA_FLAGS": ""})
    assert changed.split() == []  # the kernels whose machine code is not the usual
    with raises_exactly(jax.errors.JaxRuntimeError):
        jax.jit(f, compiler_options={"xla_turn_off_fusion": "true"}).lower(x).compile()


# 读转储文件时忘了关文件不是这个 koan 的课：CPython 回收它时发出的 ResourceWarning 不算失败。
# A dump file read and left unclosed is not this koan's lesson: the ResourceWarning CPython
# emits when it collects the file does not fail the koan.
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_read_the_module_before_the_fusion_pass(tmp_path):
    """lower() 给出 XLA 收到的程序，compile().as_text() 给出所有优化之后的程序；中间发生了什么
    只有转储里有。在 fusion 遍之前，代数化简已经运行过：两次取负消掉了，运算还没融合。第二个程序里
    化简做的是另几件事（成对的转置和取负、来回的 reshape、同一个 tanh 算两遍），所以这份文本只能从转储里读。
    lower() gives the program XLA receives and compile().as_text() the program after every
    optimisation; what happened in between is only in the dump. Before the fusion pass the
    algebraic simplifier has already run: the double negation is gone, and nothing is fused yet.
    In a second program the simplifier does other things (pairs of transposes and negations, a
    reshape there and back, one tanh computed twice), so the text can only be read from the dump.
    """
    x = jnp.linspace(0.0, 1.0, 64 * 64).reshape(64, 64)
    received = entry_ops(jax.jit(f).lower(x).as_text(dialect="hlo"))
    assert received == ["parameter", "sine", "negate", "negate", "exponential", "cosine", "add"]
    before = hlo_before_fusion(f, x, tmp_path)
    assert entry_ops(before) == ["parameter", "sine", "exponential", "cosine", "add"]
    names = os.listdir(tmp_path)
    assert any(n.endswith(".after_fusion.before_fusion-wrapper.txt") for n in names)
    # The dump also holds the final module, the very text compile().as_text() returns.
    (final,) = [n for n in names if n.endswith("cpu_after_optimizations.txt")]
    assert entry_ops((tmp_path / final).read_text()) == ["parameter", "fusion"]

    def g(x):
        folded = jnp.tanh(-(-x.T).T) + jnp.tanh(x)
        return folded * 2.0 * 0.5 + jnp.cos(x.reshape(4096).reshape(64, 64))

    received = entry_ops(jax.jit(g).lower(x).as_text(dialect="hlo"))
    assert received.count("tanh") == 2 and "transpose" in received and "negate" in received
    assert entry_ops(hlo_before_fusion(g, x, tmp_path / "g")) == [
        "parameter", "tanh", "add", "broadcast", "multiply", "broadcast", "multiply", "cosine", "add"
    ]  # fmt: skip


def test_clear_caches_drops_the_compiled_programs():
    """jax.clear_caches() 清空本进程里所有的编译缓存（jit 的、追踪的）：同一个 jit 函数、同样的
    参数，下一次调用要重新追踪、重新编译。调试编译问题、测编译时间时会用到它。
    jax.clear_caches() empties every compilation cache of this process (jit's, tracing's): the
    same jitted function with the same arguments traces and compiles again on its next call.
    Debugging compilation and measuring compile time use it.
    """
    g = jax.jit(lambda x: jnp.tanh(x) * 3.0)
    x = jnp.ones(8)
    g(x)
    with counting_compiles() as cached:
        g(x)
    jax.clear_caches()
    with counting_compiles() as cleared:
        g(x)
    assert (len(cached), len(cleared)) == (0, 1)
