"""The benchmark view: `wgattn bench`'s jobs timed by the browser's WebGPU, by the same
protocol (wgattn.protocol) and into the same records.

`start` validates the request and lists the jobs grouped in series (the jobs timed together,
interleaved): for a dense op (fwd, bwd, probs) one job per (seq_len, impl), baseline first within
a seq_len, a series per seq_len; for an op timed on one configuration of its interface (its
Config, as a live check takes it; wgattn.bench.CONFIG_OPS) a job per kernel, and for decode (as
bandwidth: wgattn.bandwidth) the copy of the bytes they read, a series per cache precision, for
prefill (as FLOP/s) its yardstick on the same work (flash_fwd unpaged), one series; for the GEMM
(wgattn.gemm) one configuration (GemmConfig: M, N, K), a job per tile of gemm.smx, in series of
at most GEMM_SERIES. The last two are cases: one configuration, its inputs filled on the GPU,
each job's output checked before it is timed. `job_plans` builds the plans of one
job (their bytes go through plan_bytes, as for a live run). A job with a `check` buffer has its
inputs filled on the GPU (`fills`) and its output judged (`check`) before it is timed. The page
uploads a series' plans, then follows the protocol step by step, asking here: `schedule` (the
order of each round), `warm` (after each warm-up round: warm yet?), `calibrate` (dispatches per
sample) and `record` (a record of exactly `wgattn bench --json`'s shape, or of
bench/decode_bandwidth.py's for a bandwidth op, from its samples).
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Optional, Tuple

from .. import bandwidth, bench, gemm, interfaces, live, protocol, registry
from ..interfaces import Case, FilledCheck
from ..plan import Plan
from ..target import Target
from .replies import BenchCalibration, BenchItem, BenchSeries, BenchSkip, BenchStart, BenchWarm, BenchWarmReps, Schedule
from .tables import BenchJob

# What one request may ask for: (lowest, highest) per knob, ...
RANGES: Dict[str, Tuple[int, int]] = {
    "B": (1, 64),
    "H": (1, 64),
    "D": (1, 512),  # the contract's head dims
    "seq_len": (16, 8192),
    "rounds": (5, 100),
    "repeat": (1, 3),
}
WARMUP_S = (0.0, 30.0)  # seconds of warm-up a request may ask for
SAMPLE_MS = (0.0, 1000.0)  # milliseconds a sample lasts at least (min_sample_ms), as a request may ask
MOST_SEQ_LENS = 8  # ... at most this many sequence lengths ...
MOST_ELEMENTS = 1 << 25  # ... and B*H*S*D per tensor: 128 MiB of float32, WebGPU's default largest binding
LIMITS: Dict[str, object] = {
    **RANGES,
    "warmup_s": WARMUP_S,
    "min_sample_ms": SAMPLE_MS,
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


def _seconds(request: Dict[str, Any], key: str, default: float, bounds=WARMUP_S, unit="seconds") -> float:
    lo, hi = bounds
    value = request.get(key, default)
    if isinstance(value, str) and value.strip():
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not lo <= value <= hi:
        raise ValueError(f"{key} must be a number of {unit} in {lo:g}..{hi:g}, got {value!r}")
    return float(value)


def _protocol(request: Dict[str, Any]) -> protocol.Protocol:
    """The protocol a request asks for: its rounds, warm-up and shortest sample (wgattn.protocol's
    defaults where it does not say)."""
    rounds = _int_in(request, "rounds", default=10)
    warmup_s = _seconds(request, "warmup_s", protocol.Protocol.warmup_s)
    min_ms = _seconds(request, "min_sample_ms", protocol.Protocol.min_sample_ms, SAMPLE_MS, "milliseconds")
    return protocol.Protocol.of(rounds, warmup_s, min_ms)


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
    """{"op", "impls"?, "B", "H", "D", "seq_lens", "causal", "variants"? ("plain,alibi+sinks": each
    kernel once per variant in a series), "rounds"?, "warmup_s"?, "repeat"?, "user_agent"?}, or
    for an op timed as bandwidth {"op", "impls"?, "name"?, "config",
    "rounds"?, "warmup_s"?, "repeat"?, "user_agent"?}, or for the GEMM {"op": "gemm", "name"?,
    "config"?, "tiles"?: [{Tile's knobs}], "rounds"?, "warmup_s"?, "repeat"?, "user_agent"?}
    (without tiles, wgattn.gemm.tiles_for's) -> the job and the page's reply
    (BenchStart: {"bench", "op", "baseline", "impls", "seq_lens", "protocol", "repeat", "jobs",
    "series", "stamps_kept", "skipped", "limits"}); ValueError says what is wrong and what is
    allowed. Kernels that `target`, the browser's device, cannot run are skipped with the reason
    (wgattn.target); a kernel that cannot take a job's sizes says so when its plans are asked
    for. `user_agent` names the runtime."""
    request = _json_object(request_json, "the benchmark request")
    op = request.get("op", "fwd")
    ops = bench.OPS + bench.CONFIG_OPS + (gemm.OP,)
    if op not in ops:
        raise ValueError(f"op must be one of {list(ops)}, got {op!r}")
    if op == gemm.OP:
        return _gemm_start(request, target, bench_id)
    known = bench.kernel_impls(op)
    impls = _impls(request.get("impls"), op, known)
    if op in bench.CONFIG_OPS:
        return _config_start(request, op, known, impls, target, bench_id)
    b, h, d = _int_in(request, "B"), _int_in(request, "H"), _int_in(request, "D")
    seq_lens = _seq_lens(request.get("seq_lens", "128,256,512,1024"))
    proto = _protocol(request)
    repeat = _int_in(request, "repeat", default=1)
    causal = request.get("causal", False)
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be true or false, got {causal!r}")
    variants = request.get("variants", "plain")
    if not isinstance(variants, str):
        raise ValueError(f"variants must be a comma-separated string (plain,alibi+sinks), got {variants!r}")
    variant_list = bench.parse_variants(variants)
    info = _run_info(request)
    for s in seq_lens:
        if b * h * s * d > MOST_ELEMENTS:
            got = f"{b}*{h}*{s}*{d} = {b * h * s * d} at S={s}"
            raise ValueError(f"B*H*S*D must be at most {MOST_ELEMENTS} (128 MiB per float32 tensor), got {got}")
        if op == "probs" and b > s:
            raise ValueError(
                f"for probs B is the number of positions timed and must be <= every sequence length, got B={b} and S={s}"
            )

    reg = registry.load()
    skipped, runnable = _runnable(impls, target)
    items: List[BenchItem] = []
    series: List[BenchSeries] = []
    for s in seq_lens:
        shape = [b, h, s, d]
        first = len(items)
        for impl in runnable:
            plans = interfaces.of(reg.kernel(impl)).bench_plans(shape)  # the count bench_plan returns
            for variant in variant_list:
                flops = bench.flops(op, shape, causal)
                items.append(_item(len(items), op, impl, shape, bench.dtype_of(impl), causal, flops, plans, variant=variant))
        if len(items) > first:
            series.append({"shape": shape, "jobs": list(range(first, len(items)))})
    job = BenchJob(items, proto, repeat, info, [sr["jobs"] for sr in series])
    reply: BenchStart = {
        **_schedule(bench_id, job, series, skipped),
        "op": op,
        "baseline": known[0],
        "impls": impls,
        "seq_lens": seq_lens,
        "limits": LIMITS,
    }
    return job, reply


def _schedule(bench_id: int, job: BenchJob, series: List[BenchSeries], skipped: List[BenchSkip]) -> Schedule:
    """What every benchmark's start tells the page of its jobs."""
    return {
        "bench": bench_id,
        "protocol": job.protocol,
        "repeat": job.repeat,
        "jobs": job.items,
        "series": series,
        "stamps_kept": protocol.STAMPS_KEPT,
        "skipped": skipped,
    }


def _item(
    index: int,
    op: str,
    impl: str,
    shape: List[int],
    dtype: str,
    causal=False,
    flops=0.0,
    plans=1,
    check="",
    config="",
    variant="",
) -> BenchItem:
    return {
        "index": index,
        "op": op,
        "impl": impl,
        "config": config,
        "shape": shape,
        "causal": causal,
        "flops": flops,
        "dtype": dtype,
        "plans": plans,
        "check": check,
        "variant": variant,
    }


def _run_info(request: Dict[str, Any]) -> bench.RunInfo:
    """What every record of the benchmark shares: the runtime and browser its user agent names."""
    user_agent = request.get("user_agent", "")
    if not isinstance(user_agent, str):
        raise ValueError(f"user_agent must be a string, got {user_agent!r}")
    runtime, browser = bench.browser_of(user_agent)
    return bench.RunInfo.now(runtime=runtime, browser=browser)


def _runnable(impls: List[str], target: Target) -> Tuple[List[BenchSkip], List[str]]:
    """(the kernels `target` cannot run, with why; the others)."""
    reg = registry.load()
    skipped: List[BenchSkip] = []
    runnable: List[str] = []
    for impl in impls:
        why = target.lacks(reg.kernel(impl))
        if why:
            skipped.append({"impl": impl, "reason": why})
        else:
            runnable.append(impl)
    return skipped, runnable


def _config_start(
    request: Dict[str, Any], op: str, known: List[str], impls: List[str], target: Target, bench_id: int
) -> Tuple[BenchJob, BenchStart]:
    """An op timed on one configuration of its interface (checked as a live one is), its case
    with the inputs the GPU fills: timed as bandwidth (decode), a series per cache precision of
    its kernels and the copy of the bytes they read (at most a binding's worth, as the target can
    bind); or as FLOP/s (prefill), one series of its kernels and its interface's yardstick on the
    same work (skipped, saying why, where the target runs none)."""
    (iface,) = bench.serving(op)
    config = live.make_config(iface, request.get("config"))
    name, proto, repeat, info = _case_request(request)
    case = iface.bench_case(config, name)
    shape = iface.bench_shape(config)
    reg = registry.load()
    skipped, runnable = _runnable(impls, target)
    items: List[BenchItem] = []
    series: List[BenchSeries] = []
    nbytes: Dict[int, int] = {}
    cases: Dict[int, Tuple[str, Case]] = {}
    if op in bench.BANDWIDTH_OPS:
        groups: Dict[str, List[str]] = {}
        for impl in impls:  # a precision whose kernels are all skipped keeps its copy
            groups.setdefault(bench.dtype_of(impl), []).append(impl)
        max_binding = target.limit("max-storage-buffer-binding-size")
        for dtype, group in groups.items():
            first = len(items)
            for impl in group:
                if impl in runnable:
                    nbytes[len(items)] = iface.bench_bytes(reg.kernel(impl), case)
                    items.append(_item(len(items), op, impl, shape, dtype, check=iface.OUTPUTS[0]))
            nbytes[len(items)] = bandwidth.copy_bytes(iface.bench_bytes(reg.kernel(group[0]), case), max_binding)
            items.append(_item(len(items), op, bandwidth.COPY, shape, dtype))
            series.append({"shape": shape, "jobs": list(range(first, len(items)))})
    else:
        flops = iface.bench_flops(case)
        for impl in runnable:
            items.append(_item(len(items), op, impl, shape, bench.dtype_of(impl), True, flops, check=iface.OUTPUTS[0]))
        yard, yard_case, why = iface.bench_yardstick(case, target)
        if yard is None or yard_case is None:
            skipped.append({"impl": "yardstick", "reason": why})
        else:
            cases[len(items)] = (yard.id, yard_case)
            items.append(_item(len(items), op, yard.id, shape, yard.precision, True, flops))
        if items:
            series.append({"shape": shape, "jobs": list(range(len(items)))})
    job = BenchJob(items, proto, repeat, info, [sr["jobs"] for sr in series])
    job.case, job.name, job.config, job.nbytes, job.cases = case, name, config.to_dict(), nbytes, cases
    reply: BenchStart = {
        **_schedule(bench_id, job, series, skipped),
        "op": op,
        "baseline": known[0],
        "impls": impls,
        "seq_lens": [shape[2]],
        "limits": {**{k: LIMITS[k] for k in ("rounds", "repeat", "warmup_s", "min_sample_ms")}, "config": iface.Config.schema()},
    }
    return job, reply


GEMM_SERIES = 8  # GEMM tiles timed together, interleaved


def _case_request(request: Dict[str, Any]) -> Tuple[str, protocol.Protocol, int, bench.RunInfo]:
    """What every case's request shares: its name, protocol, repeats and run."""
    name = request.get("name", request.get("op"))
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string (the case's name in its records), got {name!r}")
    proto = _protocol(request)
    repeat = _int_in(request, "repeat", default=1)
    return name, proto, repeat, _run_info(request)


def _gemm_start(request: Dict[str, Any], target: Target, bench_id: int) -> Tuple[BenchJob, BenchStart]:
    """The GEMM: one configuration (wgattn.gemm.GemmConfig), a job per tile of gemm.smx, its
    inputs filled on the GPU and its C checked before it is timed; a tile the target cannot run
    is skipped with the reason."""
    config = live.config_of(gemm.GemmConfig, request.get("config"), "the GEMM")
    name, proto, repeat, info = _case_request(request)
    tiles = gemm.tiles_of(request["tiles"]) if request.get("tiles") is not None else gemm.tiles_for(config, target)
    case = gemm.case(config, name)
    shape = list(gemm.sizes(case))
    skipped: List[BenchSkip] = []
    if not tiles:
        skipped.append({"impl": gemm.KERNEL, "reason": f"{target.name} offers no f16 x f16 -> f32 subgroup matrices"})
    items: List[BenchItem] = []
    kept: Dict[int, gemm.Tile] = {}
    unrunnable: Dict[str, List[str]] = {}  # the reason -> the tiles it keeps out (one skip each reason)
    for tile in tiles:
        why = gemm.plan(case, tile, target).unavailable
        if why:
            unrunnable.setdefault(why, []).append(tile.tag())
            continue
        kept[len(items)] = tile
        items.append(_item(len(items), gemm.OP, gemm.KERNEL, shape, "f16", flops=gemm.flops(case), check="c", config=tile.tag()))
    for why, tags in unrunnable.items():
        skipped.append(
            {"impl": f"{gemm.KERNEL} {tags[0]}" if len(tags) == 1 else f"{gemm.KERNEL} ({len(tags)} tiles)", "reason": why}
        )
    series = [list(range(i, min(i + GEMM_SERIES, len(items)))) for i in range(0, len(items), GEMM_SERIES)]
    job = BenchJob(items, proto, repeat, info, series)
    job.case, job.name, job.config, job.tiles = case, name, config.to_dict(), kept
    reply: BenchStart = {
        **_schedule(bench_id, job, [{"shape": shape, "jobs": s} for s in series], skipped),
        "op": gemm.OP,
        "baseline": gemm.KERNEL,
        "impls": [gemm.KERNEL],
        "seq_lens": [],
        "limits": {
            **{k: LIMITS[k] for k in ("rounds", "repeat", "warmup_s", "min_sample_ms")},
            "config": gemm.GemmConfig.schema(),
            "tiles": gemm.Tile.schema(),
        },
    }
    return job, reply


def item(job: BenchJob, index: int) -> BenchItem:
    """Job `index` of a benchmark; ValueError naming the allowed range."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(job.items):
        raise ValueError(f"job index must be an integer in 0..{len(job.items) - 1}, got {index!r}")
    return job.items[index]


def job_plans(job: BenchJob, index: int, target: Target) -> List[Plan]:
    """Job `index`'s plans for `target`, built once and kept until another job's are asked for or
    the last is handed out (`handed_out`); ValueError when the kernel cannot build them (a size
    past its limit, no tile that fits: the plans' `unavailable`). What ran is kept for the
    record, and the plan of a job to check until its check."""
    if job.cache is None or job.cache[0] != index:
        it = item(job, index)
        job.cache = None  # free the previous job's bytes first
        if job.case is None:
            plans = bench.plans(it["impl"], it["op"], tuple(it["shape"]), it["causal"], target=target, variant=it["variant"])
        elif it["impl"] == bandwidth.COPY:
            plans = [bandwidth.stream_plan(job.nbytes[index])]
            plans[0].unavailable = target.why_not(plans[0])
        elif index in job.cases:  # a yardstick: another interface's kernel on the same work
            kernel_id, other = job.cases[index]
            kernel = registry.load().kernel(kernel_id)
            plans = [interfaces.of(kernel).plan(kernel, other, target)]
        elif it["op"] == gemm.OP:
            plans = [gemm.plan(job.case, job.tiles[index], target)]
        else:  # the case's filled inputs hold no bytes: its plan is small
            kernel = registry.load().kernel(it["impl"])
            plans = [interfaces.of(kernel).plan(kernel, job.case, target)]
        why = next((p.unavailable for p in plans if p.unavailable), "")
        if why:
            raise ValueError(why)
        job.configs[index] = bench.config_of(plans)
        if it["check"]:
            job.filled[index] = plans[0]
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


def warm_reps(job: BenchJob, state_json: str) -> BenchWarmReps:
    """{"first_ms": [ms of each entry's priming run, 0 where its timer saw nothing], "passes": [per
    entry]} -> {"reps"}: each entry's dispatches per warm-up sample (wgattn.protocol.warm_reps)."""
    state = _json_object(state_json, "the priming state")
    first, passes = _numbers(state.get("first_ms"), "first_ms"), _numbers(state.get("passes"), "passes")
    if len(first) != len(passes):
        raise ValueError("first_ms and passes must have one item per entry")
    return {"reps": protocol.warm_reps(job.protocol, first, [int(n) for n in passes])}


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
    if job.case is not None:
        return _case_record(job, index, measured, timer, adapter, repeat), repeat == job.repeat - 1
    try:
        rec = bench.make_record(
            it["op"], it["impl"], it["shape"], it["causal"], it["dtype"], adapter, measured, job.protocol, timer, job.info
        )
        rec.mode, rec.config, rec.repeat = "checked", bench.config_text(job.configs.get(index, {})), repeat
        rec.variant = it["variant"]
    except ValueError as exc:
        raise ValueError(f"{it['impl']}: {exc}") from None
    return rec.to_json(), repeat == job.repeat - 1


def fills(job: BenchJob, index: int) -> List[Plan]:
    """The plans that fill job `index`'s inputs on the GPU (wgattn.bandwidth.fill_plans), each
    binding its timed plan's buffer of that name: none for a job without a `check`."""
    if not item(job, index)["check"]:
        return []
    if job.case is None or index not in job.filled:
        raise ValueError(f"job {index}'s plan is not built (bench_plan), or was checked already")
    return bandwidth.fill_plans(job.filled[index], job.case.inputs)


def check(job: BenchJob, index: int, raw: bytes) -> FilledCheck:
    """Job `index`'s `check` buffer (read back after one run on the filled inputs) judged by its
    interface against the float64 reference (Interface.check_filled); kept for its records."""
    it = item(job, index)
    if not it["check"] or job.case is None:
        raise ValueError(f"job {index} ({it['impl']}) has no output to check before it is timed")
    plan = job.filled.pop(index, None)
    if plan is None:
        raise ValueError(f"job {index}'s plan is not built (bench_plan), or was checked already")
    outputs = {o.name: o.take(raw) for o in plan.outputs if o.buffer == it["check"]}
    if it["op"] == gemm.OP:
        verdict = gemm.check_filled(job.case, outputs)
    else:
        kernel = registry.load().kernel(it["impl"])
        verdict = interfaces.of(kernel).check_filled(job.case, outputs, kernel)
    job.checks[index] = verdict
    return verdict


def _case_record(
    job: BenchJob, index: int, measured: protocol.Measured, timer: str, adapter: str, repeat: int
) -> Dict[str, object]:
    """A case's record (a bandwidth op's, prefill's, the GEMM's), once its output passed its check."""
    it = item(job, index)
    verified = job.checks.get(index)
    if it["check"] and not (verified and verified["ok"]):
        what = f"{it['impl']} {it['config']}".strip()
        raise ValueError(f"{what}: its output was not checked against the reference (bench_check): not recording it")
    if it["op"] == gemm.OP and job.case is not None:
        return gemm.record(
            job.case, job.tiles[index], measured, job.protocol, timer, adapter, job.info, repeat=repeat, verified=verified
        )  # fmt: skip
    if it["op"] in bench.CONFIG_OPS and it["op"] not in bench.BANDWIDTH_OPS:
        return bandwidth.rate_record(
            job.name, job.config, it["impl"], it["dtype"], it["flops"], measured, job.protocol, timer, adapter, job.info,
            mode="checked", config=job.configs.get(index), repeat=repeat, verified=verified, yardstick=index in job.cases,
            kind=it["op"],
        )  # fmt: skip
    copy = it["impl"] == bandwidth.COPY
    return bandwidth.record(
        job.name, job.config, it["impl"], it["dtype"], (2 if copy else 1) * job.nbytes[index], measured, job.protocol,
        timer, adapter, job.info, mode="" if copy else "checked", config=job.configs.get(index), rule=not copy,
        repeat=repeat, verified=verified,
    )  # fmt: skip
