"""05 · 三种回调：pure_callback、io_callback、jax.debug.callback / the three callbacks."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import io_callback
from jax.experimental.buffer_callback import buffer_callback
from jax.sharding import NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api.probes import collectives, primitives


def like(x):
    """The result description a callback needs: same shape and dtype as x."""
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def effect_names(f, *args):
    """The names of the effects JAX records in f's jaxpr, sorted."""
    return sorted(type(e).__name__ for e in jax.make_jaxpr(f)(*args).effects)


def test_pure_callback_calls_python_from_compiled_code():
    """pure_callback 让编译后的程序调用任意 Python / NumPy 函数。JAX 看不见函数内部，
    所以必须事先声明结果的形状和 dtype。预测：回调收到的参数是哪个类的实例？
    pure_callback lets a compiled program call any Python / NumPy function. JAX cannot see
    inside it, so the result's shape and dtype must be declared up front. Predict: of which
    class are the callback's arguments instances?
    """
    received = []

    def host_sinc(x):
        received.append(x)
        return np.sinc(np.asarray(x))

    @jax.jit
    def f(x):
        return jax.pure_callback(host_sinc, like(x), x)

    x = jnp.linspace(-2.0, 2.0, 5)
    np.testing.assert_allclose(f(x), jnp.sinc(x), atol=1e-6)
    kind = jax.Array  # the class of what the callback received
    assert isinstance(received[0], kind) and not issubclass(np.ndarray, kind)
    assert received[0].shape == x.shape
    # The declaration is part of the staged program: the jaxpr knows the result without calling.
    eqn = jax.make_jaxpr(f.__wrapped__)(x).eqns[0]
    assert eqn.primitive.name == "pure_callback"
    assert eqn.params["result_avals"][0].shape == (5,)


def test_unused_results_are_dead_code_only_for_pure_callback():
    """⚠️ 陷阱 / trap: pure_callback 承诺“没有副作用”；io_callback 和 jax.debug.callback 带有
    副作用（effect）。三个调用的结果都没人用：jit 之后各执行几次？降级出的程序里还剩几个
    custom_call？
    pure_callback promises "no side effects"; io_callback and jax.debug.callback carry an
    effect. Nobody uses any of the three results: how many times does each run once jitted? How
    many custom_calls are left in the lowered program?
    """
    calls = {"pure": 0, "io": 0, "debug": 0}

    def count(kind):
        def callback(*args):
            calls[kind] += 1
            return args[0] if args else None

        return callback

    def f(x):
        jax.pure_callback(count("pure"), like(x), x)  # result unused
        io_callback(count("io"), like(x), x)  # result unused
        jax.debug.callback(count("debug"), x)
        return x * 2

    x = jnp.ones(3)
    jax.block_until_ready(jax.jit(f)(x))
    jax.effects_barrier()
    assert calls == {"pure": 0, "io": 1, "debug": 1}
    # The jaxpr still holds all three; what does lowering keep?
    hlo = jax.jit(f).lower(x).as_text()
    assert len(jax.make_jaxpr(f)(x).eqns) == 4
    assert hlo.count("stablehlo.custom_call") == 2


def test_pure_callback_can_be_hoisted_out_of_a_loop():
    """⚠️ 陷阱 / trap: 纯回调承诺没有副作用，编译器可以像对待其他纯运算一样移动、合并它；
    io_callback 没有这个承诺。一个 5 步的 scan，循环体里一个 pure_callback（参数不随循环变化）、
    一个 io_callback：jit 之后各调用几次？
    A pure callback promises no side effects, so the compiler may move and merge it like any
    other pure operation; an io_callback makes no such promise. A 5-step scan whose body holds a
    pure_callback (its argument the same at every step) and an io_callback: once jitted, how
    many times is each called?
    """
    calls = {"pure": 0, "io": 0}

    def count(kind):
        def callback(v):
            calls[kind] += 1
            return np.asarray(v)

        return callback

    def f(x):
        def step(carry, _):
            p = jax.pure_callback(count("pure"), like(x), x)  # x is loop-invariant
            i = io_callback(count("io"), like(x), x)
            return carry + p + i, None

        return lax.scan(step, jnp.zeros_like(x), None, length=5)[0]

    x = jnp.ones(2)
    np.testing.assert_allclose(jax.jit(f)(x), 10 * np.ones(2))
    jax.effects_barrier()
    assert calls == {"pure": 1, "io": 5}


