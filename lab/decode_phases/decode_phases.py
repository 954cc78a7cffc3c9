"""Where a paged_decode kernel's time goes on this GPU, and what its tile shape does: one case of
decode_bandwidth.py timed by the measurement protocol (wgattn.protocol) in one interleaved series of
  - the kernel at each tile shape named (`--shapes`, WGxKPG: invocations, keys a key group keeps
    in flight; the first is the reference of the table);
  - the kernel with one part made trivial in its WGSL (`--variants`, VARIANTS; results wrong on
    purpose, only the times count; each variant keeps every load of the cache alive); "a+b"
    applies both;
  - another copy of the kernel under trial (`--template FILE`, repeatable; "FILE+variant" edits it,
    "FILE@NRG=4" sets an override constant of its own, "FILE@NS=32" the split count);
  - the kernel at other split counts (`--splits`);
  - the anchors: the WGSL copy of the case's K and V bytes, the read of them alone and, with
    PyTorch on CUDA, each SDPA backend on the same values unpaged (decode_bandwidth.py's).
Each WGSL entry is registered from a copy of shaders/ with its text, compiled trusted as the
kernel is benchmarked. Only the baseline's output is checked (as the benchmark checks it:
Interface.check_filled), and SDPA's against the float64 reference.

    python3 -m lab.decode_phases.decode_phases [--case target] [--shapes 128x8,128x4] [--variants all]
    (on the lent H100: python3 -m bench.devcarry run -- python3 -m lab.decode_phases.decode_phases ...)
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from bench import decode_bandwidth as db
from bench.demo import ROOT
from wgattn import bandwidth, bench, native, protocol, registry
from wgattn.interfaces import paged_decode

SHADER = "paged_decode.split.wgsl"
TILE_LOOP = ("  for (var t0 = start; t0 < end; t0 += BC) {\n", "looked up for its K\n  }\n")
LOADS_ONLY = """  for (var t0 = start; t0 < end; t0 += BC) {
    for (var i = 0u; i < min(KPG, MAX_KPG); i++) {
      let kk = widen(kn[i]);
      o[0].a += kk.a;
      o[0].b += kk.b;
    }
    k_rows = key_rows(blk_next, t0 + BC, g, z);
    kn = fetch(false, k_rows, lane);
    blk_next = key_blocks(t0 + 2u * BC, end, b, z);
    BARRIER
    for (var i = 0u; i < min(KPG, MAX_KPG); i++) {
      let vv = widen(vn[i]);
      o[0].a += vv.a;
      o[0].b += vv.b;
    }
    m[0] = 0.0;
    l[0] = 1.0;
    vn = fetch(true, k_rows, lane);
  }
"""
# An edit: (old, new), `old` found exactly once; or (start, end, new): the text from `start` through
# `end` replaced.
Edit = Tuple[str, ...]
VARIANTS: Dict[str, List[Edit]] = {
    "no exps": [("  return exp2(max(d, -1000.0) * LOG2E);", "  return max(d, -1000.0) * LOG2E + 1.0;")],
    "no score sums": [
        ("for (var c = 0u; c < DC; c++) {\n        x += part", "for (var c = 0u; c < 1u; c++) {\n        x += part")
    ],
    "no q.k (K summed)": [
        (
            "    for (var r = 0u; r < min(RB, MAX_RB); r++) {\n      let qa",
            "= dot(qa, kw[i].a) + dot(qb, kw[i].b);\n      }\n    }\n",
            """    for (var i = 0u; i < min(KPG, MAX_KPG); i++) {
      let x = dot(kw[i].a + kw[i].b, vec4<f32>(1.0));
      for (var r = 0u; r < min(RB, MAX_RB); r++) {
        part[((z * KPG + i) * RB + r) * PS + lane] = x;
      }
    }
