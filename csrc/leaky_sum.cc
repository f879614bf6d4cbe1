// leaky_sum.cc: the C++ kernel of chapter 05 (koans/05/test_ffi_kernel.py), called from JAX
// through the XLA FFI. 第 05 章的 C++ 内核：通过 XLA FFI 从 JAX 调用。
//
// It computes a leaky running sum along the last axis of a float32 array, every leading axis
// being a batch axis:
//     forward  (reverse = false):  y[i] = decay * y[i - 1] + x[i],  y[-1] = 0
//     backward (reverse = true):   y[i] = decay * y[i + 1] + x[i],  y[n]  = 0
// The map x -> y is linear, and its transpose (its VJP) is the same recurrence run backwards:
// one kernel serves as its own backward kernel.
// 沿最后一根轴做“漏积分”：y[i] = decay·y[i-1] + x[i]；前面的轴都是批次轴。它对 x 是线性的，
// 它的转置（VJP）就是反向运行的同一个递推，所以同一个内核也是自己的反向内核。
//
// Built by jaxkoans/api/cbuild.py with the machine's C++ compiler:
//     c++ -std=c++17 -O2 -shared -fPIC -I$(python -c "import jax; print(jax.ffi.include_dir())")
// The handler is exported as a plain C symbol (XLA_FFI_DEFINE_HANDLER_SYMBOL), so Python can
// load the library with ctypes and register it with
//     jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(lib.LeakySum), platform="cpu")

#include <cstdint>

#include "xla/ffi/api/ffi.h"  // the header-only XLA FFI API shipped with jaxlib

namespace ffi = xla::ffi;

namespace {

// The "library function": plain C++ on raw pointers, one sequence of length n.
void LeakySumRow(float decay, bool reverse, int64_t n, const float* x, float* y) {
  float carry = 0.0f;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = reverse ? n - 1 - k : k;
    carry = decay * carry + x[i];
    y[i] = carry;
  }
}

// The FFI implementation. By the time it runs, the binding below has decoded the call frame and
// checked the attribute types, the buffer dtypes and the number of operands; here we only look
// at shapes and loop over the batch.
ffi::Error LeakySumImpl(float decay, bool reverse, ffi::Buffer<ffi::F32> x,
                        ffi::ResultBuffer<ffi::F32> y) {
  auto dims = x.dimensions();
  if (dims.size() == 0) {
    // Becomes a Python exception, raised when the program runs, carrying this message.
    return ffi::Error::InvalidArgument("leaky_sum: the input must have at least one axis");
  }
  const int64_t n = dims.back();            // length of one sequence (the last axis)
  const int64_t total = x.element_count();  // all sequences of the batch, back to back
  if (n == 0) {
    return ffi::Error::Success();
  }
  for (int64_t start = 0; start < total; start += n) {
    LeakySumRow(decay, reverse, n, x.typed_data() + start, y->typed_data() + start);
  }
  return ffi::Error::Success();
}

}  // namespace

// The binding: what XLA must pass, in order, and the C++ type each one decodes to.
// Attributes are matched by name and by exact type: `float` accepts only an F32 attribute
// (a Python float arrives as F64 and is rejected).
XLA_FFI_DEFINE_HANDLER_SYMBOL(LeakySum, LeakySumImpl,
                              ffi::Ffi::Bind()
                                  .Attr<float>("decay")         // an F32 scalar
                                  .Attr<bool>("reverse")        // np.bool_ / Python bool
                                  .Arg<ffi::Buffer<ffi::F32>>()  // x: float32[..., n]
                                  .Ret<ffi::Buffer<ffi::F32>>()  // y: float32[..., n]
);