def test_vmap_of_a_pure_callback_needs_a_vmap_method():
    """JAX 不知道回调能不能处理一整批数据，所以 vmap 一个没有 vmap_method 的 pure_callback
    会报错；vmap_method 说明回调如何接收批次。
    JAX cannot know whether a callback handles a whole batch, so vmapping a pure_callback
    without vmap_method raises; vmap_method says how the callback receives the batch.
    """
    calls = []

    def host_square(v):
        calls.append(np.shape(v))
        return np.asarray(v) ** 2

    def square(x, method):
        return jax.pure_callback(host_square, like(x), x, vmap_method=method)

    xs = jnp.arange(6.0).reshape(3, 2)
    with raises_exactly(NotImplementedError) as info:
        jax.vmap(lambda x: square(x, None))(xs)
    assert "vmap_method" in str(info.value)
    # One call for the whole batch: the callback must already work on a leading batch axis.
    ys = jax.vmap(lambda x: square(x, "expand_dims"))(xs)
    np.testing.assert_allclose(ys, xs**2)
    assert calls == [(3, 2)]


def test_vmap_methods_decide_what_the_callback_sees():
    """vmap_method 的三种主要取法：sequential、expand_dims、broadcast_all。a 有批次（3 行、每行 2
    个数），b 由整批共用：每种取法下回调被调用几次，每次看到的 (a, b) 各是什么形状？名字就是线索。
    The three main vmap_methods: sequential, expand_dims and broadcast_all. a is batched (3 rows
    of 2), b shared by the whole batch: under each method, how many calls does the callback get,
    and which shapes of (a, b) does each call see? The names are the clue.
    """
    seen = {}

    def run(method):
        shapes = seen.setdefault(method, [])

        def host_add(a, b):
            shapes.append((np.shape(a), np.shape(b)))
            return np.asarray(a) + np.asarray(b)

        def add(a, b):
            return jax.pure_callback(host_add, like(a), a, b, vmap_method=method)

        # a is batched (3 rows of 2), b is shared by the whole batch
        return jax.vmap(add, in_axes=(0, None))(jnp.ones((3, 2)), jnp.arange(2.0))

    for method in ("sequential", "expand_dims", "broadcast_all"):
        np.testing.assert_allclose(run(method), np.ones((3, 2)) + np.arange(2.0))
    assert seen["sequential"] == [((2,), (2,))] * 3
    assert seen["expand_dims"] == [((3, 2), (1, 2))]
    assert seen["broadcast_all"] == [((3, 2), (3, 2))]


def test_only_the_debug_callback_survives_grad():
    """⚠️ 陷阱 / trap: pure_callback 和 io_callback 都没有 JVP 规则，grad 直接报错：抛出什么
    异常？jax.debug.callback 不妨碍求导；预测：求导时它看到的是原始值（primal）、切向量还是
    余切？
    Neither pure_callback nor io_callback has a JVP rule, so grad raises: which exception?
    jax.debug.callback does not stand in the way of differentiation. Predict: under grad, does
    it see the primal values, the tangents or the cotangents?
    """
    x = jnp.arange(3.0)

    def with_pure(x):
        return jax.pure_callback(np.sin, like(x), x).sum()

    def with_io(x):
        return io_callback(np.sin, like(x), x).sum()

    with raises_exactly(ValueError) as info:
        jax.grad(with_pure)(x)
    assert "custom_jvp" in str(info.value)  # the message names the way out
    with raises_exactly(ValueError):
        jax.grad(with_io)(x)

    seen = []

    def with_debug(x):
        jax.debug.callback(lambda v: seen.append(np.asarray(v)), x)
        return (x**2).sum()

    np.testing.assert_allclose(jax.grad(with_debug)(x), 2 * x)
    jax.effects_barrier()
    np.testing.assert_array_equal(seen[0], [0.0, 1.0, 2.0])


