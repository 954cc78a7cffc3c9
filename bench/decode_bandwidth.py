"""Decode attention as bandwidth, on a GPU, in one run, by the measurement protocol (wgattn.protocol):
the decode kernels (the `paged_decode` interface, wgattn.interfaces.paged_decode) against the copy bandwidth of
the same device and against PyTorch's SDPA on the same tensors, in one interleaved series per case.

    python3 bench/decode_bandwidth.py --json decode.jsonl
    (on the lent H100: python3 bench/devcarry.py run -- python3 bench/decode_bandwidth.py --json $OUT/decode.jsonl)

For each case (`cases()`), one series timed by wgattn.protocol.measure (warm-up by time until the
rounds agree, interleaved rounds, median with its interquartile spread): the decode kernel in each
mode (trusted: no runtime bounds checks; checked), at the split rule's count and, for the first
case, at other split counts (`--sweep`: is the rule's choice the best?); a WGSL copy of the case's
K and V bytes through the same wgpu device (wgattn.interfaces.paged_decode_bench) and the read of
them alone (a decode step only reads: the read is its ceiling); and, with PyTorch on CUDA, torch's
copy_ of those bytes and scaled_dot_product_attention on the same values unpaged ([B, H, S, D],
the cache's dtype): as a user calls it (DEFAULT, with the backend it picks) and each backend that
runs the case, each called eagerly and replayed from a CUDA graph (`.graph`: no host launch cost).
Bandwidth = the bytes of K and V the step must read (`bytes_touched`: each visible key of each kv
head once) over the median; the copy counts its read and written bytes. Every output is checked
against wgattn.reference.decode_attention (float64) before it is timed.

Target: B=8, Hq=32, Hkv=8, D=128, 32k tokens, f16 cache, Sq_new=1 at >= 70% of the copy bandwidth
natively (trusted) and faster than SDPA.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from wgattn import bench, protocol, reference, registry
from wgattn.interfaces import paged_decode_bench as bandwidth
from wgattn.interfaces.paged_decode import INTERFACE as decode
from wgattn.interfaces.paged_decode import bytes_touched as _bytes_touched
from wgattn.plan import Plan


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
    return _bytes_touched(
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


ARGS = ("q", "k_cache", "v_cache", "block_table", "seq_lens")


def decode_case(case: DecodeCase, x: Dict[str, np.ndarray], num_splits: Optional[int] = None):
    """The interface's case for the inputs (the split rule's count, or `num_splits`)."""
    return decode.case_from_reference(
        *(x[n] for n in ARGS), window_left=case.window_left, sinks=x.get("sinks"), num_splits=num_splits, name=case.name
    )


def unpaged(case: DecodeCase, x: Dict[str, np.ndarray], name: str) -> np.ndarray:
    """The cache of every sequence gathered through its block table: [B, Hkv, S, D]."""
    c = x[name][x["block_table"]].reshape(case.batch, -1, case.heads_kv, case.head_dim)[:, : case.seq_len]
    return np.ascontiguousarray(c.transpose(0, 2, 1, 3))


def copy_plan(rt, nbytes: int) -> Plan:
    """A vec4 copy of `nbytes` (at most a binding's limit) through the same device (the page
    times the same one: wgattn.interfaces.paged_decode_bench.copy_plan)."""
    return bandwidth.copy_plan(nbytes, rt.limits["max-storage-buffer-binding-size"])


def smoke(case: DecodeCase) -> DecodeCase:
    """The case shrunk to 2 sequences of at most 700 tokens: does the script run?"""
    return replace(case, batch=min(case.batch, 2), seq_len=min(case.seq_len, 700))


class TorchTimed(protocol.Timed):
    """A CUDA function timed with CUDA events around `reps` calls (wgattn.bench's timer)."""

    timer = "cuda"
    resolution_ns = bench.CUDA_EVENT_RESOLUTION_NS

    def __init__(self, torch, fn: Callable[[], object]):
        self.torch, self.fn = torch, fn

    def sample(self, reps: int):
        start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            self.fn()
        end.record()
        self.torch.cuda.synchronize()
        return start.elapsed_time(end) / reps, []


def torch_sdpa(torch, case: DecodeCase, x: Dict[str, np.ndarray]):
    """[(backend, its function, out [B, Sq_new, Hq, D] as float32, the backend PyTorch picks for
    DEFAULT or "")] for SDPA as a user calls it (DEFAULT) and each SDPA backend that runs the case
    (its pick is not the same in every run: record it): q, k, v on CUDA
    in the cache's dtype, [B, H, S, D], GQA through enable_gqa, the new tokens causal
    bottom-right, sinks (no SDPA argument) left out: such a case has no anchor."""
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
    backends = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH)
    for backend in (None, *backends):

        def fn(backend=backend):
            if backend is None:
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

        name = "DEFAULT" if backend is None else backend.name
        try:
            out = fn()
            torch.cuda.synchronize()
        except (RuntimeError, TypeError, NotImplementedError) as exc:
            print(f"  torch {name}: does not run this case ({str(exc).splitlines()[0][:120]})")
            continue
        found.append(
            (name, fn, out.float().cpu().numpy().transpose(0, 2, 1, 3), picked(torch, q, k, v, mask) if backend is None else "")
        )
    return found


