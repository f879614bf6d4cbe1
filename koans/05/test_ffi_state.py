"""05 · 有状态的 FFI 处理函数：instantiate 阶段建一次状态，execute 阶段每次调用时读它 / a stateful FFI handler: the instantiate stage builds its state once, the execute stage reads it on every call.

XLA FFI 的处理函数可以分阶段：instantiate 阶段在 XLA 构建可执行程序时运行一次，返回的对象
（ffi::ErrorOr<std::unique_ptr<T>>）就是这个处理函数实例的状态；execute 阶段在每次调用时运行，
用 Ctx<ffi::State<T>>() 拿到同一个对象。状态的类型 T 要有一个 static ffi::TypeId id，并先于
处理函数登记（jax.ffi.register_ffi_type）；登记时给的 XLA_FFI_TypeInfo 告诉 XLA 在可执行程序
销毁时怎样删除状态。本文件自带两个 C++ 源：COUNTER_CC（完整的计数器）和 TABLE_PRELUDE（查找表
的状态类型，处理函数由你写）；jaxkoans.api.cbuild 编译它们（没有 C++ 编译器时这些 koan 跳过），
每个 koan 载入一份新的库副本，所以它的 TypeId 和计数都从零开始。

An XLA FFI handler can come in stages: the instantiate stage runs once, when XLA builds the
executable, and what it returns (ffi::ErrorOr<std::unique_ptr<T>>) is the state of that instance
of the handler; the execute stage runs on every call and gets the same object through
Ctx<ffi::State<T>>(). The state type T needs a static ffi::TypeId id and is registered before the
handler (jax.ffi.register_ffi_type); the XLA_FFI_TypeInfo given with it tells XLA how to delete
the state when the executable is destroyed. This file carries two C++ sources: COUNTER_CC (a
complete counter) and TABLE_PRELUDE (the state type of a lookup table, whose handlers you write);
jaxkoans.api.cbuild builds them (without a C++ compiler these koans are skipped), and each koan
loads a fresh copy of its library, so that its TypeId and its counts start from zero.
"""

import ctypes
import functools
import gc
import hashlib
import shutil
import uuid
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)
from jaxkoans.api import cbuild

COUNTER_CC = r"""
#include <atomic>
#include <cstdint>
#include <memory>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

std::atomic<int64_t> made{0}, freed{0};

// The state: one per instance of the handler, made by the instantiate stage.
struct Counter {
  static ffi::TypeId id;  // XLA gives it its value when the type is registered
  explicit Counter(float start) : calls(start) { made.fetch_add(1); }
  ~Counter() { freed.fetch_add(1); }
  float calls;
};

ffi::TypeId Counter::id = XLA_FFI_UNKNOWN_TYPE_ID;
XLA_FFI_TypeInfo counter_info = ffi::MakeTypeInfo<Counter>();  // how XLA deletes a Counter

// Instantiate: runs once, when XLA builds the executable; what it returns is the state.
ffi::ErrorOr<std::unique_ptr<Counter>> MakeCounter(float start) {
  return std::make_unique<Counter>(start);
}

// Execute: runs on every call and finds the state in its context.
ffi::Error Count(Counter* counter, ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y) {
  counter->calls += 1;
  for (size_t i = 0; i < x.element_count(); ++i) {
    y->typed_data()[i] = x.typed_data()[i] + counter->calls;
  }
  return ffi::Error::Success();
}

}  // namespace

extern "C" XLA_FFI_TypeId* StateTypeId() { return &Counter::id; }
extern "C" XLA_FFI_TypeInfo* StateTypeInfo() { return &counter_info; }
extern "C" int64_t StatesMade() { return made.load(); }
extern "C" int64_t StatesFreed() { return freed.load(); }

XLA_FFI_DEFINE_HANDLER_SYMBOL(Instantiate, MakeCounter,
                              ffi::Ffi::BindInstantiate().Attr<float>("start"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(Execute, Count,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::State<Counter>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
"""

