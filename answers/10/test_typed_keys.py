"""10 · 类型化 key 与原始 key / typed keys against raw keys.

JAX 的随机数 key 有两种表示：旧的原始 key（`jax.random.PRNGKey`，一个 uint32 数组）和新的
类型化 key（`jax.random.key`，一个标量，dtype 是 key<…>）。两者底下是同样的比特，但类型化
key 带着自己的 PRNG 实现，并拒绝被当成整数来算。

JAX has two representations of a random key: the old raw key (`jax.random.PRNGKey`, a uint32
array) and the new typed key (`jax.random.key`, a scalar whose dtype is key<…>). Underneath
they hold the same bits, but a typed key carries its PRNG implementation and refuses to be
treated as integers.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)


def is_typed(k) -> bool:
    """k 是类型化 key 数组吗？/ Is k an array of typed keys?"""
    return jax.dtypes.issubdtype(k.dtype, jax.dtypes.prng_key)


def test_a_typed_key_is_a_scalar_of_key_dtype():
    """类型化 key 是一个标量（shape ()），原始 key 是 uint32[2]；用 `jax.dtypes.prng_key` 区分它们。
    split 出来的一批 key 也一样：类型化的形状就是“几个 key”，原始的多一根数据轴。
    A typed key is a scalar (shape ()), a raw key is uint32[2]; `jax.dtypes.prng_key` tells
    them apart. The same holds for a batch from split: the typed batch's shape is just "how many
    keys", the raw batch has an extra data axis.
    """
    key = jax.random.key(0)
    raw = jax.random.PRNGKey(0)
    assert key.shape == ()
    assert raw.shape == (2,)
    assert raw.dtype == jnp.uint32
    assert jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) is True
    assert jax.dtypes.issubdtype(raw.dtype, jax.dtypes.prng_key) is False
    assert jax.random.split(key, 3).shape == (3,)
    assert jax.random.split(raw, 3).shape == (3, 2)
    # The same seed gives the same bits and the same numbers.
    np.testing.assert_array_equal(jax.random.key_data(key), raw)
    np.testing.assert_array_equal(jax.random.normal(key, (3,)), jax.random.normal(raw, (3,)))


def test_prngkey_is_the_old_way_key_is_the_new_one():
    """❌ 旧写法 / ✅ 推荐写法：`jax.random.PRNGKey(seed)` → `jax.random.key(seed)`。
    `jax.legacy_prng_key("error")` 让 jax.random 拒绝原始 key，这样能找出代码里遗留的旧写法。
    ❌ old way / ✅ recommended: `jax.random.PRNGKey(seed)` → `jax.random.key(seed)`.
    Under `jax.legacy_prng_key("error")` jax.random refuses raw keys, which finds the old
    idiom left in a code base.
    """
    old = jax.random.PRNGKey(0)  # ❌ 旧写法
    expected = jax.random.normal(old, (3,))  # allowed by default ("allow")
    with jax.legacy_prng_key("error"):
        with raises_exactly(ValueError) as info:
            jax.random.normal(old, (3,))
        assert "jax.random.key()" in str(info.value)
        new = jax.random.key(0)  # ✅ 推荐写法
        draws = jax.random.normal(new, (3,))
    assert is_typed(new)
    np.testing.assert_array_equal(draws, expected)  # same seed, same numbers


def test_raw_words_and_typed_keys_convert_both_ways():
    """jax.random 里有一对互逆的函数：一个把原始 key 数据包装成类型化 key（例如从旧检查点读出
    的 key），另一个反过来取出类型化 key 底下的 uint32 数据（例如要存盘或打印）。一批 key 的
    原始数据比 key 本身多一根轴：多在哪里、多长？
    jax.random has a pair of inverse functions: one wraps raw key data into a typed key (a key
    read from an old checkpoint, say), the other goes back to the uint32 data underneath a typed
    key (to save or print it). A batch of keys' raw data has one axis more than the keys: where,
    and how long?
    """
    raw = jax.random.PRNGKey(7)  # e.g. loaded from an old checkpoint
    typed = jax.random.wrap_key_data(raw)
    assert is_typed(typed)
    np.testing.assert_array_equal(jax.random.normal(typed, (3,)), jax.random.normal(raw, (3,)))
    back = jax.random.key_data(typed)
    assert back.dtype == jnp.uint32
    np.testing.assert_array_equal(back, raw)
    assert jax.random.split(typed, 4).shape == (4,)  # typed: one key per element
    raw_batch = jax.random.split(raw, 4)  # the old way: raw data in, raw data out
    assert raw_batch.shape == (4, 2)


def test_typed_keys_refuse_integer_arithmetic():
    """⚠️ 陷阱 / trap：类型化 key 不是整数。对它做算术、把它转成 NumPy、和原始 key 拼在一起、
    或者把它当种子再传给 `jax.random.key`，都会报错：先预测异常的类型。
    ⚠️ trap: a typed key is not an integer. Arithmetic on it, converting it to NumPy, stacking
    it with a raw key, or passing it as a seed to `jax.random.key` again all raise: predict the
    type of each exception.
    """
    key = jax.random.key(0)
    raw = jax.random.PRNGKey(0)
    with raises_exactly(TypeError):
        key + 1  # the "add 1 to the seed" habit of raw keys
    with raises_exactly(TypeError):
        np.asarray(key)  # use jax.random.key_data(key)
    with raises_exactly(ValueError):
        jnp.stack([key, raw])  # a key dtype cannot be promoted with uint32
    with raises_exactly(TypeError):
        jax.random.key(key)  # a key is not a seed


def as_typed_key(k, impl=None):
    """返回类型化 key：k 已经是类型化 key（任意批量形状）就原样返回；k 是原始 key 数据
    （最后一根轴是数据轴）就用 impl 包装它。约 3 行；用 `jax.dtypes.prng_key` 判断。
    Return typed keys: if k already holds typed keys (any batch shape) return it unchanged;
    if k is raw key data (the last axis is the data axis) wrap it with impl. About 3 lines;
    test with `jax.dtypes.prng_key`.
    """
    if jax.dtypes.issubdtype(k.dtype, jax.dtypes.prng_key):
        return k
    return jax.random.wrap_key_data(k, impl=impl)


def test_as_typed_key_accepts_both_kinds():
    """写一个兼容层：库的入口同时接受新旧两种 key，内部只用类型化 key。
    Write a compatibility shim: a library's entry point accepts both kinds of key and uses
    only typed keys inside. 判断靠 dtype，不靠形状：一批类型化 key 的形状可以和原始 key 数据一样。
    Decide by dtype, not by shape: a batch of typed keys can have the shape of raw key data.
    """
    typed = jax.random.key(3)
    assert as_typed_key(typed) is typed
    typed_pair = jax.random.split(typed, 2)  # typed keys shaped like one raw key: [2]
    assert as_typed_key(typed_pair) is typed_pair
    raw = jax.random.PRNGKey(3)
    converted = as_typed_key(raw)
    assert is_typed(converted) and converted.shape == ()
    np.testing.assert_array_equal(jax.random.key_data(converted), raw)
    raw_batch = jax.random.split(raw, 5)  # uint32[5, 2]
    assert as_typed_key(raw_batch).shape == (5,)
    rbg_data = jax.random.key_data(jax.random.key(3, impl="rbg"))  # uint32[4]
    rbg = as_typed_key(rbg_data, impl="rbg")
    assert jax.random.key_impl(rbg) == "rbg"
    unsafe_data = jax.random.key_data(jax.random.key(3, impl="unsafe_rbg"))  # uint32[4] too
    assert jax.random.key_impl(as_typed_key(unsafe_data, impl="unsafe_rbg")) == "unsafe_rbg"
    rbg_typed = jax.random.key(3, impl="rbg")
    assert jax.random.key_impl(as_typed_key(rbg_typed)) == "rbg"
    jitted = jax.jit(lambda k: jax.random.uniform(as_typed_key(k), (2,)))
    np.testing.assert_array_equal(jitted(raw), jitted(typed))
