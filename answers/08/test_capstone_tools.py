"""08 · 综合三：只以字节交来的模型 / capstone three: a model that arrives as bytes.

合作方把他们的模型用 jax.export 导出（带上导数规则）、序列化，交给你的只是一串字节（下面的
ARTIFACT，压缩后用 base64 写成文本）：`jax.export.deserialize` 把它变回一个 Exported，
`.call(w, x)` 给出这一批每一行的预测。它的源码你拿不到，用 NumPy 重写它也就无从谈起。
`# ✍️ BEGIN` 与 `# ✍️ END` 之间是你这边的训练驱动：在一串由种子生成的小批量上，对均方误差求
梯度、一步步下降。生产环境在 `jax.debug_nans`（它的 NaN 守卫）之下跑训练，任务在某一步中止了，
可它算出的每个损失、梯度和参数都是有限的数：逐步打印 isfinite、看每一批数据的类型和形状、把
驱动里的中间值都打印出来，都找不到它。哪一步、守卫一共拦下几步、它点名的是什么，读代码说不出来：
要用工具。第一个测试要你预测工具的报告；其余测试钉住症状。只修改标记之间的代码。

A partner exported their model with jax.export (its derivative rule included) and serialized
it; all you get is bytes (ARTIFACT below, compressed and written as base64 text):
`jax.export.deserialize` turns them back into an Exported whose `.call(w, x)` predicts every
row of a batch. Its source is not yours to read, so there is no rewriting it in NumPy either.
Between `# ✍️ BEGIN` and `# ✍️ END` is your side, the training driver: on a stream of
mini-batches generated from a seed it takes the gradient of the mean squared error and descends
step by step. Production runs training under `jax.debug_nans`, its NaN guard, and the job
stopped at some step, yet every loss, gradient and parameter it computed is a finite number:
printing isfinite at every step, looking at every batch's types and shapes, and printing every
intermediate of the driver all miss it. Which step, how many steps the guard stops, and what it
names, reading cannot say: use the tool. The first test asks you to predict the tool's report;
the others pin the symptoms. Change only the code between the markers.
"""

import base64
import zlib

import jax
import jax.numpy as jnp
import numpy as np

from jaxkoans import __  # noqa: F401  (the koans' blanks)

