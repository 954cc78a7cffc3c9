"""The test bed's Python half: conformance jobs for one registered kernel, planned for the adapter
the test bed found (its TargetJson, as the page's static/webgpu.js reports a device), and their
judgement. testbed.mjs runs the jobs through the page's own executor under Dawn and writes the
output bytes back; `judge` judges every output of the kernel's interface by the kernel's precision
rule (wgattn.conformance: the float64 reference, the allowance from a naive run in the kernel's
precision; f16 kernels on f16-rounded inputs), so the reference and the tolerance are the
project's own, unchanged.

    python -m bench.smx_testbed.jobs build TARGET.json JOBS.json [--kernel ID] [--cases quick|PREFIX,..]
                                          [--template FILE.wgsl] [--tpr N]
    python -m bench.smx_testbed.jobs judge JOBS.json RESULTS.json

The cases: the conformance grid of the kernel's interface plus EXTRA, cases aimed at kernels on
subgroup matrices; "quick", QUICK's handful that covers every knob; or the cases whose names start
with one of a comma-separated list of prefixes. `--template` plans the kernel
from another WGSL file (a planted bug, a kernel under trial: its includes resolve in shaders/);
`--tpr N` spreads each softmax row of flash_fwd.smx over N invocations (its row shuffles at a
width the adapter's own subgroup size would not give).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, cast

import numpy as np

from wgattn import interfaces, registry
from wgattn.conformance import expected, judge, judged_case
from wgattn.interfaces import Case, Interface
from wgattn.interfaces.flash_fwd import FlashFwd
from wgattn.plan import Plan
from wgattn.registry import Kernel
from wgattn.target import Target

DEFAULT_KERNEL = "flash_fwd.smx"


def flash_fwd_extra(seed: int = 1) -> List[Case]:
    """Cases aimed at a kernel on subgroup matrices: head dims around its 16-wide fragments, rows
    spanning several row blocks and key tiles, scores that rise along the keys (every tile raises
    the row max by more than a lazy rescale's threshold, so O is rescaled again and again), and
    one-hot values (out row i is row i of P folded onto 16 columns: a wrong element of S or P
    shows where it sits in its fragment)."""
    ff = cast(FlashFwd, interfaces.get("flash_fwd"))
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
    # q = 1, k_j = j * 0.08 (times noise in (0.9, 1.1)): s_ij grows by ~0.08 * D / sqrt(D) a key.
    # The tiles are walked from the band's last, so rising scores set the row max at once (the
    # common path) and falling ones raise it by more than TAU at every tile: O is rescaled through
    # workgroup memory (in chunks at D = 512) again and again.
    cases.append(ramp_case(rs, "smx-rising-scores-d64", [(96, 256)], 64, 0.08, rising=True))
    cases.append(ramp_case(rs, "smx-falling-scores-d64", [(96, 256)], 64, 0.08, rising=False))
    t = ff.grid_case(rs, "onehot", [(40, 32)], 1, 1, 16, {}, 1.0).inputs
    v = np.zeros_like(t["v"])
    v[np.arange(v.shape[0]), 0, np.arange(v.shape[0]) % 16] = 1.0
    cases.append(ff.case_from_reference(t["q"], t["k"], v, t["cu_seqlens_q"], t["cu_seqlens_k"], name="smx-onehot-v-d16"))
    cases.append(ramp_case(rs, "smx-falling-scores-d512", [(40, 80)], 512, 0.05, rising=False))
    return cases


def ramp_case(rs, name: str, seqs, d: int, step: float, rising: bool) -> Case:
    """q = 1 and k_j = step * j (rising) or step * (n - 1 - j) (falling), times noise in (0.9,
    1.1), over the packed keys: scores that change by ~step * sqrt(D) a key."""
    ff = interfaces.get("flash_fwd")
    t = ff.grid_case(rs, name, seqs, 2, 1, d, {}, 1.0).inputs
    n = t["k"].shape[0]
    j = np.arange(n, dtype=np.float32)
    ramp = ((j if rising else n - 1 - j) * step)[:, None, None]
    k = (ramp * rs.uniform(0.9, 1.1, size=t["k"].shape)).astype(np.float32)
    return ff.case_from_reference(np.ones_like(t["q"]), k, t["v"], t["cu_seqlens_q"], t["cu_seqlens_k"], name=name)


def varlen_bwd_extra(seed: int = 1) -> List[Case]:
    """The varlen_bwd grid has no head dim that fills whole 64-wide chunks past the first (59, 64,
    111, 130): one case at D = 128, drawn as the grid's rows are."""
    bwd = interfaces.get("varlen_bwd")
    rs = np.random.RandomState(seed)
    opts = {"causal": True, "causal_align": "top_left"}
    return [bwd.grid_case(rs, "smx-bwd-d128-causal-tl-gqa2", [(200, 200), (77, 300)], 4, 2, 128, opts, 1.0)]


def paged_prefill_extra(seed: int = 1) -> List[Case]:
    """Prefill's cases aimed at a kernel on subgroup matrices: scores that rise along the keys
    (the lazy rescale taken again and again, across block boundaries of the cache), one-hot values
    (out row i is row i of P folded onto 16 columns), and a head dim of whole 16-wide fragments
    past a tile's rows at GQA 4:1 with ALiBi."""
    pf = interfaces.get("paged_prefill")
    rs = np.random.RandomState(seed)
    cases = [pf.grid_case(rs, "smx-d128-gqa4-alibi", [200, 77], 77, 8, 2, 128, 16, {}, True, False)]
    t = pf.grid_case(rs, "rising", [256, 96], 96, 2, 1, 64, 16, {}, False, False).inputs
    # q = 1; each cache row holds key j = its token: k_j = j * 0.08 * noise in (0.9, 1.1)
    bs, table, lens = t["k_cache"].shape[1], t["block_table"], t["seq_lens"]
    k = np.zeros_like(t["k_cache"])
    for b, n in enumerate(lens):
        for j in range(int(n)):
            k[table[b, j // bs], j % bs] = j * 0.08 * rs.uniform(0.9, 1.1, size=k.shape[2:])
    rising = pf.case_from_reference(np.ones_like(t["q"]), k, t["v_cache"], table, lens, name="smx-rising-scores-d64")
    cases.append(rising)
    t = pf.grid_case(rs, "onehot", [40, 32], 32, 1, 1, 16, 8, {}, False, False).inputs
    v = np.zeros_like(t["v_cache"])
    v[:, :, 0, :] = np.eye(16, dtype=np.float32)[(np.arange(v.shape[0] * v.shape[1]) % 16)].reshape(v.shape[0], v.shape[1], 16)
    cases.append(pf.case_from_reference(t["q"], t["k_cache"], v, t["block_table"], t["seq_lens"], name="smx-onehot-v-d16"))
    return cases


# Per interface: cases beyond the conformance grid, and the quick subset (name prefixes) covering
# causal in both alignments, GQA and MQA, windows, softcap, ALiBi, sinks, empty sequences and rows
# with no key, head dims past a 16-wide fragment and D = 128.
EXTRA = {"flash_fwd": flash_fwd_extra, "varlen_bwd": varlen_bwd_extra, "paged_prefill": paged_prefill_extra}
QUICK = {
    "flash_fwd": (
        "causal-br-d64-mqa-empty-seqs",
        "causal-tl-d111-gqa3",
        "window-both-causal-br-d130",
        "window-0-0-tl-d64-empty-rows",
        "softcap-d64-gqa3",
        "alibi-sinks-causal-br-d64-gqa3-empty-rows",
        "alibi-dense-tl-d59-unequal",
        "sinks-window-softcap-tl-d111-gqa2",
        "smx-rising-scores-d64",
        "smx-falling-scores-d64",
        "smx-d128-causal-tl-gqa2",
        "smx-onehot-v-d16",
        "alibi-sinks-softcap-causal-br-d512",
        "d512-window-both-tl-gqa2",
        "d510-dense-gqa3",
        "smx-falling-scores-d512",
    ),
    "paged_prefill": (
        "whole-cache-gqa4-bs16-idle",
        "awkward-d59-mqa-bs7",
        "window-softcap-d111-gqa3",
        "alibi-sinks-mha-bs1-idle",
        "d512-gqa2-bs32-sinks",
        "smx-rising-scores-d64",
        "smx-onehot-v-d16",
    ),
    "varlen_bwd": (
        "causal-br-d64-mqa-empty-seqs",
        "causal-tl-d111-gqa3",
        "causal-br-d130-mqa-empty-rows",
        "window-both-causal-br-d130",
        "window-0-0-tl-d64-empty-rows",
        "softcap-d64-gqa3",
        "alibi-sinks-causal-br-d64-gqa3-empty-rows",
        "alibi-dense-tl-d59-unequal",
        "sinks-window-softcap-tl-d111-gqa2",
        "smx-bwd-d128-causal-tl-gqa2",
    ),
}


@lru_cache(maxsize=None)
def _every_case(interface: str) -> Tuple[Case, ...]:
    extra = EXTRA.get(interface)
    return tuple(interfaces.get(interface).conformance_cases() + (extra() if extra else []))


def cases(iface: Interface, which: str = "all") -> List[Case]:
    """The conformance grid of `iface` plus its EXTRA cases; "quick": QUICK's handful; else a
    comma-separated list of case-name prefixes (ValueError when none matches)."""
    out = list(_every_case(iface.name))
    if which == "quick":
        if iface.name not in QUICK:
            raise ValueError(f"no quick cases for interface {iface.name}: use --cases all, or add them to QUICK")
        out = [c for c in out if c.name.startswith(QUICK[iface.name])]
    elif which != "all":
        prefixes = tuple(p for p in which.split(",") if p)
        out = [c for c in out if c.name.startswith(prefixes)]
        if not out:
            raise ValueError(f"--cases {which}: no case of {iface.name} starts with any of these prefixes")
    return out


def kernel(kernel_id: str, template: str = "") -> Kernel:
    """Registered kernel `kernel_id`, its WGSL taken from `template` (a .wgsl file anywhere; its
    includes resolve in the shaders folder) when given."""
    k = registry.load().kernel(kernel_id)
    if not template:
        return k
    path = Path(template).resolve()
    if not path.is_file():
        raise ValueError(f"--template {template}: no such file")
    shaders = (k.folder or registry.shader_dir()).resolve()
    return replace(k, template=os.path.relpath(path.with_suffix(""), shaders))


def tpr_overrides(k: Kernel, tpr: int) -> Optional[Dict[str, Any]]:
    """Invocations per softmax row pinned to `tpr`; the workgroup follows (WG = BR * TPR), or the
    row shuffles would meet a workgroup laid out for the adapter's own TPR."""
    if not tpr:
        return None
    if "TPR" not in k.overrides:
        raise ValueError(f"--tpr spreads flash_fwd.smx's softmax rows; {k.id} has no TPR")
    return {"TPR": tpr, "WG": f"BR * {tpr}"}


def plan(k: Kernel, case: Case, target: Target, tpr: int = 0) -> Plan:
    """`k`'s plan of the judged `case` on `target` (what the page plans for its own device)."""
    return interfaces.of(k).plan(k, judged_case(k, case), target, overrides=tpr_overrides(k, tpr))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def build(target_json: Mapping[str, Any], kernel_id: str, which: str = "all", template: str = "", tpr: int = 0) -> Dict[str, Any]:
    """The job file: for each case, the plan and its input bytes, or why the adapter cannot run
    it (a head dim no tile fits, say); with what `judge` needs to plan them again."""
    target = Target.from_json(target_json)
    k = kernel(kernel_id, template)
    jobs = []
    for case in cases(interfaces.of(k), which):
        p = plan(k, case, target, tpr)
        if p.unavailable:
            jobs.append({"name": case.name, "refused": p.unavailable})
        else:
            jobs.append(
                {"name": case.name, "plan": p.to_js(), "bytes": {b.name: _b64(b.data) for b in p.buffers if b.data is not None}}
            )
    return {"kernel": kernel_id, "template": template, "tpr": tpr, "cases": which, "target": target_json, "jobs": jobs}


def judge_results(jobs: Mapping[str, Any], results: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """A row per (case, output) of the kernel's interface, judged; a case that could not run is
    one row saying why ("refused": the adapter cannot hold it; "error": it failed)."""
    target = Target.from_json(jobs["target"])
    k = kernel(jobs["kernel"], jobs["template"])
    by_name = {c.name: c for c in cases(interfaces.of(k), jobs["cases"])}
    got = results.get("results", {})
    rows: List[Dict[str, Any]] = []
    for job in jobs["jobs"]:
        name = job["name"]
        if "refused" in job:
            rows.append({"case": name, "refused": job["refused"]})
            continue
        res = got.get(name) or {"error": "no result (testbed.mjs did not run it)"}
        if "error" in res:
            rows.append({"case": name, "error": res["error"]})
            continue
        case = judged_case(k, by_name[name])
        out = plan(k, by_name[name], target, jobs["tpr"]).unpack({b: base64.b64decode(r) for b, r in res["raw"].items()})
        ref, naive = expected(k, case)
        rows += [{kk: v for kk, v in row.items() if kk != "where"} for row in judge(case, out, ref, naive)]
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="plan the kernel's cases for the adapter testbed.mjs reported")
    b.add_argument("target", help="the adapter, as testbed.mjs's `target` wrote it")
    b.add_argument("out")
    b.add_argument("--kernel", default=DEFAULT_KERNEL, help="a registered kernel id (default: %(default)s)")
    b.add_argument("--cases", default="all", help="all, quick, or case-name prefixes, comma-separated (default: %(default)s)")
    b.add_argument(
        "--template", default="", help="the kernel's WGSL from this file instead (a planted bug, a kernel under trial)"
    )
    b.add_argument("--tpr", type=int, default=0, help="flash_fwd.smx: invocations per softmax row (default: the adapter's)")
    j = sub.add_parser("judge", help="judge the outputs testbed.mjs's `run` wrote")
    j.add_argument("jobs")
    j.add_argument("results")
    a = ap.parse_args(argv)
    if a.cmd == "build":
        jobs = build(json.loads(Path(a.target).read_text()), a.kernel, a.cases, a.template, a.tpr)
        Path(a.out).write_text(json.dumps(jobs))
        refused = sum(1 for j in jobs["jobs"] if "refused" in j)
        print(f"{a.out}: {a.kernel}, {len(jobs['jobs'])} cases ({refused} the adapter cannot hold)", file=sys.stderr)
        return 0
    jobs = json.loads(Path(a.jobs).read_text())
    rows = judge_results(jobs, json.loads(Path(a.results).read_text()))
    precision = registry.load().kernel(jobs["kernel"]).precision
    for r in rows:
        if "pass" in r:
            print(
                f"{'PASS' if r['pass'] else 'FAIL'} {r['case']} {r['output']}: err {r['max_abs_err']:.3g} "
                f"allow {r['allowance']:.3g} (naive {precision} {r['naive_err']:.3g})"
            )
        else:
            print(f"{'----' if 'refused' in r else 'FAIL'} {r['case']}: {r.get('refused') or r.get('error')}")
    judged = [r for r in rows if "pass" in r]
    bad = sum(1 for r in rows if "error" in r or r.get("pass") is False)
    worst = max(judged, key=lambda r: r["max_abs_err"] / r["allowance"] if r["allowance"] else np.inf, default=None)
    if worst is not None:
        ratio = worst["max_abs_err"] / worst["allowance"] if worst["allowance"] else np.inf
        print(f"worst error / allowance: {ratio:.3g} ({worst['case']} {worst['output']})", file=sys.stderr)
    print(f"{jobs['kernel']}: {sum(1 for r in judged if r['pass'])} outputs passed, {bad} failed or errored", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
