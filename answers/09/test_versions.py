"""09 · 版本兼容 / version compatibility.

jax.export 的承诺（见官方文档“Compatibility guarantees”）：一个导出产物可以被比导出时的 JAX
**新至 6 个月**的版本编译运行（6 个月向后兼容），也可以被**旧至 3 周**的版本运行（3 周向前兼容）；
算的是导出方和使用方各自的构建时间。产物记录了它的调用约定版本，JAX 只接受一段版本范围。
jax.export's promise (the docs' "Compatibility guarantees"): an exported artifact can be
compiled and run by a JAX **up to 6 months newer** than the one that exported it (6 months of
backward compatibility) and by one **up to 3 weeks older** (3 weeks of forward compatibility);
what counts is when each side was built. The artifact records its calling convention version,
and JAX accepts a range of them.
"""

import contextlib
import warnings
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from jax._src.export import serialization_generated as flatbuffer  # only to fake an old layout

from jaxkoans import __, raises_exactly  # noqa: F401  (the koans' blanks)

# ---- 给定代码 / given code -------------------------------------------------------------


@contextlib.contextmanager
def calling_convention(version):
    """临时设置导出用的调用约定版本，退出时恢复 / export with another calling convention
    version for a while; the old setting comes back on exit."""
    old = jax.config.jax_export_calling_convention_version
    jax.config.update("jax_export_calling_convention_version", version)
    try:
        yield
    finally:
        jax.config.update("jax_export_calling_convention_version", old)


def _export_sin():
    return export.export(jax.jit(jnp.sin))(jax.ShapeDtypeStruct((3,), jnp.float32))


# ---- 练习 / koans ----------------------------------------------------------------------


def test_calling_convention_versions_form_a_range():
    """JAX 能生成和读取的调用约定版本是一个区间 [minimum, maximum]；默认用区间里的哪一端导出？
    较旧的版本仍可以选来导出（给还没升级的使用方），区间外的版本则被拒绝。
    The calling convention versions JAX can produce and consume form a range [minimum,
    maximum]; which end does it export with by default? An older one may still be chosen (for a
    consumer that has not upgraded); a version outside the range is refused.
    """
    lo = export.minimum_supported_calling_convention_version
    hi = export.maximum_supported_calling_convention_version
    assert lo <= hi

    assert _export_sin().calling_convention_version == hi

    with calling_convention(lo):
        old = _export_sin()
    again = export.deserialize(old.serialize())
    assert again.calling_convention_version == lo
    np.testing.assert_allclose(again.call(np.ones(3, np.float32)), np.sin(np.ones(3)), rtol=1e-6)

    with raises_exactly(ValueError) as info, calling_convention(lo - 1):
        _export_sin()
    assert "outside the range of supported versions" in str(info.value)


def test_an_artifact_is_frozen_and_records_its_producer():
    """产物是导出那一刻的快照：之后改 Python 代码或全局变量，产物不变（它不会重新追踪）。
    序列化的字节里还记着生成它的 JAX 版本——兼容窗口按这个版本算，归档时要用最新的 JAX 导出。
    An artifact is a snapshot taken at export: editing Python code or globals afterwards does
    not change it (it never retraces). The serialized bytes also record the JAX version that
    wrote them: the compatibility window counts from it, so archive with the latest JAX.
    """
    config = {"scale": 2.0}

    def scaled(x):
        return x * config["scale"]

    exp = export.export(jax.jit(scaled))(jax.ShapeDtypeStruct((2,), jnp.float32))
    blob = exp.serialize()
    config["scale"] = 10.0

    x = np.ones(2, np.float32)
    assert export.deserialize(blob).call(x).tolist() == [2.0, 2.0]
    assert exp.call(x).tolist() == [2.0, 2.0]
    assert scaled(x).tolist() == [10.0, 10.0]  # the Python function did change
    assert (jax.__version__.encode() in bytes(blob)) is True


def test_an_artifact_past_the_window_is_refused():
    """窗口之外的产物会被拒绝。2025 年 11 月（序列化版本 5）之前的 JAX 把设备数写在一个 16 位的
    字段里；今天的 deserialize 把这种布局认作“比 6 个月的向后兼容窗口还旧”，直接拒绝。这里
    下载不到真正的旧产物，所以测试用 mock 把今天的产物按旧布局写出（其余字段还是今天的，
    所以消息里的版本号是今天的）。拒绝是哪种异常？配置项 jax_export_deserialize_expired_versions
    可以把它降级成一条警告，只为最后一次迁移：真正的办法是在窗口关闭前用新的 JAX 重新导出。
    An artifact outside the window is refused. JAX before November 2025 (serialization
    version 5) wrote the device count into a 16-bit field; today's deserialize takes that
    layout as older than the 6-month backward-compatibility window and refuses it. No real old
    artifact can be downloaded here, so the test uses mock to write today's artifact in the old
    layout (every other field is today's, hence today's version in the message). Which
    exception is the refusal? The option jax_export_deserialize_expired_versions downgrades it
    to a warning, for one last migration; the real remedy is to re-export with a newer JAX
    before the window closes.
    """
    exp = _export_sin()
    with mock.patch.object(
        flatbuffer, "ExportedAddNrDevices", flatbuffer.ExportedAddNrDevicesShort
    ):
        old = exp.serialize()
    with raises_exactly(ValueError) as info:
        export.deserialize(old)
    assert "older than the 6-month backward-compatibility window" in str(info.value)

    jax.config.update("jax_export_deserialize_expired_versions", True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rescued = export.deserialize(old)
    finally:
        jax.config.update("jax_export_deserialize_expired_versions", False)
    assert [w.category for w in caught] == [DeprecationWarning]
    np.testing.assert_allclose(rescued.call(np.ones(3, np.float32)), np.sin(np.ones(3)), rtol=1e-6)
