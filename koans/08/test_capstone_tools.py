"""08 · 综合三：只以字节交来的训练步 / capstone three: a training step that arrives as bytes.

合作方把他们的训练步用 jax.export 导出、序列化，交给你的只是一串字节（下面的 ARTIFACT，压缩后
用 base64 写成文本）：`jax.export.deserialize` 把它变回一个 Exported，`.call(w, x, y)` 执行一步，
返回 (新参数, 这一步之前的损失)。它的源码你拿不到。`# ✍️ BEGIN` 与 `# ✍️ END` 之间是你这边的
驱动循环：在一串由种子生成的小批量上一步步调用它，某一步的更新不是有限的数时就跳过这一步。循环
读起来没毛病，也不报错；可参数变成了 NaN，而且循环每一步都在主机和设备之间搬数据。哪一步出的
NaN、是谁造出来的，读代码说不出来：这取决于字节里的程序和数据一路走下来的值。要用工具：
`jax.debug_nans` 停在造出 NaN 的那一步（可它只看得到整个 Exported 这一个原语，看不到里面），
`jax.transfer_guard("disallow")` 说出搬了什么、往哪个方向。第一个测试要你预测工具的报告；其余
测试钉住症状。只修改标记之间的代码。

A partner exported their training step with jax.export and serialized it; all you get is bytes
(ARTIFACT below, compressed and written as base64 text): `jax.export.deserialize` turns them
back into an Exported, whose `.call(w, x, y)` runs one step and returns (new params, the loss
before the step). Its source is not yours to read. Between `# ✍️ BEGIN` and `# ✍️ END` is your
driver loop: it calls the step on a stream of mini-batches generated from a seed and skips a
step whose update is not finite. The loop reads fine and raises nothing, yet the parameters
turn NaN and the loop moves data between host and devices at every step. Which step makes the
NaN, and what makes it, reading cannot say: that depends on the program inside the bytes and
on the values the data takes on the way. Use the tools: `jax.debug_nans` stops at the step
that makes a NaN (though it sees the whole Exported as one primitive and nothing inside it),
`jax.transfer_guard("disallow")` names what moved and in which direction. The first test asks
you to predict what the tool reports; the others pin the symptoms. Change only the code between
the markers.
"""

import base64
import zlib

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __  # noqa: F401  (the koans' blanks)

