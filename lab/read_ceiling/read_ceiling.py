"""How fast WGSL can stream memory on this device, against CUDA on the same GPU, in one series by
the measurement protocol (wgattn.protocol): the ceiling a decode kernel, which only reads its
cache, is held to.

    python3 -m lab.read_ceiling.read_ceiling [--mb 1074] [--json read.jsonl]
    (on the lent H100: python3 -m bench.devcarry run -- python3 -m lab.read_ceiling.read_ceiling --json $OUT/read.jsonl)

Each entry moves the same bytes (by default the decode target's K and V, 1.07 GB) through
shaders/stream.wgsl, the decode benchmark's copy (wgattn.bandwidth.stream_plan):
- wgsl.copy PER=p: each invocation copies p vec4s (16 bytes each, workgroup-strided: coalesced);
  the decode benchmark's copy is PER=8 (wgattn.bandwidth.COPY_PER);
- wgsl.read PER=p: each invocation reads p vec4s alone;
- wgsl.read paged, shuffled / in order PER=p: the same bytes as a paged cache, K's blocks then
  V's, each block (the target's: 16 tokens x 8 kv heads x 128 f16 columns, 32 KB) read whole in
  a block table's order, shuffled as the decode benchmark's or in order (PAGED_WGSL): what any
  paged reader pays for its table, beside what the decode kernel pays;
- with PyTorch on CUDA, torch's copy_ (torch.sum of the bytes as int32 was timed too: at 560 GB/s
  on the H100 it is no read ceiling).
Bandwidth = bytes read (and, for copies, written) over the median.
"""

from __future__ import annotations

import argparse
import json
from typing import List, Optional, Sequence, Tuple

import numpy as np

from bench.decode_bandwidth import TorchTimed
from wgattn import bench, protocol
from wgattn.bandwidth import stream_plan
from wgattn.plan import Buffer, Dispatch, Plan
from wgattn.registry import Pass

PER = (1, 2, 4, 8, 16)  # vec4s an invocation
PAGED_PER = (4, 8)
BLOCK_BYTES = 16 * 8 * 128 * 2  # a block of the decode target's cache: 16 tokens x 8 kv heads x 128 f16

# Whole blocks of a paged cache (K's blocks, then V's, in one buffer), each workgroup 256 * PER
# vec4s of one block (coalesced, as stream.wgsl), the block taken through the table: the reads of
# a paged reader that wastes nothing on its layout.
PAGED_WGSL = """
override PER: u32 = 8u;        // vec4s per invocation
override BLOCK: u32 = 2048u;   // vec4s per block: a multiple of 256 * PER
override WRITE: bool = false;  // gather the blocks into dst in table order (else read only: dst is
                               // written only if the xor of the loads is a value zeros never give)

@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> table: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(256)
fn paged(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let w = wid.x + wid.y * nwg.x;
  let per_block = BLOCK / (256u * PER);
  let nb = arrayLength(&table);
  let half = w / (per_block * nb);  // 0: K, 1: V
  if (half >= 2u) {
    return;  // the spare workgroups of a grid folded into two dimensions
  }
  let e = (w / per_block) % nb;
  let chunk = (w % per_block) * 256u * PER + lid;
  let at = (half * nb + table[e]) * BLOCK + chunk;
  let to = (half * nb + e) * BLOCK + chunk;
  var acc = vec4<u32>(0u);
  for (var k = 0u; k < PER; k++) {
    let x = src[at + k * 256u];
    if (WRITE) {
      dst[to + k * 256u] = x;
    }
    acc ^= x;
  }
  if (!WRITE && all(acc == vec4<u32>(0x9e3779b9u))) {
    dst[0] = acc;
  }
}
"""


