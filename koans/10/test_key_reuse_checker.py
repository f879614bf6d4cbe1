"""10 · key 重用检查器 / the key-reuse checker.

重用 key 不报错，只会悄悄地给出相关的随机数（test_key_patterns.py）。`jax.debug_key_reuse(True)`
（即 `jax_debug_key_reuse` 这个选项）让 JAX 记住每个 key 是否已经用过：用过一次的 key 再用就报错，
急切执行和 jit 里都一样（jit 里是从 jaxpr 静态地查出来的）。`jax.random.clone` 给出一个还能再用
一次的 key：检查器不再抱怨，但抽出来的还是同样的数。

Reusing a key raises nothing; it silently gives correlated numbers (test_key_patterns.py).
`jax.debug_key_reuse(True)` (the `jax_debug_key_reuse` option) makes JAX remember whether each
key has been used: a key used once raises when used again, eagerly and under jit alike (under
jit it is found statically, from the jaxpr). `jax.random.clone` gives a key that may be used
once more: the checker no longer complains, yet the numbers drawn are the same.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import primitives

# ---- 你来实现 / your code ---------------------------------------------------------------


def noise_and_mask(key, shape):
    """一个 key 进来，两样随机的东西出去：标准正态的噪声和 p = 0.5 的 bernoulli 掩码，形状都是
    shape。两者要用不同的 key：把 key 用 jax.random.split 分成两个，第一个给噪声、第二个给掩码。
    在检查器打开时也要能在 jit 里运行。约 2 行。
    One key in, two random things out: standard normal noise and a bernoulli mask with p = 0.5,
    both shaped `shape`. They need different keys: split the key in two with jax.random.split,
    the first for the noise, the second for the mask. It must run under jit with the checker on.
    About 2 lines.
    """
    todo("noise_and_mask: 先 split，再各抽一样 / split, then one draw per key")


# ---- 检查 / checks ----------------------------------------------------------------------


def test_the_checker_catches_a_second_use():
    """⚠️ 陷阱 / trap：检查器关着时，同一个 key 用两次什么也不会发生，两次抽出同样的数。打开
    jax.debug_key_reuse(True) 后，第二次使用在急切执行里报错；jit 里一个函数用同一个 key 抽两次
    也报错（同一个异常类：问的是确切的那个类，不是它的基类）。clone 之后两个 key
    各用一次，检查器不报错：两次抽出的数相同吗？
    ⚠️ trap: with the checker off, using one key twice does nothing but draw the same numbers
    twice. With jax.debug_key_reuse(True), the second use raises eagerly; under jit a function
    that draws twice from one key raises too (the same exception class: the exact class is
    asked, not a base of it). After clone, each of the two keys is used once and the checker is
    silent: are the two draws the same numbers?
    """
    key = jax.random.key(0)
    first, again = jax.random.normal(key, (3,)), jax.random.normal(key, (3,))  # checker off
    np.testing.assert_array_equal(first, again)

    def twice(k):
        return jax.random.normal(k, (3,)) + jax.random.uniform(k, (3,))

    with jax.debug_key_reuse(True):
        fresh = jax.random.key(1)
        jax.random.normal(fresh, (3,))
        with raises_exactly(__):
            jax.random.normal(fresh, (3,))
        with raises_exactly(__):
            jax.jit(twice)(jax.random.key(2))
        original = jax.random.key(3)
        copy = jax.random.clone(original)
        a, b = jax.random.normal(original, (3,)), jax.random.normal(copy, (3,))
    assert bool(jnp.all(a == b)) is __


def test_split_gives_each_draw_its_own_key():
    """写 noise_and_mask：检查器打开时在 jit 里运行；噪声和掩码来自 split 出的两个 key（测试用
    同样的 split 算出应有的值）；jaxpr 里有 random_split，没有 random_clone——clone 只是让检查器
    闭嘴，两样东西仍然来自同一个 key。
    Write noise_and_mask: it runs under jit with the checker on; the noise and the mask come from
    the two keys of a split (the test computes what they must be with the same split); its jaxpr
    holds random_split and no random_clone: clone only silences the checker, and both draws
    would still come from one key.
    """
    key, shape = jax.random.key(7), (4, 5)
    with jax.debug_key_reuse(True):
        noise, mask = jax.jit(noise_and_mask, static_argnums=1)(key, shape)
    k_noise, k_mask = jax.random.split(key)
    np.testing.assert_array_equal(noise, jax.random.normal(k_noise, shape))
    np.testing.assert_array_equal(mask, jax.random.bernoulli(k_mask, 0.5, shape))
    assert noise.shape == mask.shape == shape and mask.dtype == jnp.bool_
    ops = primitives(jax.make_jaxpr(noise_and_mask, static_argnums=1)(key, shape).jaxpr)
    assert "random_split" in ops and "random_clone" not in ops
