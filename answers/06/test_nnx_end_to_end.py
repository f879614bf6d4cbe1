"""06 · Flax NNX + Optax 端到端 / Flax NNX + Optax end to end."""

import warnings

import flax
import flax.linen as linen
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(4, 16, rngs=rngs)
        self.out = nnx.Linear(16, 1, rngs=rngs)

    def __call__(self, x):
        return self.out(jax.nn.relu(self.hidden(x)))


def _data():
    x = jax.random.normal(jax.random.key(1), (32, 4))
    y = jnp.sum(x, axis=1, keepdims=True)
    return x, y


def test_nnx_optimizer_and_jitted_train_step_lower_the_loss():
    """nnx.Optimizer(model, tx, wrt=nnx.Param) 把 Optax 变换绑定到模型的参数上；nnx.jit 的训练步
    原地更新模型和优化器。❌ 旧写法 / ✅ 推荐写法：Flax 0.11 起 wrt 是必填的关键字参数，update 也
    要同时拿到 (model, grads)；想保留旧调用方式的代码可以改用 nnx.ModelAndOptimizer（它在 0.12
    里仍然存在，但它的文档说明已弃用，会在以后的版本里移除）。
    nnx.Optimizer(model, tx, wrt=nnx.Param) binds an Optax transformation to the model's
    parameters; an nnx.jit train step updates model and optimizer in place. ❌ old / ✅ new:
    since Flax 0.11 wrt is a required keyword argument and update takes (model, grads); code
    that keeps the old calls can switch to nnx.ModelAndOptimizer (still in 0.12, its docstring
    marks it deprecated and due to be removed).
    """
    model = MLP(nnx.Rngs(0))
    opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, opt, x, y):
        def loss_fn(model):
            return jnp.mean((model(x) - y) ** 2)

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        opt.update(model, grads)
        return loss

    x, y = _data()
    losses = [float(train_step(model, opt, x, y)) for _ in range(20)]
    assert losses[-1] < 0.5 * losses[0]
    # The optimizer counts its steps.
    assert int(opt.step[...]) == 20
    # Without wrt the constructor refuses.
    with raises_exactly(TypeError) as info:
        nnx.Optimizer(model, optax.adam(1e-2))
    assert "As of Flax 0.11.0" in str(info.value) and "nnx.ModelAndOptimizer" in str(info.value)
    # The old calls still work on nnx.ModelAndOptimizer: no wrt, update(grads) alone.
    legacy = nnx.ModelAndOptimizer(model, optax.adam(1e-2))
    legacy.update(nnx.grad(lambda m: jnp.mean((m(x) - y) ** 2))(model))
    assert legacy.model is model and int(legacy.step[...]) == 1
    assert "deprecated" in nnx.ModelAndOptimizer.__doc__


def test_value_is_deprecated_use_brackets():
    """❌ 旧写法 / ✅ 推荐写法：`.value` 读取变量已弃用，会发出一个警告（哪一类？）；用 `var[...]`
    读写数组变量。
    ❌ old / ✅ new: reading a variable with `.value` is deprecated and emits a warning (of
    which class?); read and write array variables with `var[...]`.
    """
    model = MLP(nnx.Rngs(0))
    kernel = model.hidden.kernel
    with pytest.warns(Warning) as record:
        old = kernel.value
    assert record[0].category is DeprecationWarning
    assert "variable[...]" in str(record[0].message)
    new = kernel[...]
    np.testing.assert_array_equal(old, new)
    # Writing works the same way: the assignment replaces the array in the Variable.
    kernel[...] = jnp.zeros_like(new)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(jnp.abs(model.hidden.kernel[...]).sum()) == 0.0


