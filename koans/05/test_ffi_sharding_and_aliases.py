"""05 · FFI 调用走出一个 CPU 内核之外 / an FFI call beyond one CPU kernel.

同一个 csrc/leaky_sum.cc 内核（由 jaxkoans.api.cbuild 编译，没有 C++ 编译器时这些 koan 跳过；
custom_partitioning 的 koan 先在内核的 jnp 替身上检查 partition 规则，再跳过）：
原地写输出（input_output_aliases 与参数捐赠），在分片的输入上调用（jit 会把输入收集起来，
shard_map 让每个设备只处理自己的分片，custom_partitioning 让内核自己说怎样分片），以及为 GPU
注册处理函数并为 CUDA 降级（这台机器只能降级，不能运行）。

The same csrc/leaky_sum.cc kernel (built by jaxkoans.api.cbuild; without a C++ compiler these koans
are skipped, the custom_partitioning koan after checking its rule on a jnp twin of the kernel): writing the output in place (input_output_aliases and argument donation), calling
it on sharded input (jit gathers the input, shard_map has each device work on its own shard,
custom_partitioning lets the kernel say how it shards), and registering a handler for GPU and lowering for CUDA (this machine can lower, not run).
"""

import functools
import re  # noqa: F401  (buffer_aliases may parse with it)

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jaxlib import xla_client

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api import cbuild


def like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def leaky_sum_numpy(x, decay):
    """The plain reference: a Python loop over the last axis."""
    x = np.asarray(x, dtype=np.float64)
    y, carry = np.empty_like(x), np.zeros(x.shape[:-1])
    for i in range(x.shape[-1]):
        carry = decay * carry + x[..., i]
        y[..., i] = carry
    return y


def copies(compiled):
    """How many copy instructions XLA's optimized program holds."""
    return compiled.as_text().count(" copy(")


def test_input_output_aliases_let_the_kernel_write_in_place():
    """input_output_aliases={输入序号: 输出序号} 告诉 XLA：内核把这个输出直接写进那个输入的
    缓冲区（leaky_sum 逐元素先读后写，可以原地做）。调用方的数组不能被改，所以 XLA 先复制一份；
    只有把参数也捐赠掉（donate_argnums），这次复制才消失。不加别名、只捐赠也还要复制。
    input_output_aliases={input index: output index} tells XLA that the kernel writes that output
    straight into that input's buffer (leaky_sum reads each element before writing it, so it can
    work in place). The caller's array must not change, so XLA copies it first; only when the
    argument is donated as well (donate_argnums) does the copy go away. Donating without the
    alias still copies.
    """
    target = cbuild.ffi_target("koans_leaky_sum_aliases", "leaky_sum.cc", "LeakySum")
    x = jnp.arange(1.0, 9.0).reshape(2, 4)

    def in_place(x):
        return jax.ffi.ffi_call(target, like(x), input_output_aliases=__)(
            x, decay=np.float32(0.5), reverse=False
        )

    def fresh(x):
        return jax.ffi.ffi_call(target, like(x))(x, decay=np.float32(0.5), reverse=False)

    np.testing.assert_allclose(jax.jit(in_place)(x), leaky_sum_numpy(x, 0.5), rtol=1e-6)
    assert "output_operand_aliases" in jax.jit(in_place).lower(x).as_text()
    counted = {
        "alias": copies(jax.jit(in_place).lower(x).compile()),
        "alias + donate": copies(jax.jit(in_place, donate_argnums=0).lower(x).compile()),
        "donate only": copies(jax.jit(fresh, donate_argnums=0).lower(x).compile()),
    }
    assert counted == __

    y = jnp.arange(1.0, 9.0).reshape(2, 4)
    out = jax.jit(in_place, donate_argnums=0)(y)
    assert y.is_deleted()  # donated: the caller gave its buffer away
    np.testing.assert_allclose(
        out, leaky_sum_numpy(np.arange(1.0, 9.0).reshape(2, 4), 0.5), rtol=1e-6
    )


def buffer_aliases(compiled):
    """读 compiled.as_text() 的第一行（HloModule 头）里的别名表
    `input_output_alias={ {输出序号}: (参数序号, {}, may-alias), ... }`，返回
    {输出序号: 参数序号}（都是 int）：哪个输出就写在哪个参数的缓冲区里。只有一个输出（不是元组）
    时它的序号写成 {}，算作 0；头里没有这张表时返回 {}。只读第一行：程序正文里每个内核调用也有
    自己的 output_to_operand_aliasing，那不是这张表。大约 3 行。

    Read the alias table in the first line (the HloModule header) of compiled.as_text(),
    `input_output_alias={ {output index}: (parameter number, {}, may-alias), ... }`, and
    return {output index: parameter number} (ints): which output lives in which parameter's
    buffer. A single (non-tuple) output has the index {}: count it as 0; no table in the header
    gives {}. Read the first line only: in the program's body each kernel call has its own
    output_to_operand_aliasing, which is not this table. About 3 lines.
    """
    todo("buffer_aliases: parse the HloModule header / 解析 HloModule 头")