def picked(torch, q, k, v, mask) -> str:
    """The backend F.scaled_dot_product_attention picks for these inputs (PyTorch's own choice
    function; "unknown" where this PyTorch has none)."""
    from torch.nn.attention import SDPBackend

    try:
        return SDPBackend(torch._fused_sdp_choice(q, k, v, attn_mask=mask, enable_gqa=True)).name
    except (AttributeError, TypeError, ValueError, RuntimeError):
        return "unknown"


def graphed(torch, fn: Callable[[], object]) -> Optional[Callable[[], object]]:
    """`fn` captured in a CUDA graph, its replay: no host launch cost between steps, as an engine
    serving decode runs it (vLLM captures its decode steps); None where the capture fails."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()  # lazy initialisation happens outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            fn()
    except RuntimeError as exc:
        print(f"  not captured in a CUDA graph ({str(exc).splitlines()[0][:120]})")
        return None
    return graph.replay


def anchors(torch, case: DecodeCase, x: Dict[str, np.ndarray]):
    """[(label, function, out, config)]: each of torch_sdpa's backends called eagerly, and
    replayed from a CUDA graph (MATH, many times slower, eagerly only)."""
    found = []
    for backend, fn, out, pick in torch_sdpa(torch, case, x):
        config = f"picks {pick}" if pick else ""
        found.append((f"torch.{backend}", fn, out, config))
        replay = graphed(torch, fn) if backend != "MATH" else None
        if replay is not None:
            found.append((f"torch.{backend}.graph", replay, out, config))
    return found


def check(name: str, got: np.ndarray, want: np.ndarray, allowed: float) -> float:
    err = float(np.abs(got.astype(np.float64) - want).max())
    print(f"  {name}: max abs err vs the float64 reference {err:.2e} (allowed here {allowed:.0e})")
    if not err <= allowed:
        raise SystemExit(f"{name} is wrong on this GPU (max abs err {err:.3e}): not timing a wrong answer")
    return err


@dataclass
class Entry:
    """One entry of a case's series: what its record says besides the measurement."""

    impl: str
    timed: protocol.Timed
    nbytes: int  # the bytes its bandwidth counts
    mode: str = ""
    splits: int = 0
    rule: bool = False
    config: str = ""
    kind: str = "decode"