B, D, STEPS, LR = 16, 4, 8, 0.5
# 合作方交来的模型：jax.export 序列化的字节，zlib 压缩，base64 编码。
# The partner's model: jax.export's serialized bytes, zlib-compressed, base64-encoded.
ARTIFACT = (
    "eNqtmHFsW0cZwO98/vzycnl6fXt98izv9BaZyDVp4qRpyNK0ZCHUadVGSSldVnWR5zhu6taO3dhOG7KqrapSylaNaZ1G"
    "VaYxbSON2lKgTGgaE0xoMEQnhBACBAhNgBj/0Im/qIQUvnt+dpykLvmDl37v7r7vu7vvvju/+6mPE/lsI0fIYfI0eYo8"
    "Sb5IRlGzi3yePE62k8fIVtJB2skm1H2K7CWPkkfIw2Qj2UCaSAPxYk9CJlHyKEWUZ1DOoHylRjZT1DfJeRqd8oaxLF9D"
    "uYbyHRR0Iz/E8o+ubH0I7Q/JfnIuQjraO7e040tqKCk/HrL8ULftqWlXHoYy6qyBYNRY/+fSEno0el0/r9uv8zOEZGps"
    "UrfBtUu/rTV+l+8zRtlnG+ZkoprNvairzeZm8mknDpnl++XzaZSMm89KLi/XSHlhjcSL5TV1WZ5DeQPl+2rZ5QMsNzZi"
    "3lC+gfJx4/1z6VmVp9qnNpdsVZ7r5fbG3fq5/eDu+nL7yd16ua3EQR3fy7iY4b13v6DtLyYmMqlde0fis53tnY+1dxDa"
    "CRSaKePM1k1/0A6FW6NdPX39g0Nsm+cfzXRB4TrX3YdXyxBqOZe1IA9iIZ14WVep6kGdB912UHYN6q6RDeIrqpsjfvTn"
    "dhQL0+Qmd1rctkdGohS4zoTp1/2KaSpmyG+biudLig0tYnAnhMUYtfpBDFORBasAlo3/TIMBRMQ4FXFVKPPilCVOW9ZF"
    "EJEXoFW8ZjAl2tnl7/ZDm0EJRKETukSgT+zg0C2UgTam6EOXoAdLU78iArvFHg690Cf2UdghDlDohwFxiMIg7IQhkaSw"
    "W0xR2COOURiGEXHcgH1CKclRIl1izoT9survhgMwJs5ZcFBcaIFDQnlWqqfmxfMcxq0XQSgvSUXfJXGFQ1y80gIJETEh"
    "Kd40IBWybUE1altG9Qyx6wzef982msmqXy9Trl+/LqZEWhwTWVtVpQ47VswRSumf/DTkZ/CLX2rsBx+KHL5/JY6LgiiF"
    "AqFguUt/mGLlwzt3djjtM/040wZ3CK9bomr1Z8U2qhFSlXo8ETagRWBA1SJUloamRpihRZhqiggD01B0DqBz3BEGhqIA"
    "MCXCqDno/SoA3UfbqOKdAEY1bZQyxftTD4uOKXbCn+JponxOB6biW5FvqjJVj+U4bjyjgdgJjQHTINasY8lVXzPqDR1i"
    "Iacd9IWwbenMdxZL0y9i52UEzIhdMtEehFhY+qnMF0a7DUbsZYspSlA027GrfsYhpDDfq2iCgB5rDTAdwgwrQbSEqep7"
    "HcuWVu7VIdKmjfYKxXubGSGmYcjUlsGqztgaU4BS8wlVBqeA4sX952AKUxDVh8sB/Cl6VQZW7KBcjQqxoIyK+X1B7KBx"
    "7qVM10aHQor3GDOCioYbJUfFsBjERlpwRYo7izubisHtx5JrTl8fo0DJtzac0Lll6QZvPjA+PDbQ19PT0zsU6uvrC6jc"
    "b4TUYbOnuSXSO8wN/C4EDAv/bMPSA5EAbtxEKZ0ppqfJ7JFMjmRzk6VMimRLqMpn5vDLQiZmconJZKJQjKen45PprNQl"
    "c9OFYmK6KOuJyUlZzKSKpZlpWTtcmk7KcjJXjE+lplMziUx8dgtJJjKZsuNkKZmStcLxmaK0TKZn05OOBsc8IjWF0kRx"
    "JpF0xi9k0mX3fMKZKFrM5qPJrigO3Z6fI3kcL50skqPp4jb52oTTx2eP5uNHEycjURxlupDPFVKbjs7mN0UiUVwZQUt7"
    "qZAqxAtHEvlUPJ/LzGVzM/kj6UKWZDEL7dOlbDyfmCmmi2lc6LJuJpXHYBIFOU+8Zp618zqzRVFNtpdT+tl1xCbdZXyr"
    "M+6kODE9V0ldoZR1cicTV6PbRhIzUwV0nIznSsV4sliIH84kinKyQx3jDzB2Psi4ZXxN5PWWW7Ph9VzkBtez4SrrmfA8"
    "1DM5G1qnlzw59zdK5XRuJhuJ/K99WfaMrGML8Yyuw+uBiVrjXdl9eWxnUgX8aeK5OJwjMio8/unZRDHlNOIdpGyX2+3W"
    "cG+zCfx150sTmA3ScDsMOcrf+tnPf/0b9iP2Z/ZRYGFhceG9hYXvLi7cXGA/YYvKX27/jb3N3lX+fvu2Y7zpGp3GotNY"
    "XOC3fnvr7XfYH9h7/K3f33r3HXazwiySVZL50hqmanLtT/57aekpFOm3sUafR10R5SSK9O9w9Q331sdPHffq89MnOGaD"
    "G0ptLH9F/cduLLU898y9+jz39XXG8+MHxHPm3sp4Hnbt31vWO1f0tRq/1fn6JtreQJE+HNu13yOPyxM21GfFVmTFoGTF"
    "QC0rso9u2XR+mRNDyxyIcFjFQee1TILyVa2ybgcmkQRNrpdBUJKgGR0ZGXFQMGjqikRBvxnEwvMvvJ9t0RaFZtFJkfus"
    "CIg+VewEkT7GFH8gyAXe15LzWiCMUBhqQQQMa9AmlFaX9KIO6R2DTtFNkQR7KXRDj+in0CsGKfQh9O3eA/3WMDLaiIt1"
    "+w/AgDWGioNluBPjcRi0EqhIulg3pUk8tLKoyrlgVyjBbusEKuacTpdCQUQ6QRk7JfasIrTX/JTBqVNIaewFjb34khgW"
    "I2Kf2B8KiAO24jAdApriABqDixdryNDW14KavoYSUbWa3SrApkaoqkpoU5HRkNyYIVv4YqAZYCAhGbjvMIigpnm/7ZGc"
    "ZiGnfdnDqAoOp11lVhhCO8IDSDwGIp0RG1IcMDNj+xBomGLFDnEcg/ljKYk2PBAzJdqA6sPRQde47ziWqsG8BjNhtNlQ"
    "vBcY9zMLB1RNpqi+LmQsSrUnVMvhHRee5JkjHOEJmYcxCU96rMeZkSHwqGXgmW4YM/CoNfNQKBpu6QoixXHVb4Z4ACnH"
    "sCOGWeYbRJ06gLOWVmqRphZ/qnizhlpW4k0VXSq4UuGd+/FTPYb5v4DJGiJyFat4pAYm5B3qAEUtTJwgJ1f0XjnU6ius"
    "aqje8FXN8jVcG0j5Ul2prtzlVYVEAueaW333lesrrrbKTdhwyA/9lD976fmXr7DXA/Pzp+fPz8+/eXp+YZ5dUBav32Tn"
    "2Gl+9urZc6+wV9l58qB7q2JrWirfSZVv7yPYfhSlYr+xVP++2OX23e7qf7e0vvujyZmtgSjE59Tq3SV3llbeJZvdMeX/"
    "lzQR7ng3OiMtf1EaHIvX0dX2rcTyHxzTS7xOXZF3s3uk/gsgB+MM"
)


