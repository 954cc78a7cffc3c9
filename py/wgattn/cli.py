"""The `wgattn` command.

wgattn check --interface NAME [--wgsl FILE] [--kernel ID ...] [--case PREFIX ...] [--entry NAME] [--set KEY=VALUE ...]
             [--checked] [--json]
wgattn probe [--json] [--samples N]
wgattn bench [--op NAME] [--impl A,B] [--shape B,H,S,D ...] [--causal] [--rounds N] [--warmup-s S] [--repeat N]
             [--min-sample-ms MS] [--mode M] [--variants plain,alibi+sinks] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import List, Optional

from . import bench, precision, protocol
from .check import CheckError, check, render_table, to_json
from .errors import AdapterError


def _sets(items: List[str]):
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"wgattn: --set takes KEY=VALUE, got {item!r}")
        try:
            out[key] = int(value, 0)
        except ValueError:
            raise SystemExit(f"wgattn: --set {key} needs an integer value, got {value!r}") from None
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="wgattn", description="WGSL attention kernels checked across runtimes.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="run a kernel through an interface's conformance grid natively")
    p.add_argument("--interface", required=True, help="a registered interface (sdpa_arena, varlen_fwd, ...)")
    p.add_argument("--wgsl", help="WGSL file implementing the interface (default: the project's kernels)")
    p.add_argument("--kernel", action="append", help="only these registered kernel ids")
    p.add_argument("--case", action="append", help="only the grid's cases whose names start with this (repeatable)")
    p.add_argument("--entry", help="entry point (NAME, or PASS=NAME,... for multi-pass interfaces)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override constant, e.g. WG=128")
    p.add_argument(
        "--checked",
        action="store_true",
        help="compile every kernel with runtime bounds checks (default: registered trusted kernels without)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON report")
    b = sub.add_parser("bench", help="time kernels natively beside PyTorch (CUDA) and NumPy")
    b.add_argument("--op", action="append", help="fwd, bwd or probs (repeatable; default fwd)")
    b.add_argument("--impl", help="comma-separated kernel ids, torch, numpy (default: all)")
    b.add_argument("--shape", action="append", help="B,H,S,D (repeatable)")
    b.add_argument("--causal", action="store_true", help="causal attention (fwd, bwd)")
    b.add_argument(
        "--rounds", type=int, default=protocol.Protocol.rounds, help="interleaved rounds, one sample of each row per round"
    )
    b.add_argument(
        "--warmup-s",
        type=float,
        default=protocol.Protocol.warmup_s,
        help="warm each series at least this long (seconds), until consecutive rounds agree",
    )
    b.add_argument(
        "--min-sample-ms",
        type=float,
        default=protocol.Protocol.min_sample_ms,
        help="a sample lasts at least this long (milliseconds): longer keeps a GPU busy, and its clock up, between samples",
    )
    b.add_argument("--repeat", type=int, default=1, help="time each series this many times back to back (1..5)")
    b.add_argument(
        "--mode",
        action="append",
        choices=("trusted", "checked"),
        help="shader modules with or without runtime checks (repeatable; default both)",
    )
    b.add_argument(
        "--variants",
        default="plain",
        help="the problem plain and/or with alibi, sinks or alibi+sinks, each kernel timed once per variant in the same "
        "series (comma-separated; default plain)",
    )
    b.add_argument("--json", action="store_true", help="print a JSON list of records")
    pr = sub.add_parser("probe", help="measure the native adapter's built-ins (exp, log, tanh, ...) against float64")
    pr.add_argument("--samples", type=int, default=None, help="arguments per function (default 8192)")
    pr.add_argument("--json", action="store_true", help="print the JSON report")
    args = parser.parse_args(argv)
    if args.command == "bench":
        return _bench(args)
    if args.command == "probe":
        return _probe(args)

    source = None
    if args.wgsl:
        path = Path(args.wgsl)
        if not path.is_file():
            print(f"wgattn check: no such WGSL file: {path}", file=sys.stderr)
            return 2
        source = path.read_text()
    if args.checked:
        os.environ["WGATTN_TRUSTED"] = "0"  # read when the runtime is made
    try:
        report = check(
            args.interface, wgsl=source, entry=args.entry, sets=_sets(args.set), kernel_ids=args.kernel, case_prefixes=args.case
        )
    except CheckError as exc:
        print(f"wgattn check: {exc}", file=sys.stderr)
        return 2
    print(to_json(report) if args.json else render_table(report))
    return 0 if report["failed"] == 0 and report["passed"] > 0 else 1  # nothing run is no pass


def _probe(args) -> int:
    from . import native  # imports wgpu: CPython with the native extra only

    try:
        rt = native.runtime()
        report = rt.precision() if args.samples is None else precision.probe(rt, args.samples)
    except (AdapterError, ValueError) as exc:
        print(f"wgattn probe: {exc}", file=sys.stderr)
        return 2
    print(precision.to_json(report) if args.json else precision.render_table(report))
    return 0


def _bench(args) -> int:
    try:
        ops = args.op or ["fwd"]
        for op in ops:
            bench.kernel_impls(op)  # ValueError naming the ops
        shapes = [bench.parse_shape(s) for s in args.shape] if args.shape else None
        impls = [i.strip() for i in args.impl.split(",") if i.strip()] if args.impl else None
        proto = protocol.Protocol.of(args.rounds, args.warmup_s, args.min_sample_ms)
        records = bench.run(
            ops,
            impls,
            shapes,
            args.causal,
            proto,
            log=lambda line: print(line, file=sys.stderr),
            modes=args.mode or bench.MODES,
            repeat=args.repeat,
            variants=bench.parse_variants(args.variants),
        )
    except ValueError as exc:
        print(f"wgattn bench: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([r.to_json() for r in records], indent=1))
    else:
        print(bench.render_table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