B, D, STEPS = 16, 4, 8
# 合作方交来的训练步：jax.export 序列化的字节，zlib 压缩，base64 编码。
# The partner's training step: jax.export's serialized bytes, zlib-compressed, base64-encoded.
ARTIFACT = (
    "eNqNVgtsHEcZntm5/8br8bFZNsvmuA4b92qcres7X9zUcV4X1+TSKjZOSEuI0nA9322dS++Ve9i1oipFCPESqqqC"
    "EEIIIYQA8RZCCIGVWqGCqo0qhCJAgBAvAUKoQqg8ROH4Z+9sX3wkMKd/5v+//zXz/3OrOUrUOEAKZJE8Qt5BHiIn"
    "yRwibyFHySGyn9xLJsg95G5yV2D3ANlN7iC7yE6ygwyRARJCT0IeRSohNZGeQnof0od7aCdVvoNkFw2WTfqNTshr"
    "SEPIK9VuXB9CqiH9HmlOKD+Vh5CJRGpvAieFaGRrMHLz0HrwDR3d5hNCKiDtR9rVlb/6aruNloOhrs1zPTLt2qgY"
    "qfsI+VmPTmE7unpld2+PXeiv/TE2bFh3Z8r2Bh5wfu6Vt0VON3OLJf+BuYXsciqR2p+YIDQFFIYpE8w1LCfmxkfH"
    "kpNTB9Ozx9mXtQPaMF3jQhhqiM1JLcJx4jgrnTBiRky4RiB1f2qKoS6gwEIhHVYosSMLgx1DJukEoVxLCMsSOOMq"
    "XDWSQjiCykARc9SEGgroJy3DsrjDrbjLYxbX3jrgwgiM2g8K+xiX8wvycWF/loNnv5/bn+TyM4bJAMbkGSrPUvsS"
    "l60V+eQV6VkwLj9tQ1IOaq/TZELbqzG+b2o6ejAKKZMSmIR9MCVjM3JWh2kJx8cZN928NE8gYzvzcBDXaOQDmoyd"
    "lg/rcBjSMCPPU5iVOQrHpE/huCxSeBBOyOowzEtooIMRjcOCvcolXA6kJJyy34XSu1X0ycPyvRaclvBBJc2ckU/r"
    "8LB89iNwxv4o2nwMUWtyVn7ChrMSPqWk1AKcg/MSPq8E95T0DPkVA7Ly6wbk5Lgtv6VDXo5joVxJI9S1zM27zdfX"
    "16XP2LpckkX5uMv1AIYbNxwatxn89BcR9r2fyzLOv5RVeUk24g6D9fV4DE2vvzR3JPB4aqbjeLSzpDtgGhPRbiKd"
    "ce5RStujVIa1YWjBiv16TUjzDRru2XHH5Ju0OzVYtd+swLsD0BmDy/I+jcKTVKea5rGZiEcjHjORZqK6BzNmRHoM"
    "TJPrBoDOTS6AM6AmCGDgMWrOhgbDQE/RScpDvwJGI+IkZTz0zhCbvcKtrJsXSwTujwDjcD/lao7owSwCJBLMBnYh"
    "U1a3h1GWiVsMmGmF4yhbNsuMKNmIZUZsJsCJysx7sEDMYZlRpYhEwqNo6Eo786EoAx6ThhN+BpE48PDHcR0ZYZkx"
    "ZSl4eAxlb8R9uxPDvKMGD2EVBBgpI0WssIMYZXoIo0fCX0BhXI+Ev4SrqbPM11SEFA9/AyNMjtmZb0pkYvt4+Nu4"
    "Tg2bGU1zGd5fxjJJi6lmhJMoHz7ohN+oIUPTeigCM0lxMj3MQydYxOK2HiHR8DmGBWUZqeJzI+ziEXATegi/F+Lk"
    "qTgPHWfCAlsnnWp1LWHDkitLPcwoUHLnjitYHrlgCNu2TGN4/mx6ypv2psZGvWkb8K9pxdOWZ41402lPiNEx23Sc"
    "qGm4tm3a0ahnCHOxVSw1ixWyfKFUJeVqoVXyyWK9mivkc41mtljJFopl/K6RfLXSaOYqTcWXW+hSK60qvu43W/WK"
    "4h5rVfJqLRSXiwVfcQ2/5OcDj0K1mV3yK349V8ou7yW5QiGImSuVArvWYrOe61hinmW/3mXLtVy9E+mSgvZitkIr"
    "HyDJZrmWXPYrhWo9qc5QSNRWSaPp1xKHSlUM3DiSKFUbjQAiF4vNA2raoyQveXG5tsdL4j57MNxApVGrNvw9gdZL"
    "4iHJxdwTiVbDb2QbF3I1P1urllbL1XrtQrFRJmUsWKLSKmdxj81is4j12cLqfq1UxAqqBNmNLdyUHWVyqFPvI7fb"
    "hrLb3o+NwlY2q4Vy2cfmNFdrPlkhT5DVrZj9B99qRp8OO9OHLTX7INWPbaCSsisX/Lrv9afEDvdhxUrTX/LrWNWV"
    "Pl1Q/G1Yt/eNVvl29fofXe0r5a1se4/jBReh7jfw3qPfY1XS0ZBavbica/pdMTtBOjbnJs5vcKnzpJzDv1ettYgX"
    "4rYb/69dubkQqoxbZTjQw5OBZ0fgMhXP/+gnv/4t+xN7hf2Z/YX9gL0aXVu7uva3tbUfXl27tsauwj/+yf7FXmTX"
    "2MuB5lpXI57/3QsvXhd/+OMLL1/vefeo906+1up7qw119Z/7d7v9RSRlt7MHfw6x7yJ9H0nrea892r75vVZr3/qt"
    "NYG6gW7K3px3IL673cn5CNJdXfw77Vu//X7c/v/efkNBlgHCSTjgbrW3l7bt7Z5uTPVAHiIisB4MIm0+XZFXmlCA"
    "bfiybm02zvZ3jPsaUoiEAllR8PnA8R/gEnZn"
)


def artifact():
    """序列化的字节（bytearray），交给 jax.export.deserialize。
    The serialized bytes (a bytearray), for jax.export.deserialize."""
    return bytearray(zlib.decompress(base64.b64decode("".join(ARTIFACT))))


