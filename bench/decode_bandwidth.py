"""Decode attention as bandwidth, on a GPU, in one run, by the measurement protocol (wgattn.protocol):
the decode kernels (the `paged_decode` interface, wgattn.interfaces.paged_decode) against the copy bandwidth of
the same device and against PyTorch's SDPA on the same tensors, in one interleaved series per case.

    python3 -m bench.decode_bandwidth --json decode.jsonl
    (on the lent H100: python3 -m bench.devcarry run -- python3 -m bench.decode_bandwidth --json $OUT/decode.jsonl)

A case is a decode configuration (wgattn.interfaces.paged_decode.DecodeConfig, as a live check or
the page's benchmark takes it) and the kernel timed on it (`cases()`). For each, one series timed
by wgattn.protocol.measure (warm-up by time until the rounds agree, interleaved rounds, median with
its interquartile spread): the decode kernel in each mode (trusted: no runtime bounds checks;
checked), at the split rule's count and, for the first case, at other split counts (`--sweep`: is
the rule's choice the best?); a WGSL copy of the case's K and V bytes through the same wgpu device
(wgattn.bandwidth) and the read of them alone (a decode step only reads: the read is its ceiling);
and, with PyTorch on CUDA, torch's copy_ of those bytes and scaled_dot_product_attention on the
same values unpaged ([B, H, S, D], the cache's dtype): as a user calls it (DEFAULT, with the
backend it picks) and each backend that runs the case, each called eagerly and replayed from a
CUDA graph (`.graph`: no host launch cost). Bandwidth = the bytes of K and V the step must read
(Interface.bench_bytes: each visible key of each kv head once) over the median; the copy counts
its read and written bytes. The cache holds the values the page's GPU fill writes
(wgattn.bandwidth.fill_values): each kernel's output is checked as the page checks it
(Interface.check_filled), SDPA's against the float64 reference, before either is timed.

Target: B=8, Hq=32, Hkv=8, D=128, 32k tokens, f16 cache, Sq_new=1 at >= 70% of the copy bandwidth
natively (trusted) and faster than SDPA.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from wgattn import bandwidth, bench, protocol, registry
from wgattn.interfaces import Case, FilledCheck
from wgattn.interfaces.paged_decode import INTERFACE as decode
from wgattn.interfaces.paged_decode import DecodeConfig, cache_dtype

F16, F32 = "paged_decode.split_f16", "paged_decode.split"
TARGET = DecodeConfig(batch=8, heads=32, heads_kv=8, head_dim=128, seq_len=32768, new_tokens=1, block_size=16, ragged=False)


def cases() -> Dict[str, Tuple[str, DecodeConfig]]:
    """name -> (the kernel timed, its configuration): the target first, then what moves it:
    another block size, speculative decoding, an f32 cache, one very long sequence, a wider GQA
    group, and a gpt-oss-shaped layer with sinks."""
    return {
        "target": (F16, TARGET),
        "target-bs64": (F16, replace(TARGET, block_size=64)),
        "target-5-new": (F16, replace(TARGET, new_tokens=5)),
        "target-f32-cache": (F32, TARGET),
        "one-128k-sequence": (F16, replace(TARGET, batch=1, seq_len=131072)),
        "gqa8-16k": (F16, replace(TARGET, heads=64, seq_len=16384)),
        "gpt-oss-like-sinks-d64": (F16, replace(TARGET, heads=64, head_dim=64, sinks=True)),
    }


def smoke(config: DecodeConfig) -> DecodeConfig:
    """The case shrunk to 2 sequences of at most 700 tokens: does the script run?"""
    return replace(config, batch=min(config.batch, 2), seq_len=min(config.seq_len, 700))


def filled(name: str, shape: Sequence[int], dtype, chunk: int = 1 << 24) -> np.ndarray:
    """The cache `name` as the page's GPU fill writes it (wgattn.bandwidth.fill_values, exact in
    f16 and f32), made on the host a chunk at a time."""
    out = np.empty(int(np.prod(shape)), dtype=dtype)
    for at in range(0, out.size, chunk):
        out[at : at + chunk] = bandwidth.fill_values(name, np.arange(at, min(at + chunk, out.size), dtype=np.uint32))
    return out.reshape(shape)


def inputs(kernel: str, config: DecodeConfig) -> Dict[str, np.ndarray]:
    """The configuration's tensors (q, block_table, seq_lens, sinks and slopes drawn from its
    seed), the cache filled on the host in the precision `kernel` reads."""
    x = config.tensors(filled=True)
    dt = cache_dtype(registry.load().kernel(kernel))
    for name in ("k_cache", "v_cache"):
        x[name] = filled(name, x[name].shape, dt)
    return x


def forced(case: Case, num_splits: Optional[int]) -> Case:
    """The case at the split rule's count (None), or at `num_splits`."""
    return replace(case, options={**case.options, "num_splits": num_splits})


