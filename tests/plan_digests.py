"""Digests of every plan the project builds, to prove a refactoring changed none of them.

`digests()` plans every registered kernel on every case of its interface's conformance grid (as
judged: f16 kernels on f16-rounded inputs), every kernel on its interface's default live
configuration and every benchmark job on a few shapes, for three adapters (WebGPU's default
limits, a large GPU, a software adapter: tile shapes differ), and digests each plan:

    plan   sha256 of Plan.to_js() without the WGSL text, every buffer's bytes, the outputs'
           layout and each dispatch's trusted flag: everything but the shader text
    wgsl   sha256 of each dispatch's WGSL as tokens, without comments, its top-level
           declarations sorted (the order of module-scope declarations means nothing in WGSL):
           an #include that produces the same declarations gives the same digest
    raw    sha256 of the WGSL text exactly as sent (reported, never compared)

A plan that cannot be built records its error's type and message instead. tests/golden/plans.json
holds the digests of the code before the interfaces became one object each
(tests/test_golden_plans.py compares; `python tests/plan_digests.py > tests/golden/plans.json`
wrote it), but for plans changed on purpose since, whose plan digests were replaced: the software
adapter's flash_fwd.blocked and blocked_f16 plans, which take tiles that compile in a fraction of
the time (docs/performance.md, "On a software adapter the compile..."), and the paged_decode
kernels' grid and live plans (all three digests), whose kernel was rebuilt to read the cache into
registers in 16-byte loads (new knobs and WGSL; docs/performance.md, "Decode over a paged
cache"), then again for its measured tile shape (4 keys a key group), its combine's split lanes,
its key groups' interleaved keys and its block-table entries read a tile ahead, and the
varlen_bwd plans' plan digests, whose Params gained `max_seqlen` (the longest sequence, for
kernels whose grid has a block per sequence, as flash_fwd's has) in place of its padding word.
A kernel or interface registered since adds its plans as it joins (paged_decode; flash_fwd.smx and varlen_bwd.smx,
which no adapter here can run: their plans record why; the benchmark's list of backward kernels
grew by varlen_bwd.smx)."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from typing import Dict, List

from wgattn import bench, interfaces, live, registry
from wgattn.conformance import judged_case
from wgattn.target import WEBGPU_LIMITS, Target

# name -> (max workgroup storage, max invocations, software adapter); every feature the kernels use
TARGETS = {
    "webgpu-default": (16384, 256, False),
    "gpu-48k": (49152, 1024, False),
    "cpu-32k": (32768, 1024, True),
}


def target(name: str) -> Target:
    storage, invocations, software = TARGETS[name]
    limits = dict(WEBGPU_LIMITS)
    limits.update({"max-compute-workgroup-storage-size": storage, "max-compute-invocations-per-workgroup": invocations})
    return Target(features=frozenset({"shader-f16", "subgroups", "timestamp-query"}), limits=limits, software=software, name=name)


BENCH_SHAPES = [(1, 2, 64, 16), (2, 3, 100, 59)]

_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\S")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


def wgsl_items(source: str) -> List[str]:
    """The top-level declarations of WGSL `source` as token strings, sorted."""
    code = re.sub(r"//[^\n]*", "", source)
    items, cur, depth = [], [], 0
    for tok in _TOKEN.findall(code):
        cur.append(tok)
        if tok in "{(":
            depth += 1
        elif tok in "})":
            depth -= 1
            if depth == 0 and tok == "}":  # a struct's or fn's end: nothing continues after it
                items.append(" ".join(cur))
                cur = []
        elif tok == ";" and depth == 0:
            items.append(" ".join(cur))
            cur = []
    if cur:
        items.append(" ".join(cur))
    return sorted(items)


def plan_digest(plan) -> Dict[str, str]:
    js = {key: plan.to_js()[key] for key in ("buffers", "dispatches")}  # what to_js held when recorded
    for d in js["dispatches"]:
        d["source"] = ""
    h = hashlib.sha256()
    h.update(json.dumps(js, sort_keys=True).encode())
    for b in plan.buffers:
        h.update(f"|{b.name}:{b.size}:".encode())
        h.update(b.data or b"")
    h.update(json.dumps([[o.name, o.buffer, o.offset, list(o.shape), o.dtype] for o in plan.outputs]).encode())
    h.update(json.dumps([d.trusted for d in plan.dispatches]).encode())
    h.update(json.dumps(plan.meta, sort_keys=True, default=str).encode())
    wgsl = [_sha("\n".join(wgsl_items(d.source)).encode()) for d in plan.dispatches]
    raw = [_sha(d.source.encode()) for d in plan.dispatches]
    return {"plan": h.hexdigest()[:24], "wgsl": _sha(" ".join(wgsl).encode()), "raw": _sha(" ".join(raw).encode())}


def _record(out: Dict[str, Dict[str, str]], key: str, build) -> None:
    try:
        plans = build()
    except ValueError as exc:
        out[key] = {"error": f"{type(exc).__name__}: {exc}"}
        return
    if not isinstance(plans, list):
        plans = [plans]
    stub = next((p for p in plans if not p.dispatches), None)
    if stub is not None:  # a kernel the target cannot fit: the error the plan carries
        out[key] = {"error": f"DoesNotFit: {stub.unavailable}"}
        return
    parts = [plan_digest(p) for p in plans]
    out[key] = {name: _sha(" ".join(p[name] for p in parts).encode()) for name in ("plan", "wgsl", "raw")}


def digests() -> Dict[str, Dict[str, str]]:
    reg = registry.load()
    out: Dict[str, Dict[str, str]] = {}
    grids = {i.name: i.conformance_cases() for i in interfaces.every()}
    for name in TARGETS:
        t = target(name)
        for kernel in reg.kernels.values():
            iface = interfaces.of(kernel)
            for case in grids[kernel.interface]:
                _record(out, f"grid/{name}/{kernel.id}/{case.name}", lambda: iface.plan(kernel, judged_case(kernel, case), t))
            _record(out, f"live/{name}/{kernel.id}", lambda: live.build(kernel.id, {}).plan(t))
        for op in bench.OPS:
            for impl in bench.kernel_impls(op):
                for shape in BENCH_SHAPES:
                    for causal in (False, True):
                        key = f"bench/{name}/{op}/{impl}/{','.join(map(str, shape))}/{causal}"
                        _record(out, key, lambda: bench.plans(impl, op, shape, causal, target=t))
    for kernel in reg.kernels.values():
        run = live.build(kernel.id, {})
        out[f"live-config/{kernel.id}"] = {
            "config": _sha(json.dumps(run.config.to_dict(), sort_keys=True).encode()),
            "digest": run.digest,
        }
    for op in bench.OPS:
        out[f"bench-impls/{op}"] = {"impls": ",".join(bench.kernel_impls(op))}
    return out


if __name__ == "__main__":
    json.dump(digests(), sys.stdout, indent=0, sort_keys=True)
    sys.stdout.write("\n")