TABLE_PRELUDE = r"""
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

std::atomic<int64_t> made{0}, freed{0};
std::mutex live_mutex;
std::set<struct Table*> live;

// The state of the lookup handler: values[i] = n + sqrt(i) for i in [0, n). Each Table that is
// built is counted (StatesMade), each one deleted too (StatesFreed).
struct Table {
  static ffi::TypeId id;
  explicit Table(int64_t n) : values(n) {
    for (int64_t i = 0; i < n; ++i) values[i] = float(n) + std::sqrt(float(i));
    made.fetch_add(1);
    std::lock_guard<std::mutex> lock(live_mutex);
    live.insert(this);
  }
  ~Table() {
    freed.fetch_add(1);
    std::lock_guard<std::mutex> lock(live_mutex);
    live.erase(this);
  }
  std::vector<float> values;
};

ffi::TypeId Table::id = XLA_FFI_UNKNOWN_TYPE_ID;
XLA_FFI_TypeInfo table_info = ffi::MakeTypeInfo<Table>();

}  // namespace

extern "C" XLA_FFI_TypeId* StateTypeId() { return &Table::id; }
extern "C" XLA_FFI_TypeInfo* StateTypeInfo() { return &table_info; }
extern "C" int64_t StatesMade() { return made.load(); }
extern "C" int64_t StatesFreed() { return freed.load(); }

// A probe for the koan: multiply the values of every Table alive now by k.
extern "C" void ScaleLiveTables(float k) {
  std::lock_guard<std::mutex> lock(live_mutex);
  for (Table* table : live) {
    for (float& v : table->values) v *= k;
  }
}
"""

START = 10.0  # the counter's attribute `start`


@functools.cache
def _folder() -> Path:
    """A private folder per process for the sources and the library copies."""
    return cbuild.scratch_folder("jaxkoans-ffi-state-")


def _source(text: str) -> Path:
    path = _folder() / f"state_{hashlib.sha256(text.encode()).hexdigest()[:16]}.cc"
    if not path.is_file():
        path.write_text(text)
    return path


def _fresh(built: Path) -> ctypes.CDLL:
    """A new copy of the library `built`, loaded under a path of its own: its TypeId is not yet
    registered and its counts start from zero, whatever ran before in this process."""
    copy = _folder() / f"{built.stem}-{uuid.uuid4().hex}.so"
    shutil.copyfile(built, copy)
    library = ctypes.CDLL(str(copy))
    library.StateTypeId.restype = ctypes.c_void_p  # the addresses, for jax.ffi.pycapsule
    library.StateTypeInfo.restype = ctypes.c_void_p
    library.StatesMade.restype = ctypes.c_int64
    library.StatesFreed.restype = ctypes.c_int64
    return library


def counter_library() -> ctypes.CDLL:
    """COUNTER_CC built once (skips without a C++ compiler), loaded as a fresh copy."""
    source = _source(COUNTER_CC)
    cbuild.ffi_library(source)  # without a compiler the koan is skipped here
    return _fresh(cbuild.build(source))


def table_library(stages_cc) -> ctypes.CDLL:
    """TABLE_PRELUDE followed by what `stages_cc()` returns (your C++), built and loaded as a
    fresh copy. Without a compiler the koan is skipped before your function is called."""
    try:
        cbuild.find_compiler()
    except cbuild.CompilerNotFoundError as error:  # skipped, as cbuild.ffi_library skips
        pytest.skip(str(error))
    stages = stages_cc()
    assert isinstance(stages, str), "lookup_stages_cc returns the C++ source text (a str)"
    source = _source(TABLE_PRELUDE + stages)
    try:
        built, failed = cbuild.build(source), None
    except cbuild.BuildError as error:
        failed = str(error)
    if failed:  # raised outside the except: your C++, not the machine
        raise AssertionError(f"你的 C++ 编译不过 / your C++ does not compile:\n{failed}")
    return _fresh(built)


def like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def custom_calls(text):
    """The custom-call lines of an optimized HLO module's text."""
    return [line for line in text.splitlines() if "custom-call(" in line]


def register_stateful(name, library):
    """✍️ 把 library 里的有状态处理函数登记为 CPU 上的 FFI 目标 name，并返回 name。library 导出
    （ctypes 的 restype 已设好）：StateTypeId() 和 StateTypeInfo() 返回状态类型的 XLA_FFI_TypeId
    与 XLA_FFI_TypeInfo 的地址；Instantiate 和 Execute 是两个阶段的处理函数。先登记状态类型
    （用一个进程内唯一、由 name 派生的类型名，类型 ID 和类型信息都要给），再登记目标，每个阶段
    一个处理函数。大约 8 行。
    Register the stateful handler of library as the CPU FFI target name, and return name. The
    library exports (ctypes restypes already set): StateTypeId() and StateTypeInfo() return the
    addresses of the state type's XLA_FFI_TypeId and XLA_FFI_TypeInfo; Instantiate and Execute
    are the handlers of the two stages. Register the state type first (under a type name unique
    in the process, derived from name; give both the type ID and the type info), then the
    target, one handler per stage. About 8 lines.
    """
    todo("register_stateful: 登记状态类型和两个阶段 / register the state type and both stages")


def count(x, name, **options):
    """The counter kernel on float32 x: y = x + (the number of this call, counted from START)."""
    return jax.ffi.ffi_call(name, like(x), **options)(x, start=np.float32(START))


