"""06 · 用 NNX 做张量并行与 FSDP / tensor parallelism and FSDP with NNX."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __  # noqa: F401  (the koans' blanks)

D, H = 64, 256


class MLP(nnx.Module):
    """Megatron-style: `up` split by columns, `down` split by rows over the mesh axis `axis`."""

    def __init__(self, rngs: nnx.Rngs, up_spec, down_spec):
        init = nnx.initializers.lecun_normal()
        self.up = nnx.Linear(
            D, H, use_bias=False, rngs=rngs, kernel_init=nnx.with_partitioning(init, up_spec)
        )
        self.down = nnx.Linear(
            H, D, use_bias=False, rngs=rngs, kernel_init=nnx.with_partitioning(init, down_spec)
        )

    def __call__(self, x):
        return self.down(jax.nn.relu(self.up(x)))


def _per_device_bytes(tree):
    """Bytes that device 0 holds for every array in the pytree."""
    return sum(leaf.addressable_shards[0].data.nbytes for leaf in jax.tree.leaves(tree))


def _total_bytes(tree):
    return sum(leaf.nbytes for leaf in jax.tree.leaves(tree))


def test_with_partitioning_shards_parameters_at_creation():
    """nnx.with_partitioning(init, spec) 给参数挂上分片元数据（键名 out_sharding）；在
    jax.set_mesh(mesh) 下创建模型时，参数一出生就按 spec 分片在网格上。
    nnx.with_partitioning(init, spec) attaches sharding metadata to a parameter (under the key
    out_sharding); a model created under jax.set_mesh(mesh) has its parameters sharded by that
    spec from birth.
    """
    mesh = jax.make_mesh((8,), ("model",), axis_types=(AxisType.Auto,))
    with jax.set_mesh(mesh):
        model = MLP(nnx.Rngs(0), (None, "model"), ("model", None))
    kernel = model.up.kernel
    assert kernel.get_metadata()["out_sharding"] == (None, "model")
    assert kernel[...].sharding.spec == P(None, "model")
    assert kernel[...].addressable_shards[0].data.shape == (64, 32)
    assert model.down.kernel[...].addressable_shards[0].data.shape == (32, 64)
    params = nnx.state(model, nnx.Param)
    assert _per_device_bytes(params) * 8 == _total_bytes(params)


def test_tensor_parallel_mlp_needs_one_all_reduce():
    """张量并行（Megatron）：up 按列切、down 按行切，中间激活一直是分片的，只在最后一次
    all-reduce 把部分和加起来。结果与不分片的计算相同。
    Tensor parallelism (Megatron): up split by columns, down by rows; the hidden activation stays
    sharded and a single all-reduce adds the partial sums at the end. The result equals the
    unsharded computation.
    """
    mesh = jax.make_mesh((8,), ("model",), axis_types=(AxisType.Auto,))
    with jax.set_mesh(mesh):
        model = MLP(nnx.Rngs(0), (None, "model"), ("model", None))
        graphdef, state = nnx.split(model)
        x = jnp.ones((4, D))

        @jax.jit
        def forward(state, x):
            return nnx.merge(graphdef, state)(x)

        y = forward(state, x)
        hlo = forward.lower(state, x).compile().as_text()
    assert hlo.count("all-reduce(") == 1
    up = np.asarray(model.up.kernel[...])
    down = np.asarray(model.down.kernel[...])
    np.testing.assert_allclose(y, np.maximum(np.ones((4, D)) @ up, 0) @ down, rtol=1e-4, atol=1e-5)


def test_fsdp_shards_parameters_and_optimizer_state():
    """FSDP：每个参数沿第一维切到所有设备上；nnx.Optimizer（eager 初始化）的 Adam 状态 mu、nu
    跟随参数的分片，所以参数 + 优化器状态在每个设备上只占 1/8。
    FSDP: every parameter is split along its first dimension over all devices; the Adam state
    (mu, nu) that nnx.Optimizer initialises eagerly follows the parameters' sharding, so
    parameters plus optimizer state take 1/8 per device.
    """
    mesh = jax.make_mesh((8,), ("fsdp",))  # Explicit axes by default
    with jax.set_mesh(mesh):
        model = MLP(nnx.Rngs(0), ("fsdp", None), ("fsdp", None))
        opt = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
    mu = opt.opt_state[0].mu
    assert mu["up"]["kernel"][...].sharding.spec == P("fsdp", None)
    state = (nnx.state(model, nnx.Param), mu, opt.opt_state[0].nu)
    total, per_device = _total_bytes(state), _per_device_bytes(state)
    print(f"FSDP params + Adam state: {total} B in all, {per_device} B per device")
    assert per_device * 8 == total


def test_jit_of_opt_init_on_an_auto_mesh_replicates_the_state():
    """⚠️ 陷阱 / trap：jax.jit(tx.init)(params) 里 zeros_like 的输出分片不跟着参数走，而由追踪时的
    上下文网格决定（第 03 章 test_fsdp.py 在 FSDP 的参数上量了同样三种情况）。同一个 jit：
    不在任何 jax.set_mesh 之下，Adam 状态只落在一个设备上；在一个 Auto 网格的 jax.set_mesh
    之下，编译器自由选择输出分片，它选了哪种 spec？在一个 Explicit 网格的 jax.set_mesh 之下，
    分片是类型的一部分，状态跟着参数切开。eager 的 tx.init 保留参数的分片；Auto 网格上的修复
    办法是 out_shardings=。
    ⚠️ trap: in jax.jit(tx.init)(params) the sharding of zeros_like's output does not follow
    the parameters: the context mesh at trace time decides it (chapter 03's test_fsdp.py
    measures the same three cases on FSDP parameters). The same jit: under no jax.set_mesh the
    Adam state lands on a single device; under jax.set_mesh of an Auto mesh the compiler is
    free to choose the output sharding: which spec does it choose? Under jax.set_mesh of an
    Explicit mesh the sharding is part of the type and the state is split like the parameters.
    Eager tx.init keeps the parameters' sharding; on an Auto mesh the fix is out_shardings=.
    """
    tx = optax.adam(1e-3)
    auto = jax.make_mesh((8,), ("model",), axis_types=(AxisType.Auto,))
    with jax.set_mesh(auto):
        params = nnx.state(MLP(nnx.Rngs(0), (None, "model"), ("model", None)), nnx.Param)
        jitted = jax.jit(tx.init)(params)
        eager = tx.init(params)
        shardings = jax.tree.map(lambda a: a.sharding, eager)
        fixed = jax.jit(tx.init, out_shardings=shardings)(params)
    alone = jax.jit(tx.init)(params)  # the same call outside any set_mesh
    param_bytes = _total_bytes(params)
    assert len(alone[0].mu["up"]["kernel"].sharding.device_set) == 1
    assert jitted[0].mu["up"]["kernel"].sharding.spec == P()
    assert _per_device_bytes(jitted[0].mu) == param_bytes  # a full copy on each device
    assert _per_device_bytes(eager[0].mu) * 8 == param_bytes
    assert _per_device_bytes(fixed[0].mu) * 8 == param_bytes

    explicit = jax.make_mesh((8,), ("model",), axis_types=(AxisType.Explicit,))
    with jax.set_mesh(explicit):
        params = nnx.state(MLP(nnx.Rngs(0), (None, "model"), ("model", None)), nnx.Param)
        state = jax.jit(tx.init)(params)
    assert state[0].mu["up"]["kernel"].sharding.spec == P(None, "model")
    assert isinstance(state[0].mu["up"]["kernel"].sharding, NamedSharding)
