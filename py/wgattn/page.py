"""What the page's JavaScript calls under Pyodide (Python 3.8, numpy 1.17).

The page's JS only moves bytes: it asks `prepare` for the dispatch plan of any registered kernel on
a live configuration (wgattn.live), runs it in WebGPU, hands the read-back buffers to
`add_buffer`, fetches the server's native run, and asks `finish` to compare every pair of runtimes
on every output against the float64 reference computed here; `heatmap` and `error_map` draw a
finished run (wgattn.pictures). The conformance grid (`grid_*`) and the benchmark (`bench_*`,
`bench_import` for a dropped `wgattn bench --json` file) work the same way.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Dict, List, Optional

import numpy as np

from . import live, pictures, registry, tolerance, wire

__all__ = [
    "prepare",
    "plan_bytes",
    "add_buffer",
    "finish",
    "heatmap",
    "error_map",
    "live_schema",
    "grid_start",
    "grid_prepare",
    "grid_judge",
    "bench_start",
    "bench_plan",
    "bench_release",
    "bench_record",
    "bench_import",
    "probe_prepare",
    "probe_judge",
    "use_limits",
]

_RUNS: Dict[int, Dict[str, object]] = {}
_DONE: Dict[int, Dict[str, object]] = {}  # finished live runs, kept for their pictures
_KEEP_DONE = 16  # more than the registry's kernels: a 'run every kernel' keeps all its pictures
_COUNTER = [0]


def _next_run() -> int:
    _COUNTER[0] += 1
    return _COUNTER[0]


RUNTIME_ORDER = ("browser", "pyodide", "native")


def live_schema() -> str:
    """JSON {interface: [{name, type, default, choices?}]}: the live form's fields per interface."""
    return json.dumps(live.schema())


def prepare(request_json: str) -> str:
    """{"kernel", "config"} -> JSON {"run", "plan", "digest", "config", "kernel", "interface",
    "requires", "precision", "heads"}; ValueError on bad input. The plan's buffer bytes are fetched
    separately with `plan_bytes` (JSON carries no bytes)."""
    request = json.loads(request_json)
    if not isinstance(request, dict):
        raise ValueError("the request must be an object {kernel, config}")
    run_ = live.build(request.get("kernel", "sdpa_arena.seed"), request.get("config"))
    plan = run_.plan()
    run = _next_run()
    _RUNS[run] = {"live": run_, "kernel": run_.kernel, "case": run_.case, "plan": plan, "raw": {}}
    k = run_.kernel
    return json.dumps(
        {
            "run": run,
            "plan": plan.to_js(),
            "digest": run_.digest,
            "config": run_.config.to_dict(),
            "kernel": k.id,
            "interface": k.interface.name,
            "requires": list(k.requires),
            "precision": k.precision,
            "heads": run_.config.heads,
        }
    )


def use_limits(limits_json: str) -> None:
    """Build later plans for the browser's device: `limits_json` is webgpu.js's device limits
    (kebab-case names) and `cpu` (a software adapter); tile shapes are then chosen to fit it
    (wgattn.registry)."""
    lim = json.loads(limits_json)
    registry.set_target_limits(
        int(lim["max-compute-workgroup-storage-size"]), int(lim["max-compute-invocations-per-workgroup"]), bool(lim.get("cpu"))
    )


def plan_bytes(run: int, buffer: str) -> bytes:
    """The initial bytes of one buffer of a prepared plan (becomes a Uint8Array in JS)."""
    for b in _RUNS[run]["plan"].buffers:
        if b.name == buffer:
            return b.data or b""
    raise ValueError(f"run {run} has no buffer {buffer!r}")


def add_buffer(run: int, name: str, data) -> None:
    """Store the browser's read-back bytes of one buffer (a JS Uint8Array or bytes)."""
    raw = bytes(data.to_py()) if hasattr(data, "to_py") else bytes(data)
    _RUNS[run]["raw"][name] = raw