def test_the_instantiate_stage_makes_one_state_per_executable():
    """✍️ 实现 register_stateful。计数器内核的状态在 instantiate 阶段创建：XLA 编译出可执行程序时
    就创建了，还没运行；同一个可执行程序的每次调用都读写同一个状态，所以输出一次比一次大。jit
    再调用同一个函数时复用已编译的可执行程序（也就是复用它的状态）；另一个函数是另一个可执行
    程序，有它自己的新状态。可执行程序销毁时，XLA 用登记类型时给的 TypeInfo 删除状态。
    Write register_stateful. The counter kernel's state is made by the instantiate stage: when XLA
    compiles the executable, before it runs; every call of that executable reads and writes the
    same state, so each output is larger than the last. jit calling the same function again reuses
    the compiled executable (and so its state); another function is another executable, with a
    fresh state of its own. When an executable is destroyed, XLA deletes its state with the
    TypeInfo given when the type was registered.
    """
    library = counter_library()
    name = register_stateful(f"koans_counter_{uuid.uuid4().hex}", library)
    x = jnp.arange(3.0, dtype=jnp.float32)

    def step(x):
        return count(x, name)

    counting = jax.jit(step)
    compiled = counting.lower(x).compile()
    (line,) = custom_calls(compiled.as_text())
    assert f'custom_call_target="{name}"' in line and "api_version=API_VERSION_TYPED_FFI" in line
    assert library.StatesMade() == 1  # compiled, not run yet
    np.testing.assert_array_equal(compiled(x), np.arange(3.0) + START + 1)
    np.testing.assert_array_equal(compiled(x), np.arange(3.0) + START + 2)
    np.testing.assert_array_equal(counting(x), np.arange(3.0) + START + 3)  # the same executable
    assert library.StatesMade() == 1

    other = jax.jit(lambda x: count(x, name))
    np.testing.assert_array_equal(other(x), np.arange(3.0) + START + 1)
    assert library.StatesMade() == 2

    assert library.StatesFreed() == 0
    del compiled
    counting.clear_cache()
    other.clear_cache()
    gc.collect()
    assert library.StatesFreed() == 2


def lookup_stages_cc():
    """✍️ 返回查找内核两个阶段的 C++ 源文本（接在 TABLE_PRELUDE 后面编译）：
    导出处理函数符号 Instantiate：绑定 int64 属性 n，构建状态 Table(n)（TABLE_PRELUDE 里的类型；
    n 不是正数时返回 InvalidArgument）；导出处理函数符号 Execute：从上下文取 Table 状态，对
    int32 的 index 缓冲区逐元素写出 float32 的 out[i] = values[index[i]]；下标不在 [0, n) 里时
    返回 InvalidArgument，消息里带 "outside the table"。execute 阶段不得自己构建 Table。
    大约 20 行 C++。
    Return the C++ source of the lookup kernel's two stages (compiled after TABLE_PRELUDE): the
    exported handler symbol Instantiate binds the int64 attribute n and builds the state Table(n)
    (TABLE_PRELUDE's type; InvalidArgument when n is not positive); the exported handler symbol
    Execute takes the Table state from its context and writes, element by element over the int32
    buffer index, the float32 out[i] = values[index[i]]; an index outside [0, n) returns
    InvalidArgument with "outside the table" in its message. The execute stage must not build a
    Table itself. About 20 lines of C++.
    """
    todo("lookup_stages_cc: 两个阶段的 C++ / the two stages in C++")


def lookup(index, name, n):
    """✍️ 用 ffi_call 调用注册在 name 下的查找内核：int32 的 index，float32 的结果，形状与 index
    相同；表的大小 n 作为属性 n 交给内核（C++ 绑定读的是 int64）。大约 2 行。
    Call the lookup kernel registered under name with ffi_call: int32 index, a float32 result
    shaped like index; the table size n goes to the kernel as the attribute n (the C++ binding
    reads an int64). About 2 lines.
    """
    todo("lookup: 用 ffi_call 调用查找内核 / call the lookup kernel with ffi_call")


