"""A live run judged: every pair of runtimes (the browser's WebGPU, the float64 reference computed
here under Pyodide, the server's native run) compared on every output against the reference, and
the pictures of a finished run (wgattn.pictures)."""

from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .. import pictures, tolerance, wire
from .replies import LiveResult, OutputPair, RuntimeReport
from .tables import Finished, LiveRun
from .verdict import RUNTIMES, judge


def compare(run_id: int, state: LiveRun, browser_json: str, native_json: Optional[str]) -> Tuple[LiveResult, Finished]:
    """The comparison `finish` returns (JSON-able) and what the run's pictures need. An f16
    kernel is judged against the naive float16 run, as `wgattn check` judges it."""
    run_, plan = state.live, state.plan
    # Each side is {"timings": ...} when it ran (the server's answer, for native), {"skipped": why}
    # when it cannot run there (no WebGPU, or a feature that adapter lacks), or {"error": what
    # went wrong}.
    browser: Dict[str, Any] = json.loads(browser_json) if browser_json else {"skipped": "not run"}
    native: Dict[str, Any] = json.loads(native_json) if native_json else {"error": "not run"}
    mine = run_.digest

    t0 = time.perf_counter()
    ref, naive = run_.expected()
    reference_ms = (time.perf_counter() - t0) * 1e3
    naive_err = {name: tolerance.max_abs_err(naive[name], ref[name]) for name in ref}

    outputs: Dict[str, Dict[str, np.ndarray]] = {"pyodide": ref}
    runtimes: Dict[str, RuntimeReport] = {"pyodide": {"ok": True, "timings": {"reference_ms": reference_ms}}}
    if "skipped" in browser:
        runtimes["browser"] = {"ok": False, "skipped": browser["skipped"]}
    elif browser.get("error"):
        runtimes["browser"] = {"ok": False, "error": browser["error"]}
    else:
        outputs["browser"] = plan.unpack(state.raw)
        runtimes["browser"] = {"ok": True, "timings": browser.get("timings", {})}
    if "skipped" in native:  # the server's adapter cannot run this kernel (it said why)
        runtimes["native"] = {"ok": False, "skipped": native["skipped"]}
    elif not native.get("error"):
        if native.get("digest") != mine:
            runtimes["native"] = {"ok": False, "error": "server inputs differ from the page's (digest mismatch)"}
        else:
            outputs["native"] = {k: wire.decode(v, k) for k, v in native["outputs"].items()}
            runtimes["native"] = {"ok": True, "timings": native.get("timings", {}), "adapter": native.get("adapter") or {}}
    else:
        runtimes["native"] = {"ok": False, "error": native["error"]}

    present = [r for r in RUNTIMES if r in outputs]
    pairs: List[OutputPair] = []
    for i, a in enumerate(present):
        for b in present[i + 1 :]:
            for name in ref:
                pair = tolerance.pair(a, b, outputs[a][name], outputs[b][name], ref[name], naive_err[name])
                pairs.append({**pair, "output": name})
    cfg = run_.config
    # A skipped runtime is reported, not failed; an errored one fails the run.
    passed = bool(pairs) and all(p["pass"] for p in pairs) and not any("error" in r for r in runtimes.values())
    result: LiveResult = {
        "run": run_id,
        "kernel": run_.kernel.id,
        "interface": run_.kernel.interface,
        "precision": run_.kernel.precision,
        "config": cfg.to_dict(),
        "digest": mine,
        "outputs": list(ref),
        "heads": cfg.heads,
        "naive_err": naive_err,
        "naive_f32_err": naive_err,  # the name before f16 kernels joined (naive in the kernel's precision)
        "runtimes": runtimes,
        "pairs": pairs,
        "pass": passed,
        "verdict": judge(runtimes, pairs, list(ref)),
    }
    return result, Finished(run_, outputs, pairs)


def _head(done: Finished, head: int) -> int:
    heads = done.live.config.heads
    if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < heads:
        raise ValueError(f"head must be an integer in 0..{heads - 1}, got {head!r}")
    return head


def heatmap(done: Finished, head: int) -> pictures.Heatmap:
    """Query head `head`'s attention probabilities (wgattn.pictures.heatmap)."""
    run_ = done.live
    return pictures.heatmap(run_.interface, run_.case, _head(done, head), run_.config.heads)


def error_map(done: Finished, output: str, a: str, b: str, head: int) -> pictures.ErrorPicture:
    """|a - b| for one output and query head, against that pair's allowance
    (wgattn.pictures.error_map); ValueError when a runtime did not produce it."""
    run_, outputs = done.live, done.outputs
    head = _head(done, head)
    for r in (a, b):
        if r not in outputs:
            raise ValueError(f"runtime {r!r} has no outputs in this run; runtimes with outputs: {sorted(outputs)}")
    rows = [p for p in done.pairs if p["output"] == output and {p["a"], p["b"]} == {a, b}]
    if not rows:
        raise ValueError(f"no pair ({a}, {b}) for output {output!r}")
    iface, heads = run_.interface, run_.config.heads
    va = iface.head_view(run_.case, outputs[a][output], head, heads)
    vb = iface.head_view(run_.case, outputs[b][output], head, heads)
    ndim = np.ndim(outputs[a][output])
    pic = pictures.error_map(va, vb, rows[0]["allowance"], iface.view_axes(run_.case, output, ndim))
    pic.update({"output": output, "a": a, "b": b, "head": head})
    return pic
