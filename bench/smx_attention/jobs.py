"""Jobs for the subgroup-matrix attention harness, and their judgement.

A job file (JSON) holds dispatch plans built by a kernel's interface's plan() for one registered
kernel (--kernel, default flash_fwd.smx; smx_plan.kernel pins it to each configuration) in each
configuration and variant: correctness plans with their input bytes, and timing plans whose
float inputs (q, k, v; for the backward also out, dout) the executor fills with random numbers on
the GPU. It records the kernel's id. An executor (smx.js: the bench page in a browser, or
testbed.mjs under Node with Dawn) runs them and writes a results file; `judge` reads both back and
judges every output of the kernel's interface (flash_fwd: out, lse; varlen_bwd: dq, dk, dv) by the
kernel's precision's rule (wgattn.conformance; f16: f16-rounded inputs against the float64
reference, allowance from a naive float16 run's error), so the reference and the tolerance are
the project's own, unchanged.

flash_fwd.smx is built in every kind (smx_plan.KINDS) and timing variant; any other kernel in its
one kind ("staged": as registered) and the "auto" variant. A kernel without subgroup matrices
(varlen_bwd.tiled) runs too, unpinned: the plumbing checked before its matrix kernel exists.

    python jobs.py build OUT.json [--kernel ID] [--configs 16x16x16,...] [--subgroup 32] [--storage 49152]
    python jobs.py judge OUT.json RESULTS.json
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, cast

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "py"))
sys.path.insert(0, str(HERE))

import smx_plan  # noqa: E402

from wgattn import bench, interfaces, registry  # noqa: E402
from wgattn.conformance import expected, judge, judged_case  # noqa: E402
from wgattn.interfaces import Case, Interface  # noqa: E402
from wgattn.interfaces.flash_fwd import FlashFwd  # noqa: E402
from wgattn.plan import Output  # noqa: E402
from wgattn.target import WEBGPU_LIMITS, Target  # noqa: E402
from wgattn.wgsl import preprocess  # noqa: E402

ff = cast(FlashFwd, interfaces.get("flash_fwd"))
DEFAULT_KERNEL = smx_plan.DEFAULT_KERNEL

# Timed shapes (B, H, S, D), causal, as the targets.
TIMED: Tuple[Tuple[int, int, int, int], ...] = ((4, 16, 2048, 64), (2, 16, 4096, 128))

# Variants measured: a name, tile candidates (None: the kernel's own choice) and overrides.
VARIANTS: Dict[str, Dict[str, Any]] = {
    "auto": {},
    "rb4bc32": {"tiles": [{"RB": 4, "BC": 32}]},
    "rb8bc16": {"tiles": [{"RB": 8, "BC": 16}]},
    "rb4bc64": {"tiles": [{"RB": 4, "BC": 64}]},
    "rb8bc32": {"tiles": [{"RB": 8, "BC": 32}]},
    # Two subgroups a row block (DS), each with half of O's head-dim chunks and of S's fragments.
    "ds2rb8bc32": {"tiles": [{"RB": 8, "BC": 32, "DS": 2}]},
    "ds2rb4bc32": {"tiles": [{"RB": 4, "BC": 32, "DS": 2}]},
    "ds2rb8bc64": {"tiles": [{"RB": 8, "BC": 64, "DS": 2}]},
    "ds2rb4bc64": {"tiles": [{"RB": 4, "BC": 64, "DS": 2}]},
    "tau0": {"overrides": {"TAU": 0}},  # FlashAttention-2's eager rescale, for comparison
}
KINDS = smx_plan.KINDS  # the f16 copies' conversion pass is timed with the kinds that need it
OTHER_KINDS = ("staged", "staged16+pf", "direct")  # for the configurations after the first


def parse_config(text: str) -> smx_plan.Config:
    m, n, k = (int(x) for x in text.lower().split("+")[0].split("x"))
    return (m, n, k)


def parse_kind(tag: str) -> str:
    """ "16x16x16+staged16+pf" -> "staged16+pf"; a bare configuration is the staged kind."""
    return tag.split("+", 1)[1] if "+" in tag else "staged"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def extra_cases(seed: int = 1) -> List[Case]:
    """Cases aimed at this kernel: head dims around its 16-wide fragments, rows spanning several
    row blocks and key tiles, and scores that rise along the keys (every tile raises the row max
    by more than the lazy-rescale threshold, so O is rescaled again and again)."""
    rs = np.random.RandomState(seed)
    cases = []
    specs = [
        ("smx-d128-causal-tl-gqa2", [(200, 200), (77, 300)], 4, 2, 128, {"causal": True, "causal_align": "top_left"}, 1.0),
        ("smx-d64-dense-multitile", [(130, 260)], 2, 2, 64, {}, 1.0),
        ("smx-d72-window-br", [(90, 150)], 2, 1, 72, {"window": (40, 7)}, 1.0),
        ("smx-d16-softcap-causal", [(65, 65)], 3, 3, 16, {"softcap": 10.0, "causal": True}, 2.0),
    ]
    for name, seqs, hq, hkv, d, opts, amp in specs:
        case = ff.grid_case(rs, name, seqs, hq, hkv, d, opts, amp)  # drawn as the grid's rows are
        cases.append(Case(name, case.inputs, case.options))
    # Rising scores: q = 1, k_j = j * 0.08 (times noise in (0.9, 1.1)): s_ij grows ~0.08*D/sqrt(D) a key.
    t = ff.grid_case(rs, "rising", [(96, 256)], 2, 1, 64, {}, 1.0).inputs
    k = t["k"]
    ramp = (np.arange(k.shape[0], dtype=np.float32) * 0.08)[:, None, None]
    k = (ramp * rs.uniform(0.9, 1.1, size=k.shape)).astype(np.float32)
    q = np.ones_like(t["q"])
    cases.append(ff.case_from_reference(q, k, t["v"], t["cu_seqlens_q"], t["cu_seqlens_k"], name="smx-rising-scores-d64"))
    # One-hot values: v_j = e_(j mod 16), so out row i is row i of P folded onto 16 columns, and a
    # wrong element of S or P shows where it sits in its fragment.
    t = ff.grid_case(rs, "onehot", [(40, 32)], 1, 1, 16, {}, 1.0).inputs
    v = np.zeros_like(t["v"])
    v[np.arange(v.shape[0]), 0, np.arange(v.shape[0]) % 16] = 1.0
    cases.append(ff.case_from_reference(t["q"], t["k"], v, t["cu_seqlens_q"], t["cu_seqlens_k"], name="smx-onehot-v-d16"))
    return cases


def bwd_extra_cases(seed: int = 1) -> List[Case]:
    """The varlen_bwd grid has no head dim that fills whole 64-wide chunks past the first (59, 64,
    111, 130): one case at D = 128, drawn as the grid's rows are."""
    bwd = interfaces.get("varlen_bwd")
    rs = np.random.RandomState(seed)
    opts = {"causal": True, "causal_align": "top_left"}
    return [bwd.grid_case(rs, "smx-bwd-d128-causal-tl-gqa2", [(200, 200), (77, 300)], 4, 2, 128, opts, 1.0)]