def artifact():
    """序列化的字节（bytearray），交给 jax.export.deserialize。
    The serialized bytes (a bytearray), for jax.export.deserialize."""
    return bytearray(zlib.decompress(base64.b64decode("".join(ARTIFACT))))


def squared_error(model, w, x, y):
    """模型在这一批上的均方误差。/ The model's mean squared error on the batch."""
    return jnp.mean((model.call(w, x) - y) ** 2)


# ✍️ BEGIN
def train(blob, stream):
    """把序列化的模型读回来，从 w = 0 开始在 stream 的每个 (x, y) 上走一步梯度下降（学习率 LR）。
    返回 (参数, 每一步之前的损失)。
    Read the serialized model back and, from w = 0, take one gradient step (rate LR) on every
    (x, y) of stream. Returns (params, the loss before every step).
    """
    model = jax.export.deserialize(blob)

    @jax.jit
    def step(w, x, y):
        loss, grad = jax.value_and_grad(squared_error, argnums=1)(model, w, x, y)
        return w - LR * grad, loss

    w = jax.device_put(np.zeros(D, np.float32))
    losses = []
    for x, y in stream:
        w, loss = step(w, *jax.device_put((x, y)))
        losses.append(loss)
    return w, jnp.stack(losses)


# ✍️ END


def make_stream(seed=16):
    """STEPS 个小批量 (x (B, D), y (B,))（NumPy），由种子生成；缺失的读数记作 0。
    STEPS mini-batches (x (B, D), y (B,)) as NumPy arrays, generated from the seed; missing
    readings are recorded as 0."""
    rng = np.random.default_rng(seed)
    w_true = np.array([0.8, -0.6, 0.5, 0.3])
    stream = []
    for _ in range(STEPS):
        x = rng.normal(size=(B, D)).astype(np.float32)
        x[rng.random(size=(B, D)) < 0.15] = 0.0
        y = np.tanh(x @ w_true) + 0.1 * np.linalg.norm(x[:, 1::2], axis=1)
        stream.append((x, (y + 0.05 * rng.normal(size=B)).astype(np.float32)))
    return stream


def reference_run(blob, stream):
    """测试自己的驱动：同一个模型、同一个损失，不开守卫，逐步执行。
    The test's own driver: the same model and loss, step by step, without the guard."""
    model, w, losses = jax.export.deserialize(blob), jnp.zeros(D, jnp.float32), []
    for x, y in stream:
        loss, grad = jax.value_and_grad(squared_error, argnums=1)(model, w, x, y)
        w = w - LR * grad
        losses.append(loss)
    return np.asarray(w), np.asarray(losses)


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


