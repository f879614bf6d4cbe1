"""05 · FFI 的数组属性、字典属性和可变个数的操作数 / array and dictionary attributes, a variadic number of operands.

本文件自带一个小 C++ 内核（WEIGHTED_SUM_CC）：y = affine["scale"] · Σₖ weights[k] · xₖ +
affine["shift"]。它的绑定用 ffi::RemainingArgs 接收任意个 float32 操作数，用
ffi::Span<const float> 接收一个数组属性 weights，用 ffi::Dictionary 接收一个字典属性 affine。
jaxkoans.api.cbuild 把它编译一次（没有 C++ 编译器时这些 koan 跳过）。

This file carries its own small C++ kernel (WEIGHTED_SUM_CC): y = affine["scale"] · Σₖ
weights[k] · xₖ + affine["shift"]. Its binding takes any number of float32 operands through
ffi::RemainingArgs, an array attribute weights as ffi::Span<const float>, and a dictionary
attribute affine as ffi::Dictionary. jaxkoans.api.cbuild builds it once (without a C++ compiler
these koans are skipped).
"""

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api import cbuild

WEIGHTED_SUM_CC = r"""
#include <cstdint>
#include <string>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

ffi::Error Impl(ffi::RemainingArgs xs,                   // x_0, x_1, ...: any number of operands
                ffi::Result<ffi::Buffer<ffi::F32>> y,    // y
                ffi::Span<const float> weights,          // weights: an array attribute
                ffi::Dictionary affine) {                // affine: {"scale": f32, "shift": f32}
  if (weights.size() != xs.size()) {
    return ffi::Error::InvalidArgument("weighted_sum: " + std::to_string(xs.size()) +
                                       " operands but " + std::to_string(weights.size()) +
                                       " weights");
  }
  ffi::ErrorOr<float> scale = affine.get<float>("scale");
  if (!scale.has_value()) return scale.error();
  ffi::ErrorOr<float> shift = affine.get<float>("shift");
  if (!shift.has_value()) return shift.error();
  const int64_t n = static_cast<int64_t>(y->element_count());
  float* out = y->typed_data();
  for (int64_t i = 0; i < n; ++i) out[i] = *shift;
  for (size_t k = 0; k < xs.size(); ++k) {
    ffi::ErrorOr<ffi::Buffer<ffi::F32>> x = xs.get<ffi::Buffer<ffi::F32>>(k);
    if (!x.has_value()) return x.error();
    if (static_cast<int64_t>(x->element_count()) != n) {
      return ffi::Error::InvalidArgument("weighted_sum: the operands' sizes differ");
    }
    const float* data = x->typed_data();
    for (int64_t i = 0; i < n; ++i) out[i] += *scale * weights[k] * data[i];
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(WeightedSum, Impl,
                              ffi::Ffi::Bind()
                                  .RemainingArgs()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<ffi::Span<const float>>("weights")
                                  .Attr<ffi::Dictionary>("affine"));
"""


@functools.cache
def _source() -> Path:
    """WEIGHTED_SUM_CC written once per process into a private folder (cbuild caches the build)."""
    path = cbuild.scratch_folder("jaxkoans-ffi-") / "weighted_sum.cc"
    path.write_text(WEIGHTED_SUM_CC)
    return path


def target():
    """The handler WeightedSum registered for the CPU (once per process)."""
    return cbuild.ffi_target("koans_weighted_sum", _source(), "WeightedSum")


def like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def reference(xs, weights, scale, shift):
    """The kernel's formula in NumPy (float32)."""
    total = sum(np.float32(w) * np.asarray(x) for w, x in zip(weights, xs, strict=True))
    return np.float32(scale) * total + np.float32(shift)


def operands(k):
    """k float32 vectors of length 4."""
    return [jnp.arange(4.0, dtype=jnp.float32) * (i + 1) - i for i in range(k)]


def weighted_sum(xs, weights, scale, shift, name):
    """✍️ 用注册在 name 下的内核算 scale · Σₖ weights[k] · xs[k] + shift。xs 是若干个形状相同的
    float32 数组（个数不定），全部作为操作数交给同一次 ffi_call；weights 是 Python 浮点数的元组，
    作为数组属性 weights 传入（内核要 float32 的数组）；scale 和 shift 放进一个字典属性 affine
    （键 "scale"、"shift"，float32）。输出与 xs[0] 相同。大约 4 行。
    Compute scale · Σₖ weights[k] · xs[k] + shift with the kernel registered under name. xs holds
    several float32 arrays of one shape (how many varies), all handed to one ffi_call as its
    operands; weights, a tuple of Python floats, goes in as the array attribute weights (the
    kernel wants a float32 array); scale and shift go into one dictionary attribute affine (keys
    "scale" and "shift", float32). The output is like xs[0]. About 4 lines.
    """
    return jax.ffi.ffi_call(name, like(xs[0]))(
        *xs,
        weights=np.asarray(weights, dtype=np.float32),
        affine={"scale": np.float32(scale), "shift": np.float32(shift)},
    )


