"""02 · `jax.experimental.roofline`：不编译就估出代价 / estimating costs without compiling.

`roofline.roofline(f)(*args)` 追踪 f，按每个原语的规则数出浮点运算（flops）和 HBM 字节
（hbm_bytes），返回 `(输出的形状, RooflineResult)`；给出 mesh 和 specs 时还数集合通信的字节。
flops / hbm_bytes 就是算术强度：它比硬件的“每字节算力”高，程序受算力限制，低则受带宽限制。
它只看 jaxpr、不调用编译器，所以它数到什么、没数到什么，要先弄清楚。

`roofline.roofline(f)(*args)` traces f and counts floating-point operations (flops) and HBM
bytes (hbm_bytes) by a rule per primitive, returning `(the output shapes, RooflineResult)`;
given a mesh and specs it also counts the bytes collectives move. flops / hbm_bytes is the
arithmetic intensity: above the hardware's flops per byte a program is compute-bound, below it
bandwidth-bound. It reads the jaxpr only and never calls the compiler, so know first what it
counts and what it does not.
"""

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import roofline
from jax.sharding import AbstractMesh, AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __  # noqa: F401  (the koans' blanks)


def estimate(f, *args) -> roofline.RooflineResult:
    """roofline 对 f(*args) 的估计（丢掉输出形状）/ roofline's estimate of f(*args)."""
    _, result = roofline.roofline(f)(*args)
    return result


def test_roofline_counts_a_matmul_as_xla_does_and_elementwise_ops_as_fused():
    """一次 (128, 256) @ (256, 64) 的 float32 矩阵乘法：roofline 数出几个 flops、几个 HBM 字节？
    XLA 编译后的 `cost_analysis()` 给出同样的两个数。一串逐元素运算（cos 再 sin）呢：roofline
    把它当作会被融合进相邻运算，融合后的两列和不融合（`unfused_`，每个运算单独读写内存）的
    一列各是多少？最后：方阵乘法的边长变成 4 倍，算术强度变成几倍？
    One (128, 256) @ (256, 64) float32 matmul: how many flops and HBM bytes does roofline count?
    XLA's `cost_analysis()` of the compiled program gives the same two figures. A chain of
    elementwise ops (cos, then sin): roofline takes it to be fused into its neighbours; what
    are the two fused columns, and the unfused one (`unfused_`, each op reading and writing
    memory by itself)? Last: a square matmul's side grows 4 times; by what factor does its
    arithmetic intensity grow?
    """
    a = jnp.ones((128, 256), jnp.float32)
    b = jnp.ones((256, 64), jnp.float32)
    mm = estimate(jnp.matmul, a, b)
    assert mm.flops == __
    assert mm.hbm_bytes == __
    cost = jax.jit(jnp.matmul).lower(a, b).compile().cost_analysis()
    assert (cost["flops"], cost["bytes accessed"]) == (mm.flops, mm.hbm_bytes)

    x = jnp.ones((1024,), jnp.float32)
    chain = estimate(lambda x: jnp.sin(jnp.cos(x)), x)
    assert chain.flops == __
    assert chain.hbm_bytes == __
    assert chain.unfused_hbm_bytes == __

    def intensity(n):
        square = jnp.ones((n, n), jnp.float32)
        result = estimate(jnp.matmul, square, square)
        return result.flops / result.hbm_bytes

    assert intensity(512) / intensity(128) == __


def test_what_roofline_makes_of_ten_steps():
    """⚠️ 陷阱 / trap：同样的一步（(8, 64) @ (64, 64) 再 tanh）做 10 次，写法不同，roofline 给出
    的 flops 是一步的几倍？`lax.scan` 10 步、`lax.map` 10 个、`vmap` 一批 10 个，以及上界在运行时
    才知道的 `fori_loop`（它变成 while_loop）。用 roofline 估一个循环，次数要自己乘。
    ⚠️ trap: the same step ((8, 64) @ (64, 64), then tanh) done 10 times, written four ways:
    how many times one step's flops does roofline report? `lax.scan` over 10 steps, `lax.map`
    over 10, `vmap` over a batch of 10, and a `fori_loop` whose bound is known only at run time
    (it becomes a while_loop).
    """
    w = jnp.ones((64, 64), jnp.float32)
    h = jnp.ones((8, 64), jnp.float32)
    batch = jnp.ones((10, 8, 64), jnp.float32)

    def step(h):
        return jnp.tanh(h @ w)

    once = estimate(step, h)
    scanned = estimate(lambda h: lax.scan(lambda c, _: (step(c), None), h, length=10)[0], h)
    mapped = estimate(lambda hs: lax.map(step, hs), batch)
    batched = estimate(jax.vmap(step), batch)
    until_n = estimate(lambda h, n: lax.fori_loop(0, n, lambda i, c: step(c), h), h, 10)
    assert scanned.flops == __ * once.flops
    assert mapped.flops == __ * once.flops
    assert batched.flops == __ * once.flops
    assert until_n.flops == __


def test_roofline_counts_the_bytes_each_collective_moves_on_a_mesh():
    """给 roofline 一个网格和 specs，它把 f 当作 shard_map 的函数体来估计，`ici_bytes` 按网格轴
    记下每个设备在集合通信里发出的字节。网格只需是抽象的（`AbstractMesh`，不要真的 8 个设备）。
    一个 1024 个 float32 的数组按 8 份切开，每个设备 512 字节：把整块传给下一个设备的
    `ppermute` 记 512 字节；`psum` 和 `psum_scatter` 呢？
    Given a mesh and specs, roofline estimates f as the body of a shard_map, and `ici_bytes`
    records per mesh axis the bytes each device sends in collectives. The mesh may be abstract
    (an `AbstractMesh`, no 8 real devices needed). An array of 1024 float32 split 8 ways, 512
    bytes per device: a `ppermute` passing the whole block to the next device records 512
    bytes; what about a `psum` and a `psum_scatter`?
    """
    mesh = AbstractMesh((8,), ("x",), axis_types=(AxisType.Explicit,))
    x = jax.ShapeDtypeStruct((1024,), jnp.float32, sharding=NamedSharding(mesh, P("x")))

    def moved(f, out_specs):
        _, result = roofline.roofline(f, mesh=mesh, in_specs=P("x"), out_specs=out_specs)(x)
        return result.ici_bytes

    ring = [(i, (i + 1) % 8) for i in range(8)]
    assert moved(lambda b: lax.ppermute(b, "x", ring), P("x")) == {"x": 512}
    assert moved(lambda b: lax.psum(b, "x"), P()) == {"x": __}
    assert moved(lambda b: lax.psum_scatter(b, "x", tiled=True), P("x")) == {"x": __}