def unpaged(config: DecodeConfig, x: Dict[str, np.ndarray], name: str) -> np.ndarray:
    """The cache of every sequence (each seq_len long) gathered through its block table: [B, Hkv, S, D]."""
    c = x[name][x["block_table"]].reshape(config.batch, -1, config.kv_heads, config.head_dim)[:, : config.seq_len]
    return np.ascontiguousarray(c.transpose(0, 2, 1, 3))


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


def torch_sdpa(torch, config: DecodeConfig, x: Dict[str, np.ndarray]):
    """[(backend, its function, out [B, Sq_new, Hq, D] as float32, the backend PyTorch picks for
    DEFAULT or "")] for SDPA as a user calls it (DEFAULT) and each SDPA backend that runs the case
    (its pick is not the same in every run: record it): q, k, v on CUDA
    in the cache's dtype, [B, H, S, D], GQA through enable_gqa, the new tokens causal
    bottom-right. Sinks, ALiBi, a window, softcap and ragged lengths have no SDPA argument: such a
    case has no anchor."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if config.sinks or config.alibi or config.window_left >= 0 or config.softcap or config.ragged:
        return []
    tdt = torch.float16 if x["k_cache"].dtype == np.float16 else torch.float32
    q = torch.from_numpy(x["q"].transpose(0, 2, 1, 3).copy()).to("cuda", tdt)
    k = torch.from_numpy(unpaged(config, x, "k_cache")).to("cuda", tdt)
    v = torch.from_numpy(unpaged(config, x, "v_cache")).to("cuda", tdt)
    mask = None
    if config.new_tokens > 1:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(config.new_tokens, config.seq_len)
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


def anchors(torch, config: DecodeConfig, x: Dict[str, np.ndarray]):
    """[(label, function, out, config)]: each of torch_sdpa's backends called eagerly, and
    replayed from a CUDA graph (MATH, many times slower, eagerly only)."""
    found = []
    for backend, fn, out, pick in torch_sdpa(torch, config, x):
        config = f"picks {pick}" if pick else ""
        found.append((f"torch.{backend}", fn, out, config))
        replay = graphed(torch, fn) if backend != "MATH" else None
        if replay is not None:
            found.append((f"torch.{backend}.graph", replay, out, config))
    return found


def check(name: str, err: float, allowed: float) -> None:
    print(f"  {name}: max abs err vs the float64 reference {err:.2e} (allowed here {allowed:.2e})")
    if not err <= allowed:
        raise SystemExit(f"{name} is wrong on this GPU (max abs err {err:.3e}): not timing a wrong answer")


@dataclass
class Entry:
    """One entry of a case's series: what its record says besides the measurement."""

    impl: str
    timed: protocol.Timed
    nbytes: int  # the bytes its bandwidth counts
    mode: str = ""
    config: Optional[Dict[str, float]] = None  # what ran (the tile, num_splits)
    rule: bool = False
    kind: str = "decode"
    verified: Optional[FilledCheck] = None  # its output's check before timing
    label: str = ""  # what the console line adds (SDPA's pick)


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
    chosen = [(n, kc) for n, kc in cases().items() if not args.case or n in args.case]
    for i, (name, (kernel_id, config)) in enumerate(chosen):
        config = smoke(config) if args.smoke else config
        kernel = registry.load().kernel(kernel_id)
        x = inputs(kernel_id, config)
        case = decode.live_case(config, x, name)
        dtype = kernel.precision
        nbytes = decode.bench_bytes(kernel, case)
        print(f"\n{name}: {kernel.id} on {config}; {nbytes / 1e9:.3f} GB of K and V a step")
        plan = decode.plan(kernel, case, rt.target)
        if plan.unavailable:
            print(f"  skipped: {plan.unavailable}")
            continue
        entries: List[Entry] = []
        splits = [None] + ([int(s) for s in args.sweep.split(",") if s] if i == 0 else [])
        for mode in [m for m in args.modes.split(",") if m]:
            verified: Optional[FilledCheck] = None
            for ns in splits:
                p = decode.plan(kernel, forced(case, ns), rt.target)
                if ns is None:
                    rt.trusted = mode == "trusted"
                    verified = decode.check_filled(case, rt.run(p).outputs)
                    rt.trusted = True
                    check(f"{kernel.id} {mode}", verified["max_abs_err"], verified["allowed"])
                timed = rt.timing([p], trusted=mode == "trusted")
                entries.append(Entry(kernel.id, timed, nbytes, mode, bench.config_of([p]), ns is None, verified=verified))
        cp = bandwidth.copy_plan(nbytes, rt.limits["max-storage-buffer-binding-size"])
        copied = cp.buffers[0].size
        entries.append(Entry(bandwidth.COPY, rt.timing([cp]), 2 * copied, kind="copy"))
        entries.append(Entry("wgsl.read", rt.timing([bandwidth.stream_plan(copied, write=False)]), copied, kind="read"))
        if torch is not None:
            src = torch.empty(copied, dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            entries.append(Entry("torch.copy_", TorchTimed(torch, lambda: dst.copy_(src)), 2 * copied, kind="copy"))
            found = anchors(torch, config, x)
            if found:
                t0 = time.perf_counter()
                want = decode.reference(case)["out"]
                print(f"  float64 reference: {time.perf_counter() - t0:.1f} s")
            for label, fn, out, pick in found:
                check(label, float(np.abs(out.astype(np.float64) - want).max()), 5e-2 if dtype == "f16" else 1e-4)
                entries.append(Entry(label, TorchTimed(torch, fn), nbytes, label=pick))
        del x
        measured = protocol.measure([e.timed for e in entries], proto, log=print)
        records = []
        for e, m in zip(entries, measured):
            run_info = replace(info, runtime="native")
            adapter = rt.name if not e.impl.startswith("torch") else str(torch_name)
            rec = bandwidth.record(
                name, config.to_dict(), e.impl, dtype, e.nbytes, m, proto, e.timed.timer, adapter, run_info,
                mode=e.mode, config=e.config, rule=e.rule, verified=e.verified, kind=e.kind,
            )  # fmt: skip
            if e.label:
                rec["config"] = e.label
            records.append(rec)
        bandwidth.copy_shares(records)
        copy_gbps = next(
            e.nbytes / protocol.summarize(proto, m.samples).median_ms / 1e6
            for e, m in zip(entries, measured)
            if e.impl == bandwidth.COPY
        )
        for e, m, r in zip(entries, measured, records):
            st = protocol.summarize(proto, m.samples)
            gbps = e.nbytes / st.median_ms / 1e6
            label = e.impl + (f" [{e.mode}] splits={r['splits']}{' (rule)' if e.rule else ''}" if e.mode else "")
            print(
                f"  {label:44s} {st.median_ms:9.4f} ms \u00b1{100 * st.spread:4.1f}% {gbps:8.1f} GB/s"
                f" = {100 * gbps / copy_gbps:5.1f}% of the WGSL copy ({len(m.samples)}x{m.reps}, {e.timed.timer}"
                f"{'' if m.warmed else ', NOT warmed'}) {r['config']}"
            )
        if args.json:
            with open(args.json, "a") as f:
                f.writelines(json.dumps(r) + "\n" for r in records)


if __name__ == "__main__":
    main()
