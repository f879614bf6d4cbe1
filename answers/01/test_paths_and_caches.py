"""01 · pytree 的键路径与 scan 里原地更新的缓存 / pytree key paths and a cache updated in place
inside a scan.

真实的参数是嵌套的 pytree：按名字挑出一部分叶子（不给偏置做权重衰减、冻结某一层）靠的是键路径
（jax.tree_util.tree_map_with_path、keystr），而不是叶子的顺序。自回归解码把每一步的 key / value
写进一个预先分配好的缓存：scan 的 carry 形状固定，lax.dynamic_update_slice 在被追踪的位置 t 写入
一行，XLA 可以原地更新，不必每步复制或拼接。

Real parameters are nested pytrees: picking leaves by name (no weight decay on biases, a frozen
layer) takes key paths (jax.tree_util.tree_map_with_path, keystr), not the order of the leaves.
Autoregressive decoding writes each step's key / value into a cache allocated up front: scan's
carry keeps a fixed shape, and lax.dynamic_update_slice writes one row at the traced position t,
which XLA can do in place instead of copying or concatenating at every step.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax  # noqa: F401  (the TODO's tool)

from jaxkoans import __, todo  # noqa: F401  (the koans' blanks)


def make_params():
    return {
        "encoder": {"w": jnp.ones((2, 3)), "b": jnp.zeros(3)},
        "head": [jnp.ones((3, 1)), jnp.zeros(1)],
    }


def test_key_paths_name_every_leaf():
    """tree_flatten_with_path 给每片叶子配上它的键路径：字典的键（DictKey）、列表的下标
    （SequenceKey）……keystr 把路径写成一个字符串。预测：这些字符串是什么、按什么顺序？再用
    tree_map_with_path 做一个权重衰减的掩码：只衰减 encoder 里的矩阵。
    tree_flatten_with_path pairs every leaf with its key path: a dict's keys (DictKey), a list's
    indices (SequenceKey)… keystr writes a path as one string. Predict: which strings, in which
    order? Then build a weight-decay mask with tree_map_with_path: decay the encoder's matrices
    only.
    """
    params = make_params()
    leaves_with_paths, _ = jax.tree_util.tree_flatten_with_path(params)
    names = [jax.tree_util.keystr(path) for path, _ in leaves_with_paths]
    assert names == ["['encoder']['b']", "['encoder']['w']", "['head'][0]", "['head'][1]"]

    def decays(path, leaf):
        return leaf.ndim == 2 and jax.tree_util.keystr(path).startswith("['encoder']")

    mask = jax.tree_util.tree_map_with_path(decays, params)
    assert mask == {"encoder": {"b": False, "w": True}, "head": [False, False]}


def test_a_custom_node_names_its_leaves_only_when_registered_with_keys():
    """自己的类要成为 pytree 节点，得先注册。`register_pytree_node` 只交出孩子（一个序列），
    `register_pytree_with_keys` 把每个孩子和它的键（这里是 `GetAttrKey`）一起交出，
    `register_dataclass` 从字段生成这些。预测 keystr 给三种节点的叶子写出什么（也试试
    `simple=True` 和 `separator=`）；再用按名字挑叶子的权重衰减（只衰减名为 w 的叶子）：
    它碰到了哪几个 w？
    A class of your own becomes a pytree node once registered. `register_pytree_node` hands
    over the children only (a sequence), `register_pytree_with_keys` hands each child over with
    its key (here a `GetAttrKey`), and `register_dataclass` derives them from the fields.
    Predict what keystr writes for the leaves of the three kinds of node (try `simple=True`
    and `separator=` as well); then a weight decay that picks leaves by name (decay only the
    leaves named w): which of the w's does it reach?
    """
    tu = jax.tree_util

    class Plain:
        def __init__(self, w, b):
            self.w, self.b = w, b

    class Keyed:
        def __init__(self, w, b):
            self.w, self.b = w, b

    @tu.register_dataclass
    @dataclasses.dataclass
    class Fields:
        w: float
        b: float
        width: int = dataclasses.field(default=3, metadata={"static": True})

    tu.register_pytree_node(Plain, lambda n: ((n.w, n.b), None), lambda _, ch: Plain(*ch))
    tu.register_pytree_with_keys(
        Keyed,
        lambda n: (((tu.GetAttrKey("w"), n.w), (tu.GetAttrKey("b"), n.b)), None),
        lambda _, ch: Keyed(*ch),
    )
    tree = {"layers": [Plain(1.0, 2.0), Keyed(3.0, 4.0), Fields(5.0, 6.0)]}
    paths = [path for path, _ in tu.tree_flatten_with_path(tree)[0]]
    assert len(paths) == 6
    assert tu.keystr(paths[1]) == "['layers'][0][<flat index 1>]"
    assert tu.keystr(paths[2]) == "['layers'][1].w"
    assert tu.keystr(paths[5], simple=True, separator="/") == "layers/2/b"

    def decay(path, leaf):
        return leaf * 0.5 if path[-1] == tu.GetAttrKey("w") else leaf

    decayed = tu.tree_map_with_path(decay, tree)["layers"]
    assert [layer.w for layer in decayed] == [1.0, 1.5, 2.5]


def causal_attention(q, k, v):
    """参照：一次算完的因果注意力（T×T 的分数矩阵）/ the reference: causal attention at once."""
    scores = q @ k.T / np.sqrt(q.shape[-1])
    t = q.shape[0]
    scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, -jnp.inf)
    return jax.nn.softmax(scores, axis=-1) @ v


def decode_with_cache(q, k, v):
    """像自回归解码那样一步一步算因果注意力。q, k, v 的形状都是 [T, D]。
    - 用 lax.scan 走 t = 0 … T-1；carry 是 (k_cache, v_cache)，开始时都是 [T, D] 的零。
    - 第 t 步：用 lax.dynamic_update_slice 把 k[t]、v[t] 写进缓存的第 t 行（不要 .at[].set，
      它变成 scatter；不要拼接，scan 的 carry 形状不能变）；再让 q[t] 只关注缓存的第 0 … t 行
      （之后的行用 where 挡住，再 softmax），输出这一步的 [D]。
    - 返回 (outputs [T, D], (k_cache, v_cache))。不许先算整个 T×T 的分数矩阵；大约 12 行。
    Causal attention step by step, as in autoregressive decoding. q, k, v are [T, D].
    - lax.scan over t = 0 … T-1; the carry is (k_cache, v_cache), both [T, D] zeros at first.
    - Step t: write k[t] and v[t] into row t of the caches with lax.dynamic_update_slice (not
      .at[].set, which becomes a scatter; no concatenation: scan's carry keeps its shape); then
      let q[t] attend to rows 0 … t of the cache only (mask the later rows with where before
      the softmax) and output this step's [D].
    - Return (outputs [T, D], (k_cache, v_cache)). Never build the whole T×T score matrix;
      about 12 lines.
    """
    steps, dim = q.shape
    rows = jnp.arange(steps)

    def step(cache, inputs):
        k_cache, v_cache = cache
        t, q_t, k_t, v_t = inputs
        k_cache = lax.dynamic_update_slice(k_cache, k_t[None, :], (t, 0))
        v_cache = lax.dynamic_update_slice(v_cache, v_t[None, :], (t, 0))
        scores = jnp.where(rows <= t, k_cache @ q_t / np.sqrt(dim), -jnp.inf)
        return (k_cache, v_cache), jax.nn.softmax(scores) @ v_cache

    empty = jnp.zeros((steps, dim), q.dtype)
    caches, outputs = lax.scan(step, (empty, empty), (rows, q, k, v))
    return outputs, caches


def test_decode_with_a_kv_cache_updated_in_place():
    """✍️ 实现 decode_with_cache：KV 缓存让解码每一步只算新的一行，而不是把前缀重算一遍。缓存是
    scan 的 carry，形状从头到尾不变；写入位置 t 是被追踪的值，所以要 dynamic_update_slice。结果
    必须等于一次算完的因果注意力，缓存最后装着全部的 k 和 v。
    Write decode_with_cache: a KV cache lets each decoding step compute one new row instead of
    recomputing the prefix. The cache is scan's carry, with one shape throughout; the write
    position t is a traced value, hence dynamic_update_slice. The result must equal causal
    attention computed at once, and the caches end up holding all of k and v.
    """
    steps, dim = 32, 4
    q, k, v = jax.random.normal(jax.random.key(7), (3, steps, dim))
    outputs, (k_cache, v_cache) = jax.jit(decode_with_cache)(q, k, v)
    np.testing.assert_allclose(outputs, causal_attention(q, k, v), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(k_cache, k)
    np.testing.assert_array_equal(v_cache, v)
    first, _ = decode_with_cache(q[:5], k[:5], v[:5])  # a shorter prompt: the same first rows
    np.testing.assert_allclose(first, outputs[:5], rtol=1e-5, atol=1e-5)
