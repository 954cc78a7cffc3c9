"""How fast WGSL can stream memory on this device, against CUDA on the same GPU, in one series by
the measurement protocol (wgattn.protocol): the ceiling a decode kernel, which only reads its
cache, is held to.

    python3 bench/read_ceiling.py [--mb 1074] [--json read.jsonl]
    (on the lent H100: python3 bench/devcarry.py run -- python3 bench/read_ceiling.py --json $OUT/read.jsonl)

Each entry moves the same bytes (by default the decode target's K and V, 1.07 GB) through
wgattn.interfaces.paged_decode_bench.STREAM_WGSL, the decode benchmark's copy:
- wgsl.copy PER=p: each invocation copies p vec4s (16 bytes each, workgroup-strided: coalesced);
  the decode benchmark's copy is PER=8 (COPY_PER);
- wgsl.read PER=p: each invocation reads p vec4s alone;
- with PyTorch on CUDA, torch's copy_ (torch.sum of the bytes as int32 was timed too: at 560 GB/s
  on the H100 it is no read ceiling).
Bandwidth = bytes read (and, for copies, written) over the median.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from decode_bandwidth import TorchTimed  # noqa: E402

from wgattn import bench, protocol  # noqa: E402
from wgattn.interfaces.paged_decode_bench import stream_plan  # noqa: E402

PER = (1, 2, 4, 8, 16)  # vec4s an invocation


def entries(rt, nbytes: int, torch=None) -> List[Tuple[str, protocol.Timed, int]]:
    """(name, timed, bytes counted) of every entry of the series."""
    out = []
    for per in PER:
        out.append((f"wgsl.copy PER={per}", rt.timing([stream_plan(nbytes, per, True)]), 2 * nbytes))
    for per in PER:
        out.append((f"wgsl.read PER={per}", rt.timing([stream_plan(nbytes, per, False)]), nbytes))
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
            f"  {name:24s} {st.median_ms:9.4f} ms \u00b1{100 * st.spread:4.1f}% {gbps:8.1f} GB/s"
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