def finish(run: int, browser_json: str, native_json: Optional[str]) -> str:
    """Compare every pair of runtimes on every output; JSON {kernel, config, pairs, runtimes, ...}.
    An f16 kernel is judged against the naive float16 run, as `wgattn check` judges it."""
    state = _RUNS.pop(run)
    run_, plan = state["live"], state["plan"]
    # Each side is {"timings": ...} when it ran, {"skipped": why} when it cannot run here (no
    # WebGPU, or a feature this adapter lacks), or {"error": what went wrong}.
    browser = json.loads(browser_json) if browser_json else {"skipped": "not run"}
    native = json.loads(native_json) if native_json else {"error": "not run"}
    mine = run_.digest

    t0 = time.perf_counter()
    ref, naive = run_.expected()
    reference_ms = (time.perf_counter() - t0) * 1e3
    naive_err = {name: tolerance.max_abs_err(naive[name], ref[name]) for name in ref}

    outputs = {"pyodide": ref}
    runtimes = {"pyodide": {"ok": True, "timings": {"reference_ms": reference_ms}}}
    if "skipped" in browser:
        runtimes["browser"] = {"ok": False, "skipped": browser["skipped"]}
    elif browser.get("error"):
        runtimes["browser"] = {"ok": False, "error": browser["error"]}
    else:
        outputs["browser"] = plan.unpack(state["raw"])
        runtimes["browser"] = {"ok": True, "timings": browser.get("timings", {})}
    if not native.get("error"):
        if native.get("digest") != mine:
            runtimes["native"] = {"ok": False, "error": "server inputs differ from the page's (digest mismatch)"}
        else:
            outputs["native"] = {k: wire.decode(v, k) for k, v in native["outputs"].items()}
            runtimes["native"] = {"ok": True, "timings": native.get("timings", {}), "adapter": native.get("adapter")}
    else:
        runtimes["native"] = {"ok": False, "error": native["error"]}

    present = [r for r in RUNTIME_ORDER if r in outputs]
    pairs: List[Dict[str, object]] = []
    for i, a in enumerate(present):
        for b in present[i + 1 :]:
            for name in ref:
                row = tolerance.pair(a, b, outputs[a][name], outputs[b][name], ref[name], naive_err[name])
                row["output"] = name
                pairs.append(row)
    result = {
        "run": run,
        "kernel": run_.kernel.id,
        "interface": run_.kernel.interface.name,
        "precision": run_.kernel.precision,
        "config": run_.config.to_dict(),
        "digest": mine,
        "outputs": list(ref),
        "heads": run_.config.heads,
        "naive_err": naive_err,
        "naive_f32_err": naive_err,  # the name before f16 kernels joined (naive in the kernel's precision)
        "runtimes": runtimes,
        "pairs": pairs,
        # A skipped runtime is reported, not failed; an errored one fails the run.
        "pass": bool(pairs) and all(p["pass"] for p in pairs) and not any("error" in r for r in runtimes.values()),
    }
    _DONE[run] = {"live": run_, "outputs": outputs, "pairs": pairs}
    for old in sorted(_DONE)[:-_KEEP_DONE]:
        del _DONE[old]
    return json.dumps(wire.jsonable(result))


def _done(run: int) -> Dict[str, object]:
    if run not in _DONE:
        raise ValueError(f"run {run} is not among the last {_KEEP_DONE} finished runs; run it again")
    return _DONE[run]


def _head(state, head: int) -> int:
    heads = state["live"].config.heads
    if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < heads:
        raise ValueError(f"head must be an integer in 0..{heads - 1}, got {head!r}")
    return head


def heatmap(run: int, head: int = 0) -> str:
    """JSON picture of query head `head`'s attention probabilities (wgattn.pictures.heatmap)."""
    state = _done(run)
    run_ = state["live"]
    return json.dumps(wire.jsonable(pictures.heatmap(run_.kernel.interface.name, run_.case, _head(state, head))))


def error_map(run: int, output: str, a: str, b: str, head: int = 0) -> str:
    """JSON picture of |a - b| for one output and query head of a finished run, against that pair's
    allowance (wgattn.pictures.error_map); ValueError when a runtime did not produce it."""
    state = _done(run)
    run_, outputs = state["live"], state["outputs"]
    head = _head(state, head)
    for r in (a, b):
        if r not in outputs:
            raise ValueError(f"runtime {r!r} has no outputs in this run; runtimes with outputs: {sorted(outputs)}")
    rows = [p for p in state["pairs"] if p["output"] == output and {p["a"], p["b"]} == {a, b}]
    if not rows:
        raise ValueError(f"no pair ({a}, {b}) for output {output!r}")
    iface, heads = run_.kernel.interface.name, run_.config.heads
    va = pictures.head_view(iface, run_.case, outputs[a][output], head, heads)
    vb = pictures.head_view(iface, run_.case, outputs[b][output], head, heads)
    pic = pictures.error_map(va, vb, rows[0]["allowance"])
    pic.update(output=output, a=a, b=b, head=head)
    return json.dumps(wire.jsonable(pic))


# --- Conformance view: the `wgattn check` grid, run by the browser's WebGPU -----------------

_JOBS: Dict[int, Dict[str, object]] = {}