@jax.custom_jvp
def host_sin(x):
    """sin computed by NumPy on the host."""
    return jax.pure_callback(np.sin, like(x), x, vmap_method="expand_dims")


@host_sin.defjvp
def host_sin_jvp(primals, tangents):
    """Return (host_sin(x), cos(x) * t), with cos(x) also computed on the host by a
    pure_callback of np.cos (give it a vmap_method so vmap keeps working). About 4 lines.
    返回 (host_sin(x), cos(x) * t)；cos(x) 也用 pure_callback 在主机上算（记得给 vmap_method）。
    """
    (x,), (t,) = primals, tangents
    y = host_sin(x)
    cos = jax.pure_callback(np.cos, like(x), x, vmap_method="expand_dims")
    return y, cos * t


def test_custom_jvp_makes_a_callback_differentiable():
    """✅ 推荐写法 / recommended: 给回调包一层 custom_jvp，自己提供导数，grad、jit、vmap
    就都能用了。写出 host_sin 的 JVP 规则。
    Wrap the callback in custom_jvp and supply the derivative yourself: grad, jit and vmap all
    work. Write host_sin's JVP rule.
    """
    x = jnp.linspace(-1.0, 2.0, 4)
    y, t = jax.jvp(host_sin, (x,), (jnp.ones_like(x),))
    np.testing.assert_allclose(y, jnp.sin(x), rtol=1e-6)
    np.testing.assert_allclose(t, jnp.cos(x), rtol=1e-6)
    wide = jnp.linspace(-9.0, 9.0, 7)  # 每个周期都对 / right over every period
    _, t_wide = jax.jvp(host_sin, (wide,), (jnp.ones(7),))
    np.testing.assert_allclose(t_wide, jnp.cos(wide), atol=1e-6)
    g = jax.jit(jax.grad(lambda x: (host_sin(x) ** 2).sum()))(x)
    np.testing.assert_allclose(g, 2 * jnp.sin(x) * jnp.cos(x), rtol=1e-5)
    per_row = jax.vmap(jax.grad(lambda v: host_sin(v).sum()))(x.reshape(2, 2))
    np.testing.assert_allclose(per_row, jnp.cos(x).reshape(2, 2), rtol=1e-6)
    # The derivative really comes from the host: two callbacks in the gradient's jaxpr.
    jaxpr = str(jax.make_jaxpr(jax.grad(lambda v: host_sin(v).sum()))(x))
    assert jaxpr.count("pure_callback[") == 2
    # 设备上只剩乘以 t 这一步 / on the device only the product with t is left
    jvp_jaxpr = jax.make_jaxpr(lambda v, dv: jax.jvp(host_sin, (v,), (dv,)))(x, jnp.ones_like(x))
    assert primitives(jvp_jaxpr) - {"custom_jvp_call", "pure_callback"} == {"mul"}


def test_effects_and_ordering_of_io_callbacks():
    """jaxpr 记录每个回调的副作用（effect）。预测：pure_callback、io_callback 和
    ordered=True 的 io_callback 各记下哪些副作用（类名）？哪一个编译后的程序多了一个 token
    参数，把调用串起来、保证按程序顺序执行？
    The jaxpr records each callback's effects. Predict the effects (class names) recorded for
    pure_callback, io_callback and io_callback with ordered=True. Which of their compiled
    programs gains a token argument that threads the calls together so they run in program
    order?
    """
    x = jnp.ones(2)

    def pure(x):
        return jax.pure_callback(np.negative, like(x), x)

    def unordered(x):
        return io_callback(np.negative, like(x), x)

    def ordered(x):
        return io_callback(np.negative, like(x), x, ordered=True)

    assert effect_names(pure, x) == []
    assert effect_names(unordered, x) == ["IOEffect"]
    assert effect_names(ordered, x) == ["OrderedIOEffect"]

    def signature(f):
        text = jax.jit(f).lower(x).as_text()
        return next(line for line in text.splitlines() if "func.func public @main" in line)

    tokens = ("stablehlo.token" in signature(unordered), "stablehlo.token" in signature(ordered))
    assert tokens == (False, True)

    # What it is for: a host-side log that must keep the loop's order.
    log = []

    def record(i):
        log.append(int(i))

    def loop(xs):
        def step(carry, i):
            io_callback(record, None, i, ordered=True)
            return carry + i, None

        return lax.scan(step, 0, xs)[0]

    assert int(jax.jit(loop)(jnp.arange(5))) == 10
    jax.effects_barrier()
    assert log == [0, 1, 2, 3, 4]