# Per interface: its cases beyond the conformance grid, and the quick subset (name prefixes)
# covering every knob: causal in both alignments, GQA and MQA, windows, softcap, empty sequences
# and rows with no key, head dims past a 16-wide fragment and D = 128.
EXTRA = {"flash_fwd": extra_cases, "varlen_bwd": bwd_extra_cases}
QUICK = {
    "flash_fwd": (
        "causal-br-d64-mqa-empty-seqs",
        "causal-tl-d111-gqa3",
        "window-both-causal-br-d130",
        "window-0-0-tl-d64-empty-rows",
        "softcap-d64-gqa3",
        "smx-rising-scores-d64",
        "smx-d128-causal-tl-gqa2",
        "smx-onehot-v-d16",
    ),
    "varlen_bwd": (
        "causal-br-d64-mqa-empty-seqs",
        "causal-tl-d111-gqa3",
        "causal-br-d130-mqa-empty-rows",
        "window-both-causal-br-d130",
        "window-0-0-tl-d64-empty-rows",
        "softcap-d64-gqa3",
        "smx-bwd-d128-causal-tl-gqa2",
    ),
}


def interface_of(kernel_id: str) -> Interface:
    """The interface registered kernel `kernel_id` implements (ValueError naming the registered
    kernels for an unknown id)."""
    return interfaces.of(registry.load().kernel(kernel_id))


@lru_cache(maxsize=None)
def _cases(interface: str) -> Tuple[Case, ...]:
    iface = interfaces.get(interface)
    extra = EXTRA.get(interface)
    return tuple(iface.conformance_cases() + (extra() if extra else []))


def correctness_cases(which: str = "all", kernel_id: str = DEFAULT_KERNEL) -> List[Case]:
    """The conformance grid of `kernel_id`'s interface plus its EXTRA cases; "quick": QUICK's
    handful covering every knob."""
    name = interface_of(kernel_id).name
    cases = list(_cases(name))
    if which == "quick":
        if name not in QUICK:
            raise ValueError(f"no quick cases for interface {name} ({kernel_id}); use --cases all, or add them to jobs.QUICK")
        cases = [c for c in cases if c.name.startswith(QUICK[name])]
    return cases