""",
        )
    ],
    "P.V of one row": [
        (
            "        o[r].a += p * vv.a;\n        o[r].b += p * vv.b;",
            "        if (r == 0u) {\n          o[r].a += p * vv.a;\n          o[r].b += p * vv.b;\n        }",
        )
    ],
    "no tile barriers": [
        ("    workgroupBarrier();  // the partial dot products are written\n", ""),
        ("    workgroupBarrier();  // the scores are written; the partial sums are no longer read\n", ""),
    ],
    "rows 2": [("const MAX_RB: u32 = 4u;", "const MAX_RB: u32 = 2u;")],
    "rows 8": [("const MAX_RB: u32 = 4u;", "const MAX_RB: u32 = 8u;")],
    "no combine": [
        (
            "  let w = wid.x + wid.y * nwg.x;\n  let cl = lid % NC;\n",
            "  if (params.num_splits > 0u) {\n    return;\n  }\n  let w = wid.x + wid.y * nwg.x;\n  let cl = lid % NC;\n",
        )
    ],
    "loads only": [(*TILE_LOOP, LOADS_ONLY.replace("BARRIER", "workgroupBarrier();\n    workgroupBarrier();"))],
    "loads only, no barriers": [(*TILE_LOOP, LOADS_ONLY.replace("    BARRIER\n", ""))],
}


def edited(text: str, name: str, edits: Sequence[Edit]) -> str:
    for e in edits:
        if len(e) == 2:
            old, new = e
            if text.count(old) != 1:
                raise SystemExit(f"{name}: the kernel no longer holds {old!r} once")
            text = text.replace(old, new)
        else:
            start, end, new = e
            i = text.find(start)
            j = text.find(end, i)
            if i < 0 or j < 0 or text.count(start) != 1:
                raise SystemExit(f"{name}: the kernel no longer holds {start!r} once, then {end!r}")
            text = text[:i] + new + text[j + len(end) :]
    return text


def variant(text: str, names: str) -> str:
    """The text with the edits of each VARIANTS name in `names` ("a+b"; "" for none)."""
    for name in [n for n in names.split("+") if n]:
        text = edited(text, name, VARIANTS[name])
    return text


def wider(text: str, shape: str) -> str:
    """The kernel's text with room for the shape's keys per group (MAX_KPG at least KPG)."""
    kpg = int(shape.split("x")[1])
    return text if kpg <= 8 else edited(text, shape, [("const MAX_KPG: u32 = 8u;", f"const MAX_KPG: u32 = {kpg}u;")])


def forced_tiles(shape: str, variant: registry.Kernel, sets: Dict[str, int]):
    """paged_decode.tiles for the `variant` kernel (its WGSL: its caps, its private arrays' sizes)
    with one tile candidate, (invocations, keys per group) = `shape`, and without the manifest's
    bound on the keys in flight (a shape past it is what is tried); the constants `sets` set."""
    wg, kpg = (int(x) for x in shape.split("x"))
    one = dataclasses.replace(
        variant, tiles=({"WG": wg, "KPG": kpg},), constraints=tuple(c for c in variant.constraints if "KPG" not in c)
    )
    original = paged_decode.tiles

    def tiles(kernel, head_dim, rows, target):
        knobs, row_blocks = original(one, head_dim, rows, target)
        return {**knobs, **sets}, row_blocks

    return tiles


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="target", help="a case of decode_bandwidth.cases()")
    ap.add_argument("--shapes", default="128x8", help="tile shapes WGxKPG, comma-separated; the first is the baseline's")
    ap.add_argument("--variants", default="all", help="names from VARIANTS, comma-separated ('all', or '' for none)")
    ap.add_argument("--template", action="append", default=[], help="another copy of the kernel's WGSL to time")
    ap.add_argument("--splits", default="", help="split counts to time the first shape at (default: the rule's only)")
    ap.add_argument("--rounds", type=int, default=12, help="the protocol's interleaved rounds")
    ap.add_argument("--warm", type=float, default=2.0, help="the protocol's warm-up, seconds")
    ap.add_argument(
        "--sequential", action="store_true", help="each sequence's blocks in order in the cache (what a shuffled table costs)"
    )
    ap.add_argument("--smoke", action="store_true", help="the case shrunk (decode_bandwidth.smoke): does the script run?")
    args = ap.parse_args(argv)
    proto = protocol.Protocol.of(args.rounds, args.warm)
    kernel_id, config = db.cases()[args.case]
    if args.smoke:
        config = db.smoke(config)
    rt = native.runtime()
    rt.trusted = True
    x = db.inputs(kernel_id, config)
    if args.sequential:
        x["block_table"] = np.sort(x["block_table"], axis=None).reshape(x["block_table"].shape)
    case = paged_decode.INTERFACE.live_case(config, x, args.case)
    nbytes = paged_decode.INTERFACE.bench_bytes(registry.load().kernel(kernel_id), case)
    text = (ROOT / "shaders" / SHADER).read_text()
    shapes = [s for s in args.shapes.split(",") if s]
    names = list(VARIANTS) if args.variants == "all" else [v for v in args.variants.split(",") if v]
    # (label, WGSL text, tile shape[, split count[, constants]])
    jobs: List[tuple] = [(f"kernel {s}", wider(text, s), s) for s in shapes]
    jobs += [(v, variant(text, v), shapes[0]) for v in names]
    for t in args.template:
        spec, *sets = t.split("@")
        path, _, more = spec.partition("+")
        knobs = {k: int(v) for k, v in (s.split("=") for s in sets)}
        jobs.append((Path(t).name, variant(Path(path).read_text(), more), shapes[0], knobs.pop("NS", None), knobs))
    splits = [int(n) for n in args.splits.split(",") if n]
    print(f"adapter: {rt.name}; {args.case}: {config}; {nbytes / 1e9:.3f} GB of K and V a step; {proto}", flush=True)

    labels, entries, keep = [], [], []
    original = paged_decode.tiles
    jobs += [(f"kernel {shapes[0]} splits={n}", wider(text, shapes[0]), shapes[0], n) for n in splits]
    for label, src, shape, *more in jobs:
        num_splits, sets = (more + [None, None])[:2]
        tmp = tempfile.TemporaryDirectory()
        keep.append(tmp)
        shutil.copytree(ROOT / "shaders", Path(tmp.name) / "shaders")
        (Path(tmp.name) / "shaders" / SHADER).write_text(src)
        kernel = registry.load(Path(tmp.name) / "shaders" / "manifest.json").kernel(kernel_id)
        paged_decode.tiles = forced_tiles(shape, kernel, sets or {})
        try:
            this = db.forced(case, num_splits)
            plan = paged_decode.INTERFACE.plan(kernel, this, rt.target)
            lay = paged_decode.INTERFACE.layout_on(kernel, this, rt.target)
            knobs = {**lay.knobs, "NS": lay.values["num_splits"]}
        finally:
            paged_decode.tiles = original
        if plan.unavailable:
            print(f"  {label}: unavailable ({plan.unavailable})")
            continue
        if label == jobs[0][0]:
            verified = paged_decode.INTERFACE.check_filled(case, rt.run(plan).outputs)
            db.check(label, verified["max_abs_err"], verified["allowed"])
        labels.append(f"{label} [WG {knobs['WG']} KPG {knobs['KPG']} RB {knobs['RB']} NS {knobs['NS']}]")
        entries.append((rt.timing([plan]), nbytes))
    cp = bandwidth.copy_plan(nbytes, rt.limits["max-storage-buffer-binding-size"])
    copied = cp.buffers[0].size
    labels.append(bandwidth.COPY)
    entries.append((rt.timing([cp]), 2 * copied))
    labels.append("wgsl.read")
    entries.append((rt.timing([bandwidth.stream_plan(copied, write=False)]), copied))
    if bench.torch_cuda():
        import torch

        found = db.anchors(torch, config, x)
        want = paged_decode.INTERFACE.reference(case)["out"] if found else None
        for label, fn, out, pick in found:
            db.check(label, float(np.abs(out.astype(np.float64) - want).max()), 5e-2)
            labels.append(label + (f" ({pick})" if pick else ""))
            entries.append((db.TorchTimed(torch, fn), nbytes))
    measured = protocol.measure([t for t, _ in entries], proto, log=print)
    stats = [protocol.summarize(proto, m.samples) for m in measured]
    base = stats[0].median_ms
    ci = labels.index(bandwidth.COPY)
    copy_gbps = entries[ci][1] / stats[ci].median_ms / 1e6
    print(f"\n{args.case}: median ms (spread), GB/s, % of the WGSL copy, x the first entry")
    for label, (_, nb), st, m in zip(labels, entries, stats, measured):
        gbps = nb / st.median_ms / 1e6
        print(
            f"  {label:58s} {st.median_ms:8.4f} ms \u00b1{100 * st.spread:4.1f}% {gbps:7.0f} GB/s"
            f" {100 * gbps / copy_gbps:5.1f}% {st.median_ms / base:5.2f}x{'' if m.warmed else ' NOT warmed'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
