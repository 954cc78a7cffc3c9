"""What the page's JavaScript calls under Pyodide (Python 3.8, numpy 1.17).

The page's JS only moves bytes: it asks `prepare` for a dispatch plan, runs it in WebGPU, hands the
read-back buffers to `add_buffer`, fetches the server's native run, and asks `finish` to compare
every pair of runtimes against the float64 reference computed here.
"""
from __future__ import annotations

import json
import time
from typing import Dict, List, Optional

import numpy as np

from . import registry, tolerance, wire
from .cases import SdpaCase, digest

__all__ = ["prepare", "plan_bytes", "add_buffer", "finish", "grid_start", "grid_prepare", "grid_judge"]

_RUNS: Dict[int, Dict[str, object]] = {}
_COUNTER = [0]


def _next_run() -> int:
    _COUNTER[0] += 1
    return _COUNTER[0]
RUNTIME_ORDER = ("browser", "pyodide", "native")


def prepare(request_json: str) -> str:
    """{"kernel", "config"} -> JSON {"run", "plan", "digest", "config"}; ValueError on bad input.
    The plan's buffer bytes are fetched separately with `plan_bytes` (JSON carries no bytes)."""
    request = json.loads(request_json)
    kernel = registry.load().kernel(request.get("kernel", "sdpa_arena.seed"))
    config = request.get("config") or {}
    if not isinstance(config, dict):
        raise ValueError("config must be an object")
    case = SdpaCase(**config)
    inputs = case.inputs()
    plan = case.plan(kernel, inputs)
    run = _next_run()
    _RUNS[run] = {"kernel": kernel, "case": case, "inputs": inputs, "plan": plan, "raw": {}}
    return json.dumps({"run": run, "plan": plan.to_js(), "digest": digest(inputs), "config": case.to_dict()})


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
    """Compare every pair of runtimes; JSON {kernel, config, pairs, runtimes, ...}."""
    state = _RUNS.pop(run)
    case, inputs, plan = state["case"], state["inputs"], state["plan"]
    # Each side is {"timings": ...} when it ran, {"skipped": why} when it cannot run here (no
    # WebGPU in this browser), or {"error": what went wrong}.
    browser = json.loads(browser_json) if browser_json else {"skipped": "not run"}
    native = json.loads(native_json) if native_json else {"error": "not run"}
    mine = digest(inputs)

    t0 = time.perf_counter()
    ref = case.reference(inputs)
    reference_ms = (time.perf_counter() - t0) * 1e3
    naive = case.reference(inputs, dtype=np.float32)
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
            runtimes["native"] = {"ok": True, "timings": native.get("timings", {}),
                                  "adapter": native.get("adapter")}
    else:
        runtimes["native"] = {"ok": False, "error": native["error"]}

    present = [r for r in RUNTIME_ORDER if r in outputs]
    pairs: List[Dict[str, object]] = []
    for i, a in enumerate(present):
        for b in present[i + 1:]:
            for name in ref:
                row = tolerance.pair(a, b, outputs[a][name], outputs[b][name], ref[name], naive_err[name])
                row["output"] = name
                pairs.append(row)
    result = {
        "kernel": state["kernel"].id,
        "config": case.to_dict(),
        "digest": mine,
        "naive_f32_err": naive_err,
        "runtimes": runtimes,
        "pairs": pairs,
        # A skipped runtime is reported, not failed; an errored one fails the run.
        "pass": bool(pairs) and all(p["pass"] for p in pairs) and not any("error" in r for r in runtimes.values()),
    }
    return json.dumps(wire.jsonable(result))


# --- Conformance view: the `wgattn check` grid, run by the browser's WebGPU -----------------

_JOBS: Dict[int, Dict[str, object]] = {}


def grid_start(request_json: str) -> str:
    """{"interface", "source"?} -> JSON {"job", "items": [{"kernel", "case"}]}: the project's
    kernels of that interface, or the pasted WGSL, on the interface's conformance grid."""
    from .interfaces import module

    request = json.loads(request_json)
    reg = registry.load()
    iface = reg.interface(request.get("interface", ""))
    mod = module(iface.name)
    source = request.get("source") or None
    if source is not None:
        kernels = [reg.user_kernel(iface.name, "pasted WGSL")]
    else:
        kernels = reg.kernels_of(iface.name)
    cases = mod.conformance_cases()
    job = len(_JOBS) + 1
    items = [(k, c) for k in kernels for c in cases]
    _JOBS[job] = {"module": mod, "items": items, "source": source}
    return json.dumps({"job": job, "items": [{"kernel": k.id, "case": c.name} for k, c in items]})


def grid_prepare(job: int, index: int) -> str:
    """Plan item `index` of a job: JSON {"run", "plan"} (bytes via plan_bytes, as for the demo)."""
    state = _JOBS[job]
    kernel, case = state["items"][index]
    plan = state["module"].plan(kernel, case, source=state["source"])
    run = _next_run()
    _RUNS[run] = {"kernel": kernel, "case": case, "plan": plan, "raw": {}, "job": job}
    return json.dumps({"run": run, "plan": plan.to_js()})


def grid_judge(run: int, error: str = "") -> str:
    """Judge a run the browser finished (or report its error): JSON rows per output."""
    from .conformance import judge

    state = _RUNS.pop(run)
    case, kernel = state["case"], state["kernel"]
    mod = _JOBS[state["job"]]["module"]
    if error:
        rows = [{"case": case.name, "output": "-", "max_abs_err": float("inf"), "allowance": 0.0,
                 "pass": False, "error": error}]
    else:
        got = state["plan"].unpack(state["raw"])
        rows = judge(case, got, mod.reference(case), mod.reference(case, dtype=np.float32))
    for r in rows:
        r["kernel"] = kernel.id
    return json.dumps(wire.jsonable(rows))