def main(argv: Optional[Sequence[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", help="run only these cases (default: all)")
    ap.add_argument("--modes", default="trusted,checked", help="wgattn.native shader modules to time")
    ap.add_argument("--sweep", default="1,4,8,16,32,64,128", help="split counts tried on the first case ('' for none)")
    ap.add_argument("--rounds", type=int, default=20, help="the protocol's interleaved rounds")
    ap.add_argument("--warm", type=float, default=2.0, help="the protocol's warm-up, seconds (capped at 3x)")
    ap.add_argument("--json", help="append one JSON line per record to this file")
    ap.add_argument("--smoke", action="store_true", help="shrunk cases (2 sequences of 700 tokens): does the script run?")
    args = ap.parse_args(argv)
    proto = protocol.Protocol.of(args.rounds, args.warm)

    from wgattn import native

    rt = native.runtime()
    torch_name = bench.torch_cuda()
    torch = None
    if torch_name:
        import torch
    print(f"adapter: {rt.name}; torch: {torch_name or 'absent (no anchors)'}; {proto}")
    info = bench.RunInfo.now(commit=bench.git_commit())
    chosen = [c for c in cases() if not args.case or c.name in args.case]
    if args.smoke:
        chosen = [smoke(c) for c in chosen]
    for i, case in enumerate(chosen):
        nbytes = bytes_touched(case)
        print(f"\n{case.name}: {asdict(case)}; {nbytes / 1e9:.3f} GB of K and V a step")
        x = inputs(case)
        kernel = registry.load().kernel("paged_decode.split_f16" if case.cache == "f16" else "paged_decode.split")
        plan = decode.plan(kernel, decode_case(case, x), rt.target)
        if plan.unavailable:
            print(f"  skipped: {plan.unavailable}")
            continue
        t0 = time.perf_counter()
        want_out, _ = reference.decode_attention(*(x[n] for n in ARGS), window_left=case.window_left, sinks=x.get("sinks"))
        print(f"  float64 reference: {time.perf_counter() - t0:.1f} s")
        entries: List[Entry] = []
        splits = [None] + ([int(s) for s in args.sweep.split(",") if s] if i == 0 else [])
        for mode in [m for m in args.modes.split(",") if m]:
            for ns in splits:
                p = decode.plan(kernel, decode_case(case, x, ns), rt.target)
                if ns is None:
                    rt.trusted = mode == "trusted"
                    check(f"{kernel.id} {mode}", rt.run(p).outputs["out"], want_out, 1e-4)
                    rt.trusted = True
                lay = decode.layout_on(kernel, decode_case(case, x, ns), rt.target)
                k = lay.knobs
                config = f"WG={k['WG']} KPG={k['KPG']} BC={k['BC']} RB={k['RB']} row_blocks={lay.values['row_blocks']}"
                timed = rt.timing([p], trusted=mode == "trusted")
                entries.append(Entry(kernel.id, timed, nbytes, mode, int(lay.values["num_splits"]), ns is None, config))
        cp = copy_plan(rt, nbytes)
        copied = cp.buffers[0].size
        entries.append(Entry("wgsl.copy", rt.timing([cp]), 2 * copied, kind="copy"))
        entries.append(Entry("wgsl.read", rt.timing([bandwidth.stream_plan(copied, write=False)]), copied, kind="read"))
        if torch is not None:
            src = torch.empty(copied, dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            entries.append(Entry("torch.copy_", TorchTimed(torch, lambda: dst.copy_(src)), 2 * copied, kind="copy"))
            for label, fn, out, config in anchors(torch, case, x):
                check(label, out, want_out, 5e-2 if case.cache == "f16" else 1e-4)
                entries.append(Entry(label, TorchTimed(torch, fn), nbytes, config=config))
        del x
        measured = protocol.measure([e.timed for e in entries], proto, log=print)
        copy_gbps = None
        rows = []
        for e, m in zip(entries, measured):
            st = protocol.summarize(proto, m.samples)
            gbps = e.nbytes / st.median_ms / 1e6
            if e.impl == "wgsl.copy":
                copy_gbps = gbps
            rows.append((e, m, st, gbps))
        for e, m, st, gbps in rows:
            pct = 100 * gbps / copy_gbps if copy_gbps else 0.0
            label = e.impl + (f" [{e.mode}] splits={e.splits}{' (rule)' if e.rule else ''}" if e.mode else "")
            print(
                f"  {label:44s} {st.median_ms:9.4f} ms \u00b1{100 * st.spread:4.1f}% {gbps:8.1f} GB/s"
                f" = {pct:5.1f}% of the WGSL copy ({len(m.samples)}x{m.reps}, {e.timed.timer}"
                f"{'' if m.warmed else ', NOT warmed'}) {e.config}"
            )
            record = {
                "kind": e.kind,
                "case": case.name,
                "runtime": "native",
                "shape": asdict(case),
                "impl": e.impl,
                "mode": e.mode,
                "splits": e.splits,
                "rule": e.rule,
                "config": e.config,
                "adapter": rt.name if not e.impl.startswith("torch") else torch_name,
                "bytes": e.nbytes,
                "gbps": gbps,
                "pct_of_copy": pct,
                **m.record_fields(proto),
                "timer": e.timed.timer,
                "timer_resolution_ns": m.resolution_ns,
                "time": info.time,
                "commit": info.commit,
            }
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