# ✍️ BEGIN
def train(blob, stream):
    """把序列化的训练步读回来，从 w = 0 开始在 stream 的每个 (x, y) 上执行一步；这一步的更新
    不是有限的数时就跳过它（参数保持不变）。返回 (参数, 每一步的损失)。
    Read the serialized step back and, from w = 0, run one step on every (x, y) of stream;
    skip a step whose update is not finite (the parameters stay as they were). Returns
    (params, the loss of every step).
    """
    step = jax.export.deserialize(blob)
    w = jnp.zeros(D, jnp.float32)
    losses = []
    for x, y in stream:
        new_w, loss = step.call(w, x, y)
        if np.isfinite(loss):  # 炸了的一步不算 / a step that blew up does not count
            w = new_w
        losses.append(loss)
    return w, jnp.stack(losses)


# ✍️ END


def make_stream(seed=7):
    """STEPS 个小批量 (x (B, D), y (B,))（NumPy），由种子生成。
    STEPS mini-batches (x (B, D), y (B,)) as NumPy arrays, generated from the seed."""
    rng = np.random.default_rng(seed)
    w_true = np.array([0.8, -0.6, 0.5, 0.3])
    stream = []
    for _ in range(STEPS):
        x = rng.normal(size=(B, D)).astype(np.float32)
        y = np.sqrt(np.maximum(x @ w_true + 1.0, 0.0)) + 0.05 * rng.normal(size=B)
        stream.append((x, y.astype(np.float32)))
    return stream


def reference_run(blob, stream):
    """测试自己的驱动：同一个训练步，更新不是有限的数时保留原来的参数。
    The test's own driver: the same step, keeping the old parameters when an update is not
    finite."""
    step = jax.export.deserialize(blob)
    w, losses = np.zeros(D, np.float32), []
    for x, y in stream:
        new_w, loss = (np.asarray(v) for v in step.call(jnp.asarray(w), x, y))
        losses.append(loss)
        if np.isfinite(new_w).all() and np.isfinite(loss):
            w = new_w
    return w, np.array(losses)


def refusing_the_reference(monkeypatch):
    """train 运行期间，reference_run 一被调用就报错：训练要自己做。
    While train runs, calling reference_run fails: train must do the training itself.
    """

    def refuse(*args, **kwargs):
        raise AssertionError("train called reference_run / train 调用了参考实现")

    monkeypatch.setitem(globals(), "reference_run", refuse)


def host_traffic(monkeypatch):
    """从现在起记下主机与设备之间的数据（monkeypatch.undo() 为止）：交给 Exported.call 的主机值
    （NumPy 数组、Python 数：每个都是一次隐式的主机到设备传输）记进 "to_device"，从设备读回
    主机的数组（np.asarray、np.isfinite、float()、.tolist()……）记进 "to_host"。它不看传输守卫，
    守卫关掉了也照样记。
    From now on (until monkeypatch.undo()) record the data moved between host and devices:
    host values handed to Exported.call (NumPy arrays, Python numbers: each an implicit
    host-to-device transfer) go into "to_device", arrays read back to the host (np.asarray,
    np.isfinite, float(), .tolist()...) into "to_host". It does not look at the transfer guards,
    and records the same with a guard switched off.
    """
    moved = {"to_device": [], "to_host": []}
    exported, array_type = jax.export.Exported, type(jnp.zeros(()))
    real_call, value, to_numpy = exported.call, array_type._value, array_type.__array__

    def call(self, *args, **kwargs):
        for leaf in jax.tree.leaves((args, kwargs)):
            if not isinstance(leaf, jax.Array):
                moved["to_device"].append(f"{type(leaf).__name__} {np.shape(leaf)}")
        return real_call(self, *args, **kwargs)

    reading = []  # __array__ reads through _value: count such a read once / 只记一次

    def host_value(array):
        if not reading:
            moved["to_host"].append(f"{array.dtype}{list(array.shape)}")
        return value.fget(array)

    def host_copy(array, *args, **kwargs):
        moved["to_host"].append(f"{array.dtype}{list(array.shape)}")
        reading.append(array)
        try:
            return to_numpy(array, *args, **kwargs)
        finally:
            reading.pop()

    monkeypatch.setattr(exported, "call", call)
    monkeypatch.setattr(array_type, "_value", property(host_value))
    monkeypatch.setattr(array_type, "__array__", host_copy)
    return moved