def test_the_compiled_header_names_the_buffer_each_output_reuses():
    """✍️ 实现 buffer_aliases：数 copy 只说明复制了几次；要确认别名生效，读编译后程序的头：
    input_output_alias 表列出每个输出复用了哪个参数的缓冲区。这张表来自捐赠：jit 降级时按输出的
    顺序，给每个输出配第一个还没配过、形状和 dtype 都相同的捐赠参数，记在 StableHLO 的
    tf.aliasing_output 上；
    内核的 input_output_aliases 只说内核想写进哪个操作数。两者一致时才没有复制。
    ⚠️ 陷阱 / trap：头里有表不等于内核原地写：只捐赠、不加内核别名时表照样在，内核写进新缓冲区，
    再复制过去；两个形状相同的输出交换了顺序时，jit 的配对和内核的别名对不上，XLA 复制四次
    （两个输入先各复制一份给内核覆盖，两个结果再各复制进另一个参数的缓冲区）。
    序号可以有两位：十一个捐赠的输入按相反的顺序返回时，第 0 个输出写在第 10 个参数里。
    Write buffer_aliases: counting copies says only how many there were; to confirm an alias,
    read the compiled program's header: its input_output_alias table lists which parameter's
    buffer each output reuses. The table comes from donation: when jit lowers, it gives each
    output, in order, the first donated argument of the same shape and dtype not yet taken, and
    records it as tf.aliasing_output in the StableHLO; the kernel's input_output_aliases only says which
    operand the kernel wants to write into. Only when the two agree is there no copy.
    A table in the header does not mean the kernel wrote in place: donating without the
    kernel's alias gives the same table, the kernel writes a fresh buffer and it is copied
    over; and when two outputs of the same shape come back swapped, jit's pairing and the
    kernel's aliases disagree and XLA copies four times (each input copied first for the kernel
    to overwrite, each result copied into the other parameter's buffer).
    Numbers may take two digits: eleven donated inputs handed back in reverse order put output 0
    in parameter 10's buffer.
    """
    target = cbuild.ffi_target("koans_leaky_sum_header", "leaky_sum.cc", "LeakySum")

    def kernel(v, alias):
        call = jax.ffi.ffi_call(target, like(v), input_output_aliases={0: 0} if alias else None)
        return call(v, decay=np.float32(0.5), reverse=False)

    def compiled(fn, *args, **donation):
        return jax.jit(fn, **donation).lower(*args).compile()

    def in_place(v):
        return kernel(v, alias=True)

    def fresh(v):
        return kernel(v, alias=False)

    def swapped(a, b):
        return kernel(b, alias=True), kernel(a, alias=True)

    x, y = jnp.arange(8.0).reshape(2, 4), jnp.arange(12.0).reshape(3, 4)
    kept = compiled(in_place, x)
    assert buffer_aliases(kept) == {} and copies(kept) == 1
    donated = compiled(in_place, x, donate_argnums=0)
    assert buffer_aliases(donated) == {0: 0} and copies(donated) == 0
    fresh_donated = compiled(fresh, x, donate_argnums=0)
    assert buffer_aliases(fresh_donated) == {0: 0} and copies(fresh_donated) == 1

    both = compiled(swapped, x, y, donate_argnums=(0, 1))
    assert buffer_aliases(both) == {0: 1, 1: 0} and copies(both) == 0
    one = compiled(swapped, x, y, donate_argnums=__)
    assert buffer_aliases(one) == {1: 0} and copies(one) == 1

    twin = jnp.arange(8.0, 16.0).reshape(2, 4)  # the same shape as x
    clash = compiled(swapped, x, twin, donate_argnums=(0, 1))
    assert buffer_aliases(clash) == {0: 0, 1: 1} and copies(clash) == 4
    lowered = jax.jit(swapped, donate_argnums=(0, 1)).lower(x, twin).as_text()
    assert "%arg0: tensor<2x4xf32> {tf.aliasing_output = 0 : i32}" in lowered
    assert "%arg1: tensor<2x4xf32> {tf.aliasing_output = 1 : i32}" in lowered
    out = jax.jit(swapped, donate_argnums=(0, 1))(jnp.array(x), jnp.array(twin))
    np.testing.assert_allclose(out[0], leaky_sum_numpy(twin, 0.5), rtol=1e-6)
    np.testing.assert_allclose(out[1], leaky_sum_numpy(x, 0.5), rtol=1e-6)

    # Eleven donated vectors of eleven lengths, handed back reversed: two-digit numbers.
    def reversed_doubles(*vs):
        return tuple(2 * v for v in vs[::-1])

    eleven = compiled(reversed_doubles, *(jnp.ones(n) for n in range(1, 12)), donate_argnums=tuple(range(11)))
    assert buffer_aliases(eleven) == {k: 10 - k for k in range(11)}