def grid_start(request_json: str) -> str:
    """{"interface", "source"?, "features"?} -> JSON {"job", "items": [{"kernel", "case"}],
    "skipped": [{"kernel", "reason"}]}: the project's kernels of that interface that the device's
    features allow, or the pasted WGSL, on the interface's conformance grid."""
    from .interfaces import module

    request = json.loads(request_json)
    reg = registry.load()
    iface = reg.interface(request.get("interface", ""))
    mod = module(iface.name)
    source = request.get("source") or None
    skipped = []
    if source is not None:
        kernels = [reg.user_kernel(iface.name, "pasted WGSL")]
    else:
        # A kernel needing a feature the browser's device lacks is skipped with the reason.
        have = set(request.get("features") or ())
        kernels = []
        for k in reg.kernels_of(iface.name):
            missing = [f for f in k.requires if f not in have]
            if missing:
                skipped.append({"kernel": k.id, "reason": f"needs adapter features {missing}, which this device lacks"})
            else:
                kernels.append(k)
    cases = mod.conformance_cases()
    job = len(_JOBS) + 1
    items = [(k, c) for k in kernels for c in cases]
    _JOBS[job] = {"module": mod, "items": items, "source": source}
    return json.dumps({"job": job, "items": [{"kernel": k.id, "case": c.name} for k, c in items], "skipped": skipped})


def grid_prepare(job: int, index: int) -> str:
    """Plan item `index` of a job: JSON {"run", "plan"} (bytes via plan_bytes, as for the demo)."""
    from .conformance import judged_case

    state = _JOBS[job]
    kernel, case = state["items"][index]
    case = judged_case(kernel, case)
    plan = state["module"].plan(kernel, case, source=state["source"])
    run = _next_run()
    _RUNS[run] = {"kernel": kernel, "case": case, "plan": plan, "raw": {}, "job": job}
    return json.dumps({"run": run, "plan": plan.to_js()})


def grid_judge(run: int, error: str = "") -> str:
    """Judge a run the browser finished (or report its error): JSON rows per output. A failing
    output is localised, with the browser's precision probe (when it ran) naming suspects."""
    from .conformance import expected, judge, suspects

    state = _RUNS.pop(run)
    case, kernel = state["case"], state["kernel"]
    if error:
        rows = [{"case": case.name, "output": "-", "max_abs_err": float("inf"), "allowance": 0.0, "pass": False, "error": error}]
    else:
        got = state["plan"].unpack(state["raw"])
        code = "\n".join(sorted({d.source for d in state["plan"].dispatches}))
        rows = judge(case, got, *expected(kernel, case), suspects=suspects(code, _PROBE.get("browser")))
    for r in rows:
        r["kernel"] = kernel.id
    return json.dumps(wire.jsonable(rows))


# --- Precision probe: the browser's built-ins measured (wgattn.precision) -------------------

_PROBE: Dict[str, Dict[str, object]] = {}  # "browser": the last report, for grid_judge's suspects


def probe_prepare() -> str:
    """JSON {"run", "plan"} of the precision probe (bytes via plan_bytes, as for the demo)."""
    from . import precision

    plan = precision.plan()
    run = _next_run()
    _RUNS[run] = {"plan": plan, "raw": {}}
    return json.dumps({"run": run, "plan": plan.to_js()})


def probe_judge(run: int, adapter_json: str = "{}") -> str:
    """The probe's report from the browser's read-back: JSON {adapter, functions}."""
    from . import precision

    state = _RUNS.pop(run)
    got = state["plan"].unpack(state["raw"])["got"]
    report = {"adapter": json.loads(adapter_json or "{}"), "functions": precision.judge(got, state["plan"].meta["samples"])}
    _PROBE["browser"] = report
    return json.dumps(wire.jsonable(report))


# --- Benchmark view: `wgattn bench`'s jobs timed by the browser's WebGPU --------------------
# bench_start validates the request and lists the jobs (one per (seq_len, impl), baseline first
# within a seq_len); bench_plan builds one plan of a job (its bytes through plan_bytes, as for
# the demo); the page times it (static/webgpu.js Executor.time) and bench_record turns the
# per-run milliseconds into a record of exactly `wgattn bench --json`'s shape.

BENCH_LIMITS = {
    "B": (1, 64),
    "H": (1, 64),
    "D": (1, 256),
    "seq_len": (16, 8192),
    "runs": (10, 100),
    "warmup": (3, 20),
    "seq_lens": 8,  # at most this many sequence lengths per request
    "elements": 1 << 24,  # B*H*S*D per tensor: 64 MiB of float32
}
_BENCHES: Dict[int, Dict[str, object]] = {}


