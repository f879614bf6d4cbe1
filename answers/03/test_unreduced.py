"""03 · 未归约的分片 / unreduced shardings.

收缩维被切开的矩阵乘（a 按列、b 按行切到 8 个设备上），每个设备只能算出结果的一个部分和；
要得到真正的结果，得把 8 个部分和加起来（all-reduce）。JAX 0.12 在类型里写出这个中间状态：
PartitionSpec(..., unreduced={"x"}) 说“这个值沿 x 还没归约”，jax.typeof 的结果里也写着它。
未归约的值可以先相加（加法是线性的，部分和的和还是部分和），最后只归约一次：两次矩阵乘只要
一次 all-reduce。

A matmul whose contracting dimension is split (a by columns, b by rows over 8 devices) leaves
each device with one partial sum of the result; the true result needs the 8 partial sums
added (an all-reduce). JAX 0.12 writes that intermediate state into the type:
PartitionSpec(..., unreduced={"x"}) says "this value is not yet reduced along x", and
jax.typeof shows it too. Unreduced values may be added first (addition is linear: a sum
of partial sums is a partial sum), and reduced once at the end: two matmuls, one all-reduce.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding, reshard
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8
UNREDUCED = P(None, None, unreduced={"x"})  # 结果沿 x 未归约 / the result, unreduced along x


def placed(seed=0):
    """显式网格 x (8,) 和四个操作数：a、c (4, 16) 按列切，b、d (16, 4) 按行切。
    An explicit mesh x (8,) and four operands: a, c (4, 16) split by columns, b, d (16, 4) by
    rows."""
    mesh = jax.make_mesh((N,), ("x",), axis_types=(AxisType.Explicit,))
    rng = np.random.default_rng(seed)
    host = [rng.standard_normal(s, dtype=np.float32) for s in [(4, 16), (16, 4)] * 2]
    specs = [P(None, "x"), P("x", None)] * 2
    return mesh, host, [jax.device_put(h, NamedSharding(mesh, s)) for h, s in zip(host, specs, strict=True)]


def partial_matmul(a, b):
    """收缩维切开的矩阵乘，结果留在未归约状态。/ The split-contraction matmul, left unreduced."""
    return jnp.einsum("ij,jk->ik", a, b, out_sharding=UNREDUCED)


# ---- 检查 / checks ----------------------------------------------------------------------


def test_an_unreduced_matmul_leaves_a_partial_sum_on_every_device():
    """未归约的结果：jax.typeof 怎么写它？编译后的程序里有哪些集合通信？设备 k 的块是 a 的第 k 段列乘
    b 的第 k 段行，8 个块加起来才是 a @ b。这样的数组不能直接读回主机：
    XLA 运行时拒绝（它的消息说未归约的分片不支持 UniqueIndexDomains：没有哪个块就是结果）。
    The unreduced result: how does jax.typeof write it? Which collectives does the compiled
    program hold? Device k's block is a's k-th slice of columns times b's k-th slice of rows, and only the
    8 blocks added are a @ b. Such an array cannot be read back
    to the host as it is: XLA's runtime refuses (its message says an unreduced sharding does
    not support UniqueIndexDomains: no block is the result).
    """
    mesh, host, (a, b, _, _) = placed()
    with jax.set_mesh(mesh):
        f = jax.jit(partial_matmul)
        out = f(a, b)
        assert str(jax.typeof(out)) == "float32[4,4]{U:x}"
        assert collectives(f.lower(a, b).compile().as_text()) == {}
    blocks = [np.asarray(s.data) for s in sorted(out.addressable_shards, key=lambda s: s.device.id)]
    assert blocks[0].shape == (4, 4)
    k = 3
    np.testing.assert_allclose(blocks[k], host[0][:, 2 * k : 2 * k + 2] @ host[1][2 * k : 2 * k + 2], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sum(blocks), host[0] @ host[1], rtol=1e-5, atol=1e-5)
    with raises_exactly(jax.errors.JaxRuntimeError) as info:
        np.asarray(out)
    assert "Unreduced sharding does not support" in str(info.value)


# ---- 你来实现 / your code ---------------------------------------------------------------


def sum_of_products(a, b, c, d):
    """在显式网格上（jit 里，set_mesh 之下）算 a @ b + c @ d，返回复制的结果（P()）：整个程序只归约
    一次，XLA 只发一条 all-reduce、只传一个 (4, 4) 的块。用上面的 partial_matmul 和
    jax.sharding.reshard。大约 1 行。
    On the explicit mesh (under jit and set_mesh), compute a @ b + c @ d and return it
    replicated (P()): the program reduces once, XLA emits one all-reduce carrying one (4, 4)
    block. Use partial_matmul above and jax.sharding.reshard. About 1 line.
    """
    return reshard(partial_matmul(a, b) + partial_matmul(c, d), P())


def test_add_the_partial_sums_then_reduce_once():
    """（先写好 sum_of_products。）结果是复制的 a @ b + c @ d；编译后的程序只有一条 all-reduce，
    传的是一个 f32[4,4]。对照的两个程序也编译了：先各自归约再相加（每个乘积 out_sharding=P()），
    XLA 把两次归约并成一条元组 all-reduce，传两个 f32[4,4]，字节翻倍；先收集操作数再乘，通信的是
    四条 all-gather（每个操作数一条）。
    (Write sum_of_products first.) The result is the replicated a @ b + c @ d; the compiled
    program holds a single all-reduce carrying one f32[4,4]. The two programs to compare with
    are compiled too: reduce each product first and then add (out_sharding=P() on each
    product), and XLA merges the two reductions into one tuple all-reduce carrying two
    f32[4,4], twice the bytes; gather the operands first and multiply, and what travels is four
    all-gathers (one per operand).
    """
    for seed in (0, 1):
        mesh, host, args = placed(seed)
        with jax.set_mesh(mesh):
            f = jax.jit(sum_of_products)
            out = f(*args)
            assert str(jax.typeof(out)) == "float32[4,4]"
            assert out.sharding.is_fully_replicated
            assert collectives(f.lower(*args).compile().as_text()) == {"all-reduce": ["f32[4,4]"]}
        expected = host[0] @ host[1] + host[2] @ host[3]
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)

    def reduce_each_first(a, b, c, d):
        dot = lambda x, y: jnp.einsum("ij,jk->ik", x, y, out_sharding=P())  # noqa: E731
        return dot(a, b) + dot(c, d)

    def gather_first(a, b, c, d):
        return sum(reshard(x, P()) @ reshard(y, P()) for x, y in ((a, b), (c, d)))

    with jax.set_mesh(mesh):
        each = collectives(jax.jit(reduce_each_first).lower(*args).compile().as_text())
        gathered = collectives(jax.jit(gather_first).lower(*args).compile().as_text())
    assert each == {"all-reduce": ["(f32[4,4], f32[4,4])"]}
    assert set(gathered) == {"all-gather"} and len(gathered["all-gather"]) == 4


def test_resharding_an_unreduced_value_to_a_split_on_cpu():
    """把未归约的值 reshard 成沿 x 切开的 P("x", None)：每个设备最后只要和的 1/8 行，理论上一条
    reduce-scatter 就够。XLA 为 CPU 编译出的是哪一种集合通信、传多大的数组？每个设备的块是什么形状？
    在 CPU 上读 HLO，而不是凭理论猜；最后每个设备用一条 dynamic-slice 取出自己那几行。
    Reshard an unreduced value to P("x", None), split along x: each device ends up with 1/8 of
    the sum's rows, for which one reduce-scatter would do in theory. Which collective does XLA
    compile for the CPU, carrying how large an array? What shape is each device's block? Read
    the HLO on the CPU rather than guess from theory; at the end each device takes its own rows
    with a dynamic-slice.
    """
    mesh = jax.make_mesh((N,), ("x",), axis_types=(AxisType.Explicit,))
    rng = np.random.default_rng(2)
    a_host, b_host = rng.standard_normal((8, 16), dtype=np.float32), rng.standard_normal((16, 8), dtype=np.float32)
    a = jax.device_put(a_host, NamedSharding(mesh, P(None, "x")))
    b = jax.device_put(b_host, NamedSharding(mesh, P("x", None)))
    with jax.set_mesh(mesh):
        f = jax.jit(lambda a, b: reshard(partial_matmul(a, b), P("x", None)))
        out = f(a, b)
        hlo = f.lower(a, b).compile().as_text()
    assert str(jax.typeof(out)) == "float32[8@x,8]"
    assert out.sharding.shard_shape(out.shape) == (1, 8)
    assert collectives(hlo) == {"all-reduce": ["f32[8,8]"]}
    assert " dynamic-slice(" in hlo
    np.testing.assert_allclose(np.asarray(out), a_host @ b_host, rtol=1e-5, atol=1e-5)