def _sharded_rows():
    """A [8, 4] batch, its rows split over 2 devices."""
    mesh = jax.make_mesh((2,), ("batch",), axis_types=(jax.sharding.AxisType.Explicit,))
    x = jax.device_put(jnp.arange(32.0).reshape(8, 4), NamedSharding(mesh, P("batch")))
    return mesh, x


def leaky_sum_per_shard(x, mesh, target):
    """用 jax.shard_map 包住 ffi_call：每个设备对自己那几行调用内核（in_specs 和 out_specs
    都是 P("batch")），结果保持按行分片。leaky_sum 沿最后一根轴递推、行与行无关，所以这样
    分开算是对的。三行左右。

    Wrap the ffi_call in jax.shard_map: each device calls the kernel on its own rows (in_specs and
    out_specs both P("batch")), and the result stays sharded by rows. leaky_sum recurs along the
    last axis and rows are independent, so splitting the work this way is right. About 3 lines.
    """

    todo("leaky_sum_per_shard: 用 shard_map 包住 ffi_call / wrap the ffi_call in shard_map")


def test_an_ffi_call_on_sharded_input_runs_on_the_whole_array():
    """⚠️ 陷阱 / trap：XLA 不知道一个 FFI 内核怎样分片。jit 遇到分片的输入时，先用 all-gather
    把整个数组收集到每个设备上，每个设备都对整个数组调用一次内核，输出是复制（不分片）的。
    用 shard_map 明说“每个设备处理自己的分片”：没有 all-gather，内核只看到本地的 [4, 4]，
    输出仍按行分片。
    XLA does not know how an FFI kernel shards. Given sharded input, jit first all-gathers the
    whole array onto every device, every device calls the kernel on all of it, and the output is
    replicated (not sharded). Say "each device handles its own shard" with shard_map: no
    all-gather, the kernel sees only the local [4, 4], and the output stays sharded by rows.
    """
    target = cbuild.ffi_target("koans_leaky_sum_sharded", "leaky_sum.cc", "LeakySum")
    mesh, x = _sharded_rows()

    def whole(x):
        return jax.ffi.ffi_call(target, like(x))(x, decay=np.float32(0.5), reverse=False)

    gathered = jax.jit(whole).lower(x).compile()
    assert "all-gather" in gathered.as_text()
    assert gathered.output_shardings.spec == __

    per_shard = jax.jit(functools.partial(leaky_sum_per_shard, mesh=mesh, target=target))
    compiled = per_shard.lower(x).compile()
    assert "all-gather" not in compiled.as_text()
    assert "custom-call" in compiled.as_text() and "f32[4,4]" in compiled.as_text()
    out = per_shard(x)
    assert out.sharding.spec[0] == "batch"
    np.testing.assert_allclose(out, leaky_sum_numpy(np.arange(32.0).reshape(8, 4), 0.5), rtol=1e-6)


def leaky_sum_call(x):
    """The kernel on whatever block it is given (the target is registered by the koan)."""
    target = cbuild.ffi_target("koans_leaky_sum_partitioned", "leaky_sum.cc", "LeakySum")
    return jax.ffi.ffi_call(target, like(x))(x, decay=np.float32(0.5), reverse=False)


def leaky_sum_partition(mesh, arg_shapes, result_shape):
    """custom_partitioning 的 partition 规则：XLA 给出它为输入（arg_shapes[0].sharding）和输出
    （result_shape.sharding）选的分片，规则返回 (mesh, lower_fn, 输出分片, (输入分片,))：
    lower_fn 在每个设备的本地块上运行（这里就是 leaky_sum_call），返回的分片若和 XLA 选的
    不同，XLA 在调用前后插入集合通信来改成它们。
    - leaky_sum 的行互不相关，可以按行分（保留输入第一根轴的分片）；最后一根轴是递推的方向，
      必须整段在一个设备上（那根轴不分片）。输入和输出用同一个分片。大约 4 行。
    The partition rule of custom_partitioning: XLA hands it the shardings it chose for the
    input (arg_shapes[0].sharding) and the output (result_shape.sharding), and the rule returns
    (mesh, lower_fn, output sharding, (input sharding,)): lower_fn runs on each device's local
    block (here it is leaky_sum_call), and where the returned shardings differ from XLA's
    choice, XLA inserts collectives before and after the call to make them so.
    - leaky_sum's rows are independent and may be split (keep the sharding of the input's first
      axis); the last axis is the direction of the recurrence and must stay whole on one device
      (that axis is not split). Input and output get the same sharding. About 4 lines.
    """
    todo("leaky_sum_partition: 按行分、不分最后一根轴 / split the rows, never the last axis")