def _int_in(request: Dict[str, object], key: str, lo: int, hi: int, default: Optional[int] = None) -> int:
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
    lo, hi = BENCH_LIMITS["seq_len"]
    most = BENCH_LIMITS["seq_lens"]
    wanted = f"a comma-separated list of 1 to {most} integers in {lo}..{hi} (e.g. 128,256,512,1024)"
    items: List[object]
    if isinstance(value, str):
        items = [p.strip() for p in value.split(",") if p.strip()]
    elif isinstance(value, list):
        items = list(value)
    else:
        raise ValueError(f"seq_lens must be {wanted}, got {value!r}")
    out = []
    for item in items:
        if isinstance(item, str) and item.isdigit():
            item = int(item)
        if not isinstance(item, int) or isinstance(item, bool) or not lo <= item <= hi:
            raise ValueError(f"seq_lens must be {wanted}; {item!r} is not")
        out.append(item)
    out = sorted(set(out))
    if not 1 <= len(out) <= most:
        raise ValueError(f"seq_lens must be {wanted}, got {len(out)} lengths")
    return out


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


def _skip_reason(kernel, features: List[str], d: int) -> Optional[str]:
    """Why this browser cannot run `kernel` at head_dim d, or None."""
    missing = [f for f in kernel.requires if f not in features]
    if missing:
        return f"needs adapter features {missing}, which this browser's adapter lacks"
    if not kernel.path.exists():
        return f"its shader {kernel.path.name} is not in this build"
    most = kernel.limits.get("head_dim")
    if most is not None and d > most:
        return f"supports head_dim <= {most}, got D={d}"
    return None


def bench_start(request_json: str) -> str:
    """{"op", "impls"?, "B", "H", "D", "seq_lens", "causal", "runs", "warmup"?, "features"?} ->
    JSON {"bench", "op", "baseline", "impls", "runs", "warmup", "seq_lens", "jobs": [{"index", "impl", "shape", "causal", "flops",
    "dtype", "plans"}], "skipped": [{"impl", "reason"}]}; ValueError says what is wrong and what
    is allowed. `features` are the browser adapter's: kernels needing others are skipped."""
    from . import bench

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
    b = _int_in(request, "B", *BENCH_LIMITS["B"])
    h = _int_in(request, "H", *BENCH_LIMITS["H"])
    d = _int_in(request, "D", *BENCH_LIMITS["D"])
    seq_lens = _seq_lens(request.get("seq_lens", "128,256,512,1024"))
    runs = _int_in(request, "runs", *BENCH_LIMITS["runs"], default=10)
    warmup = _int_in(request, "warmup", *BENCH_LIMITS["warmup"], default=3)
    causal = request.get("causal", False)
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be true or false, got {causal!r}")
    features = request.get("features") or []
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
        raise ValueError(f"features must be a list of adapter feature names, got {features!r}")
    most = BENCH_LIMITS["elements"]
    for s in seq_lens:
        if b * h * s * d > most:
            raise ValueError(
                f"B*H*S*D must be at most {most} (64 MiB per float32 tensor), got {b}*{h}*{s}*{d} = {b * h * s * d} at S={s}"
            )
        if op == "probs" and b > s:
            raise ValueError(
                f"for probs B is the number of positions timed and must be <= every sequence length, got B={b} and S={s}"
            )

    reg = registry.load()
    skipped, runnable = [], []
    for impl in impls:
        why = _skip_reason(reg.kernel(impl), features, d)
        if why:
            skipped.append({"impl": impl, "reason": why})
        else:
            runnable.append(impl)
    jobs = []
    for s in seq_lens:
        shape = (b, h, s, d)
        for impl in runnable:
            jobs.append(
                {
                    "index": len(jobs),
                    "op": op,
                    "impl": impl,
                    "shape": list(shape),
                    "causal": causal,
                    "flops": bench.flops(op, shape, causal),
                    "dtype": bench.dtype_of(impl),
                    # attn_probs takes one position per plan (the count bench_plan returns)
                    "plans": b if reg.kernel(impl).interface.name == "attn_probs" else 1,
                }
            )
    _BENCHES.clear()  # one benchmark at a time: drop the last one's plans
    bench_id = _next_run()
    _BENCHES[bench_id] = {"jobs": jobs, "runs": runs, "cache": None}
    return json.dumps(
        {
            "bench": bench_id,
            "op": op,
            "baseline": known[0],
            "impls": impls,
            "runs": runs,
            "warmup": warmup,
            "seq_lens": seq_lens,
            "jobs": jobs,
            "skipped": skipped,
            "limits": BENCH_LIMITS,
        }
    )


