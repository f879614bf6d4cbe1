"""10 · 自己定义一个 PRNG 实现 / a PRNG implementation of your own.

六种内置实现之外，`jax.extend.random.define_prng_impl` 让你定义自己的：给出 key 数据的形状
key_shape 和四个函数——seed（整数 → key 数据）、split、fold_in、random_bits（key 数据 → 给定
位宽和形状的无符号整数比特）。它返回一个 PRNGSpec，交给 `jax.random.key(seed, impl=spec)`；此后
uniform、normal、bernoulli 等所有 `jax.random` 函数都从你的 random_bits 取比特，再像对内置实现
一样把比特变成数。jaxpr 里只有 random_bits 这个原语，你的函数在它被执行或 lower 时才被调用
（jit 里拿到的是追踪值）。用途：复现另一套系统的随机流，或者在硬件上用更便宜的哈希。

Besides the six built-in implementations, `jax.extend.random.define_prng_impl` defines one of your
own: give the key data's shape key_shape and four functions, seed (an integer → key data),
split, fold_in and random_bits (key data → unsigned integer bits of a given width and shape). It
returns a PRNGSpec for `jax.random.key(seed, impl=spec)`; from then on uniform, normal, bernoulli
and every other `jax.random` function take their bits from your random_bits and turn them into
numbers as they do for the built-in ones. The jaxpr holds just the random_bits primitive; your
function is called when it is executed or lowered (under jit it receives tracers). Uses:
reproducing another system's random stream, or a cheaper hash on some hardware.
"""

import re

import jax
import jax.extend.random as jer
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives, equations

# ---- 给定代码 / given code -------------------------------------------------------------

GOLDEN = 0x9E3779B9


