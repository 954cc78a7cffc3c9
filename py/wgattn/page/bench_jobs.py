"""The benchmark view: `wgattn bench`'s jobs timed by the browser's WebGPU, by the same
protocol (wgattn.protocol) and into the same records.

`start` validates the request and lists the jobs (one per (seq_len, impl), baseline first within
a seq_len) grouped in series (one per seq_len: the jobs timed together, interleaved); `job_plans`
builds the plans of one job (their bytes go through plan_bytes, as for a live run). The page
uploads a series' plans, then follows the protocol step by step, asking here: `schedule` (the
order of each round), `warm` (after each warm-up round: warm yet?), `calibrate` (dispatches per
sample) and `record` (a record of exactly `wgattn bench --json`'s shape from its samples).
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Optional, Tuple

from .. import bench, interfaces, protocol, registry
from ..interfaces import paged_decode_bench as bandwidth
from ..plan import Plan
from ..target import Target
from .replies import BenchCalibration, BenchItem, BenchSeries, BenchSkip, BenchStart, BenchWarm, DecodeCheck, DecodeStart
from .tables import BenchJob, DecodeBench

# What one request may ask for: (lowest, highest) per knob, ...
RANGES: Dict[str, Tuple[int, int]] = {
    "B": (1, 64),
    "H": (1, 64),
    "D": (1, 256),
    "seq_len": (16, 8192),
    "rounds": (5, 100),
    "repeat": (1, 3),
}
WARMUP_S = (0.0, 30.0)  # seconds of warm-up a request may ask for
MOST_SEQ_LENS = 8  # ... at most this many sequence lengths ...
MOST_ELEMENTS = 1 << 24  # ... and B*H*S*D per tensor: 64 MiB of float32
LIMITS: Dict[str, object] = {
    **RANGES,
    "warmup_s": WARMUP_S,
    "seq_lens": MOST_SEQ_LENS,
    "elements": MOST_ELEMENTS,
}  # as the page is told


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


def _seconds(request: Dict[str, Any], key: str, default: float) -> float:
    lo, hi = WARMUP_S
    value = request.get(key, default)
    if isinstance(value, str) and value.strip():
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not lo <= value <= hi:
        raise ValueError(f"{key} must be a number of seconds in {lo:g}..{hi:g}, got {value!r}")
    return float(value)


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
    """{"op", "impls"?, "B", "H", "D", "seq_lens", "causal", "rounds"?, "warmup_s"?, "repeat"?,
    "user_agent"?} -> the job and the page's reply (BenchStart: {"bench", "op", "baseline",
    "impls", "seq_lens", "protocol", "repeat", "jobs", "series", "stamps_kept", "skipped",
    "limits"}); ValueError says what is wrong and what is allowed. Kernels that `target`, the
    browser's device, cannot run are skipped with the reason (wgattn.target); a kernel that
    cannot take a job's sizes says so when its plans are asked for. `user_agent` names the
    runtime."""
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
    rounds = _int_in(request, "rounds", default=10)
    repeat = _int_in(request, "repeat", default=1)
    warmup_s = _seconds(request, "warmup_s", protocol.Protocol.warmup_s)
    proto = protocol.Protocol.of(rounds, warmup_s)
    causal = request.get("causal", False)
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be true or false, got {causal!r}")
    user_agent = request.get("user_agent", "")
    if not isinstance(user_agent, str):
        raise ValueError(f"user_agent must be a string, got {user_agent!r}")
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
    series: List[BenchSeries] = []
    for s in seq_lens:
        shape = [b, h, s, d]
        first = len(items)
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
        if len(items) > first:
            series.append({"shape": shape, "jobs": list(range(first, len(items)))})
    runtime, browser = bench.browser_of(user_agent)
    info = bench.RunInfo.now(runtime=runtime, browser=browser)
    reply: BenchStart = {
        "bench": bench_id,
        "op": op,
        "baseline": known[0],
        "impls": impls,
        "seq_lens": seq_lens,
        "protocol": proto,
        "repeat": repeat,
        "jobs": items,
        "series": series,
        "stamps_kept": protocol.STAMPS_KEPT,
        "skipped": skipped,
        "limits": LIMITS,
    }
    return BenchJob(items, proto, repeat, info, [sr["jobs"] for sr in series]), reply


def item(job: BenchJob, index: int) -> BenchItem:
    """Job `index` of a benchmark; ValueError naming the allowed range."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(job.items):
        raise ValueError(f"job index must be an integer in 0..{len(job.items) - 1}, got {index!r}")
    return job.items[index]