def test_debug_nans_stops_where_no_output_is_nan():
    """先诊断，再修。测试自己的驱动在 jax.debug_nans 之下逐步训练：守卫拦下一步时抛出
    FloatingPointError，消息的最后一个词是它点名的原语，这一步再不开守卫重算一遍。每一步测试都
    记下逐步打印 isfinite 会看到的：损失、梯度、参数和每一行的误差是不是都是有限的数（每一步
    都是）。预测：守卫第一次拦下是在第几步（从 0 数起），整个训练里一共拦下几步，点名的是哪个
    原语？读代码说不出这些，逐步打印也说不出：要自己跑工具。
    Diagnose first, then repair. The test's own driver trains step by step under
    jax.debug_nans: when the guard stops a step it raises FloatingPointError, the message's last
    word is the primitive it names, and the step is computed again without the guard. At every
    step the test notes what printing isfinite would show: whether the loss, the gradient, the
    parameters and every row's error are all finite (at every step they are).
    Predict: at which step (from 0) does the guard first stop, at how many steps of the run
    does it stop in all, and which primitive does it name? Reading cannot tell, nor can
    printing at every step: run the tool yourself.
    """
    model = jax.export.deserialize(artifact())
    value_and_grad = jax.value_and_grad(squared_error, argnums=1)
    w, stopped, named, finite = jnp.zeros(D, jnp.float32), [], set(), []
    for k, (x, y) in enumerate(make_stream()):
        x, y = jnp.asarray(x), jnp.asarray(y)
        try:
            with jax.debug_nans(True):
                loss, grad = value_and_grad(model, w, x, y)
        except FloatingPointError as err:
            stopped.append(k)
            named.add(str(err).split()[-1])
            loss, grad = value_and_grad(model, w, x, y)  # the step without the guard / 不开守卫
        seen = (loss, grad, w, model.call(w, x) - y)  # what printing shows / 打印能看到的
        finite.append(all(bool(jnp.isfinite(v).all()) for v in seen))
        w = w - LR * grad
    assert all(finite)  # what an isfinite print per step shows / 逐步打印 isfinite 看到的
    assert (stopped[0], len(stopped)) == (5, 2)
    assert sorted(named) == ["call_exported"]


def test_the_guard_lets_every_step_through(monkeypatch):
    """症状一：生产环境在 jax.debug_nans 之下跑 train，它中途被拦下。修好之后整个训练在守卫之下
    跑完，模型的每一次调用都在守卫之下（守卫不能在标记之间关掉）；参数是有限的数，最后一步的损失
    不到第一步的一半。
    Symptom one: production runs train under jax.debug_nans and it is stopped halfway. Once
    repaired, the whole run completes under the guard, every call of the model made with the
    guard on (it may not be switched off between the markers); the parameters are finite, and
    the last step's loss is under half the first's.
    """
    guard_on, real_call = [], jax.export.Exported.call

    def call(self, *args, **kwargs):
        guard_on.append(jax.config.jax_debug_nans)
        return real_call(self, *args, **kwargs)

    monkeypatch.setattr(jax.export.Exported, "call", call)
    try:
        with jax.debug_nans(True):
            w, losses = jax.block_until_ready(train(artifact(), make_stream()))
    except FloatingPointError:
        monkeypatch.undo()
        print("production's guard (jax.debug_nans) stopped train")
        raise AssertionError("the guard stopped train") from None
    monkeypatch.undo()
    print(f"losses {np.asarray(losses)}; w {np.asarray(w)}; guard on at each call: {guard_on}")
    assert guard_on and all(guard_on)
    assert np.isfinite(np.asarray(w)).all()
    assert float(losses[-1]) < float(losses[0]) / 2


def test_the_loop_moves_nothing_implicitly(monkeypatch):
    """症状二：除了 train 自己明确地用 jax.device_put 放上设备的东西，循环不该在主机和设备之间
    搬任何数据。在 jax.transfer_guard("disallow") 之下跑 train 不该被拒绝；不看守卫的计数
    （host_traffic）也该是空的：交给 Exported.call 的全是设备上的数组，没有数组被读回主机。参数和
    每一步的损失与测试自己的驱动一致。
    Symptom two: beyond what train puts on the devices explicitly with jax.device_put, its
    loop should move no data between host and devices. Running train under
    jax.transfer_guard("disallow") should not be refused, and a count that does not rely on the
    guard (host_traffic) should come back empty: every value handed to Exported.call is on the
    devices already, and no array is read back to the host. The parameters and every step's
    loss match the test's own driver.
    """
    blob, stream = artifact(), make_stream()
    refusing_the_reference(monkeypatch)
    moved = host_traffic(monkeypatch)
    try:
        with jax.transfer_guard("disallow"):
            w, losses = jax.block_until_ready(train(blob, stream))
    except jax.errors.JaxRuntimeError:
        monkeypatch.undo()
        print("the transfer guard refused a transfer inside train")
        raise AssertionError("train moved data implicitly") from None
    monkeypatch.undo()
    print(f"host values handed to Exported.call: {moved['to_device']}")
    print(f"arrays read back to the host: {moved['to_host']}")
    assert moved == {"to_device": [], "to_host": []}
    assert isinstance(w, jax.Array) and isinstance(losses, jax.Array)
    w_ref, losses_ref = reference_run(blob, stream)
    np.testing.assert_allclose(losses, losses_ref, rtol=1e-5)
    np.testing.assert_allclose(w, w_ref, rtol=1e-5, atol=1e-6)
