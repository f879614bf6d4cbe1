"""05 · DLPack 零拷贝：用缓冲区地址证明 / DLPack zero-copy, proven by buffer addresses."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __, raises_exactly, todo  # noqa: F401  (the koans' blanks)


def buffer_at(n, offset_bytes=0, dtype=np.float32, alignment=64):
    """A fresh 1-D NumPy array of n zeros whose data starts offset_bytes past a 64-byte
    boundary (NumPy itself only promises 16-byte alignment)."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.zeros(n + (alignment + offset_bytes) // itemsize, dtype)
    start = ((-raw.ctypes.data) % alignment + offset_bytes) // itemsize
    out = raw[start : start + n]
    assert out.ctypes.data % alignment == offset_bytes
    return out


def address(a):
    """Where an array's data lives: a NumPy array's or a jax.Array's buffer address."""
    return a.unsafe_buffer_pointer() if isinstance(a, jax.Array) else a.ctypes.data


def test_numpy_views_a_jax_array_without_copying():
    """np.from_dlpack(jax_array) 不复制：NumPy 数组就是 JAX 缓冲区上的一个视图（地址相同），
    而且是只读的，因为 JAX 数组不可变。再用 jax.dlpack.from_dlpack 导回来，还是同一块内存。
    np.from_dlpack(jax_array) does not copy: the NumPy array is a view of the JAX buffer (same
    address), and a read-only one, since JAX arrays are immutable. Importing it back with
    jax.dlpack.from_dlpack gives the very same memory again.
    """
    x = jnp.arange(8.0)
    view = np.from_dlpack(x)
    assert address(view) == address(x)
    assert view.flags.writeable is False
    with raises_exactly(ValueError):
        view[0] = 42.0

    back = jax.dlpack.from_dlpack(view)
    assert address(back) == address(x)
    assert back is not x  # a new jax.Array object over the same buffer


def test_an_aligned_numpy_buffer_is_shared_and_can_change_under_jax():
    """⚠️ 陷阱 / trap: 64 字节对齐的 NumPy 缓冲区被 jax.dlpack.from_dlpack 零拷贝地共享。
    之后在 NumPy 一侧修改数据，“不可变”的 JAX 数组也跟着变了。
    A 64-byte-aligned NumPy buffer is shared, zero-copy, by jax.dlpack.from_dlpack. Modify the
    data on the NumPy side afterwards and the "immutable" JAX array changes too.
    """
    a = buffer_at(4)
    a[:] = [1.0, 2.0, 3.0, 4.0]
    y = jax.dlpack.from_dlpack(a)
    assert address(y) == address(a)

    total_before = float(jnp.sum(y))
    a[0] = 100.0  # NumPy writes into the buffer JAX is using
    seen = (float(y[0]), float(jnp.sum(y)) - total_before)  # y[0], and how much y's sum moved
    assert seen == (100.0, 99.0)


def test_an_unaligned_buffer_is_silently_copied():
    """⚠️ 陷阱 / trap: XLA 的 CPU 缓冲区要求 64 字节对齐。不对齐的 NumPy 数组会被悄悄复制
    （地址不同，不再共享）；copy=False 把这次复制变成一个错误。NumPy 只保证 16 字节对齐，
    所以普通数组会不会被复制全凭运气：需要零拷贝时就写 copy=False。
    XLA's CPU buffers must be 64-byte aligned. An unaligned NumPy array is silently copied
    (another address, nothing shared); copy=False turns that copy into an error. NumPy only
    promises 16-byte alignment, so whether an ordinary array is copied is luck: when you rely
    on zero copy, say copy=False.
    """
    u = buffer_at(8, offset_bytes=4)
    y = jax.dlpack.from_dlpack(u)
    assert (address(y) == address(u)) is False
    u[0] = 7.0
    assert float(y[0]) == 0.0  # the copy does not see NumPy's write

    with raises_exactly(ValueError) as info:
        jax.dlpack.from_dlpack(u, copy=False)
    assert "aligned to 64 bytes" in str(info.value)
    aligned = buffer_at(8)
    assert address(jax.dlpack.from_dlpack(aligned, copy=False)) == address(aligned)


def test_dlpack_describes_device_layout_and_strides():
    """__dlpack_device__ 返回 (设备类型, 设备号)，CPU 的类型码是 kDLCPU。转置（列优先）的数组
    也能零拷贝：JAX 给它一个列优先的 layout；但隔列取的带步长视图会被拒绝（不是复制），要先
    用 NumPy 把它变成 C 连续的数组。
    __dlpack_device__ returns (device type, device id), and the CPU's type code is kDLCPU. A
    transposed (column-major) array is imported zero-copy too: JAX gives it a column-major
    layout; but a strided view (every other column) is refused, not copied: make it
    C-contiguous with NumPy first.
    """
    x = jnp.arange(4.0)
    assert tuple(int(v) for v in x.__dlpack_device__()) == (1, 0)

    m = buffer_at(12).reshape(3, 4)
    m[:] = np.arange(12.0).reshape(3, 4)
    t = jax.dlpack.from_dlpack(m.T)
    assert address(t) == address(m)
    np.testing.assert_array_equal(t, m.T)
    assert t.format.layout.major_to_minor == (1, 0)

    with raises_exactly(jax.errors.JaxRuntimeError) as info:
        jax.dlpack.from_dlpack(m[:, ::2])
    assert "striding" in str(info.value)
    fixed = jax.dlpack.from_dlpack(np.ascontiguousarray(m[:, ::2]))
    np.testing.assert_array_equal(fixed, m[:, ::2])


def test_device_put_may_share_numpy_memory_too():
    """⚠️ 陷阱 / trap: 在 CPU 上，jax.device_put 遇到 64 字节对齐的 NumPy 数组也不复制，之后
    NumPy 的写入 JAX 也看得见。要一份独立的副本，就用 jnp.array（它默认 copy=True），或者
    jnp.asarray(..., copy=True)。jnp.asarray 不是“只在需要时复制”：交给它一个 jax.Array，它原样
    返回同一个对象；交给它 device_put 能共享的对齐 NumPy 数组，它却复制一份（这里连 copy=False
    也照样复制，不报错）。要共享就用 device_put 或 from_dlpack，并用地址确认。
    On CPU, jax.device_put does not copy a 64-byte-aligned NumPy array either, and later NumPy
    writes show through. When you need an independent copy, use jnp.array (copy=True by
    default) or jnp.asarray(..., copy=True). jnp.asarray does not copy "only when it must": hand
    it a jax.Array and it returns that very object, but hand it an aligned NumPy array that
    device_put would share and it copies (here even with copy=False, without an error). To
    share, use device_put or from_dlpack, and check the address.
    """
    a = buffer_at(16)
    shares = {
        "device_put": address(jax.device_put(a)) == address(a),
        "from_dlpack": address(jax.dlpack.from_dlpack(a)) == address(a),
        "array": address(jnp.array(a)) == address(a),
        "asarray": address(jnp.asarray(a)) == address(a),
    }
    assert shares == {"device_put": True, "from_dlpack": True, "array": False, "asarray": False}

    put, copied = jax.device_put(a), jnp.array(a)
    a[0] = 5.0
    assert (float(put[0]), float(copied[0])) == (5.0, 0.0)

    x = jnp.arange(4.0)
    assert (jnp.asarray(x) is x, jnp.array(x) is x) == (True, False)
    assert address(jnp.asarray(x, copy=True)) != address(x)
    assert address(jnp.asarray(a, copy=False)) != address(a)  # copy=False: still a copy here