def test_split_and_merge_give_a_pure_pytree_of_state():
    """nnx.split 把模型分成静态 graphdef 和 State（一个 pytree）；nnx.merge 把它们装回模型。
    State 的叶子就是参数数组，可以交给 jax.jit、Orbax 或 Optax。
    nnx.split separates a model into a static graphdef and a State (a pytree); nnx.merge puts
    them back together. The State's leaves are the parameter arrays, ready for jax.jit, Orbax or
    Optax.
    """
    model = MLP(nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    leaves = jax.tree.leaves(state)
    assert len(leaves) == 4
    assert sum(leaf.size for leaf in leaves) == 4 * 16 + 16 + 16 * 1 + 1

    @jax.jit
    def forward(state, x):
        return nnx.merge(graphdef, state)(x)

    x, _ = _data()
    np.testing.assert_allclose(forward(state, x), model(x), rtol=1e-6)


def test_linen_keeps_the_parameters_outside_the_module():
    """❌ 旧写法 / ✅ 推荐写法：Flax Linen 的模块（Haiku 见下一个 koan）是无状态的描述：参数放在
    init 返回、apply 接收的一个单独的字典里，直接调用模块会报错；NNX 的模块自己拿着参数。两者的
    参数布局相同：把 Linen 的参数抄进一个 nnx.Linear，算出的结果一模一样，这就是迁移的第一步。
    ❌ old / ✅ new: a Flax Linen module (Haiku: the next koan) is a stateless description: its
    parameters live in a separate dict that init returns and apply takes, and calling the module
    directly raises; an NNX module holds its parameters. The two share a parameter layout: copy Linen's
    parameters into an nnx.Linear and it computes exactly the same, the first step of a
    migration.
    """
    x = jax.random.normal(jax.random.key(1), (4, 16))
    dense = linen.Dense(8)
    variables = dense.init(jax.random.key(0), x)
    assert jax.tree.map(jnp.shape, variables) == {"params": {"bias": (8,), "kernel": (16, 8)}}
    with raises_exactly(flax.errors.CallCompactUnboundModuleError):
        dense(x)  # unbound: no parameters to use
    layer = nnx.Linear(16, 8, rngs=nnx.Rngs(0))
    layer.kernel[...], layer.bias[...] = variables["params"]["kernel"], variables["params"]["bias"]
    np.testing.assert_array_equal(layer(x), dense.apply(variables, x))


def linear_from_haiku(params):
    """把 Haiku 的 Linear 参数（params["linear"] 下的 "w" 和 "b"）放进一个新的 nnx.Linear 并返回它，
    输入、输出大小从 w 的形状读出。约 4 行。
    Return a new nnx.Linear holding Haiku's Linear parameters ("w" and "b" under
    params["linear"]); read its input and output sizes from w's shape. About 4 lines.
    """
    w, b = params["linear"]["w"], params["linear"]["b"]
    layer = nnx.Linear(*w.shape, rngs=nnx.Rngs(0))
    layer.kernel[...], layer.bias[...] = w, b
    return layer


def test_haiku_transforms_a_function_into_init_and_apply():
    """❌ 旧写法 / ✅ 推荐写法：Haiku 的模块只能在 hk.transform 包起来的函数里调用：transform 把函数
    变成一对纯函数 init 和 apply，参数是 init 返回、apply 接收的字典，按模块名（"linear"）分组，
    叫 "w" 和 "b"；在 transform 外面调用模块会报错。把 Haiku 的参数搬进 nnx.Linear（kernel 和
    bias），不论层有多大，它算出的结果都和 apply 一模一样。
    ❌ old / ✅ new: a Haiku module can only be called inside a function wrapped by hk.transform:
    transform turns the function into a pair of pure functions, init and apply, and the
    parameters are a dict that init returns and apply takes, grouped by module name ("linear")
    and named "w" and "b"; calling the module outside transform raises. Move Haiku's
    parameters into an nnx.Linear (kernel and bias): whatever the layer's sizes, it computes
    exactly what apply computes.
    """
    # Haiku is not removed: its README (dm-haiku 0.0.17) puts it in maintenance mode, bug fixes
    # and new JAX releases only, and recommends Flax for new projects. The old-API contrast
    # only: nothing else in the course uses Haiku.
    import haiku as hk

    def forward(x):
        # a random bias, so a layer that keeps NNX's zero bias computes something else
        return hk.Linear(8, b_init=hk.initializers.RandomNormal())(x)

    x = jax.random.normal(jax.random.key(1), (4, 16))
    transformed = hk.transform(forward)
    params = transformed.init(jax.random.key(0), x)
    assert jax.tree.map(jnp.shape, params) == {"linear": {"b": (8,), "w": (16, 8)}}
    with raises_exactly(ValueError):
        forward(x)  # outside transform: no frame to hold the parameters
    layer = linear_from_haiku(params)
    np.testing.assert_array_equal(layer(x), transformed.apply(params, None, x))
    # a second layer whose sizes are drawn at run time: sizes written into the body fit one only
    draw = np.random.default_rng(2)
    d_in, d_out = (int(n) for n in draw.choice(np.arange(9, 16), 2, replace=False))
    x = draw.standard_normal((2, d_in), np.float32)
    w, b = draw.standard_normal((d_in, d_out), np.float32), draw.standard_normal(d_out, np.float32)
    params = {"linear": {"w": w, "b": b}}
    transformed = hk.transform(lambda x: hk.Linear(d_out)(x))
    layer = linear_from_haiku(params)
    assert (layer.in_features, layer.out_features) == (d_in, d_out)
    np.testing.assert_array_equal(layer(x), transformed.apply(params, None, x))


class Classifier(nnx.Module):
    """A pretrained backbone and a new head, the shape of every fine-tuning job (given)."""

    def __init__(self, rngs: nnx.Rngs):
        self.backbone = nnx.Linear(4, 16, rngs=rngs)
        self.head = nnx.Linear(16, 1, rngs=rngs)

    def __call__(self, x):
        return self.head(jax.nn.relu(self.backbone(x)))


HEAD = nnx.All(nnx.Param, nnx.PathContains("head"))  # the head's parameters (given)


def fine_tune_step(model, opt, x, y):
    """微调的一步：只对 HEAD 选中的参数求均方误差损失的梯度（nnx.value_and_grad 的 argnums 用
    nnx.DiffState 给出过滤器），用 opt 更新模型，返回损失。骨干网络的梯度根本不要算。约 4 行。
    One fine-tuning step: take the gradient of the mean squared error with respect to the
    parameters HEAD selects only (nnx.value_and_grad with an nnx.DiffState as argnums), update
    the model with opt, return the loss. The backbone's gradient is not computed at all. About 4
    lines.
    """
    loss_fn = lambda model: jnp.mean((model(x) - y) ** 2)  # noqa: E731
    loss, grads = nnx.value_and_grad(loss_fn, argnums=nnx.DiffState(0, HEAD))(model)
    opt.update(model, grads)
    return loss


def test_fine_tuning_freezes_the_backbone_twice():
    """冻结骨干网络要做两件事：wrt 决定优化器更新什么（它的 Adam 状态也只为这些参数分配），
    DiffState 决定对什么求导。只设 wrt 时骨干不动，但反向传播照样把骨干的梯度算出来再丢掉；
    数一数 jaxpr 里的矩阵乘就看得出来。
    Freezing a backbone takes two things: wrt decides what the optimizer updates (and allocates
    Adam state for those parameters only), DiffState decides what is differentiated. With wrt
    alone the backbone stays put, but the backward pass still computes its gradient and throws
    it away; count the matrix multiplies in the jaxpr to see it.
    """
    model = Classifier(nnx.Rngs(0))
    opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=HEAD)
    x, _ = _data()
    y = jnp.tanh(x[:, :1])
    backbone, head = model.backbone.kernel[...], model.head.kernel[...]
    step = nnx.jit(fine_tune_step)
    losses = [float(step(model, opt, x, y)) for _ in range(10)]
    assert losses[-1] < losses[0]
    np.testing.assert_array_equal(model.backbone.kernel[...], backbone)
    assert bool(jnp.any(model.head.kernel[...] != head))
    moments = nnx.to_pure_dict(nnx.state(opt, nnx.OptState)["opt_state"][0]["mu"])
    assert jax.tree.map(jnp.shape, moments) == {"head": {"bias": (1,), "kernel": (16, 1)}}

    def dots(train_step):
        fresh = Classifier(nnx.Rngs(0))
        fresh_opt = nnx.Optimizer(fresh, optax.adam(1e-2), wrt=HEAD)
        graphdef, state = nnx.split((fresh, fresh_opt))

        def pure(state):
            fresh, fresh_opt = nnx.merge(graphdef, state)
            return train_step(fresh, fresh_opt, x, y)

        return str(jax.make_jaxpr(pure)(state)).count("dot_general")

    def wrt_only_step(model, opt, x, y):
        loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
        opt.update(model, grads)  # the backbone's gradient: computed, then ignored
        return loss

    # Forward: 2 matmuls; backward: the head kernel's gradient, plus, when the backbone is
    # differentiated, the gradient flowing into the hidden layer and the backbone kernel's.
    assert (dots(fine_tune_step), dots(wrt_only_step)) == (3, 5)