def test_custom_partitioning_keeps_the_kernel_sharded_under_jit():
    """✍️ 实现 leaky_sum_partition：shard_map 要你在调用处写明怎么分；custom_partitioning 把
    “这个内核怎样分片”交给内核自己，于是普通的 jit 也不再 all-gather。sharding_rule
    "b n -> b n" 告诉分片传播（Shardy）输出的两根轴跟着输入走；真正的本地调用和它要的分片由
    partition 规则决定。⚠️ 陷阱 / trap：规则若把 XLA 给的分片原样照收，列被分开时每个设备
    只对自己那半列递推，结果悄悄算错。
    Write leaky_sum_partition: shard_map makes you say how to split at the call site;
    custom_partitioning leaves "how does this kernel shard" to the kernel itself, so that plain
    jit no longer all-gathers. The sharding_rule "b n -> b n" tells sharding propagation (Shardy)
    that both output axes follow the input; the local call and the shardings it needs are the
    partition rule's. A rule that accepts whatever sharding XLA offers recurs over half the
    columns on each device when the columns are split, and the result is silently wrong.
    The koan first has XLA partition a jnp twin of the kernel by your rule (no compiler needed),
    then the kernel itself. / koan 先让 XLA 按你的规则给内核的 jnp 替身分片（不需要编译器），再换成内核本身。
    """
    mesh, x = _sharded_rows()
    # The rule on its own first (XLA calls it while compiling): offered split columns, it asks
    # for whole rows.
    offered = jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, P(None, "batch")))
    _, _, out_sharding, (in_sharding,) = leaky_sum_partition(mesh, (offered,), offered)
    replicated = NamedSharding(mesh, P())
    assert in_sharding.is_equivalent_to(replicated, 2)
    assert out_sharding.is_equivalent_to(replicated, 2)
    # 另一个轴名：规则读输入的分片，不写死轴名 / another axis name: the rule reads the input's
    # sharding, no axis name written in
    named = jax.make_mesh((2,), ("rows",), axis_types=(jax.sharding.AxisType.Explicit,))
    by_rows = jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(named, P("rows")))
    _, _, out_rows, (in_rows,) = leaky_sum_partition(named, (by_rows,), by_rows)
    assert in_rows.is_equivalent_to(NamedSharding(named, P("rows", None)), 2)
    assert out_rows.is_equivalent_to(NamedSharding(named, P("rows", None)), 2)

    want = leaky_sum_numpy(np.arange(32.0).reshape(8, 4), 0.5)

    # The whole rule, still without the kernel (so without a C++ compiler too): XLA partitions
    # a jnp twin of the kernel by it; the rule must hand XLA leaky_sum_call as its lower_fn.
    def twin_of_the_kernel(x):
        def step(carry, xi):
            carry = 0.5 * carry + xi
            return carry, carry

        _, ys = jax.lax.scan(step, jnp.zeros(x.shape[:-1], x.dtype), jnp.moveaxis(x, -1, 0))
        return jnp.moveaxis(ys, 0, -1)

    handed = []

    def rule_around_the_twin(mesh, arg_shapes, result_shape):
        mesh, lower_fn, out_sharding, in_shardings = leaky_sum_partition(
            mesh, arg_shapes, result_shape
        )
        handed.append(lower_fn)
        return mesh, twin_of_the_kernel, out_sharding, in_shardings

    twin = custom_partitioning(twin_of_the_kernel)
    twin.def_partition(partition=rule_around_the_twin, sharding_rule="b n -> b n")
    auto = jax.make_mesh((2,), ("batch",), axis_types=(jax.sharding.AxisType.Auto,))
    rows_x = jax.device_put(np.arange(32.0).reshape(8, 4), NamedSharding(auto, P("batch")))
    twin_by_rows = jax.jit(twin).lower(rows_x).compile()
    assert "all-gather" not in twin_by_rows.as_text()
    assert jax.jit(twin)(rows_x).sharding.spec[0] == "batch"
    np.testing.assert_allclose(jax.jit(twin)(rows_x), want, rtol=1e-6)
    columns_x = jax.device_put(rows_x, NamedSharding(auto, P(None, "batch")))
    np.testing.assert_allclose(jax.jit(twin)(columns_x), want, rtol=1e-6)
    assert handed and all(fn is leaky_sum_call for fn in handed), "lower_fn: leaky_sum_call"

    # Now the kernel itself (this part needs the compiled library).
    kernel = custom_partitioning(leaky_sum_call)
    kernel.def_partition(partition=leaky_sum_partition, sharding_rule="b n -> b n")

    by_rows = jax.jit(kernel).lower(x).compile()
    assert "all-gather" not in by_rows.as_text()
    (call,) = [line for line in by_rows.as_text().splitlines() if "custom-call(" in line]
    assert "f32[4,4]" in call.split("=")[1]  # each device calls the kernel on its 4 rows
    out = jax.jit(kernel)(x)
    assert out.sharding.spec[0] == "batch"
    np.testing.assert_allclose(out, want, rtol=1e-6)

    by_columns = jax.device_put(x, NamedSharding(mesh, P(None, "batch")))
    compiled = jax.jit(kernel).lower(by_columns).compile()
    (call,) = [line for line in compiled.as_text().splitlines() if "custom-call(" in line]
    assert "all-gather" in compiled.as_text() and "f32[8,4]" in call.split("=")[1]
    np.testing.assert_allclose(jax.jit(kernel)(by_columns), want, rtol=1e-6)

    def accepts_what_xla_offers(mesh, arg_shapes, result_shape):
        return mesh, leaky_sum_call, result_shape.sharding, (arg_shapes[0].sharding,)

    naive = custom_partitioning(leaky_sum_call)
    naive.def_partition(partition=accepts_what_xla_offers, sharding_rule="b n -> b n")
    split = np.asarray(jax.jit(naive)(by_columns))
    assert not np.allclose(split, want)  # each half of the columns recurred on its own
    np.testing.assert_allclose(
        split[:, 2:], leaky_sum_numpy(np.arange(32.0).reshape(8, 4)[:, 2:], 0.5)
    )


