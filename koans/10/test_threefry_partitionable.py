"""10 · jax_threefry_partitionable：分片生成与可复现性 / sharded generation and reproducibility.

threefry 是计数器式生成器：第 i 个随机数 = hash(key, 计数器 i)。`jax_threefry_partitionable`
（它的默认值在 JAX 0.5 改过）决定计数器怎样排布：打开时每个元素的计数器只取决于它在数组里的
位置，所以每个设备只算自己那一块，不用通信；关闭时每个字来自数组前后两半的两个
计数器一起哈希，和设备的块对不上：XLA 仍把哈希分给各个设备，但每个设备随后都要收集
（all-gather）整个数组，才能取出自己那一块。两种排布给出的数不同：这就是旧笔记本的输出
无法复现的原因。

threefry is counter-based: random number i = hash(key, counter i). `jax_threefry_partitionable`
(its default changed in JAX 0.5) decides how the counters are laid out: when on, an element's
counter depends only on its position in the array, so each device computes just its block with
no communication; when off each word hashes two counters taken from the two
halves of the array, which do not line up with the devices' blocks: XLA still spreads the
hashing over the devices, but then every device gathers (all-gather) the whole array to cut out
its block. The two layouts give different numbers: which is why an old notebook's outputs no
longer reproduce.
"""

import json
import re

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import run_python

# ---- 给定代码 / given code -------------------------------------------------------------

N = 8  # 本章的网格用 8 个设备（chapter.toml: devices = 8）/ this chapter's meshes use 8 devices
SHAPE = (64, 16)


def generate(key):
    return jax.random.uniform(key, SHAPE)


def largest_u32_buffer(hlo: str) -> int:
    """编译后 HLO 里最大的 u32 数组有几个元素：一个设备上同时存在的随机比特最多有多少个字。
    The element count of the largest u32 array in compiled HLO: the most random words one
    device holds at once."""
    sizes = [
        int(np.prod([int(d) for d in dims.split(",")]))
        for dims in re.findall(r"u32\[(\d+(?:,\d+)*)\]", hlo)
    ]
    return max(sizes)


OLD_NOTEBOOK = """
import json, jax
print(json.dumps(jax.random.bits(jax.random.key(0), (5,)).tolist()))
"""


def run_old_notebook() -> list[int]:
    """在一个新进程里、按旧默认值（flag 关闭）跑一段“笔记本”，返回它打印的随机比特。
    Run a "notebook" in a fresh process under the old default (flag off) and return the random
    words it printed."""
    out = run_python("-c", OLD_NOTEBOOK, env={"JAX_THREEFRY_PARTITIONABLE": "false"})
    return json.loads(out.strip().splitlines()[-1])


# ---- 检查 / checks ----------------------------------------------------------------------


def test_the_flag_default_and_which_streams_toggling_it_changes():
    """在 0.12 上这个 flag 默认是什么？在 `jax.threefry_partitionable(...)` 上下文里把它换成另一个值
    （只在上下文里）再做同样的事：哪些操作的结果变了？
    What is the flag's default on 0.12? Switch it to the other value inside a
    `jax.threefry_partitionable(...)` context (only there) and do the same things: which results
    change?
    """
    default = jax.config.jax_threefry_partitionable
    assert default is __
    key = jax.random.key(0)
    ops = {
        "split": lambda k: jax.random.key_data(jax.random.split(k, 3)),
        "fold_in": lambda k: jax.random.key_data(jax.random.fold_in(k, 7)),
        "bits": lambda k: jax.random.bits(k, (4,)),
        "normal": lambda k: jax.random.normal(k, (4,)),
    }
    run_all = jax.jit(lambda k: {name: op(k) for name, op in ops.items()})  # one compile each
    new = run_all(key)
    with jax.threefry_partitionable(not default):
        old = run_all(key)
    changed = {name for name in ops if not np.array_equal(new[name], old[name])}
    assert changed == __
    assert jax.config.jax_threefry_partitionable is default  # the context restored it


def test_sharded_generation_equals_unsharded_generation():
    """在 jit 里用 out_shardings 直接生成一个按行切到 8 个设备的随机数组：每个设备只拿到（也只
    算）自己的几行，拼起来和不分片生成的数组逐位相同。
    Generate a random array split by rows over 8 devices directly inside jit with
    out_shardings: each device holds (and computes) only its rows, and together they equal the
    unsharded array bit for bit.
    """
    mesh = jax.make_mesh((N,), ("x",))
    key = jax.random.key(42)
    sharded = jax.jit(generate, out_shardings=__)(key)
    assert len(sharded.sharding.device_set) == N
    assert sharded.addressable_shards[0].data.shape == __
    np.testing.assert_array_equal(sharded, generate(key))


def test_without_the_flag_every_device_gathers_the_whole_array():
    """同一个分片生成程序，分别在 flag 打开和关闭时编译，读编译后的 HLO：每个设备最大的随机
    比特缓冲有多大？关闭时设备之间还要通信（all-gather、collective-permute），打开时一次也
    没有。两种情况下值都和不分片的一致——flag 改变的是代价和数，不是正确性。
    Compile the same sharded generation with the flag on and off and read the compiled HLO: how
    large is each device's largest buffer of random words? With the flag off the devices also
    exchange data (all-gather, collective-permute); with it on they never do. In both cases the
    values match the unsharded ones: the flag changes the cost and the numbers, not correctness.
    """
    mesh = jax.make_mesh((N,), ("x",))
    key = jax.random.key(42)
    largest, collectives = {}, {}
    for flag in (True, False):
        with jax.threefry_partitionable(flag):
            f = jax.jit(generate, out_shardings=NamedSharding(mesh, P("x")))
            hlo = f.lower(key).compile().as_text()
            np.testing.assert_array_equal(f(key), generate(key))
        largest[flag] = largest_u32_buffer(hlo)
        collectives[flag] = hlo.count("all-gather(") + hlo.count("collective-permute(")
    assert largest == {True: __, False: __}
    assert collectives[True] == 0 and collectives[False] > 0


def test_an_old_notebook_reproduces_only_with_the_old_flag():
    """⚠️ 陷阱 / trap：一个按旧默认值（flag 关闭）跑出的笔记本，在今天的 JAX 上同一个种子
    得到不同的数。要复现它，只在一个上下文里把 flag 关掉（不要全局改）。jit 的缓存以这个 flag
    为键：同一个 jit 函数在两种设置下各追踪一次，回到默认设置时不会再追踪。
    ⚠️ trap: a notebook run under the old default (flag off) gets other numbers for the same
    seed on today's JAX. To reproduce it, turn the flag off inside a context only (not
    globally). jit's cache is keyed on the flag: the same jitted function is traced once per
    setting, and not again when the default comes back.
    """
    notebook = run_old_notebook()
    traces = []

    @jax.jit
    def draw(key):
        traces.append(None)  # runs only while tracing
        return jax.random.bits(key, (5,))

    key = jax.random.key(0)
    today = draw(key).tolist()
    assert today != notebook
    with __:
        again = draw(key).tolist()
    assert again == notebook
    assert draw(key).tolist() == today
    assert len(traces) == __
