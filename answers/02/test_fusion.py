"""02 · 融合与内存：从编译后的 HLO 量出来 / fusion and memory, measured from the compiled HLO.

`compiled = jax.jit(f).lower(*args).compile()` 之后：
- `compiled.cost_analysis()["bytes accessed"]`：XLA 估计的内存读写字节数——逐元素运算被融合后，
  中间结果留在寄存器里，不再往内存写一遍、读一遍；
- `compiled.memory_analysis()`：参数、输出、临时缓冲区（temp）和别名（alias，捐赠的输入被输出
  复用）各占多少字节。
这些数字不依赖计时，在 CPU 上也完全确定。

With `compiled = jax.jit(f).lower(*args).compile()`:
- `compiled.cost_analysis()["bytes accessed"]`: the bytes XLA expects to read and write;
  once elementwise ops are fused, intermediates stay in registers instead of making a round
  trip through memory;
- `compiled.memory_analysis()`: the bytes of arguments, outputs, temporary buffers (temp)
  and aliases (a donated input reused by an output).
These figures do not depend on timing and are exact, on CPU too.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def compile_for(f, *args, **jit_kwargs):
    return jax.jit(f, **jit_kwargs).lower(*args).compile()


def entry_fusions(compiled):
    """编译后 HLO 入口里的 fusion 指令（每个是一个内核）。
    The fusion instructions of the compiled entry computation (one kernel each).
    """
    entry = compiled.as_text().split("ENTRY")[1]
    return [line for line in entry.splitlines() if " fusion(" in line]


def test_cost_analysis_is_one_dict():
    """❌ 旧写法 / ✅ 推荐写法：老版本的 compiled.cost_analysis() 返回一个列表（每个设备程序一个
    字典），老教程里到处是 cost_analysis()[0]；现在它直接返回一个字典，老写法不再能用。字典里
    flops 只数乘加之类的算术，sin、exp 这样的超越函数单独记在 transcendentals 里。
    Old versions of compiled.cost_analysis() returned a list (one dict per device program),
    hence cost_analysis()[0] in old tutorials; it now returns one dict, and the old idiom
    fails. In it, flops counts arithmetic such as multiplies and adds only; transcendental
    functions such as sin and exp are counted separately as transcendentals.
    """
    x = jnp.linspace(0.0, 1.0, 1000)
    cost = compile_for(lambda x, y: jnp.exp(jnp.sin(x * y)), x, x).cost_analysis()
    assert isinstance(cost, dict)
    with raises_exactly(KeyError):
        cost[0]
    assert (cost["flops"], cost["transcendentals"]) == (1 * x.size, 2 * x.size)


def test_fusion_reads_inputs_once_and_writes_the_output_once():
    """exp(sin(x*y)) 融合成一个内核：每个输入读一次，结果写一次。用 optimization_barrier
    把三个运算隔开后，三个内核各自读输入、写输出：每个中间结果都要写到内存再读回来。
    以数组个数计，各访问多少字节？
    exp(sin(x*y)) fuses into one kernel: each input is read once and the result written once.
    With optimization_barrier between the three ops, three kernels each read their inputs and
    write their output: every intermediate is written to memory and read back. How many
    arrays' worth of bytes does each version access?
    """

    def fused(x, y):
        return jnp.exp(jnp.sin(x * y))

    def split(x, y):
        a = lax.optimization_barrier(x * y)
        b = lax.optimization_barrier(jnp.sin(a))
        return jnp.exp(b)

    x = jnp.linspace(0.0, 1.0, 1 << 14)
    y = jnp.linspace(1.0, 2.0, 1 << 14)
    fused_c, split_c = compile_for(fused, x, y), compile_for(split, x, y)
    np.testing.assert_allclose(fused_c(x, y), split_c(x, y), rtol=1e-6)
    assert len(entry_fusions(fused_c)) == 1 and len(entry_fusions(split_c)) == 3

    fused_bytes = fused_c.cost_analysis()["bytes accessed"]
    split_bytes = split_c.cost_analysis()["bytes accessed"]
    assert fused_bytes == 3 * x.nbytes
    assert split_bytes == 7 * x.nbytes
    print(f"split / fused bytes accessed: {split_bytes / fused_bytes:.3f}")


def test_a_reduction_fuses_with_its_producer():
    """sum(exp(x)) 也是一个内核：exp 的结果一边算一边累加，从不落到内存里（temp 为 0，
    只读一遍 x）。在中间加一道屏障，exp(x) 就必须整个存进一个临时缓冲区。
    sum(exp(x)) is one kernel too: exp's results are summed as they are produced and never
    reach memory (temp is 0, x is read once). A barrier in between forces all of exp(x) into a
    temporary buffer.
    """
    x = jnp.linspace(-1.0, 1.0, 1 << 14)
    fused = compile_for(lambda x: jnp.sum(jnp.exp(x)), x)
    split = compile_for(lambda x: jnp.sum(lax.optimization_barrier(jnp.exp(x))), x)

    out_bytes = 4  # one float32
    assert fused.cost_analysis()["bytes accessed"] == x.nbytes + out_bytes
    assert fused.memory_analysis().temp_size_in_bytes == 0
    assert split.memory_analysis().temp_size_in_bytes == 65536  # bytes
    assert split.cost_analysis()["bytes accessed"] == 3 * x.nbytes + out_bytes


def test_a_matmul_is_a_fusion_boundary_on_cpu():
    """tanh(x @ W + b)：CPU 上矩阵乘法是单独的内核（一个 kCustom 融合，交给矩阵乘法库），
    加偏置和 tanh 融合成第二个内核。矩阵乘法的结果要写出去、再被读回来一次。
    tanh(x @ W + b): on CPU the matmul is a kernel of its own (a kCustom fusion handed to a
    matmul library), and the bias add and tanh fuse into a second kernel. The matmul's result
    is written out and read back once.
    """
    x = jnp.ones((64, 256)) / 256
    w = jnp.ones((256, 256))
    b = jnp.ones(256)
    compiled = compile_for(lambda x, w, b: jnp.tanh(x @ w + b), x, w, b)

    kinds = [line.split("kind=")[1].split(",")[0] for line in entry_fusions(compiled)]
    assert kinds == ["kCustom", "kLoop"]
    out_nbytes = 64 * 256 * 4
    bytes_accessed = compiled.cost_analysis()["bytes accessed"]
    assert bytes_accessed == x.nbytes + w.nbytes + b.nbytes + 3 * out_nbytes


def test_donating_an_input_lets_the_output_reuse_its_buffer():
    """捐赠（donate_argnames / donate_argnums）告诉 XLA：这个输入之后不再用，它的缓冲区可以
    直接给输出用。memory_analysis() 的 alias 字节数就是被复用的部分。代价：被捐赠的数组随即被删除，
    再用它会报错。
    Donation (donate_argnames / donate_argnums) tells XLA that an input is not needed
    afterwards, so the output may take over its buffer: memory_analysis() reports the reused
    bytes as alias. The price: the donated array is deleted, and using it again raises.
    """

    def sgd(grad, params):
        return params - 0.1 * grad

    grad = jnp.full(1024, 2.0)
    params = jnp.ones(1024)
    step = jax.jit(sgd, donate_argnames="params")
    plain = compile_for(sgd, grad, params)
    donating = step.lower(grad, params).compile()
    assert plain.memory_analysis().alias_size_in_bytes == 0
    assert donating.memory_analysis().alias_size_in_bytes == params.nbytes

    new_params = step(grad, params)
    np.testing.assert_allclose(new_params, 0.8)
    assert params.is_deleted() and not grad.is_deleted()
    with raises_exactly(RuntimeError):
        params + 1