def test_a_cuda_handler_lowers_but_cannot_run_here():
    """为 GPU 注册处理函数：register_ffi_target 的 platform 参数指定 NVIDIA GPU 平台。在没有 GPU
    的机器上，这次注册去了哪里：报错、进了 CPU 的目标表，还是被记下、等 GPU 插件加载后再交给 XLA？
    为 CUDA 降级也行（ffi_call 只在 StableHLO 里留下一个按名字的 custom_call）；但在 CPU 上运行时
    找不到这个名字在 CPU 上的处理函数。这里借用 CPU 内核的胶囊只为演示注册；真正的 GPU 处理函数
    用 nvcc 编译，并从 FFI 取得 CUDA 流。
    Registering a handler for the GPU: register_ffi_target's platform argument names the NVIDIA
    GPU platform. On a machine without a GPU, where does the registration go: an error, the CPU's
    target table, or kept until a GPU plugin loads and then handed to XLA?
    Lowering for CUDA works too (ffi_call leaves only a custom_call by name in the StableHLO); but
    running on the CPU finds no CPU handler under that name. The CPU kernel's capsule is borrowed
    here only to show the registration; a real GPU handler is compiled with nvcc and gets its CUDA
    stream from the FFI.
    """
    name = "koans_leaky_sum_cuda_only"
    capsule = jax.ffi.pycapsule(cbuild.ffi_library("leaky_sum.cc").LeakySum)
    jax.ffi.register_ffi_target(name, capsule, platform="CUDA")
    # jaxlib keeps a registration for a platform without a loaded plugin until one loads; the
    # NVIDIA plugin takes those kept under jaxlib's own name for the "gpu" platform.
    nvidia = xla_client.xla_platform_names["gpu"]
    waiting = [target for target, *_ in xla_client._custom_callback.get(nvidia, [])]
    registered = (name in waiting, name in xla_client.custom_call_targets("cpu"))
    assert registered == __  # (kept for the GPU, on the CPU)
    x = jnp.arange(4.0)

    def call(x):
        return jax.ffi.ffi_call(name, like(x))(x, decay=np.float32(0.5), reverse=False)

    lowered = jax.jit(call).trace(x).lower(lowering_platforms=("cuda",))
    assert f"stablehlo.custom_call @{name}" in lowered.as_text()
    with raises_exactly(__) as info:
        jax.jit(call)(x)
    assert "No FFI handler registered" in str(info.value)