def test_debug_nans_stops_at_the_artifact_not_inside_it():
    """先诊断，再修。测试自己的驱动在 jax.debug_nans 下执行训练步：第一个输出里有 NaN 的调用
    抛出 FloatingPointError，消息的最后一个词是造出 NaN 的原语。预测：这是第几步（从 0 数起）、
    消息点名的是哪个原语？然后不开 debug_nans，在同一步上再执行一次：这一步的损失是有限的数吗？
    它的更新呢？读代码说不出这些：要自己跑工具。
    Diagnose first, then repair. The test's own driver runs the step under jax.debug_nans: the
    first call with a NaN in its outputs raises FloatingPointError, and the message's last word
    is the primitive that made it. Predict: which step is it (counting from 0), and which
    primitive does the message name? Then, without debug_nans, run that same step again: is its
    loss a finite number? And its update? Reading cannot tell: run the tool yourself.
    """
    step = jax.export.deserialize(artifact())
    w, report = jnp.zeros(D, jnp.float32), None
    with jax.debug_nans(True):
        for k, (x, y) in enumerate(make_stream()):
            try:
                new_w, _ = step.call(w, jnp.asarray(x), jnp.asarray(y))
            except FloatingPointError as err:
                report = (k, str(err).split()[-1])
                break
            w = new_w
    new_w, loss = step.call(w, jnp.asarray(x), jnp.asarray(y))
    assert report == (__, __)
    assert (bool(jnp.isfinite(loss)), bool(jnp.isfinite(new_w).all())) == (__, __)


def test_the_parameters_stay_finite():
    """症状一：训练之后参数该是有限的数，每一步的损失也是；最后一步的损失不到第一步的一半。
    Symptom one: after training the parameters should be finite numbers, and so every step's
    loss; the last step's loss under half the first's.
    """
    w, losses = train(artifact(), make_stream())
    print(f"losses {np.asarray(losses)}; w {np.asarray(w)}")
    assert np.isfinite(np.asarray(w)).all()
    assert np.isfinite(np.asarray(losses)).all()
    assert float(losses[-1]) < float(losses[0]) / 2


def test_the_loop_moves_nothing_implicitly(monkeypatch):
    """症状二：除了 train 自己明确地用 jax.device_put 放上设备的东西，循环不该在主机和设备之间
    搬任何数据。在 jax.transfer_guard("disallow") 之下跑 train 不该被拒绝；不看守卫的计数
    （host_traffic）也该是空的：交给 Exported.call 的全是设备上的数组，没有数组被读回主机。
    Symptom two: beyond what train puts on the devices explicitly with jax.device_put, its
    loop should move no data between host and devices. Running train under
    jax.transfer_guard("disallow") should not be refused, and a count that does not rely on the
    guard (host_traffic) should come back empty: every value handed to Exported.call is on the
    devices already, and no array is read back to the host.
    """
    blob, stream = artifact(), make_stream()
    moved = host_traffic(monkeypatch)
    try:
        with jax.transfer_guard("disallow"):
            jax.block_until_ready(train(blob, stream))
    except jax.errors.JaxRuntimeError:
        monkeypatch.undo()
        print("the transfer guard refused a transfer inside train")
        raise AssertionError("train moved data implicitly") from None
    monkeypatch.undo()
    print(f"host values handed to Exported.call: {moved['to_device']}")
    print(f"arrays read back to the host: {moved['to_host']}")
    assert moved == {"to_device": [], "to_host": []}


def test_training_matches_the_reference(monkeypatch):
    """两个症状都修好后，参数和每一步的损失与测试自己的驱动一致：更新不是有限的数的那一步被跳过，
    其余每一步都算数。
    With both symptoms repaired, the parameters and every step's loss match the test's own
    driver: the step whose update is not finite is skipped, every other step counts.
    """
    blob, stream = artifact(), make_stream()
    refusing_the_reference(monkeypatch)
    w, losses = train(blob, stream)
    monkeypatch.undo()
    assert isinstance(w, jax.Array) and isinstance(losses, jax.Array)
    w_ref, losses_ref = reference_run(blob, stream)
    print(f"JAX w {np.asarray(w)}; reference w {w_ref}")
    np.testing.assert_allclose(losses, losses_ref, rtol=1e-6)
    np.testing.assert_allclose(w, w_ref, rtol=1e-6)