def paged_plan(table: np.ndarray, block_bytes: int, per: int, write: bool = False) -> Plan:
    """PAGED_WGSL over 2 * len(table) blocks of `block_bytes` (K's, then V's), read whole in
    `table`'s order; write=True gathers them into dst in that order (what a test can see)."""
    block = block_bytes // 16
    if block % (256 * per):
        raise ValueError(f"a block of {block} vec4s is no multiple of 256 * PER = {256 * per}")
    nbytes = 2 * len(table) * block_bytes
    groups = 2 * len(table) * block // (256 * per)
    return Plan(
        buffers=[
            Buffer("src", nbytes, "storage"),
            Buffer("table", 4 * len(table), "storage", np.asarray(table, np.uint32).tobytes()),
            Buffer("dst", nbytes if write else 16, "storage"),
        ],
        dispatches=[
            Dispatch(
                label="paged",
                source=PAGED_WGSL,
                entry_point="paged",
                constants={"PER": per, "BLOCK": block, "WRITE": int(write)},
                bindings={0: "src", 1: "table", 2: "dst"},
                layout=[(0, "read-only-storage"), (1, "read-only-storage"), (2, "storage")],
                workgroups=Pass("grid", "paged", (0,), {"items": str(groups)}).workgroups({}, {}),
            )
        ],
        outputs=[],
    )


def entries(rt, nbytes: int, torch=None) -> List[Tuple[str, protocol.Timed, int]]:
    """(name, timed, bytes counted) of every entry of the series."""
    out = []
    for per in PER:
        out.append((f"wgsl.copy PER={per}", rt.timing([stream_plan(nbytes, per, True)]), 2 * nbytes))
    for per in PER:
        out.append((f"wgsl.read PER={per}", rt.timing([stream_plan(nbytes, per, False)]), nbytes))
    blocks = nbytes // (2 * BLOCK_BYTES)
    tables = {"shuffled": np.random.default_rng(0).permutation(blocks), "in order": np.arange(blocks)}
    for order, table in tables.items():
        for per in PAGED_PER:
            plan = paged_plan(table, BLOCK_BYTES, per)
            out.append((f"wgsl.read paged, {order} PER={per}", rt.timing([plan]), 2 * blocks * BLOCK_BYTES))
    if torch is not None:
        src = torch.zeros(nbytes, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        out.append(("torch.copy_", TorchTimed(torch, lambda: dst.copy_(src)), 2 * nbytes))
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=2 * 8 * 32768 * 8 * 128 * 2 / 1e6, help="bytes streamed, in MB")
    ap.add_argument("--rounds", type=int, default=20, help="the protocol's interleaved rounds")
    ap.add_argument("--warm", type=float, default=2.0, help="the protocol's warm-up, seconds (capped at 3x)")
    ap.add_argument("--json", help="append one JSON line per record to this file")
    args = ap.parse_args(argv)
    proto = protocol.Protocol.of(args.rounds, args.warm)

    from wgattn import native

    rt = native.runtime()
    nbytes = min(int(args.mb * 1e6), rt.limits["max-storage-buffer-binding-size"]) // 4096 * 4096
    torch_name = bench.torch_cuda()
    torch = None
    if torch_name:
        import torch
    print(f"adapter: {rt.name}; torch: {torch_name or 'absent'}; {nbytes / 1e9:.3f} GB; {proto}")
    info = bench.RunInfo.now(commit=bench.git_commit())
    series = entries(rt, nbytes, torch)
    measured = protocol.measure([t for _, t, _ in series], proto, log=print)
    for (name, timed, counted), m in zip(series, measured):
        st = protocol.summarize(proto, m.samples)
        gbps = counted / st.median_ms / 1e6
        print(
            f"  {name:36s} {st.median_ms:9.4f} ms \u00b1{100 * st.spread:4.1f}% {gbps:8.1f} GB/s"
            f" ({len(m.samples)}x{m.reps}, {timed.timer}{'' if m.warmed else ', NOT warmed'})"
        )
        if args.json:
            record = {
                "kind": "stream",
                "impl": name,
                "bytes": counted,
                "gbps": gbps,
                **m.record_fields(proto),
                "adapter": torch_name if name.startswith("torch") else rt.name,
                "timer": timed.timer,
                "time": info.time,
                "commit": info.commit,
            }
            with open(args.json, "a") as f:
                f.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
