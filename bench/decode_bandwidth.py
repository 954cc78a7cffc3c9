"""Decode attention as bandwidth, on a GPU, in one run: the decode kernels (wgattn.decode_plan)
against the copy bandwidth measured in the same run and against PyTorch's SDPA on the same tensors.

    bash bench/device.sh python3 bench/decode_bandwidth.py --json decode.json

For each case (`cases()`): the effective bandwidth of the cache read, bytes of K and V the step
must read (`bytes_touched()`: each visible key of each kv head once) over the kernel's median GPU
time (timestamp queries, both passes summed); the copy bandwidth of the same device, (read +
written bytes) / time of a WGSL vec4 copy through the same wgpu device and of torch's
device-to-device copy; and PyTorch's scaled_dot_product_attention on the same values unpaged
([B, H, S, D], the cache's dtype), each backend tried and the fastest kept as the anchor. Every
output is checked against wgattn.reference.decode_attention (float64) before it is timed.

Target (issue's): B=8, Hq=32, Hkv=8, D=128, 32k tokens, f16 cache, Sq_new=1 at >= 70% of the copy
bandwidth natively (trusted) and faster than SDPA. A cold H100 idles at low clocks: every timing
is preceded by --warm seconds of the same work, then --runs timed runs; medians with p10-p90.
`--sweep` times the first case at several split counts (is the split rule's choice the best?).
`cases()` and `bytes_touched()` are what a `wgattn bench --op decode` can take over.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from wgattn import bench, decode_plan, reference
from wgattn.plan import Buffer, Dispatch, Plan
from wgattn.registry import Pass


@dataclass(frozen=True)
class DecodeCase:
    name: str
    batch: int
    heads_q: int
    heads_kv: int
    head_dim: int
    seq_len: int  # tokens in each sequence's cache, the new ones included
    new_tokens: int
    block_size: int
    cache: str  # "f16" or "f32"
    sinks: bool = False
    window_left: int = -1


def cases() -> List[DecodeCase]:
    """The target first, then what moves it: another block size, speculative decoding, an f32
    cache, one very long sequence, a wider GQA group, and a gpt-oss-shaped layer with sinks."""
    return [
        DecodeCase("target", 8, 32, 8, 128, 32768, 1, 16, "f16"),
        DecodeCase("target-bs64", 8, 32, 8, 128, 32768, 1, 64, "f16"),
        DecodeCase("target-5-new", 8, 32, 8, 128, 32768, 5, 16, "f16"),
        DecodeCase("target-f32-cache", 8, 32, 8, 128, 32768, 1, 16, "f32"),
        DecodeCase("one-128k-sequence", 1, 32, 8, 128, 131072, 1, 16, "f16"),
        DecodeCase("gqa8-16k", 8, 64, 8, 128, 16384, 1, 16, "f16"),
        DecodeCase("gpt-oss-like-sinks-d64", 8, 64, 8, 64, 32768, 1, 16, "f16", sinks=True),
    ]


def _itemsize(case: DecodeCase) -> int:
    return 2 if case.cache == "f16" else 4


def bytes_touched(case: DecodeCase) -> int:
    """Bytes of K and V one decoding step of `case` reads at least."""
    return decode_plan.bytes_touched(
        [case.seq_len] * case.batch, case.window_left, case.new_tokens, case.heads_kv, case.head_dim, _itemsize(case)
    )


def inputs(case: DecodeCase, seed: int = 0) -> Dict[str, np.ndarray]:
    """q [B, Sq_new, Hq, D] f32; a paged cache whose blocks are scattered in a shuffled order;
    block_table, seq_lens; sinks when the case has them."""
    rng = np.random.default_rng(seed)
    dt = np.float16 if case.cache == "f16" else np.float32
    per_seq = -(-case.seq_len // case.block_size)
    num_blocks = case.batch * per_seq
    shape = (num_blocks, case.block_size, case.heads_kv, case.head_dim)
    out = {
        "q": rng.standard_normal((case.batch, case.new_tokens, case.heads_q, case.head_dim), dtype=np.float32),
        "k_cache": rng.standard_normal(shape, dtype=np.float32).astype(dt),
        "v_cache": rng.standard_normal(shape, dtype=np.float32).astype(dt),
        "block_table": rng.permutation(num_blocks).astype(np.int32).reshape(case.batch, per_seq),
        "seq_lens": np.full(case.batch, case.seq_len, dtype=np.int32),
    }
    if case.sinks:
        out["sinks"] = rng.standard_normal(case.heads_q, dtype=np.float32)
    return out


def _keywords(case: DecodeCase, x: Dict[str, np.ndarray]) -> Dict[str, object]:
    return {"window_left": case.window_left, "sinks": x.get("sinks")}


def unpaged(case: DecodeCase, x: Dict[str, np.ndarray], name: str) -> np.ndarray:
    """The cache of every sequence gathered through its block table: [B, Hkv, S, D]."""
    c = x[name][x["block_table"]].reshape(case.batch, -1, case.heads_kv, case.head_dim)[:, : case.seq_len]
    return np.ascontiguousarray(c.transpose(0, 2, 1, 3))


def _spread(samples: Sequence[float]) -> Dict[str, float]:
    s = sorted(samples)
    pick = lambda f: s[min(len(s) - 1, int(f * len(s)))]  # noqa: E731
    return {"median_ms": statistics.median(s), "p10_ms": pick(0.1), "p90_ms": pick(0.9)}


def time_plan(rt, plan: Plan, runs: int, warm_s: float) -> Dict[str, float]:
    """GPU milliseconds of one run of `plan` (every pass), after `warm_s` seconds of it."""
    _, first = rt.time(plan, runs=10, warmup=1)
    warm = max(1, math.ceil(warm_s * 1e3 / max(statistics.median(first), 1e-3)))
    timer, samples = rt.time(plan, runs=runs, warmup=warm)
    if timer != "gpu":
        print("  (no timestamp queries on this adapter: wall-clock times)", file=sys.stderr)
    return _spread(samples)


COPY_WGSL = """
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(256)
fn copy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * 256u + lid;
  if (i < arrayLength(&dst)) {
    dst[i] = src[i];
  }
}
"""


def wgsl_copy_gbps(rt, nbytes: int, runs: int, warm_s: float) -> Dict[str, float]:
    """(read + written bytes) / median time of a vec4 copy of `nbytes` through the same device."""
    nbytes = min(nbytes, rt.limits["max-storage-buffer-binding-size"]) // 16 * 16
    plan = Plan(
        buffers=[Buffer("src", nbytes, "storage"), Buffer("dst", nbytes, "storage")],
        dispatches=[
            Dispatch(
                label="copy",
                source=COPY_WGSL,
                entry_point="copy",
                constants={},
                bindings={0: "src", 1: "dst"},
                layout=[(0, "read-only-storage"), (1, "storage")],
                workgroups=Pass("copy", "copy", (0, 1), {"items": str(nbytes // 16 // 256)}).workgroups({}, {}),
            )
        ],
        outputs=[],
    )
    t = time_plan(rt, plan, runs, warm_s)
    return {**t, "gbps": 2 * nbytes / t["median_ms"] / 1e6, "bytes": nbytes}


def _torch_time(torch, fn: Callable, runs: int, warm_s: float) -> Dict[str, float]:
    """CUDA-event milliseconds of `fn` (wgattn.bench's timer) after `warm_s` seconds of it."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warm_s:
        fn()
        torch.cuda.synchronize()
    return _spread(bench._time_torch(fn, runs, warmup=0))


def torch_copy_gbps(torch, nbytes: int, runs: int, warm_s: float) -> Dict[str, float]:
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = _torch_time(torch, lambda: dst.copy_(src), runs, warm_s)
    return {**t, "gbps": 2 * nbytes / t["median_ms"] / 1e6, "bytes": nbytes}


def torch_sdpa(torch, case: DecodeCase, x: Dict[str, np.ndarray], runs: int, warm_s: float):
    """[(backend, timing, out [B, Sq_new, Hq, D] as float32)] for each SDPA backend that runs the
    case: q, k, v on CUDA in the cache's dtype, [B, H, S, D], GQA through enable_gqa, the new
    tokens causal bottom-right, sinks (no SDPA argument) left out: such a case has no anchor."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if case.sinks:
        return []
    tdt = torch.float16 if case.cache == "f16" else torch.float32
    q = torch.from_numpy(x["q"].transpose(0, 2, 1, 3).copy()).to("cuda", tdt)
    k = torch.from_numpy(unpaged(case, x, "k_cache")).to("cuda", tdt)
    v = torch.from_numpy(unpaged(case, x, "v_cache")).to("cuda", tdt)
    mask = None
    if case.new_tokens > 1:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(case.new_tokens, case.seq_len)
    found = []
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH):

        def fn():
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

        try:
            out = fn()
            torch.cuda.synchronize()
        except (RuntimeError, TypeError, NotImplementedError) as exc:
            print(f"  torch {backend.name}: does not run this case ({str(exc).splitlines()[0][:120]})")
            continue
        found.append((backend.name, _torch_time(torch, fn, runs, warm_s), out.float().cpu().numpy().transpose(0, 2, 1, 3)))
    return found


def check(name: str, got: np.ndarray, want: np.ndarray, allowed: float) -> float:
    err = float(np.abs(got.astype(np.float64) - want).max())
    print(f"  {name}: max abs err vs the float64 reference {err:.2e} (allowed here {allowed:.0e})")
    if not err <= allowed:
        raise SystemExit(f"{name} is wrong on this GPU (max abs err {err:.3e}): not timing a wrong answer")
    return err


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", help="run only these cases (default: all)")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--warm", type=float, default=2.0, help="seconds of warm-up before each timing")
    ap.add_argument("--modes", default="trusted,checked", help="wgattn.native shader modules to time")
    ap.add_argument("--sweep", default="1,4,8,16,32,64,128", help="split counts tried on the first case ('' for none)")
    ap.add_argument("--copy-mib", type=int, default=1024)
    ap.add_argument("--json", help="append one JSON line per record to this file")
    ap.add_argument("--smoke", action="store_true", help="shrunk cases (2 sequences of 700 tokens): does the script run?")
    args = ap.parse_args(argv)

    from wgattn import native

    rt = native.runtime()
    try:
        import torch

        torch_ok = torch.cuda.is_available()
    except ImportError:
        torch, torch_ok = None, False
    print(f"adapter: {rt.name}; torch: {torch.cuda.get_device_name(0) if torch_ok else 'absent (no anchors)'}")
    records: List[Dict[str, object]] = []

    def record(**kw):
        records.append(kw)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(kw) + "\n")

    copy = wgsl_copy_gbps(rt, args.copy_mib << 20, args.runs, args.warm)
    mib, gbps0 = copy["bytes"] >> 20, copy["gbps"]
    print(f"copy bandwidth, WGSL vec4 copy of {mib} MiB: {gbps0:.1f} GB/s (median {copy['median_ms']:.3f} ms)")
    record(kind="copy", impl="wgsl", adapter=rt.name, **copy)
    tcopy = None
    if torch_ok:
        tcopy = torch_copy_gbps(torch, args.copy_mib << 20, args.runs, args.warm)
        print(f"copy bandwidth, torch copy_: {tcopy['gbps']:.1f} GB/s")
        record(kind="copy", impl="torch", **tcopy)

    chosen = [c for c in cases() if not args.case or c.name in args.case]
    if args.smoke:
        chosen = [replace(c, batch=min(c.batch, 2), seq_len=min(c.seq_len, 700)) for c in chosen]
    for i, case in enumerate(chosen):
        nbytes = bytes_touched(case)
        print(f"\n{case.name}: {asdict(case)}; {nbytes / 1e9:.3f} GB of K and V a step")
        x = inputs(case)
        kw = _keywords(case, x)
        try:
            decode_plan.plan(*(x[n] for n in ("q", "k_cache", "v_cache", "block_table", "seq_lens")), **kw)
        except ValueError as exc:  # wgattn.errors.DoesNotFit is one: a buffer past the adapter's limits
            print(f"  skipped: {exc}")
            continue
        args5 = (x["q"], x["k_cache"], x["v_cache"], x["block_table"], x["seq_lens"])
        t0 = time.perf_counter()
        want_out, _ = reference.decode_attention(*args5, **kw)
        print(f"  float64 reference: {time.perf_counter() - t0:.1f} s")
        splits = [None] + ([int(s) for s in args.sweep.split(",") if s] if i == 0 else [])
        for mode in [m for m in args.modes.split(",") if m]:
            rt.trusted = mode == "trusted"
            for ns in splits:
                plan = decode_plan.plan(*args5, num_splits=ns, **kw)
                if ns is None:
                    check(f"wgattn {mode}", rt.run(plan).outputs["out"], want_out, 1e-4)
                t = time_plan(rt, plan, args.runs, args.warm)
                gbps = nbytes / t["median_ms"] / 1e6
                tiles = plan.meta["tiles"]
                config = f"WG={tiles.WG} BC={tiles.BC} RB={tiles.RB} row_blocks={tiles.row_blocks}"
                label = f"splits={plan.meta['num_splits']}{' (rule)' if ns is None else ''}"
                pct = 100 * gbps / copy["gbps"]
                print(
                    f"  wgattn {mode:8s} {label:18s} {t['median_ms']:8.3f} ms [{t['p10_ms']:.3f}-{t['p90_ms']:.3f}]"
                    f" {gbps:8.1f} GB/s = {pct:5.1f}% of the WGSL copy"
                    + (f", {100 * gbps / tcopy['gbps']:5.1f}% of torch's" if tcopy else "")
                    + f"  {config}"
                )
                record(
                    kind="decode",
                    case=case.name,
                    impl=plan.meta["kernel"],
                    mode=mode,
                    splits=plan.meta["num_splits"],
                    rule=ns is None,
                    config=config,
                    bytes=nbytes,
                    gbps=gbps,
                    pct_of_copy=pct,
                    **t,
                )
        rt.trusted = True
        if torch_ok:
            for backend, t, out in torch_sdpa(torch, case, x, args.runs, args.warm):
                err = float(np.abs(out - want_out).max())
                gbps = nbytes / t["median_ms"] / 1e6
                print(
                    f"  torch {backend:20s} {t['median_ms']:8.3f} ms [{t['p10_ms']:.3f}-{t['p90_ms']:.3f}]"
                    f" {gbps:8.1f} GB/s = {100 * gbps / copy['gbps']:5.1f}% of the WGSL copy; max abs err {err:.1e}"
                )
                record(kind="decode", case=case.name, impl=f"torch.{backend}", bytes=nbytes, gbps=gbps, err=err, **t)
        del x


if __name__ == "__main__":
    main()