def test_effectful_callbacks_run_once_per_element_under_vmap():
    """有副作用的回调没有 vmap_method 可选。预测：vmap 一个 4 行的批次时，io_callback 和
    jax.debug.callback 的每次调用各看到什么形状、一共几次？ordered=True 的 io_callback 能
    vmap 吗（批次里的顺序是什么意思）？
    An effectful callback has no vmap_method to choose. Predict: vmapped over a batch of 4 rows,
    which shape does each call of io_callback and of jax.debug.callback see, and how many calls
    are there? Can an io_callback with ordered=True be vmapped (what would order mean inside a
    batch)?
    """
    xs = jnp.ones((4, 2))
    io_shapes, debug_shapes = [], []

    def host_copy(v):
        io_shapes.append(np.shape(v))
        return np.asarray(v)

    def f(x):
        jax.debug.callback(lambda v: debug_shapes.append(np.shape(v)), x)
        return io_callback(host_copy, like(x), x)

    np.testing.assert_allclose(jax.vmap(f)(xs), xs)
    jax.effects_barrier()
    assert io_shapes == [(2,)] * 4
    assert debug_shapes == [(2,)] * 4

    def g(x):
        return io_callback(host_copy, like(x), x, ordered=True)

    with raises_exactly(ValueError) as info:
        jax.vmap(g)(xs)
    assert "ordered" in str(info.value)


def cumsum_in_place(x):
    """✍️ 用 buffer_callback 在主机上算 x 沿最后一根轴的累加和（np.cumsum），直接写进输出缓冲区：
    回调的参数是 (ctx, out, x)，out 和 x 是 Buffer（np.asarray 能看成 NumPy 数组），回调不返回
    任何值；让输出与输入 0 共用缓冲区（input_output_aliases），并选一个让 vmap 只调用一次、把
    整批交给回调的 vmap_method。大约 5 行。
    Compute x's running sum along its last axis on the host (np.cumsum) with buffer_callback,
    writing straight into the output buffer: the callback takes (ctx, out, x), out and x being
    Buffers (np.asarray views them as NumPy arrays), and returns nothing; have the output share
    input 0's buffer (input_output_aliases), and pick a vmap_method under which vmap calls once
    and hands the callback the whole batch. About 5 lines.
    """

    def fill(ctx, out, x):
        np.cumsum(np.asarray(x), axis=-1, out=np.asarray(out))

    return buffer_callback(
        fill, like(x), input_output_aliases={0: 0}, vmap_method="broadcast_all"
    )(x)


