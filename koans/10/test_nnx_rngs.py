"""10 · Flax NNX 的 nnx.Rngs：命名的流与计数器 / named streams and counters.

`nnx.Rngs` 把 key 管理变成对象状态：每个命名的流（params、dropout……）存一个根 key 和一个
计数器，每要一个 key，就返回 `fold_in(根 key, 计数器)` 并把计数器加 1。所以同样的种子、同样
的调用顺序给出同样的模型；调用顺序一变，数就变。

`nnx.Rngs` turns key management into object state: each named stream (params, dropout, ...)
holds a root key and a counter; each key requested is `fold_in(root key, counter)`, and the
counter goes up by 1. So the same seed and the same order of calls give the same model; change
the order and the numbers change.
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)


def same_keys(a, b) -> bool:
    return bool(np.array_equal(jax.random.key_data(a), jax.random.key_data(b)))


def test_each_stream_folds_in_its_own_counter():
    """`nnx.Rngs(params=0, dropout=1)` 有两条流，各有各的根 key 和计数器。预测计数器，再写出
    第二个 params key 是怎么来的；没有声明的流会报错。
    `nnx.Rngs(params=0, dropout=1)` has two streams, each with its own root key and counter.
    Predict the counters, then write how the second params key was made; a stream that was not
    declared raises.
    """
    rngs = nnx.Rngs(params=0, dropout=1)
    rngs.params()
    second = rngs.params()
    rngs.dropout()
    assert int(rngs.params.count[...]) == __
    assert int(rngs.dropout.count[...]) == __
    assert same_keys(second, jax.random.fold_in(jax.random.key(__), __))
    with raises_exactly(__):
        rngs.noise()


def test_one_seed_means_one_shared_default_stream():
    """⚠️ 陷阱 / trap：`nnx.Rngs(0)` 只有一条 default 流；`rngs.params()` 和 `rngs.dropout()`
    都从它取 key，共用一个计数器。于是先调用哪个会改变另一个拿到的 key。
    ⚠️ trap: `nnx.Rngs(0)` has a single default stream; `rngs.params()` and `rngs.dropout()`
    both take keys from it and share one counter. So calling one first changes the key the other
    gets.
    """
    rngs = nnx.Rngs(0)
    first = rngs.params()
    dropout_key = rngs.dropout()
    assert int(rngs.default.count[...]) == __
    assert same_keys(first, jax.random.fold_in(jax.random.key(0), 0))
    assert same_keys(dropout_key, jax.random.fold_in(jax.random.key(0), __))
    other_order = nnx.Rngs(0)
    assert same_keys(other_order.dropout(), first)  # the dropout stream took the params key


def test_same_seed_same_model_and_modules_consume_keys():
    """同样的种子给出同样的初始化：nnx.Linear 只从 params 流取 key（Rngs(0) 时从 default 流取，
    数就一样）。它取了几个 key？权重一个、偏置一个——即使偏置初始化为 0。Dropout 保存自己的流，
    每次调用推进它，所以两次调用得到不同的掩码。
    The same seed gives the same initialisation: nnx.Linear takes keys only from the params
    stream (from the default stream under Rngs(0), hence the same numbers). How many keys does it
    take? One for the kernel, one for the bias, even though the bias starts at zero. Dropout keeps
    its own stream and advances it on every call, so two calls give two different masks.
    """
    rngs = nnx.Rngs(params=0, dropout=1)
    layer = nnx.Linear(3, 4, rngs=rngs)
    assert int(rngs.params.count[...]) == __
    assert int(rngs.dropout.count[...]) == 0
    same_seed = nnx.Linear(3, 4, rngs=nnx.Rngs(0))
    np.testing.assert_array_equal(layer.kernel[...], same_seed.kernel[...])
    other_seed = nnx.Linear(3, 4, rngs=nnx.Rngs(params=1))
    assert not np.array_equal(layer.kernel[...], other_seed.kernel[...])
    drop = nnx.Dropout(0.5, rngs=rngs)
    x = jnp.ones((4, 8))
    a, b = drop(x), drop(x)
    assert bool(jnp.array_equal(a, b)) is __