def mix32(x):
    """MurmurHash3 的 32 位终混函数（fmix32），逐元素作用于 uint32。
    MurmurHash3's 32-bit finaliser (fmix32), elementwise on uint32."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def fmix_seed(seed):
    """整数种子 → key 数据 uint32[2]。/ An integer seed → key data uint32[2]."""
    s = jnp.asarray(seed).astype(jnp.uint32)
    return jnp.stack([mix32(s ^ jnp.uint32(GOLDEN)), mix32(s + jnp.uint32(GOLDEN))])


def fmix_fold_in(key, data):
    """把一个整数混进 key 数据。/ Mix an integer into key data."""
    d = mix32(jnp.asarray(data).astype(jnp.uint32) + jnp.uint32(GOLDEN))
    return jnp.stack([mix32(key[0] ^ d), mix32(key[1] + d)])


def fmix_split(key, shape):
    """子 key i 就是 fold_in(key, i)。/ Child i is fold_in(key, i)."""
    count = int(np.prod(shape))
    children = jax.vmap(lambda i: fmix_fold_in(key, i))(jnp.arange(count, dtype=jnp.uint32))
    return children.reshape(*shape, 2)


def reference_bits(key_data, bit_width, shape):
    """numpy 写的参考（只能用于具体的数）：第 i 个字是 mix32(k0 ^ mix32(k1 + i))，保留低 bit_width 位。
    The numpy reference (concrete numbers only): word i is mix32(k0 ^ mix32(k1 + i)), its low
    bit_width bits kept."""

    def mix(x):
        x = x ^ (x >> np.uint32(16))
        x = x * np.uint32(0x85EBCA6B)
        x = x ^ (x >> np.uint32(13))
        x = x * np.uint32(0xC2B2AE35)
        return x ^ (x >> np.uint32(16))

    k0, k1 = np.asarray(key_data, dtype=np.uint32)
    counter = np.arange(int(np.prod(shape)), dtype=np.uint32)
    with np.errstate(over="ignore"):
        words = mix(k0 ^ mix(k1 + counter))
    return words.astype(f"uint{bit_width}").reshape(shape)


def zero_bits(key, bit_width, shape):
    """一个只会给出 0 的“生成器”：JAX 不检查比特是否随机。/ A "generator" of zeros only."""
    return jnp.zeros(shape, jnp.uint32)


def define(random_bits, name, tag):
    """用上面的 seed / split / fold_in 和给定的 random_bits 定义一个实现。
    Define an implementation from the seed / split / fold_in above and the given random_bits."""
    return jer.define_prng_impl(
        key_shape=(2,),
        seed=fmix_seed,
        split=fmix_split,
        fold_in=fmix_fold_in,
        random_bits=random_bits,
        name=name,
        tag=tag,
    )


# ---- 检查 / checks ----------------------------------------------------------------------


def test_a_custom_implementation_is_trusted_to_return_what_was_asked():
    """⚠️ 陷阱 / trap：JAX 相信你的 random_bits。一个只会返回 0 的实现照样能用：key 的 dtype 里
    写着定义时给的 tag；uniform 把比特变成 [0, 1) 里的数，零比特变成哪个数？jaxpr 里的 random_bits
    方程记下要几位：float32 的 normal 要几位，uint16 的 bits 又要几位？急切执行时 JAX 也不检查返回
    的 dtype：要 uint8 而实现给了 uint32，拿到的是什么 dtype？jit 里 lower 时类型对不上，抛出什么？
    内置实现可以用名字找到，自己定义的不行：用名字会怎样？
    ⚠️ trap: JAX trusts your random_bits. An implementation that returns zeros works all the
    same: the key's dtype carries the tag given at definition; uniform turns bits into numbers
    in [0, 1), so which number do zero bits become? The random_bits equation of a jaxpr records
    the width asked for: how many bits does a float32 normal ask, and bits of uint16? Eagerly
    JAX does not check the returned dtype either: asking uint8 of an implementation that gives
    uint32, which dtype do you get? Under jit, lowering finds the types disagree and raises
    what? The built-in implementations are found by name, yours is not: what does a name do?
    """
    impl = define(zero_bits, name="zeros", tag="zero")
    key = jax.random.key(0, impl=impl)
    assert str(key.dtype) == __
    assert jax.random.key_impl(key) == impl
    assert float(jax.random.uniform(key, ())) == __
    (normal,) = equations("random_bits", lambda k: jax.random.normal(k, (2,)), key)
    (bits,) = equations("random_bits", lambda k: jax.random.bits(k, (2,), jnp.uint16), key)
    assert (normal.params["bit_width"], bits.params["bit_width"]) == __
    assert jax.random.bits(key, (3,), jnp.uint8).dtype == __
    with raises_exactly(__):
        jax.jit(lambda k: jax.random.bits(k, (3,), jnp.uint8))(key)
    with raises_exactly(__):
        jax.random.key(0, impl="zeros")


# ---- 你来实现 / your code ---------------------------------------------------------------


def fmix_random_bits(key, bit_width, shape):
    """计数器式的 random_bits：key 是 uint32[2] 的 key 数据 (k0, k1)；一共 n = prod(shape) 个字，
    第 i 个字（i = 0 … n-1，uint32）是 mix32(k0 ^ mix32(k1 + i))；排成 shape，再只保留低 bit_width
    位（bit_width 是 8、16 或 32：转换成 uint{bit_width}）。它在 jit 里运行（key 是追踪值，不能用
    numpy），而且每个字只取决于 (key, i)，所以分片生成时每个设备只算自己那一块。大约 4 行。
    A counter-based random_bits: key is uint32[2] key data (k0, k1); there are n = prod(shape)
    words, and word i (i = 0 … n-1, uint32) is mix32(k0 ^ mix32(k1 + i)); lay them out as
    shape, then keep the low bit_width bits only (bit_width is 8, 16 or 32: convert to
    uint{bit_width}). It runs under jit (key is a tracer, no numpy), and each word depends on
    (key, i) only, so that in a sharded draw each device computes its own block. About 4 lines.
    """
    todo(
        "fmix_random_bits: 计数器 i 的哈希，排成 shape，保留低位 / hash counter i, lay out as shape, keep the low bits"
    )


def test_a_counter_based_generator_of_your_own_draws_sharded():
    """（先写好 fmix_random_bits。）用它定义的实现在 jit 里给出参考的比特（三种位宽、两个 key，
    包括 split 出来的子 key），uniform 的值就是这些比特变出来的；lower 出的程序里没有 threefry。
    按行分到 8 个设备上生成 (64, 16) 的比特：编译后的程序没有集合通信，最大的 uint32 数组就是
    一个设备的一块 (8·16 个字)；程序里没有循环，它的浮点运算数（cost_analysis 的 flops）是不分片时的
    1/8 左右——和 partitionable threefry 一样，每个设备只哈希自己的计数器。
    (Write fmix_random_bits first.) The implementation it defines gives the reference bits under
    jit (three widths, two keys, a split child among them), and uniform's values are made from
    those bits; the lowered program holds no threefry. Drawing (64, 16) bits split by rows over
    8 devices: the compiled program has no collectives, and its largest uint32 array is one
    device's block (8·16 words); the program has no loop, and its flops (cost_analysis) are about
    1/8 of the unsharded draw's: as with partitionable threefry, each device hashes its own
    counters only.
    """
    impl = define(fmix_random_bits, name="fmix32", tag="fm")
    root = jax.random.key(3, impl=impl)
    for key in (root, jax.random.split(root)[1]):
        data = jax.random.key_data(key)
        for width, dtype in [(8, jnp.uint8), (16, jnp.uint16), (32, jnp.uint32)]:
            got = jax.jit(lambda k, dtype=dtype: jax.random.bits(k, (5, 3), dtype))(key)
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, reference_bits(data, width, (5, 3)))
    words = reference_bits(jax.random.key_data(root), 32, (6,))
    expected = (words >> 9 | np.uint32(0x3F800000)).view(np.float32) - 1.0
    np.testing.assert_array_equal(jax.jit(lambda k: jax.random.uniform(k, (6,)))(root), expected)
    assert "threefry" not in jax.jit(lambda k: jax.random.bits(k, (6,))).lower(root).as_text()

    mesh = jax.make_mesh((8,), ("x",))
    draw = jax.jit(
        lambda k: jax.random.bits(k, (64, 16)), out_shardings=NamedSharding(mesh, P("x"))
    )
    compiled = draw.lower(root).compile()
    np.testing.assert_array_equal(
        compiled(root), reference_bits(jax.random.key_data(root), 32, (64, 16))
    )
    hlo = compiled.as_text()
    assert collectives(hlo) == {}
    sizes = [
        int(np.prod([int(n) for n in d.split(",") if n]))
        for d in re.findall(r"u32\[([\d,]*)\]", hlo)
    ]
    assert max(sizes) == 64 * 16 // 8
    # 没有循环（CPU 的 cost_analysis 只数一次循环体），每个设备的运算量是整个的 1/8 左右
    # no loop (CPU's cost_analysis counts a loop body once), and each device does about 1/8 of the work
    assert " while(" not in hlo
    whole = jax.jit(lambda k: jax.random.bits(k, (64, 16))).lower(root).compile().cost_analysis()
    assert whole["flops"] / 8 <= compiled.cost_analysis()["flops"] < whole["flops"] / 4
