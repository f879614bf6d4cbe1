"""05 · 一个处理函数、多种 dtype，以及按批次分片的 FFI 目标 / one handler for several dtypes, and a batch-partitionable FFI target.

本文件自带一个小 C++ 内核（THIRD_PLUS_ONE_CC，y = x / 3 + 1，逐元素）：它的绑定用
ffi::AnyBuffer，运行时按 element_type() 分派到 float 或 double 的模板实现，别的 dtype 返回
InvalidArgument。jaxkoans.api.cbuild 把它编译一次（没有 C++ 编译器时这些 koan 跳过）。

This file carries its own small C++ kernel (THIRD_PLUS_ONE_CC, y = x / 3 + 1, elementwise): its
binding takes ffi::AnyBuffer and dispatches at run time on element_type() to a float or a double
instantiation of one template; any other dtype returns InvalidArgument. jaxkoans.api.cbuild builds
it once (without a C++ compiler these koans are skipped).
"""

import functools
import uuid
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.xla_metadata import set_xla_metadata
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api import cbuild

THIRD_PLUS_ONE_CC = r"""
#include <cstdint>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

template <typename T>
void ThirdPlusOne(int64_t n, const T* x, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / T(3) + T(1);
}

// AnyBuffer: the binding accepts a buffer of any dtype; the handler looks at it and dispatches.
ffi::Error Impl(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y) {
  if (y->element_type() != x.element_type() || y->element_count() != x.element_count()) {
    return ffi::Error::InvalidArgument("third_plus_one: the result must be like the operand");
  }
  const int64_t n = static_cast<int64_t>(x.element_count());
  switch (x.element_type()) {
    case ffi::F32:
      ThirdPlusOne(n, x.typed_data<float>(), y->typed_data<float>());
      return ffi::Error::Success();
    case ffi::F64:
      ThirdPlusOne(n, x.typed_data<double>(), y->typed_data<double>());
      return ffi::Error::Success();
    default:
      return ffi::Error::InvalidArgument("third_plus_one: float32 or float64 only");
  }
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(ThirdPlusOneAny, Impl,
                              ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>());
"""


@functools.cache
def _source() -> Path:
    """THIRD_PLUS_ONE_CC written once per process into a private folder (cbuild caches the build)."""
    path = cbuild.scratch_folder("jaxkoans-ffi-") / "third_plus_one.cc"
    path.write_text(THIRD_PLUS_ONE_CC)
    return path


def target(name):
    """The handler ThirdPlusOneAny registered for the CPU under `name` (once per process)."""
    return cbuild.ffi_target(name, _source(), "ThirdPlusOneAny")


def like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def custom_calls(text):
    """The custom-call lines of an optimized HLO module's text."""
    return [line for line in text.splitlines() if "custom-call(" in line]


def third_plus_one(x, name):
    """✍️ 调用注册在 name 下的内核：float32 和 float64 原样交给它（同一个处理函数按 dtype 分派，
    不要转换），输出的形状和 dtype 与 x 相同；内核不支持的半精度浮点（float16、bfloat16）先转成
    float32 调用，再把结果转回 x 的 dtype。其他 dtype 原样交给内核（由内核拒绝）。大约 4 行。
    Call the kernel registered under name: hand float32 and float64 over as they are (one handler
    dispatches on the dtype: no conversion), the output shaped and typed like x; the half-precision
    floats the kernel lacks (float16, bfloat16) go in as float32 and the result comes back in x's
    dtype. Any other dtype goes to the kernel as it is (the kernel refuses it). About 4 lines.
    """
    todo("third_plus_one: 按 dtype 调用内核 / call the kernel by dtype")


