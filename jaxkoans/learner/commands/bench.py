"""progress.py bench 07: your chapter 07 kernels compiled on a TPU, timed against jitted XLA.

At realistic sizes with the block sizes below (`--block kernel.name=value` changes one): the first
call compiles, then the median of `--repeats` calls to `block_until_ready`, for the kernel and for
its plain jnp version under jax.jit; the error is relative to that XLA result (jaxkoans.api.tpu).
Without a TPU it says so and exits 0; `--cpu-interpret` tries small sizes in the interpreter on the
CPU (its times mean nothing); `--answers` benches the answer key (chapter 07's README table).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from jaxkoans.api import tpu


@dataclass(frozen=True)
class Case:
    kernel: str  # the TODO function
    file: str  # its koan file in chapter 07
    dtype: str
    real: tuple  # (input shapes, block keyword arguments) on a TPU
    small: tuple  # the same for --cpu-interpret
    xla: str  # the plain jnp version: a reference of the koan file, or a lambda's name below
    indices: bool = False  # the third input: indices into the second's first axis (int32)


SQUARE = [(4096, 4096)] * 2
ATTENTION_REAL = ([(4096, 128)] * 3, {"bq": 512, "bk": 512})
ATTENTION_SMALL = ([(256, 128)] * 3, {"bq": 128, "bk": 128})
CASES = [
    Case("matmul_bf16", "test_hardware.py", "bfloat16", (SQUARE, {"bm": 512, "bn": 512, "bk": 512}),
         ([(256, 256)] * 2, {"bm": 128, "bn": 128, "bk": 128}), "matmul"),
    Case("add_relu", "test_kernels.py", "float32", (SQUARE, {"bm": 256, "bn": 1024}),
         ([(16, 256)] * 2, {"bm": 8, "bn": 128}), "add_relu"),
    Case("row_softmax", "test_kernels.py", "float32", ([(4096, 4096)], {"bm": 128}),
         ([(16, 128)], {"bm": 8}), "softmax"),
    Case("layer_norm", "test_kernels.py", "float32", ([(4096, 4096), (4096,), (4096,)], {"bm": 128}),
         ([(16, 128), (128,), (128,)], {"bm": 8}), "_layer_norm_reference"),
    Case("flash_attention_forward", "test_flash_attention.py", "bfloat16", ATTENTION_REAL,
         ATTENTION_SMALL, "reference_attention"),
    Case("causal_flash_attention_forward", "test_flash_attention.py", "bfloat16", ATTENTION_REAL,
         ATTENTION_SMALL, "causal_reference_attention"),
    # q [sequences, heads, C], pages [pool, PAGE, C], page_table [sequences, pages per sequence]
    Case("paged_scores", "test_paged_gather.py", "float32", ([(32, 32, 128), (2048, 8, 128), (32, 64)], {}),
         ([(2, 8, 128), (8, 8, 128), (2, 4)], {}), "_reference", True),
    # x [BM * blocks, K], w [experts, K, N], group_ids [blocks]
    Case("grouped_matmul", "test_scalar_prefetch.py", "float32", ([(4096, 512), (8, 512, 512), (512,)], {}),
         ([(32, 128), (3, 128, 128), (4,)], {}), "grouped", True),
    Case("double_with_prefetch", "test_tpu_dma.py", "float32", ([(4096, 1024)], {}),
         ([(32, 128)], {}), "double"),
]  # fmt: skip


def _xla_functions():
    import jax
    import jax.numpy as jnp

    return {
        "matmul": lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype),
        "add_relu": lambda x, y: jax.nn.relu(x + y),
        "softmax": lambda x: jax.nn.softmax(x, axis=-1),
        "double": lambda x: 2 * x,
        # each row block times its expert: the weights gathered per block, then one einsum
        "grouped": lambda x, w, ids: jnp.einsum(
            "gbk,gkn->gbn", x.reshape(ids.shape[0], -1, x.shape[1]), w[ids]
        ).reshape(x.shape[0], w.shape[2]),
    }


def _inputs(case: Case, shapes: list) -> list:
    import jax
    import jax.numpy as jnp

    keys = jax.random.split(jax.random.key(0), len(shapes))
    floats = [jax.random.normal(k, s).astype(case.dtype) for k, s in zip(keys, shapes, strict=True)]
    if case.indices:  # the pages of each sequence from the pool, an expert per block of rows
        return [*floats[:2], jax.random.randint(keys[2], shapes[2], 0, shapes[1][0], jnp.int32)]
    return floats


def _median_ms(call, repeats: int) -> float:
    import jax

    jax.block_until_ready(call())  # compiles; not timed
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def bench_case(case: Case, directory: Path, args, blocks: dict) -> dict:
    """One row of the table: kernel, dtype, shape, compiles, error, kernel ms, XLA ms."""
    import jax

    shapes, sized = case.small if args.cpu_interpret else case.real
    row = {"kernel": case.kernel, "dtype": case.dtype,
           "shape": " ".join("x".join(map(str, s)) for s in shapes)}  # fmt: skip
    spec = importlib.util.spec_from_file_location(
        f"jaxkoans_bench_{case.file[:-3]}", directory / case.file
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    xla = _xla_functions().get(case.xla) or getattr(module, case.xla)
    inputs = _inputs(case, shapes)
    kwargs = {**sized, **blocks.get(case.kernel, {}), "interpret": args.cpu_interpret}
    with tpu.precision([a.dtype for a in inputs]):
        run_kernel = functools.partial(getattr(module, case.kernel), *inputs, **kwargs)
        run_xla = functools.partial(jax.jit(xla), *inputs)
        try:
            got = jax.block_until_ready(run_kernel())
        except Exception as error:  # a TODO not written yet, or a kernel Mosaic refuses
            if type(error).__name__ == "TodoError":
                return row | {"compiles": "TODO: 还没写 / not written yet"}
            text = (str(error).strip().splitlines() or [""])[0][:160]
            return row | {"compiles": f"no: {type(error).__name__}: {text}"}
        want = jax.block_until_ready(run_xla())
        row |= {"compiles": "yes", "error": f"{tpu.relative_error(got, want):.1e}"}
        row["kernel ms"] = f"{_median_ms(run_kernel, args.repeats):.3f}"
        row["XLA ms"] = f"{_median_ms(run_xla, args.repeats):.3f}"
    return row


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("chapter", choices=["07"], help="the chapter whose kernels to bench")
    add("--cpu-interpret", action="store_true",
        help="small sizes in the interpreter on the CPU (tries the code path; times mean nothing)")  # fmt: skip
    add("--answers", action="store_true", help="bench the answer key, not your koans")
    add("--repeats", type=int, default=None, help="timed calls per kernel (median)")
    add("--only", action="append", default=[], metavar="KERNEL", help="only this kernel")
    add("--block", action="append", default=[], metavar="KERNEL.NAME=VALUE",
        help="a block size of your own, e.g. row_softmax.bm=256")  # fmt: skip


def _blocks(settings: list[str]) -> dict:
    found: dict[str, dict] = {}
    for setting in settings:
        name, _, value = setting.partition("=")
        kernel, _, keyword = name.partition(".")
        if not (kernel and keyword and value.isdigit()):
            raise SystemExit(
                f"--block {setting!r}: write KERNEL.NAME=VALUE, e.g. row_softmax.bm=256"
            )
        found.setdefault(kernel, {})[keyword] = int(value)
    return found


def run(args) -> int:
    notes = tpu.neutralise()  # before JAX imports libtpu
    if not args.cpu_interpret and not tpu.chips_on_this_machine():
        print("bench 07: 没有 TPU / no TPU on this machine: nothing to time "
              "(python progress.py bench 07 --cpu-interpret tries the code path on the CPU)")  # fmt: skip
        return 0
    import jax

    if args.cpu_interpret:
        jax.config.update("jax_platforms", "cpu")
    mine = "answers" if args.answers else "koans"
    directory = args.checkout.root / mine / args.chapter
    args.repeats = args.repeats or (2 if args.cpu_interpret else 20)
    blocks = _blocks(args.block)
    where = "CPU, interpret=True" if args.cpu_interpret else tpu.describe(jax.devices()[0])
    print(f"bench 07 ({mine}): {where}; jax {jax.__version__}; median of {args.repeats}, "
          "warm-up excluded" + "".join(f"; {n}" for n in notes), flush=True)  # fmt: skip
    columns = ("kernel", "dtype", "shape", "compiles", "error", "kernel ms", "XLA ms")
    rows = [bench_case(c, directory, args, blocks) for c in CASES if c.kernel in (args.only or [c.kernel])]  # fmt: skip
    print("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    return 0