def test_buffer_callback_writes_the_output_buffer_in_place():
    """✍️ 实现 cumsum_in_place。pure_callback 的回调返回一个新的 NumPy 数组，JAX 再把它复制进
    输出；jax.experimental.buffer_callback 把 XLA 的输出缓冲区本身交给回调，让它原地写（HLO 里
    是另一个 custom_call 目标）。加上 input_output_aliases 和参数捐赠，输出就复用输入的缓冲区，
    整个程序没有一次 copy；不捐赠时 XLA 先复制输入，调用方的数组不变。
    Write cumsum_in_place. pure_callback's callback returns a new NumPy array, which JAX then
    copies into the output; jax.experimental.buffer_callback hands the callback XLA's output
    buffer itself to write in place (another custom_call target in the HLO). With
    input_output_aliases and a donated argument the output reuses the input's buffer, and the
    program holds no copy at all; without donation XLA copies the input first and the caller's
    array is left as it was.
    """
    want = np.cumsum(np.arange(15.0).reshape(3, 5), axis=-1)

    donated = jax.jit(cumsum_in_place, donate_argnums=0)
    x = jnp.arange(5.0)
    text = donated.lower(x).compile().as_text()
    (call,) = [line for line in text.splitlines() if "custom-call(" in line]
    assert 'custom_call_target="xla_buffer_python_cpu_callback"' in call
    assert "input_output_alias={ {}: (0, {}, may-alias) }" in text.splitlines()[0]
    assert text.count(" copy(") == 0
    np.testing.assert_array_equal(donated(jnp.arange(5.0)), want[0])

    kept = jax.jit(cumsum_in_place)
    assert kept.lower(x).compile().as_text().count(" copy(") == 1
    np.testing.assert_array_equal(kept(x), want[0])
    np.testing.assert_array_equal(x, np.arange(5.0))  # the caller's array is untouched

    batched = jax.jit(jax.vmap(cumsum_in_place), donate_argnums=0)
    xs = jnp.arange(15.0).reshape(3, 5)
    text = batched.lower(xs).compile().as_text()
    assert "while" not in text and text.count("custom-call(") == 1
    assert text.count(" copy(") == 0
    np.testing.assert_array_equal(batched(xs), want)


def rows_on_two_devices(rows=4):
    """A (rows, 2) float32 array whose rows are split over the chapter's two CPU devices."""
    mesh = jax.make_mesh((2,), ("rows",), axis_types=(jax.sharding.AxisType.Auto,))
    x = jax.device_put(np.arange(rows * 2.0, dtype=np.float32).reshape(rows, 2), NamedSharding(mesh, P("rows")))
    return mesh, x


def test_a_pure_callback_gathers_a_sharded_operand():
    """⚠️ 陷阱 / trap: x 的行分在两个设备上。pure_callback 的回调是 XLA 看不见内部的主机函数，
    编译器不能替它把数组切开；jax.debug.callback(..., partitioned=True) 声明回调可以按分片运行。
    预测：两种回调各被调用几次，每次看到什么形状？编译后的程序里各有什么集合通信？
    x's rows live on two devices. A pure_callback's callback is a host function XLA cannot see
    into, so the compiler cannot split the array for it; jax.debug.callback(...,
    partitioned=True) declares that the callback may run per shard. Predict: how many times is
    each callback called, and with what shape each time? Which collectives does each compiled
    program hold?
    """
    _, x = rows_on_two_devices()
    pure_shapes, debug_shapes = [], []

    def host_double(v):
        pure_shapes.append(np.shape(v))
        return np.asarray(v) * 2

    def record(v):
        debug_shapes.append(np.shape(v))

    gathered = jax.jit(lambda x: jax.pure_callback(host_double, like(x), x))
    np.testing.assert_array_equal(gathered(x), np.arange(8.0).reshape(4, 2) * 2)
    assert pure_shapes == [(4, 2)]
    assert list(collectives(gathered.lower(x).compile().as_text())) == ["all-gather"]

    def observe(x):
        jax.debug.callback(record, x, partitioned=True)
        return x + 1

    per_shard = jax.jit(observe)
    np.testing.assert_array_equal(per_shard(x), np.arange(8.0).reshape(4, 2) + 1)
    jax.effects_barrier()
    assert debug_shapes == [(2, 2), (2, 2)]
    text = per_shard.lower(x).compile().as_text()
    assert collectives(text) == {}
    assert 'custom_call_target="xla_ffi_partitioned_python_cpu_callback"' in text


