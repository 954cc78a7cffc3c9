"""Time a kernel's forward (or backward, --op bwd) on one shape for several tile shapes, natively, in one run:

    python -m bench.sweep_tiles --causal flash_fwd.blocked 4,16,2048,64 BR=64,BC=32,WG=128 BR=32,BC=16,WG=64

With no tiles given, every candidate registered in the manifest. The tiles are one series of the
measurement protocol (wgattn.protocol: warmed by time, interleaved rounds): prints each tile's
median GPU ms with its spread and TFLOP/s (FlashAttention's FLOP count); a tile that does not fit
the adapter says why. This is how the registry's candidate order was chosen (docs/performance.md).
"""

from __future__ import annotations

import argparse

from wgattn import bench, interfaces, native, protocol, registry


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel")
    ap.add_argument("shape")
    ap.add_argument("tiles", nargs="*", help="KEY=V,KEY=V (default: the registered candidates)")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--op", default="fwd", choices=("fwd", "bwd"))
    ap.add_argument("--rounds", type=int, default=protocol.Protocol.rounds)
    ap.add_argument("--warmup-s", type=float, default=protocol.Protocol.warmup_s)
    args = ap.parse_args()
    proto = protocol.Protocol.of(args.rounds, args.warmup_s)
    rt = native.runtime()
    kernel = registry.load().kernel(args.kernel)
    shape = bench.parse_shape(args.shape)
    tiles = [{k: int(v) for k, v in (p.split("=") for p in t.split(","))} for t in args.tiles] or [dict(t) for t in kernel.tiles]
    iface = interfaces.of(kernel)
    (case,) = iface.bench_cases(bench.dense_inputs(args.op, shape), args.causal)
    flop = bench.flops(args.op, shape, args.causal)
    print(f"{args.kernel} {shape}{' causal' if args.causal else ''} on {rt.name}, trusted={rt.trusted}")
    labels, entries = [], []
    for tile in tiles:
        label = ",".join(f"{k}={v}" for k, v in tile.items())
        try:
            plan = iface.plan(kernel, case, rt.target, overrides=tile)
            if plan.unavailable:
                raise ValueError(plan.unavailable)
            entries.append(rt.timing([plan]))
        except ValueError as exc:
            print(f"  {label:28s} skip: {str(exc)[:150]}")
            continue
        labels.append(label)
    for label, m in zip(labels, protocol.measure(entries, proto, log=print)):
        st = protocol.summarize(proto, m.samples)
        flag = (" wide" if st.wide else "") + ("" if m.warmed else " cold")
        print(
            f"  {label:28s} {st.median_ms:9.3f} ms \u00b1{100 * st.spread:4.1f}% {flop / st.median_ms / 1e9:8.2f} TFLOP/s{flag}"
        )


if __name__ == "__main__":
    main()