def job_plans(job: BenchJob, index: int, target: Target) -> List[Plan]:
    """Job `index`'s plans for `target`, built once and kept until another job's are asked for or
    the last is handed out (`handed_out`); ValueError when the kernel cannot build them (a size
    past its limit, no tile that fits: the plans' `unavailable`). The tile that ran is kept for
    the record."""
    if job.decode is not None:  # built at decode_start: the filled case's plans hold no cache bytes
        plan = job.decode.plans[item(job, index)["index"]]
        if plan.unavailable:
            raise ValueError(plan.unavailable)
        return [plan]
    if job.cache is None or job.cache[0] != index:
        it = item(job, index)
        job.cache = None  # free the previous job's bytes first
        plans = bench.plans(it["impl"], it["op"], tuple(it["shape"]), it["causal"], target=target)
        why = next((p.unavailable for p in plans if p.unavailable), "")
        if why:
            raise ValueError(why)
        job.configs[index] = " ".join(f"{k}={v}" for k, v in plans[0].dispatches[0].constants.items())
        job.cache = (index, plans)
    return job.cache[1]


def handed_out(job: BenchJob, index: int, plan_index: int) -> None:
    """Plan `plan_index` of job `index` is with the page: after the last, drop the job's plans,
    and after the last job of its series the series' input tensors (the page holds the bytes)."""
    if job.cache is None or job.cache[0] != index or plan_index != len(job.cache[1]) - 1:
        return
    job.cache = None
    if any(jobs and jobs[-1] == index for jobs in job.series):
        bench.forget_inputs()


def _json_object(text: str, what: str) -> Dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError(f"{what} must be a JSON object") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object")
    return value