def test_io_callback_runs_on_the_device_its_sharding_names():
    """io_callback（和 pure_callback）的 sharding= 决定由哪个设备的程序发起调用、结果放在哪个设备上；
    它只接受 SingleDeviceSharding（一个设备），不接受把数组切开的 NamedSharding。补全：让回调
    的结果落在第二个设备上。预测：传入 NamedSharding 时抛出什么异常？
    io_callback's (and pure_callback's) sharding= decides which device's program makes the call
    and holds its result; it takes a SingleDeviceSharding (one device), not a NamedSharding
    that splits the array. Complete: put the callback's result on the second device. Predict:
    what does a NamedSharding raise?
    """
    mesh, x = rows_on_two_devices()

    def host_plus_one(v):
        return np.asarray(v) + 1

    def f(x):
        y = io_callback(host_plus_one, like(x), x, sharding=SingleDeviceSharding(jax.devices()[1]))
        return y * 2

    on_second = jax.jit(f)
    np.testing.assert_array_equal(on_second(x), (np.arange(8.0).reshape(4, 2) + 1) * 2)
    (call,) = [line for line in on_second.lower(x).as_text("hlo").splitlines() if "custom-call(" in line]
    assert "sharding={maximal device=1}" in call

    split = jax.jit(lambda x: io_callback(host_plus_one, like(x), x, sharding=NamedSharding(mesh, P("rows"))))
    with raises_exactly(NotImplementedError) as info:
        split(x)
    assert "SingleDeviceSharding" in str(info.value)


def on_each_shard(host_fn, x, mesh):
    """✍️ 让 mesh 的 "rows" 轴上的每个设备各自把自己那几行交给主机函数 host_fn（用
    pure_callback），不 all-gather。host_fn 收一个 (r, c) 的 float32 数组，返回 (r,) 的
    float32；结果是各块结果按行拼起来的 (x.shape[0],) 数组，同样按 "rows" 切开。大约 6 行。
    Have every device of mesh's "rows" axis hand its own rows to the host function host_fn
    (with pure_callback), with no all-gather. host_fn takes an (r, c) float32 array and
    returns (r,) float32; the result is the blocks' results joined by rows, an (x.shape[0],)
    array split over "rows" too. About 6 lines.
    """

    def block(v):
        return jax.pure_callback(host_fn, jax.ShapeDtypeStruct(v.shape[:1], v.dtype), v)

    return jax.shard_map(block, mesh=mesh, in_specs=P("rows"), out_specs=P("rows"))(x)


def test_a_callback_inside_shard_map_sees_one_block_per_device():
    """✍️ 实现 on_each_shard。在 jax.shard_map 里，程序就是“每个设备上的程序”：里面的
    pure_callback 由每个设备用自己的块各调用一次，编译后的 HLO 里没有集合通信。这是在分片数据
    上调用主机代码而不把整个数组搬到一处的办法。
    Write on_each_shard. Inside jax.shard_map the program is the per-device program: a
    pure_callback in it is called once by each device with its own block, and the compiled HLO
    holds no collective. This is how host code runs on sharded data without moving the whole
    array to one place.
    """
    mesh, x = rows_on_two_devices(6)
    seen = []

    def row_sums_of_squares(v):
        seen.append(np.shape(v))
        return (np.asarray(v) ** 2).sum(axis=1)

    run = jax.jit(on_each_shard, static_argnums=(0, 2))
    y = run(row_sums_of_squares, x, mesh)
    np.testing.assert_allclose(y, (np.arange(12.0).reshape(6, 2) ** 2).sum(axis=1))
    assert seen == [(3, 2), (3, 2)]
    assert y.sharding.spec == P("rows")
    assert collectives(run.lower(row_sums_of_squares, x, mesh).compile().as_text()) == {}

    # 网格是调用者给的：只有一个设备时，那个设备拿到全部 6 行 / the mesh is the caller's: with
    # one device, that device hands over all 6 rows
    one = jax.make_mesh((1,), ("rows",), axis_types=(jax.sharding.AxisType.Auto,))
    seen.clear()
    y = run(row_sums_of_squares, jax.device_put(x, NamedSharding(one, P("rows"))), one)
    np.testing.assert_allclose(y, (np.arange(12.0).reshape(6, 2) ** 2).sum(axis=1))
    assert seen == [(6, 2)] and y.sharding.mesh == one