def target(storage: int) -> Target:
    """An adapter with subgroup matrices, `storage` bytes of workgroup storage and 1024
    invocations a workgroup (the matrix configuration is the kernel's: smx_plan.kernel)."""
    limits = {**WEBGPU_LIMITS, "max-compute-workgroup-storage-size": storage, "max-compute-invocations-per-workgroup": 1024}
    features = frozenset(("shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"))
    return Target(features=features, limits=limits, name=f"an adapter with {storage} bytes of workgroup storage")


# Inputs a timing plan's executor fills with random numbers on the GPU (those its plan has as inputs:
# flash_fwd's out is an output).
FILLED = ("q", "k", "v", "out", "dout")


def _plan_job(
    name: str, kern, case: Case, tgt: Target, overrides: Optional[Mapping[str, float]], with_bytes: bool
) -> Dict[str, Any]:
    """One job: `kern`'s plan on `case` by its interface's plan(); every output as [name, buffer,
    shape, offset in float32 elements] (dk and dv share one buffer)."""
    if kern.defines.get("KV_F16"):
        if overrides:
            kern = replace(kern, overrides={**kern.overrides, **overrides})
        plan = smx_plan.f16_plan(kern, case, tgt)
    else:
        plan = interfaces.of(kern).plan(kern, case, tgt, overrides=overrides)  # type: ignore[arg-type]
    if plan.unavailable:
        raise ValueError(plan.unavailable)
    js = plan.to_js()
    outputs = [[o.name, o.buffer, list(o.shape)] + ([o.offset] if o.offset else []) for o in plan.outputs]
    job: Dict[str, Any] = {"name": name, "plan": js, "outputs": outputs}
    if with_bytes:
        job["bytes"] = {b.name: _b64(b.data) for b in plan.buffers if b.data is not None}
    else:  # timing: the float inputs filled on the GPU; the small ones travel
        fill = [b.name for b in plan.buffers if b.name in FILLED and b.data is not None]
        job["bytes"] = {b.name: _b64(b.data) for b in plan.buffers if b.data is not None and b.name not in fill}
        job["fill"] = fill
    return job


def _tpr_overrides(tpr: int) -> Optional[Dict[str, Any]]:
    """Invocations per softmax row pinned to `tpr`: the workgroup follows (WG = BR * TPR), or the
    row shuffles would meet a workgroup laid out for the adapter's own TPR."""
    return {"TPR": tpr, "WG": f"BR * {tpr}"} if tpr else None


def timed_case(shape: Tuple[int, int, int, int], iface: Interface = ff) -> Case:
    """A dense causal case of `shape` for `iface` (its bench_cases; flash_fwd's dense_case) with
    zero tensors (the executor fills them)."""
    b, h, s, d = shape
    name = "x".join(map(str, shape))
    z = np.zeros((b, h, s, d), dtype=np.float32)
    if iface is ff:
        return ff.dense_case(z, z, z, causal=True, name=name)
    dense = {n: z for n in ("q", "k", "v")}
    if iface.bench_op == "bwd":
        dense["dout"] = z
    (case,) = iface.bench_cases(dense, causal=True)  # one plan a timed run
    return Case(name, case.inputs, case.options)


