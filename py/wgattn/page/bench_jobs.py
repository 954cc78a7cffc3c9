"""The benchmark view: `wgattn bench`'s jobs timed by the browser's WebGPU.

`start` validates the request and lists the jobs (one per (seq_len, impl), baseline first within
a seq_len); `job_plans` builds the plans of one job (their bytes go through plan_bytes, as for a
live run); the page times them (static/webgpu.js Executor.time) and `record` turns the per-run
milliseconds into a record of exactly `wgattn bench --json`'s shape.
"""

from __future__ import annotations

import json
import statistics
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .. import bench, interfaces, registry
from ..plan import Plan
from ..target import Target
from .replies import BenchItem, BenchSkip, BenchStart
from .tables import BenchJob

# What one request may ask for: (lowest, highest) per knob, ...
RANGES: Dict[str, Tuple[int, int]] = {
    "B": (1, 64),
    "H": (1, 64),
    "D": (1, 256),
    "seq_len": (16, 8192),
    "runs": (10, 100),
    "warmup": (3, 20),
}
MOST_SEQ_LENS = 8  # ... at most this many sequence lengths ...
MOST_ELEMENTS = 1 << 24  # ... and B*H*S*D per tensor: 64 MiB of float32
LIMITS: Dict[str, object] = {**RANGES, "seq_lens": MOST_SEQ_LENS, "elements": MOST_ELEMENTS}  # as the page is told


def _int_in(request: Dict[str, Any], key: str, default: Optional[int] = None) -> int:
    lo, hi = RANGES[key]
    value = request.get(key, default)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        got = "nothing" if value is None else repr(value)
        raise ValueError(f"{key} must be an integer in {lo}..{hi}, got {got}")
    return value


def _seq_lens(value: object) -> List[int]:
    lo, hi = RANGES["seq_len"]
    wanted = f"a comma-separated list of 1 to {MOST_SEQ_LENS} integers in {lo}..{hi} (e.g. 128,256,512,1024)"
    items: List[object]
    if isinstance(value, str):
        items = [p.strip() for p in value.split(",") if p.strip()]
    elif isinstance(value, list):
        items = list(value)
    else:
        raise ValueError(f"seq_lens must be {wanted}, got {value!r}")
    out = set()
    for item in items:
        if isinstance(item, str) and item.isdigit():
            item = int(item)
        if not isinstance(item, int) or isinstance(item, bool) or not lo <= item <= hi:
            raise ValueError(f"seq_lens must be {wanted}; {item!r} is not")
        out.add(item)
    if not 1 <= len(out) <= MOST_SEQ_LENS:
        raise ValueError(f"seq_lens must be {wanted}, got {len(out)} lengths")
    return sorted(out)