def test_one_anybuffer_handler_serves_float32_and_float64():
    """✍️ 实现 third_plus_one。Buffer<F32> 的绑定在调用前就检查 dtype，一个 dtype 一个处理函数；
    AnyBuffer 把 dtype 留给处理函数自己在运行时查看（element_type()），一个 C++ 模板、一个
    注册名就能服务多种 dtype。HLO 里仍然是同一个 custom_call，只是操作数的类型不同。float64 要
    jax.enable_x64。预测：int32 的数组交给内核时，抛出什么异常？
    Write third_plus_one. A Buffer<F32> binding checks the dtype before the call: one handler per
    dtype. AnyBuffer leaves the dtype to the handler, which looks at it at run time
    (element_type()): one C++ template and one registered name serve several dtypes. The HLO
    holds the same custom_call, only its operand type differs. float64 needs jax.enable_x64.
    Predict: what does an int32 array handed to the kernel raise?
    """
    name = target("koans_third_plus_one_any")
    call = jax.jit(third_plus_one, static_argnums=1)
    x32 = jnp.arange(6.0, dtype=jnp.float32)
    want32 = np.arange(6.0, dtype=np.float32) / np.float32(3) + np.float32(1)
    np.testing.assert_array_equal(call(x32, name), want32)
    (line,) = custom_calls(call.lower(x32, name).compile().as_text())
    assert f'custom_call_target="{name}"' in line and "f32[6]" in line

    with jax.enable_x64(True):
        x64 = jnp.arange(6.0, dtype=jnp.float64)
        y64 = call(x64, name)
        assert y64.dtype == jnp.float64
        np.testing.assert_array_equal(y64, np.arange(6.0) / 3 + 1)  # exact in double, not in float
        (line,) = custom_calls(call.lower(x64, name).compile().as_text())
        assert "f64[6]" in line and "f32" not in line

    for half in (jnp.bfloat16, jnp.float16):  # both half floats / 两种半精度浮点
        xh = jnp.arange(6.0, dtype=half)
        yh = call(xh, name)
        assert yh.dtype == half
        np.testing.assert_array_equal(yh, want32.astype(half))
        (line,) = custom_calls(call.lower(xh, name).compile().as_text())
        assert f'custom_call_target="{name}"' in line and "f32[6]" in line

    with raises_exactly(__) as info:
        call(jnp.arange(6, dtype=jnp.int32), name).block_until_ready()
    assert "float32 or float64 only" in str(info.value)


def _sharded_rows():
    mesh = jax.make_mesh((2,), ("batch",), axis_types=(jax.sharding.AxisType.Auto,))
    rows = NamedSharding(mesh, P("batch"))
    return rows, jax.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4), rows)


def third_plus_one_by_rows(x, name):
    """✍️ 让 XLA 自己按批次轴切分对 name 的调用：把这个目标登记为可按批次分片
    （jax.ffi 里有专门的函数，对一个名字重复登记无害），并在调用处用 set_xla_metadata 给
    custom_call 加上前端属性 num_batch_dims，值是字符串形式的批次轴数（这里第一根轴是批次轴）。
    然后照常 ffi_call，输出与 x 相同。不用 shard_map，也不用 custom_partitioning。大约 4 行。
    Let XLA split the call of name along its batch axis by itself: register the target as batch
    partitionable (jax.ffi has a function for it; registering a name again does no harm), and at
    the call site give the custom_call the frontend attribute num_batch_dims with
    set_xla_metadata, the number of batch axes as a string (here the first axis is the batch
    axis). Then ffi_call as usual, the output like x. No shard_map, no custom_partitioning.
    About 4 lines.
    """
    todo("third_plus_one_by_rows: 可按批次分片的调用 / a batch-partitionable call")


def test_a_batch_partitionable_target_is_split_by_the_partitioner():
    """✍️ 实现 third_plus_one_by_rows。XLA 不知道一个 FFI 内核能不能分片，所以普通的 jit 先把
    按行分片的输入 all-gather，再在每个设备上对整个 [8, 4] 调用内核。把目标登记为可按批次分片、
    并用 num_batch_dims 说明前几根轴是批次轴之后，SPMD 分片器把调用切开：每个设备只对自己的
    [4, 4] 调用一次，不再 all-gather（输出分片由 jit 的 out_shardings 指定）。两样缺一样都不行。
    Write third_plus_one_by_rows. XLA cannot know whether an FFI kernel may be split, so plain jit
    all-gathers the row-sharded input and calls the kernel on the whole [8, 4] on every device.
    With the target registered as batch partitionable and num_batch_dims saying how many leading
    axes are batch axes, the SPMD partitioner splits the call: each device calls the kernel once
    on its own [4, 4], with no all-gather (jit's out_shardings names the output's sharding).
    Either one alone is not enough.
    """
    # A fresh name each run: a registration made by an earlier run (it lasts for the process,
    # through any re-import of this file) cannot do this run's work.
    name = target(f"koans_third_plus_one_rows_{uuid.uuid4().hex}")
    rows, x = _sharded_rows()
    want = np.arange(32.0, dtype=np.float32).reshape(8, 4) / np.float32(3) + np.float32(1)

    def plain(x):
        return jax.ffi.ffi_call(name, like(x))(x)

    whole = jax.jit(plain, out_shardings=rows).lower(x).compile().as_text()
    (line,) = custom_calls(whole)
    assert "all-gather" in whole and "f32[8,4]" in line.split("=")[1]

    split = jax.jit(third_plus_one_by_rows, static_argnums=1, out_shardings=rows)
    text = split.lower(x, name).compile().as_text()
    (line,) = custom_calls(text)
    assert "all-gather" not in text
    assert f'custom_call_target="{name}"' in line and "f32[4,4]" in line.split("=")[1]
    assert 'num_batch_dims="1"' in line
    out = split(x, name)
    assert out.sharding.spec[0] == "batch"
    np.testing.assert_array_equal(out, want)