def test_the_table_is_built_once_per_executable_and_read_on_every_call():
    """✍️ 实现 lookup_stages_cc 和 lookup（register_stateful 来自上一个 koan）。查找表是这个
    处理函数实例的状态：编译时建一次，之后每次调用只读它，不再重建；每个可执行程序（这里 n=4、
    n=8，以及另一种形状的下标再用 n=4）有自己的表。探针 ScaleLiveTables 直接改写活着的表，用来证明 execute 读的是状态。
    小于 0 或不小于 n 的下标都被拒绝；表的大小 n = 0 时，编译就失败。
    Write lookup_stages_cc and lookup (register_stateful comes from the last koan). The lookup
    table is the state of this instance of the handler: built once at compile time, then only
    read on each call, never rebuilt; each executable (here n=4, n=8, and n=4 again for an index
    of another shape) has a table of its own. The probe ScaleLiveTables rewrites the live tables in place, which shows that
    execute reads the state. An index below 0 or at n and above is refused, and so is a table
    size n = 0 when the program is compiled.
    """
    library = table_library(lookup_stages_cc)
    name = register_stateful(f"koans_lookup_{uuid.uuid4().hex}", library)
    index = jnp.array([0, 3, 1, 3, 2], dtype=jnp.int32)

    def table(n):
        return np.float32(n) + np.sqrt(np.arange(n, dtype=np.float32))

    looking = jax.jit(lookup, static_argnums=(1, 2))
    four = looking.lower(index, name, 4).compile()
    (line,) = custom_calls(four.as_text())
    assert f'custom_call_target="{name}"' in line and "n = 4 : i64" in line
    assert library.StatesMade() == 1  # built when compiled
    np.testing.assert_array_equal(four(index), table(4)[index])
    np.testing.assert_array_equal(four(index[::-1]), table(4)[index[::-1]])
    assert library.StatesMade() == 1  # not rebuilt by the calls

    library.ScaleLiveTables(ctypes.c_float(2.0))
    np.testing.assert_array_equal(four(index), 2 * table(4)[index])  # execute reads the state

    eight = looking.lower(index, name, 8).compile()
    assert library.StatesMade() == 2
    wide = jnp.array([7, 0, 4, 5, 6], dtype=jnp.int32)
    np.testing.assert_array_equal(eight(wide), table(8)[wide])
    np.testing.assert_array_equal(four(index), 2 * table(4)[index])  # its own table still
    # (JaxRuntimeError or, once the executable has run, ValueError: match the kernel's message)
    with pytest.raises(Exception, match="outside the table"):
        four(wide).block_until_ready()
    with pytest.raises(Exception, match="outside the table"):  # below the table too
        four(jnp.array([0, -1, 1, 2, 3], dtype=jnp.int32)).block_until_ready()
    grid = jnp.array([[3, 0, 1], [2, 2, 0]], dtype=jnp.int32)  # another shape: an executable
    np.testing.assert_array_equal(looking(grid, name, 4), table(4)[grid])  # and a table anew
    assert library.StatesMade() == 3
    with pytest.raises(jax.errors.JaxRuntimeError, match="INVALID_ARGUMENT"):
        looking.lower(index, name, 0).compile()  # no table of no values
    assert library.StatesMade() == 3

    del four, eight
    looking.clear_cache()
    gc.collect()
    assert library.StatesFreed() == 3


def test_each_custom_call_instruction_gets_its_own_state():
    """状态属于可执行程序里的一条 custom_call 指令，不属于注册名：一个程序里有几条调用这个
    目标的指令，instantiate 就运行几次。ffi_call 默认被当作纯函数，XLA 可以合并完全相同的纯
    指令；has_side_effect=True 的调用不会被合并。vmap_method="sequential" 把调用放进一个循环：
    循环体里只有一条指令，每一行都是它的一次调用。预测每一步之后一共创建了多少个状态，以及
    vmap 的第三行加上了多少。
    A state belongs to one custom_call instruction of an executable, not to the registered name:
    instantiate runs once per instruction that calls the target. ffi_call is taken to be pure by
    default, and XLA may merge identical pure instructions; calls with has_side_effect=True are
    not merged. vmap_method="sequential" puts the call inside a loop: the loop body holds one
    instruction, and each row is one call of it. Predict how many states exist after each step,
    and what the third row of the vmap gets added.
    """
    library = counter_library()
    name = register_stateful(f"koans_counter_{uuid.uuid4().hex}", library)
    x = jnp.arange(3.0, dtype=jnp.float32)

    twice = jax.jit(lambda x: count(x, name) + count(2 * x, name))
    twice(x).block_until_ready()
    assert library.StatesMade() == __

    merged = jax.jit(lambda x: count(x, name) + count(x, name))
    merged(x).block_until_ready()
    assert library.StatesMade() == __

    effects = jax.jit(lambda x: count(x, name, has_side_effect=True) + count(x, name, has_side_effect=True))
    effects(x).block_until_ready()
    assert library.StatesMade() == __

    rows = jax.jit(jax.vmap(lambda r: count(r, name, vmap_method="sequential")))
    out = rows(jnp.zeros((4, 2), dtype=jnp.float32))
    assert library.StatesMade() == __
    assert float(out[2, 0]) - START == __