def _job_plans(bench_id: int, index: int):
    """The job's plans, built once and kept until the next job's are asked for."""
    from . import bench

    state = _BENCHES[bench_id]
    cache = state["cache"]
    if cache is None or cache[0] != index:
        job = state["jobs"][index]
        state["cache"] = None  # free the previous job's bytes first
        state["cache"] = (index, bench.plans(job["impl"], job["op"], tuple(job["shape"]), job["causal"]))
    return state["cache"][1]


def bench_plan(bench_id: int, index: int, plan_index: int = 0) -> str:
    """Plan `plan_index` of job `index`: JSON {"run", "plan"} (bytes via plan_bytes, released with
    bench_release), or {"skipped": why} when the kernel cannot build this job's plan."""
    try:
        plans = _job_plans(bench_id, index)
    except ValueError as exc:
        return json.dumps({"skipped": str(exc)})
    plan = plans[plan_index]
    run = _next_run()
    _RUNS[run] = {"plan": plan, "raw": {}}
    return json.dumps({"run": run, "plan": plan.to_js(), "count": len(plans)})


def bench_release(run: int) -> None:
    """Forget a timed plan (its bytes are on the GPU already)."""
    _RUNS.pop(run, None)


def bench_record(bench_id: int, index: int, samples_json: str, timer: str, adapter: str) -> str:
    """The record of job `index` from its per-run milliseconds (every plan of a run summed): JSON
    of `wgattn bench --json`'s shape {op, impl, shape, causal, dtype, adapter, median_ms, tflops,
    runs, timer}."""
    from . import bench

    state = _BENCHES[bench_id]
    job = state["jobs"][index]
    samples = [float(x) for x in json.loads(samples_json)]
    if not samples or any(not np.isfinite(x) for x in samples):
        raise ValueError(f"{job['impl']}: no finite timings ({samples[:3]}...)")
    if timer not in ("gpu", "wall"):
        raise ValueError(f"timer must be 'gpu' or 'wall', got {timer!r}")
    if statistics.median(samples) <= 0:
        raise ValueError(f"{job['impl']}: median time is not positive (below the timer's resolution)")
    if state["cache"] is not None and state["cache"][0] == index:
        state["cache"] = None
    rec = bench._record(job["op"], job["impl"], job["shape"], job["causal"], job["dtype"], adapter, samples, job["flops"], timer)
    return json.dumps(rec.to_json())


def bench_import(text: str) -> str:
    """The records of a `wgattn bench --json` file (a list of {op, impl, shape, causal, dtype,
    adapter, median_ms, tflops, runs, timer}), checked, as JSON; ValueError saying what is wrong.
    The impl need not be registered here (PyTorch's, NumPy's, another machine's kernels)."""
    import math

    from . import bench

    try:
        records = json.loads(text)
    except ValueError:
        raise ValueError("not JSON: expected the output of `wgattn bench --json` (a list of records)") from None
    if isinstance(records, dict):
        records = [records]
    if not isinstance(records, list) or not records:
        raise ValueError("expected a non-empty list of benchmark records (`wgattn bench --json`)")
    keys = list(bench.Record.__dataclass_fields__)
    optional = {"mode", "config"}  # records of wgattn bench before trusted mode lack them
    out = []
    for n, r in enumerate(records):
        where = f"record {n}"
        if not isinstance(r, dict) or not set(keys) - optional <= set(r) <= set(keys):
            got = sorted(r) if isinstance(r, dict) else type(r).__name__
            raise ValueError(f"{where}: expected the fields {keys} ({sorted(optional)} optional), got {got}")
        r = {"mode": "", "config": "", **r}
        for name in optional:
            if not isinstance(r[name], str):
                raise ValueError(f"{where}: {name} must be a string, got {r[name]!r}")
        if r["op"] not in bench.OPS:
            raise ValueError(f"{where}: op must be one of {list(bench.OPS)}, got {r['op']!r}")
        shape = r["shape"]
        if (
            not isinstance(shape, list)
            or len(shape) != 4
            or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in shape)
        ):
            raise ValueError(f"{where}: shape must be 4 positive integers (B, H, S, D), got {shape!r}")
        for name in ("median_ms", "tflops"):
            x = r[name]
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                raise ValueError(f"{where}: {name} must be a finite number >= 0, got {x!r}")
        for name in ("impl", "dtype", "adapter", "timer"):
            if not isinstance(r[name], str) or not r[name]:
                raise ValueError(f"{where}: {name} must be a non-empty string, got {r[name]!r}")
        if not isinstance(r["causal"], bool):
            raise ValueError(f"{where}: causal must be true or false, got {r['causal']!r}")
        out.append({k: r[k] for k in keys})
    return json.dumps(out)