def gemm_job(cfg: smx_plan.Config, subgroup: int, size: int, flat: bool = False) -> Dict[str, Any]:
    """The GEMM ceiling (gemm.wgsl) for `cfg`: C = A Bᵀ, size^3, 2 x 2 subgroups of 64 x 64;
    `flat`: its FLAT contrast (dynamic offsets into flat workgroup arrays)."""
    m, n, k = cfg
    defines = {"SMX_M16": int(m == 16), "SMX_N16": int(n == 16), "SMX_K16": int(k == 16), "FLAT": int(flat)}
    src = preprocess((HERE / "gemm.wgsl").read_text(), defines, lambda path: "", "gemm.wgsl")
    block = 2 * 64
    return {
        "name": f"gemm{'_flat' if flat else ''}:{size}",
        "source": src,
        "constants": {"WG": 4 * subgroup, "SGR": 2, "SGC": 2},
        "dims": [size, size, size],
        "workgroups": [size // block, size // block, 1],
        "flops": 2 * size**3,
    }


def build(
    configs: Sequence[smx_plan.Config],
    subgroup: int,
    storage: int,
    which: str,
    timing: bool,
    variants: Sequence[str],
    gemm_size: int = 8192,
    shapes: Sequence[Tuple[int, int, int, int]] = TIMED,
    template: str = "",
    kinds: Sequence[str] = KINDS,
    tpr: int = 0,
    cases_variant: str = "auto",
    kernel_id: str = DEFAULT_KERNEL,
) -> Dict[str, Any]:
    """Jobs for (configuration, kind) pairs of registered kernel `kernel_id`: the first
    configuration with every kind, every variant timed and, in its staged kind, `which` cases;
    the other configurations with OTHER_KINDS, the "auto" variant and the quick cases (a page can
    narrow further: each correctness job says whether it is "quick"). The staged kind carries the
    GEMM ceiling. The correctness plans use `cases_variant`'s tiles (a variant is timed only once
    it passes). Kinds, variants and `tpr` are flash_fwd.smx's: another kernel is built in its one
    kind, "staged", and the "auto" variant; timed shapes are dense and causal, with the FLOPs of
    wgattn.bench.flops for its interface's op (the backward: 2.5 times the forward's)."""
    iface = interface_of(kernel_id)
    if smx_plan.kinds_of(kernel_id) != smx_plan.KINDS:
        if cases_variant != "auto" or tpr:
            raise ValueError(f"--cases-variant and --tpr are flash_fwd.smx's tiles and row spreading; {kernel_id} has neither")
        kinds, variants = ["staged"], ["auto"]
    tgt = target(storage)
    jobs: Dict[str, Any] = {
        "kernel": kernel_id,
        "interface": iface.name,
        "configs": [],
        "subgroup": subgroup,
        "storage": storage,
        "timed": [list(s) for s in shapes],
    }
    quick = {c.name for c in correctness_cases("quick", kernel_id)} if iface.name in QUICK else set()
    pairs = [(c, k) for c in configs for k in (kinds if c == configs[0] else [k for k in kinds if k in OTHER_KINDS])]
    for cfg, kind in pairs:
        first = cfg == configs[0]
        tag = "x".join(map(str, cfg)) + ("" if kind == "staged" else f"+{kind}")
        entry: Dict[str, Any] = {"config": {"M": cfg[0], "N": cfg[1], "K": cfg[2]}, "tag": tag, "correctness": [], "timing": []}
        try:
            kern = smx_plan.kernel(cfg, subgroup, VARIANTS[cases_variant].get("tiles"), template, kind, kernel_id)
        except ValueError as e:
            entry["refused"] = str(e)
            jobs["configs"].append(entry)
            continue
        for case in correctness_cases(which if first and kind == "staged" else "quick", kernel_id):
            jc = judged_case(kern, case)
            try:
                over = {**VARIANTS[cases_variant].get("overrides", {}), **(_tpr_overrides(tpr) or {})}
                job = _plan_job(case.name, kern, jc, tgt, over or None, True)
            except ValueError as e:  # a head dim or size this kernel refuses
                job = {"name": case.name, "refused": str(e)}
            job["quick"] = case.name in quick
            entry["correctness"].append(job)
        if not timing:
            jobs["configs"].append(entry)
            continue
        if kind == "staged":
            entry["gemm"] = [gemm_job(cfg, subgroup, gemm_size)] + ([gemm_job(cfg, subgroup, gemm_size, True)] if first else [])
        for shape in shapes:
            case = timed_case(shape, iface)
            for vname in variants if first else ["auto"]:
                spec = VARIANTS[vname]
                k2 = smx_plan.kernel(cfg, subgroup, spec.get("tiles"), template, kind, kernel_id)
                try:
                    job = _plan_job(f"{vname}:{case.name}", k2, case, tgt, spec.get("overrides"), False)
                except ValueError as e:
                    job = {"name": f"{vname}:{case.name}", "refused": str(e)}
                job["variant"], job["shape"] = vname, list(shape)
                job["flops"] = int(bench.flops(iface.bench_op, shape, causal=True))  # causal: half the scores
                entry["timing"].append(job)
        jobs["configs"].append(entry)
    return jobs


def judge_results(jobs_path: Path, results_path: Path) -> List[Dict[str, Any]]:
    """Judge every correctness output in `results_path` against the cases `jobs_path` was built
    from, for the kernel it records (flash_fwd.smx in a file from before it did); one row per
    (config, case, output)."""
    jobs = json.loads(jobs_path.read_text())
    results = json.loads(results_path.read_text())
    kernel_id = jobs.get("kernel", DEFAULT_KERNEL)
    by_name = {c.name: c for c in correctness_cases("all", kernel_id)}
    rows = []
    for entry in jobs["configs"]:
        tag = entry["tag"]
        got_cfg = results.get("configs", {}).get(tag, {})
        if "refused" in entry or got_cfg.get("skipped"):
            rows.append({"config": tag, "case": "-", "skipped": entry.get("refused") or got_cfg.get("skipped")})
            continue
        kern = smx_plan.kernel(parse_config(tag), jobs["subgroup"], kind=parse_kind(tag), kernel_id=kernel_id)
        for job in entry["correctness"]:
            name = job["name"]
            res = got_cfg.get("correctness", {}).get(name)
            if "refused" in job:
                rows.append({"config": tag, "case": name, "refused": job["refused"]})
                continue
            if res is None and not job.get("quick"):
                continue  # a page asked for the quick cases only
            if res is None or "error" in res:
                rows.append({"config": tag, "case": name, "error": (res or {}).get("error", "no result")})
                continue
            case = judged_case(kern, by_name[name])
            got = {}
            for out_name, buf, shape, *offset in job["outputs"]:
                out = Output(out_name, buf, offset[0] if offset else 0, tuple(shape))
                got[out_name] = out.take(base64.b64decode(res["raw"][buf]))
            try:
                ref, naive = expected(kern, case)
            except ValueError as e:  # e.g. an f16 kernel of an interface with no naive float16 reference
                why = f"{kernel_id} is judged by the {kern.precision} rule, whose reference failed: {e}"
                rows.append({"config": tag, "case": name, "error": why})
                continue
            for row in judge(case, got, ref, naive):
                rows.append({"config": tag, **{k: v for k, v in row.items() if k != "where"}})
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("--kernel", default=DEFAULT_KERNEL, help="a registered kernel id (its interface's cases and plan())")
    b.add_argument("--configs", default=",".join("x".join(map(str, c)) for c in smx_plan.PREFERRED))
    b.add_argument("--subgroup", type=int, default=32)
    b.add_argument("--storage", type=int, default=49152)
    b.add_argument("--cases", default="all", choices=("all", "quick"))
    b.add_argument("--timing", action="store_true")
    b.add_argument("--variants", default=",".join(VARIANTS))
    b.add_argument("--gemm", type=int, default=8192, help="GEMM ceiling size (a multiple of 128)")
    b.add_argument("--kinds", default=",".join(KINDS), help="staged, staged16, direct: where K and V come from")
    b.add_argument("--tpr", type=int, default=0, help="invocations per row in the softmax (default: subgroup size / M)")
    b.add_argument(
        "--cases-variant", default="auto", choices=tuple(VARIANTS), help="the variant whose tiles the correctness plans use"
    )
    b.add_argument("--template", default="", help="another WGSL file for the kernel: path without .wgsl, from shaders/")
    b.add_argument("--shapes", default=";".join(",".join(map(str, s)) for s in TIMED), help="timed B,H,S,D;...")
    j = sub.add_parser("judge")
    j.add_argument("jobs")
    j.add_argument("results")
    j.add_argument("--json", default="")
    a = ap.parse_args(argv)
    if a.cmd == "build":
        cfgs = [parse_config(c) for c in a.configs.split(",") if c]
        shapes = [bench.parse_shape(t) for t in a.shapes.split(";") if t]
        jobs = build(
            cfgs,
            a.subgroup,
            a.storage,
            a.cases,
            a.timing,
            a.variants.split(","),
            a.gemm,
            shapes,
            a.template,
            a.kinds.split(","),
            a.tpr,
            a.cases_variant,
            a.kernel,
        )
        Path(a.out).write_text(json.dumps(jobs))
        n = sum(len(e.get("correctness", [])) for e in jobs["configs"])
        print(f"{a.out}: {a.kernel}, {len(jobs['configs'])} configurations, {n} correctness plans", file=sys.stderr)
        return 0
    rows = judge_results(Path(a.jobs), Path(a.results))
    precision = registry.load().kernel(json.loads(Path(a.jobs).read_text()).get("kernel", DEFAULT_KERNEL)).precision
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    bad = 0
    for r in rows:
        if "pass" in r:
            ok = r["pass"]
            bad += not ok
            print(
                f"{'PASS' if ok else 'FAIL'} {r['config']} {r['case']} {r['output']}: err {r['max_abs_err']:.3g} "
                f"allow {r['allowance']:.3g} (naive {precision} {r['naive_err']:.3g})"
            )
        else:
            bad += "error" in r
            print(f"---- {r['config']} {r['case']}: {r.get('error') or r.get('refused') or r.get('skipped')}")
    print(f"{sum(1 for r in rows if r.get('pass'))} passed, {bad} failed or errored", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