def _numbers(value: object, what: str) -> List[float]:
    if not isinstance(value, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        raise ValueError(f"{what} must be a list of numbers, got {str(value)[:80]}")
    return [float(x) for x in value]


def _stamps(value: object, what: str) -> List[int]:
    return [int(x) for x in _numbers(value, what)]


def schedule(job: BenchJob, n_entries: int) -> List[List[int]]:
    """The order of every round of a series of `n_entries` (wgattn.protocol.schedule; the
    warm-up's rounds cycle through it too)."""
    if isinstance(n_entries, bool) or not isinstance(n_entries, int) or not 1 <= n_entries <= len(job.items):
        raise ValueError(f"a series has 1..{len(job.items)} entries, got {n_entries!r}")
    return protocol.schedule(n_entries, job.protocol.rounds)


def warm(job: BenchJob, state_json: str) -> BenchWarm:
    """{"elapsed_s", "rounds": [ms of each warm-up round]} -> {"done", "warmed"}: whether to stop
    warming, and whether the warm-up settled (wgattn.protocol.warm_verdict)."""
    state = _json_object(state_json, "the warm-up state")
    elapsed = _numbers([state.get("elapsed_s")], "elapsed_s")[0]
    verdict = protocol.warm_verdict(job.protocol, elapsed, _numbers(state.get("rounds"), "rounds"))
    return {"done": verdict is not None, "warmed": bool(verdict)}


def calibrate(job: BenchJob, state_json: str) -> BenchCalibration:
    """{"per_run": [[ms of each warm-up run] per entry], "stamps": [[ns] per entry], "passes":
    [per entry], "resolution_ns": [known, or 0, per entry]} -> {"reps", "resolution_ns"} per
    entry (wgattn.protocol.calibrate)."""
    state = _json_object(state_json, "the calibration state")
    lists = [state.get(k) for k in ("per_run", "stamps", "passes", "resolution_ns")]
    if not all(isinstance(x, list) for x in lists) or len({len(x) for x in lists if isinstance(x, list)}) != 1:
        raise ValueError("per_run, stamps, passes and resolution_ns must be lists with one item per entry")
    per_run = [_numbers(x, "per_run") for x in state["per_run"]]
    stamps = [_stamps(x, "stamps") for x in state["stamps"]]
    passes = [int(x) for x in _numbers(state["passes"], "passes")]
    reps, res = protocol.calibrate(job.protocol, per_run, stamps, passes, _numbers(state["resolution_ns"], "resolution_ns"))
    return {"reps": reps, "resolution_ns": res}


def record(job: BenchJob, index: int, payload_json: str) -> Tuple[Dict[str, object], bool]:
    """The record of job `index` from what the page measured: {"samples": [ms per run, one per
    round], "stamps": [ns], "reps", "warmup_s", "warmed", "timer", "resolution_ns", "adapter",
    "repeat"}; of `wgattn bench --json`'s shape. Also whether it was the job's last repeat. Its
    mode is "checked": every browser runs Dawn's (or its own) robustness unless started without,
    which a page cannot see (bench/suite.py, which starts the browser, relabels such runs)."""
    it = item(job, index)
    p = _json_object(payload_json, "the measurement")
    timer = p.get("timer")
    if timer not in ("gpu", "wall"):
        raise ValueError(f"timer must be 'gpu' or 'wall', got {timer!r}")
    repeat = p.get("repeat", 0)
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 0 <= repeat < job.repeat:
        raise ValueError(f"repeat must be an integer in 0..{job.repeat - 1}, got {repeat!r}")
    adapter = p.get("adapter")
    if not isinstance(adapter, str) or not adapter:
        raise ValueError(f"adapter must be a non-empty string, got {adapter!r}")
    samples = _numbers(p.get("samples"), "samples")
    reps = p.get("reps")
    if isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= job.protocol.max_reps:
        raise ValueError(f"reps must be an integer in 1..{job.protocol.max_reps}, got {reps!r}")
    known = _numbers([p.get("resolution_ns", 0)], "resolution_ns")[0]
    measured = protocol.Measured(
        samples=samples,
        reps=reps,
        warmup_s=_numbers([p.get("warmup_s")], "warmup_s")[0],
        warmed=bool(p.get("warmed")),
        resolution_ns=protocol.resolution_of(known, _stamps(p.get("stamps", []), "stamps")),
    )
    if job.decode is not None:
        return _decode_record(job, index, measured, {"timer": timer, "adapter": adapter}, repeat), repeat == job.repeat - 1
    try:
        rec = bench.make_record(
            it["op"], it["impl"], it["shape"], it["causal"], it["dtype"], adapter, measured, job.protocol, timer, job.info
        )
        rec.mode, rec.config, rec.repeat = "checked", job.configs.get(index, ""), repeat
    except ValueError as exc:
        raise ValueError(f"{it['impl']}: {exc}") from None
    return rec.to_json(), repeat == job.repeat - 1


# ---------------------------------------------------------------------------------------------
# Decode as bandwidth: one case, the decode kernel and the WGSL copy in one series
# ---------------------------------------------------------------------------------------------

DECODE_RANGES: Dict[str, Tuple[int, int]] = {
    "batch": (1, 64),
    "heads_q": (1, 128),
    "heads_kv": (1, 128),
    "head_dim": (1, 256),
    "seq_len": (1, 1 << 20),
    "new_tokens": (1, 8),
    "block_size": (1, 256),
}


def decode_start(request_json: str, target: Target, bench_id: int) -> Tuple[BenchJob, DecodeStart]:
    """{"case": {wgattn.interfaces.paged_decode_bench.CASE_FIELDS, "name"?}, "rounds"?, "warmup_s"?, "repeat"?,
    "user_agent"?} -> the job and the page's reply (DecodeStart): job 0 the case's decode kernel
    (paged_decode.split_f16 for an f16 cache, paged_decode.split for f32) on a cache the GPU
    fills (`decode_fill`), job 1 the WGSL copy of the bytes a step reads. A job the target cannot
    hold (a buffer past its limits) is skipped with the reason."""
    request = _json_object(request_json, "the decode benchmark request")
    raw = request.get("case")
    if not isinstance(raw, dict):
        raise ValueError(f"case must be an object with {list(bandwidth.CASE_FIELDS)}, got {raw!r}")
    case: Dict[str, object] = {"name": str(raw.get("name", "decode"))}
    for key, (lo, hi) in DECODE_RANGES.items():
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"case.{key} must be an integer in {lo}..{hi}, got {value!r}")
        case[key] = value
    if raw.get("cache") not in ("f16", "f32"):
        raise ValueError(f"case.cache must be 'f16' or 'f32', got {raw.get('cache')!r}")
    case["cache"] = raw["cache"]
    if case["heads_q"] % case["heads_kv"] or case["seq_len"] < case["new_tokens"]:  # type: ignore[operator]
        raise ValueError("case.heads_kv must divide case.heads_q, and case.seq_len hold the new tokens")
    rounds = _int_in(request, "rounds", default=10)
    repeat = _int_in(request, "repeat", default=1)
    proto = protocol.Protocol.of(rounds, _seconds(request, "warmup_s", protocol.Protocol.warmup_s))
    user_agent = request.get("user_agent", "")
    if not isinstance(user_agent, str):
        raise ValueError(f"user_agent must be a string, got {user_agent!r}")
    filled = bandwidth.filled_case(case)
    kernel = bandwidth.kernel_of(case)
    plan = interfaces.of(kernel).plan(kernel, filled, target)
    copy = bandwidth.copy_plan(bandwidth.bytes_touched(case), target.limit("max-storage-buffer-binding-size"))
    copy.unavailable = target.why_not(copy)
    splits = 0 if plan.unavailable else int(interfaces.of(kernel).layout_on(kernel, filled, target).values["num_splits"])
    shape = [int(case[k]) for k in ("batch", "heads_q", "seq_len", "head_dim")]  # type: ignore[call-overload]
    dtype = str(case["cache"])
    impls = [bandwidth.kernel_for(dtype), "wgsl.copy"]
    items: List[BenchItem] = [
        {"index": i, "op": "decode", "impl": impl, "shape": shape, "causal": False, "flops": 0.0, "dtype": dtype, "plans": 1}
        for i, impl in enumerate(impls)
    ]
    skipped: List[BenchSkip] = [{"impl": impls[i], "reason": p.unavailable} for i, p in enumerate((plan, copy)) if p.unavailable]
    runtime, browser = bench.browser_of(user_agent)
    info = bench.RunInfo.now(runtime=runtime, browser=browser)
    job = BenchJob(items, proto, repeat, info, [[0, 1]])
    job.decode = DecodeBench(case, filled, [plan, copy], bandwidth.bytes_touched(case), splits)
    for s in skipped:
        job.left.discard(impls.index(s["impl"]))
    reply: DecodeStart = {
        "bench": bench_id,
        "case": case,
        "bytes": job.decode.bytes,
        "protocol": proto,
        "repeat": repeat,
        "jobs": items,
        "series": [{"shape": shape, "jobs": [0, 1]}],
        "stamps_kept": protocol.STAMPS_KEPT,
        "skipped": skipped,
    }
    return job, reply


