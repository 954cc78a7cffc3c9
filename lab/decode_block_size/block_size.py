"""Does the decode kernel's block size as a runtime parameter cost speed on the GPU?

paged_decode.split took the cache's block size as an override constant (BS: one pipeline per
block size, 1..256); it now reads it from Params (`block_size`, `block_shift`: a shift and a mask
for a power of two, a division for any other, one pipeline each). This times the two in one
interleaved series per case (wgattn.protocol, trusted modules): `before`, the kernel as it was
(paged_decode.split.const_bs.wgsl in this folder, a copy of shaders/paged_decode.split.wgsl before
the change; the interface header is the new one, whose block_size sits where that kernel had
padding), and `after`, the registered kernel, on decode_bandwidth.py's target with block sizes 16
and 64, its f32 cache, and block size 24 (not a power of two). The cache is left zeroed (the GPU
reads the same bytes whatever they hold); before timing, both run a small case on filled values
and must agree bit for bit (the same indices, the same arithmetic).

    python3 -m lab.decode_block_size.block_size [--json block_size.jsonl] [--smoke]
    (on the lent H100: python3 -m bench.devcarry run -- bash lab/decode_block_size/device.sh; about 90 s
     with lab/server_load/new_shape_cost.py, a new shape's compile seconds there)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from bench import decode_bandwidth as db
from wgattn import bench, native, protocol, registry
from wgattn.interfaces.paged_decode import INTERFACE as decode
from wgattn.interfaces.paged_decode import DecodeConfig

HERE = Path(__file__).resolve().parent
BEFORE = "paged_decode.split.const_bs"


def before_kernel(kernel_id: str, folder: Path):
    """`kernel_id` compiled from this folder's copy of the kernel as it was (BS an override)."""
    shaders = registry.shader_dir()
    for sub in ("interfaces", "lib"):
        (folder / sub).symlink_to(shaders / sub)
    shutil.copy(HERE / f"{BEFORE}.wgsl", folder / f"{BEFORE}.wgsl")
    return replace(registry.load().kernel(kernel_id), template=BEFORE, folder=folder)


def plans(rt, kernel, old, config: DecodeConfig, filled: bool):
    """(before, after) plans of `config`: the cache zeroed (`filled` False) or host-filled."""
    x = db.inputs(kernel.id, config) if filled else config.tensors(filled=True)
    case = decode.live_case(config, x, "case")
    after = decode.plan(kernel, case, rt.target)
    before = decode.plan(old, case, rt.target, overrides={"BS": config.block_size})
    return before, after


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="append one JSON line per record")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--warm", type=float, default=2.0)
    ap.add_argument("--min-sample-ms", type=float, help="the protocol's shortest sample (device.sh: the suite's 20 ms on a GPU)")
    ap.add_argument("--smoke", action="store_true", help="the cases shrunk: does the script run?")
    args = ap.parse_args(argv)
    proto = protocol.Protocol.of(args.rounds, args.warm, args.min_sample_ms)
    rt = native.runtime()
    rt.trusted = True
    cases = {
        "target": (db.F16, db.TARGET),
        "target-bs64": (db.F16, replace(db.TARGET, block_size=64)),
        "target-bs24": (db.F16, replace(db.TARGET, block_size=24)),
        "target-f32-cache": (db.F32, db.TARGET),
    }
    commit = bench.git_commit()
    print(f"adapter: {rt.name}; {proto}; commit {commit}", flush=True)
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        olds = {}
        for name, (kernel_id, config) in cases.items():
            kernel = registry.load().kernel(kernel_id)
            if kernel_id not in olds:
                folder = Path(tmp) / kernel_id
                folder.mkdir()
                olds[kernel_id] = before_kernel(kernel_id, folder)
            old = olds[kernel_id]
            small = db.smoke(config)
            b, a = plans(rt, kernel, old, small, filled=True)
            if b.unavailable or a.unavailable:
                print(f"{name}: unavailable ({b.unavailable or a.unavailable})")
                continue
            ob, oa = rt.run(b).outputs, rt.run(a).outputs
            same = all(np.array_equal(ob[n], oa[n]) for n in oa)
            if not same:
                raise SystemExit(f"{name}: before and after disagree on filled values")
            sized = small if args.smoke else config
            b, a = plans(rt, kernel, old, sized, filled=False)
            if b.unavailable or a.unavailable:
                print(f"{name}: not timed here ({b.unavailable or a.unavailable})")
                continue
            nbytes = decode.bench_bytes(kernel, decode.live_case(sized, sized.tensors(filled=True), name))
            measured = protocol.measure([rt.timing([b]), rt.timing([a])], proto, log=lambda s: None)
            st = [protocol.summarize(proto, m.samples) for m in measured]
            for label, s, m in zip(("before", "after"), st, measured):
                rec = {
                    "case": name,
                    "kernel": kernel_id,
                    "block_size": sized.block_size,
                    "variant": label,
                    "median_ms": s.median_ms,
                    "spread": s.spread,
                    "gbps": nbytes / s.median_ms / 1e6,
                    "warmed": m.warmed,
                    "adapter": rt.name,
                    "same_outputs": same,
                    "commit": commit,
                }
                records.append(rec)
    if args.json:
        with open(args.json, "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)
    print("\ncase, block size, before ms, after ms, after/before (median, spread)")
    for i in range(0, len(records), 2):
        b, a = records[i], records[i + 1]
        print(
            f"  {b['case']:18s} {b['block_size']:4d} {b['median_ms']:9.4f} \u00b1{100 * b['spread']:4.1f}%"
            f" {a['median_ms']:9.4f} \u00b1{100 * a['spread']:4.1f}% {a['median_ms'] / b['median_ms']:6.3f}"
            f"{'' if a['warmed'] and b['warmed'] else ' NOT warmed'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