def test_array_and_dictionary_attributes_and_any_number_of_operands():
    """✍️ 实现 weighted_sum。ffi_call 的关键字参数成为 custom_call 的属性：NumPy 数组成为稠密
    数组属性（C++ 里是 ffi::Span<const T>），字典成为字典属性（ffi::Dictionary，按名字取值），
    都写在 StableHLO 的 mhlo.backend_config 里。绑定里的 RemainingArgs 让同一个处理函数接收任意
    个操作数：两个和三个操作数是同一个注册名、两条不同的 custom_call。
    Write weighted_sum. ffi_call's keyword arguments become the custom_call's attributes: a NumPy
    array becomes a dense array attribute (ffi::Span<const T> in C++), a dict a dictionary
    attribute (ffi::Dictionary, read by name), all written in the StableHLO's
    mhlo.backend_config. RemainingArgs in the binding lets one handler take any number of
    operands: two and three operands are one registered name and two different custom_calls.
    """
    name = target()
    call = jax.jit(weighted_sum, static_argnums=(1, 2, 3, 4))
    for weights, scale, shift in [((0.5, -2.0, 3.0), 2.0, 1.0), ((1.0, 4.0), -1.5, 0.25)]:
        xs = operands(len(weights))
        y = call(xs, weights, scale, shift, name)
        assert y.dtype == jnp.float32 and y.shape == (4,)
        np.testing.assert_allclose(y, reference(xs, weights, scale, shift), rtol=1e-6)

    xs = operands(3)
    text = call.lower(xs, (0.5, -2.0, 3.0), 2.0, 1.0, name).as_text()
    (line,) = [line for line in text.splitlines() if "stablehlo.custom_call" in line]
    assert f"@{name}(%arg0, %arg1, %arg2)" in line
    assert "weights = dense<[5.000000e-01, -2.000000e+00, 3.000000e+00]> : tensor<3xf32>" in line
    assert "affine = {scale = 2.000000e+00 : f32, shift = 1.000000e+00 : f32}" in line


def test_what_attributes_accept_and_when_a_wrong_dtype_fails():
    """⚠️ 陷阱 / trap: 属性值只有少数几种 Python 类型能用（NumPy 数组、标量、字符串、字典……），
    而属性的 dtype 要和 C++ 绑定里写的一致，否则 XLA 解码属性时报错；属性的个数对不对，只有内核
    自己能发现。预测：把权重写成 Python 列表时抛出什么异常？float64 的权重走到哪一步才失败？
    Only a few Python types make an attribute value (NumPy arrays, scalars, strings, dicts, …),
    and an attribute's dtype must match the one the C++ binding names, or XLA fails to decode
    it; whether their counts agree, only the kernel itself can notice. Predict: what do weights
    written as a Python list raise? How far do float64 weights get before they fail?
    """
    name = target()
    xs = operands(3)
    affine = {"scale": np.float32(1.0), "shift": np.float32(0.0)}

    with raises_exactly(TypeError) as info:
        jax.ffi.ffi_call(name, like(xs[0]))(*xs, weights=[1.0, 1.0, 1.0], affine=affine)

    def f(*xs):
        return jax.ffi.ffi_call(name, like(xs[0]))(*xs, weights=np.ones(3), affine=affine)

    stages = []
    with raises_exactly(jax.errors.JaxRuntimeError) as info:
        lowered = jax.jit(f).lower(*xs)
        stages.append("lower")
        compiled = lowered.compile()
        stages.append("compile")
        compiled(*xs).block_until_ready()
        stages.append("run")
    assert stages == ["lower", "compile"]
    assert "expected F32 but got F64" in str(info.value)

    def g(*xs):
        return jax.ffi.ffi_call(name, like(xs[0]))(*xs, weights=np.ones(2, np.float32), affine=affine)

    with raises_exactly(jax.errors.JaxRuntimeError) as info:
        jax.jit(g)(*xs).block_until_ready()
    assert "3 operands but 2 weights" in str(info.value)