def _decode(job: BenchJob) -> DecodeBench:
    if job.decode is None:
        raise ValueError("this benchmark is not a decode benchmark (decode_start)")
    return job.decode


def decode_fill(job: BenchJob, index: int) -> List[Plan]:
    """The fills of job `index`'s cache buffers (the decode kernel's; none for the copy)."""
    d = _decode(job)
    if item(job, index)["impl"] == "wgsl.copy":
        return []
    return bandwidth.fill_plans(d.plans[index], half=d.case["cache"] == "f16")


def decode_check(job: BenchJob, index: int, out: bytes) -> DecodeCheck:
    """Job `index`'s out buffer (read back after one run on the filled cache) against the
    float64 reference (wgattn.interfaces.paged_decode_bench.check_filled); kept for its records."""
    d = _decode(job)
    (output,) = [o for o in d.plans[index].outputs if o.name == "out"]
    got = bandwidth.check_filled(d.case_obj, output.take(out))
    verdict: DecodeCheck = {
        "ok": bool(got["pass"]),
        "max_abs_err": float(got["max_abs_err"]),  # type: ignore[arg-type]
        "allowed": float(got["allowed"]),  # type: ignore[arg-type]
        "pairs": got["pairs"],  # type: ignore[typeddict-item]
    }
    d.checks[index] = dict(verdict)
    return verdict


def _decode_record(job: BenchJob, index: int, measured: protocol.Measured, p: Dict[str, Any], repeat: int) -> Dict[str, object]:
    d = _decode(job)
    impl = item(job, index)["impl"]
    if impl == "wgsl.copy":
        nbytes, kind, verified = 2 * d.plans[index].buffers[0].size, "copy", None
    else:
        if not d.checks.get(index, {}).get("ok"):
            raise ValueError(f"{impl}: its output was not checked against the reference (decode_check): not recording it")
        nbytes, kind, verified = d.bytes, "decode", d.checks[index]
    knobs = d.plans[index].dispatches[0].constants if kind == "decode" else {}
    config = " ".join(f"{k}={int(v)}" for k, v in knobs.items() if k in ("WG", "KPG", "BC", "RB"))
    splits = d.splits if kind == "decode" else 0
    return bandwidth.record(
        d.case, impl, kind, nbytes, measured, job.protocol, p["timer"], p["adapter"], job.info,
        mode="checked" if kind == "decode" else "", splits=splits, rule=kind == "decode", config=config,
        repeat=repeat, verified=verified,
    )  # fmt: skip
