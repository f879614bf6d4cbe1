"""progress.py bench 07: your chapter 07 kernels compiled on a TPU, timed against jitted XLA.

Each kernel runs at a realistic size (a 4096-scale matmul, softmax and layer norm, flash
attention at 4096 x 128, the paged and grouped kernels at serving sizes), with the block sizes
below (`--block kernel.name=value` changes one). The first call compiles and is not timed;
then each of `--repeats` calls is timed to `block_until_ready`, and the median is shown, for
the kernel and for the plain jnp version under jax.jit. The error is the kernel's relative
error against that XLA result (jaxkoans.api.tpu: float32 with dots at Precision.HIGHEST, both
sides). Without a TPU it says so and exits 0; `--cpu-interpret` runs small sizes in the
interpreter on the CPU, to try the code path (its times mean nothing).
`--answers` benches the answer key instead of your koans (the table of chapter 07's README).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from jaxkoans.api import tpu


@dataclass(frozen=True)
class Case:
    kernel: str  # the TODO function
    file: str  # its koan file in chapter 07
    dtype: str
    shapes: dict  # "real" / "small": the input shapes
    blocks: dict  # "real" / "small": the kernel's block keyword arguments
    inputs: str  # how to make the inputs: "normal" or a maker below
    xla: str  # the plain jnp version: a reference of the koan file, or a lambda's name below


CASES = [
    Case("matmul_bf16", "test_hardware.py", "bfloat16",
         {"real": [(4096, 4096), (4096, 4096)], "small": [(256, 256), (256, 256)]},
         {"real": {"bm": 512, "bn": 512, "bk": 512}, "small": {"bm": 128, "bn": 128, "bk": 128}},
         "normal", "matmul"),
    Case("add_relu", "test_kernels.py", "float32",
         {"real": [(4096, 4096), (4096, 4096)], "small": [(16, 256), (16, 256)]},
         {"real": {"bm": 256, "bn": 1024}, "small": {"bm": 8, "bn": 128}},
         "normal", "add_relu"),
    Case("row_softmax", "test_kernels.py", "float32",
         {"real": [(4096, 4096)], "small": [(16, 128)]},
         {"real": {"bm": 128}, "small": {"bm": 8}}, "normal", "softmax"),
    Case("layer_norm", "test_kernels.py", "float32",
         {"real": [(4096, 4096), (4096,), (4096,)], "small": [(16, 128), (128,), (128,)]},
         {"real": {"bm": 128}, "small": {"bm": 8}}, "normal", "_layer_norm_reference"),
    Case("flash_attention_forward", "test_flash_attention.py", "bfloat16",
         {"real": [(4096, 128)] * 3, "small": [(256, 128)] * 3},
         {"real": {"bq": 512, "bk": 512}, "small": {"bq": 128, "bk": 128}},
         "normal", "reference_attention"),
    Case("causal_flash_attention_forward", "test_flash_attention.py", "bfloat16",
         {"real": [(4096, 128)] * 3, "small": [(256, 128)] * 3},
         {"real": {"bq": 512, "bk": 512}, "small": {"bq": 128, "bk": 128}},
         "normal", "causal_reference_attention"),
    # q [sequences, heads, C], pages [pool, PAGE, C], page_table [sequences, pages per sequence]
    Case("paged_scores", "test_paged_gather.py", "float32",
         {"real": [(32, 32, 128), (2048, 8, 128), (32, 64)], "small": [(2, 8, 128), (8, 8, 128), (2, 4)]},
         {"real": {}, "small": {}}, "paged", "_reference"),
    # x [BM * blocks, K], w [experts, K, N], group_ids [blocks]
    Case("grouped_matmul", "test_scalar_prefetch.py", "float32",
         {"real": [(4096, 512), (8, 512, 512), (512,)], "small": [(32, 128), (3, 128, 128), (4,)]},
         {"real": {}, "small": {}}, "grouped", "grouped"),
    Case("double_with_prefetch", "test_tpu_dma.py", "float32",
         {"real": [(4096, 1024)], "small": [(32, 128)]}, {"real": {}, "small": {}},
         "normal", "double"),
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


def _inputs(case: Case, size: str) -> list:
    import jax
    import jax.numpy as jnp

    shapes = case.shapes[size]
    keys = jax.random.split(jax.random.key(0), len(shapes))
    floats = [jax.random.normal(k, s).astype(case.dtype) for k, s in zip(keys, shapes, strict=True)]
    if case.inputs == "paged":  # every sequence's pages drawn from the pool
        pool, (seqs, npages) = shapes[1][0], shapes[2]
        table = jax.random.randint(keys[2], (seqs, npages), 0, pool, jnp.int32)
        return [floats[0], floats[1], table]
    if case.inputs == "grouped":  # an expert per block of rows
        experts, blocks = shapes[1][0], shapes[2][0]
        return [floats[0], floats[1], jax.random.randint(keys[2], (blocks,), 0, experts, jnp.int32)]
    return floats


def _module(directory: Path, file: str):
    spec = importlib.util.spec_from_file_location(
        f"jaxkoans_bench_{Path(file).stem}", directory / file
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _median_ms(call, repeats: int) -> float:
    import jax

    jax.block_until_ready(call())  # compiles; not timed
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def bench_case(
    case: Case, directory: Path, *, size: str, interpret: bool, repeats: int, blocks: dict
) -> dict:
    """One row of the table: kernel, dtype, shape, compiles, error, kernel ms, XLA ms."""
    import jax

    row = {"kernel": case.kernel, "dtype": case.dtype,
           "shape": " ".join("x".join(map(str, s)) for s in case.shapes[size])}  # fmt: skip
    module = _module(directory, case.file)
    kernel = getattr(module, case.kernel)
    xla = _xla_functions().get(case.xla) or getattr(module, case.xla)
    args = _inputs(case, size)
    kwargs = {**case.blocks[size], **blocks.get(case.kernel, {}), "interpret": interpret}
    dtypes = [a.dtype for a in args]
    with tpu.precision(dtypes):
        run_kernel = functools.partial(kernel, *args, **kwargs)
        run_xla = functools.partial(jax.jit(xla), *args)
        try:
            got = jax.block_until_ready(run_kernel())
        except Exception as error:  # a TODO not written yet, or a kernel Mosaic refuses
            if type(error).__name__ == "TodoError":
                return row | {"compiles": "TODO: 还没写 / not written yet"}
            text = (str(error).strip().splitlines() or [""])[0][:160]
            return row | {"compiles": f"no: {type(error).__name__}: {text}"}
        want = jax.block_until_ready(run_xla())
        row |= {"compiles": "yes", "error": f"{tpu.relative_error(got, want):.1e}"}
        row["kernel ms"] = f"{_median_ms(run_kernel, repeats):.3f}"
        row["XLA ms"] = f"{_median_ms(run_xla, repeats):.3f}"
    return row


COLUMNS = ("kernel", "dtype", "shape", "compiles", "error", "kernel ms", "XLA ms")


def table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("chapter", choices=["07"], help="the chapter whose kernels to bench")
    parser.add_argument(
        "--cpu-interpret",
        action="store_true",
        help="small sizes in the interpreter on the CPU (tries the code path; times mean nothing)",
    )
    parser.add_argument(
        "--answers", action="store_true", help="bench the answer key, not your koans"
    )
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per kernel (median)")
    parser.add_argument(
        "--only", action="append", default=[], metavar="KERNEL", help="only this kernel"
    )
    parser.add_argument("--block", action="append", default=[], metavar="KERNEL.NAME=VALUE",
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
    root = args.checkout.root
    directory = root / ("answers" if args.answers else "koans") / args.chapter
    size = "small" if args.cpu_interpret else "real"
    repeats = args.repeats or (2 if args.cpu_interpret else 20)
    blocks = _blocks(args.block)
    device = jax.devices()[0]
    where = "CPU, interpret=True" if args.cpu_interpret else tpu.describe(device)
    print(f"bench 07 ({'answers' if args.answers else 'koans'}): {where}; jax {jax.__version__}; "
          f"median of {repeats}, warm-up excluded" + "".join(f"; {n}" for n in notes))  # fmt: skip
    rows = []
    for case in CASES:
        if args.only and case.kernel not in args.only:
            continue
        rows.append(bench_case(case, directory, size=size, interpret=args.cpu_interpret,
                               repeats=repeats, blocks=blocks))  # fmt: skip
        sys.stdout.flush()
    print(table(rows))
    return 0
