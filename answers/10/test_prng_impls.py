"""10 · 六种 PRNG 实现 / the six PRNG implementations.

`jax.random.key(seed, impl=...)` 选择生成随机比特的算法：默认的 threefry2x32（计数器式、
可移植、可分片），threefry4x32，philox2x32 / philox4x32（另一族计数器式哈希），以及 rbg /
unsafe_rbg（用 XLA 的 RngBitGenerator，在加速器上更快，但不同后端、不同版本之间不保证
得到同样的数）。实现跟着 key 走：key 的数据形状、随机流都因实现而不同。

`jax.random.key(seed, impl=...)` picks the algorithm that makes the random bits: the default
threefry2x32 (counter-based, portable, partitionable), threefry4x32, philox2x32 / philox4x32
(another family of counter-based hashes), and rbg / unsafe_rbg (XLA's RngBitGenerator: faster on
accelerators, but the numbers are not guaranteed to match across backends or versions). The
implementation travels with the key: its data shape and its stream depend on it.
"""

import re

import jax
import numpy as np
import pytest

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------


def implementations() -> list[str]:
    """JAX 自己列出的内置实现名（取自配置项 jax_default_prng_impl 拒绝错名时的错误信息）。
    不从 `jax.random.key(0, impl="拼错")` 的错误里取：导入 Pallas TPU 后那里还会多出它私有的
    实现（"pallas_tpu" 等）。
    The built-in implementation names as JAX lists them (from the error of the config option
    jax_default_prng_impl for a misspelt name). Not from the error of `jax.random.key(0,
    impl="misspelt")`: once Pallas TPU is imported, that one also lists its private ones
    ("pallas_tpu", …)."""
    with pytest.raises(ValueError) as info:
        jax.config.update("jax_default_prng_impl", "threefry")  # refused: "must be in [...]"
    return sorted(re.findall(r"'(\w+)'", str(info.value).split(", got")[0]))


def first_bits(key) -> bytes:
    return np.asarray(jax.random.bits(key, (4,))).tobytes()


# ---- 检查 / checks ----------------------------------------------------------------------


def test_six_implementations_each_with_its_key_shape():
    """key 数据的长度由实现决定：它就是算法的“密钥”有几个 32 位字——不一定等于名字里的那个数。
    存档、传输、包装原始 key 数据时，这个长度就是实现的指纹。
    The implementation decides the key-data length: the number of 32-bit words in the
    algorithm's key, which is not always the number in its name. When raw key data is saved,
    sent or wrapped again, that length is the implementation's fingerprint.
    """
    names = implementations()
    assert names == sorted(
        ["threefry2x32", "threefry4x32", "rbg", "unsafe_rbg", "philox2x32", "philox4x32"]
    )
    shapes = {n: jax.random.key_data(jax.random.key(0, impl=n)).shape for n in names}
    assert shapes == {
        "threefry2x32": (2,),
        "threefry4x32": (4,),
        "philox2x32": (1,),
        "philox4x32": (2,),
        "rbg": (4,),
        "unsafe_rbg": (4,),
    }
    # Whatever the implementation, the typed key itself is a scalar.
    assert {jax.random.key(0, impl=n).shape for n in names} == {()}
    assert jax.random.key_impl(jax.random.key(0)) == "threefry2x32"  # the default


def test_the_same_seed_gives_a_different_stream_per_implementation():
    """⚠️ 陷阱 / trap：同一个种子，换了实现就是另一条随机流——换实现等于换了所有的数。但 rbg 和
    unsafe_rbg 用同样的方式生成比特，只是 split / fold_in 的做法不同：从根 key 直接抽的数一样，
    派生出来的 key 就分道扬镳了。数一数有几条不同的流。
    ⚠️ trap: the same seed under another implementation is another stream: switching changes
    every number. But rbg and unsafe_rbg make bits the same way and differ only in how they
    split and fold_in: draws from the root key agree, derived keys part ways. Count the distinct
    streams.
    """
    names = implementations()

    @jax.jit  # one compile per implementation (the key dtype differs)
    def root_and_child(key):
        child = jax.random.split(key)[1]
        return jax.random.bits(key, (4,)), jax.random.bits(child, (4,))

    draws = {n: root_and_child(jax.random.key(0, impl=n)) for n in names}
    from_root = {n: np.asarray(root).tobytes() for n, (root, _) in draws.items()}
    assert len(set(from_root.values())) == 5
    twins = sorted(n for n in names if list(from_root.values()).count(from_root[n]) > 1)
    assert twins == ["rbg", "unsafe_rbg"]
    from_child = {n: np.asarray(child).tobytes() for n, (_, child) in draws.items()}
    assert len(set(from_child.values())) == 6


def test_choose_an_implementation_and_keep_it_with_the_data():
    """选实现有两种方式：`jax.random.key(0, impl=...)`，或者用 `jax.default_prng_impl(...)`
    上下文改默认值。这里要的是：比特由 XLA 的 RngBitGenerator 生成，split / fold_in 却仍用
    Threefry 的那个实现——它的子 key 就是 threefry2x32 的子 key 重复两遍。原始 key 数据不记得
    自己的实现：包装回去时必须再说一遍 impl，否则派生出来的 key 就不是原来那条流。
    Two ways to choose: `jax.random.key(0, impl=...)`, or change the default with the
    `jax.default_prng_impl(...)` context. Wanted here: the implementation whose bits come from
    XLA's RngBitGenerator but whose split / fold_in are still Threefry's, so its child keys are
    threefry2x32's child keys twice over. Raw key data does not remember its implementation:
    wrapping it again needs the impl once more, or the derived keys leave the original stream.
    """
    with jax.default_prng_impl("rbg"):
        key = jax.random.key(0)
        raw = jax.random.PRNGKey(0)  # legacy keys follow the default too
    child = jax.random.key_data(jax.random.split(key)[1])
    threefry_child = jax.random.key_data(
        jax.random.split(jax.random.key(0, impl="threefry2x32"))[1]
    )
    np.testing.assert_array_equal(child, np.tile(threefry_child, 2))
    assert raw.shape == (4,)
    assert jax.random.key_impl(jax.random.key(0)) == "threefry2x32"  # restored on exit
    data = jax.random.key_data(key)
    with raises_exactly(TypeError):
        jax.random.wrap_key_data(data)  # read as a threefry2x32 key: wrong data shape
    again = jax.random.wrap_key_data(data, impl="rbg")
    assert first_bits(again) == first_bits(key)
    # The same stream, derived keys included.
    assert first_bits(jax.random.split(again)[1]) == first_bits(jax.random.split(key)[1])
    assert first_bits(jax.random.fold_in(again, 7)) == first_bits(jax.random.fold_in(key, 7))