def _impls(value: object, op: str, known: List[str]) -> List[str]:
    if value is None or value == "" or value == []:
        return list(known)
    items = [p.strip() for p in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ValueError(f"impls must be a list of kernel ids, got {value!r}")
    items = [i for i in items if i]
    for i in items:
        if i not in known:
            raise ValueError(f"unknown impl {i!r} for op {op}; its kernels: {known}")
    return [i for i in known if i in items]  # baseline first, whatever order was asked


def start(request_json: str, target: Target, bench_id: int) -> Tuple[BenchJob, BenchStart]:
    """{"op", "impls"?, "B", "H", "D", "seq_lens", "causal", "runs", "warmup"?} ->
    the job and the page's reply {"op", "baseline", "impls", "runs", "warmup", "seq_lens",
    "jobs": [{"index", "impl", "shape", "causal", "flops", "dtype", "plans"}], "skipped": [{"impl",
    "reason"}], "limits"}; ValueError says what is wrong and what is allowed. Kernels that
    `target`, the browser's device, cannot run are skipped with the reason (wgattn.target);
    a kernel that cannot take a job's sizes says so when its plans are asked for."""
    try:
        request = json.loads(request_json)
    except ValueError:
        raise ValueError("the benchmark request must be a JSON object") from None
    if not isinstance(request, dict):
        raise ValueError("the benchmark request must be a JSON object")
    op = request.get("op", "fwd")
    if op not in bench.OPS:
        raise ValueError(f"op must be one of {list(bench.OPS)}, got {op!r}")
    known = bench.kernel_impls(op)
    impls = _impls(request.get("impls"), op, known)
    b, h, d = _int_in(request, "B"), _int_in(request, "H"), _int_in(request, "D")
    seq_lens = _seq_lens(request.get("seq_lens", "128,256,512,1024"))
    runs = _int_in(request, "runs", default=10)
    warmup = _int_in(request, "warmup", default=3)
    causal = request.get("causal", False)
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be true or false, got {causal!r}")
    for s in seq_lens:
        if b * h * s * d > MOST_ELEMENTS:
            got = f"{b}*{h}*{s}*{d} = {b * h * s * d} at S={s}"
            raise ValueError(f"B*H*S*D must be at most {MOST_ELEMENTS} (64 MiB per float32 tensor), got {got}")
        if op == "probs" and b > s:
            raise ValueError(
                f"for probs B is the number of positions timed and must be <= every sequence length, got B={b} and S={s}"
            )

    reg = registry.load()
    skipped: List[BenchSkip] = []
    runnable: List[str] = []
    for impl in impls:
        why = target.lacks(reg.kernel(impl))
        if why:
            skipped.append({"impl": impl, "reason": why})
        else:
            runnable.append(impl)
    items: List[BenchItem] = []
    for s in seq_lens:
        shape = [b, h, s, d]
        for impl in runnable:
            plans = interfaces.of(reg.kernel(impl)).bench_plans(shape)  # the count bench_plan returns
            flops = bench.flops(op, shape, causal)
            dtype = bench.dtype_of(impl)
            items.append(
                {
                    "index": len(items),
                    "op": op,
                    "impl": impl,
                    "shape": shape,
                    "causal": causal,
                    "flops": flops,
                    "dtype": dtype,
                    "plans": plans,
                }
            )
    reply: BenchStart = {
        "bench": bench_id,
        "op": op,
        "baseline": known[0],
        "impls": impls,
        "runs": runs,
        "warmup": warmup,
        "seq_lens": seq_lens,
        "jobs": items,
        "skipped": skipped,
        "limits": LIMITS,
    }
    return BenchJob(items, runs), reply


def item(job: BenchJob, index: int) -> BenchItem:
    """Job `index` of a benchmark; ValueError naming the allowed range."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(job.items):
        raise ValueError(f"job index must be an integer in 0..{len(job.items) - 1}, got {index!r}")
    return job.items[index]


def job_plans(job: BenchJob, index: int, target: Target) -> List[Plan]:
    """Job `index`'s plans for `target`, built once and kept until another job's are asked for (or
    it is recorded); ValueError when the kernel cannot build them (a size past its limit, no tile
    that fits: the plans' `unavailable`)."""
    if job.cache is None or job.cache[0] != index:
        it = item(job, index)
        job.cache = None  # free the previous job's bytes first
        plans = bench.plans(it["impl"], it["op"], tuple(it["shape"]), it["causal"], target=target)
        why = next((p.unavailable for p in plans if p.unavailable), "")
        if why:
            raise ValueError(why)
        job.cache = (index, plans)
    return job.cache[1]


def record(job: BenchJob, index: int, samples_json: str, timer: str, adapter: str) -> Dict[str, object]:
    """The record of job `index` from its per-run milliseconds (every plan of a run summed), of
    `wgattn bench --json`'s shape {op, impl, shape, causal, dtype, adapter, median_ms, tflops,
    runs, timer}; the job's plans are dropped."""
    it = item(job, index)
    samples = [float(x) for x in json.loads(samples_json)]
    if not samples or any(not np.isfinite(x) for x in samples):
        raise ValueError(f"{it['impl']}: no finite timings ({samples[:3]}...)")
    if timer not in ("gpu", "wall"):
        raise ValueError(f"timer must be 'gpu' or 'wall', got {timer!r}")
    if statistics.median(samples) <= 0:
        raise ValueError(f"{it['impl']}: median time is not positive (below the timer's resolution)")
    if job.cache is not None and job.cache[0] == index:
        job.cache = None
    rec = bench._record(it["op"], it["impl"], it["shape"], it["causal"], it["dtype"], adapter, samples, it["flops"], timer)
    return rec.to_json()
