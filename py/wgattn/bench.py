"""Benchmarks: the same jobs timed natively (`wgattn bench`), in the page (Pyodide builds the plans
here, the browser times them) and against the anchors (PyTorch on CUDA, NumPy's reference).

An op is timed on dense (B, H, S, D) problems, Sq = Sk = S, H query and key/value heads, by the
kernels of every interface that serves it (Interface.bench_op; each lays the dense tensors out
as its own cases, Interface.bench_cases):
    fwd    attention forward
    bwd    attention backward (dq, dk, dv from dout)
    probs  attention probabilities for the last B positions of a history of S keys (seed B's
           job; an interface taking one position per dispatch times B plans)
FLOPs follow FlashAttention: forward 4*B*H*S*S*D, halved when causal; backward 2.5x the forward;
probs 2*B*H*S*D (the scores; every entry of every row is written).

Plans are pure Python (Pyodide builds them too); only `run_native` and the anchors touch a GPU
or a CPU clock. Inputs are standard normal; the backward's out and lse are stand-ins of the
right magnitude (timing does not depend on their values; correctness is the harness's job).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import interfaces, registry
from .interfaces import Interface
from .plan import Plan
from .target import DEFAULT, Target

__all__ = ["OPS", "DEFAULT_SHAPES", "Record", "flops", "kernel_impls", "plans", "parse_shape", "run", "render_table"]

OPS = ("fwd", "bwd", "probs")
MODES = ("trusted", "checked")
DEFAULT_SHAPES = {"fwd": [(1, 8, 1024, 64)], "bwd": [(1, 8, 1024, 64)], "probs": [(16, 8, 4096, 64)]}
ANCHORS = ("torch", "numpy")


@dataclass
class Record:
    op: str
    impl: str
    shape: Tuple[int, int, int, int]
    causal: bool
    dtype: str
    adapter: str
    median_ms: float
    tflops: float
    runs: int
    timer: str  # "gpu" (timestamp queries / CUDA events) or "wall"
    mode: str = ""  # "trusted" or "checked" (wgattn.native's shader modules); "" for the anchors
    config: str = ""  # the tile shape that ran (override constants), e.g. "BR=64 BC=32 WG=128"

    def to_json(self) -> Dict[str, object]:
        d = asdict(self)
        d["shape"] = list(self.shape)
        return d


def parse_shape(text: str) -> Tuple[int, int, int, int]:
    try:
        b, h, s, d = (int(p) for p in text.split(","))
    except ValueError:  # not four parts, or one not an integer
        raise ValueError(f"a shape is B,H,S,D with four positive integers, got {text!r}") from None
    if min(b, h, s, d) < 1:
        raise ValueError(f"a shape is B,H,S,D with four positive integers, got {text!r}")
    return b, h, s, d


def flops(op: str, shape: Sequence[int], causal: bool) -> float:
    b, h, s, d = shape
    if op == "probs":
        return 2.0 * b * h * s * d
    fwd = 4.0 * b * h * s * s * d / (2.0 if causal else 1.0)
    return fwd if op == "fwd" else 2.5 * fwd


def kernel_impls(op: str) -> List[str]:
    """Registered kernels that run `op`, baseline first."""
    return [k.id for iface in serving(op) for k in iface.kernels()]


def serving(op: str) -> List[Interface]:
    """The interfaces whose kernels time `op`, in the manifest's order (the first's first kernel
    is the baseline)."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; ops: {list(OPS)}")
    return [i for i in interfaces.every() if i.bench_op == op]


def dtype_of(impl: str) -> str:
    """A kernel's precision as the registry states it (not read off its name); the anchors run f32
    unless asked (PyTorch's f16 records say so themselves)."""
    return "f32" if impl in ANCHORS else registry.load().kernel(impl).precision


def _normal(rs: np.random.RandomState, shape) -> np.ndarray:
    return rs.standard_normal(shape).astype(np.float32)


def dense_inputs(op: str, shape: Sequence[int], seed: int = 0) -> Dict[str, np.ndarray]:
    """The job's tensors in PyTorch's layout: q, k, v [B, H, S, D] (and dout for bwd); for probs
    q [B, H, D] (one query per position) and k_hist [S, H, D]."""
    b, h, s, d = shape
    rs = np.random.RandomState(seed)
    if op == "probs":
        return {"q": _normal(rs, (b, h, d)), "k_hist": _normal(rs, (s, h, d))}
    out = {name: _normal(rs, (b, h, s, d)) for name in ("q", "k", "v")}
    if op == "bwd":
        out["dout"] = _normal(rs, (b, h, s, d))
    return out


def plans(
    kernel_id: str, op: str, shape: Sequence[int], causal: bool = False, seed: int = 0, target: Target = DEFAULT
) -> List[Plan]:
    """The plans one timed run of `kernel_id` on the job dispatches on `target` (several for a
    kernel that takes one position per dispatch); their `unavailable` says when it cannot."""
    kernel = registry.load().kernel(kernel_id)
    iface = interfaces.of(kernel)
    if iface.bench_op != op:
        raise ValueError(f"no {op} benchmark job for kernel {kernel_id!r}")
    return [iface.plan(kernel, case, target) for case in iface.bench_cases(dense_inputs(op, shape, seed), causal)]


# ---------------------------------------------------------------------------
# timing (CPython)
# ---------------------------------------------------------------------------


def _torch_fn(op: str, shape, causal: bool, dtype: str):
    """A zero-argument callable running PyTorch's SDPA (forward, or backward only) on CUDA."""
    import torch
    import torch.nn.functional as F

    tdt = torch.float16 if dtype == "f16" else torch.float32
    x = {k: torch.from_numpy(v).to("cuda", tdt) for k, v in dense_inputs(op, shape).items()}
    if op == "fwd":
        return lambda: F.scaled_dot_product_attention(x["q"], x["k"], x["v"], is_causal=causal)
    q, k, v = (x[n].requires_grad_() for n in ("q", "k", "v"))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return lambda: torch.autograd.grad(out, (q, k, v), x["dout"], retain_graph=True)


def _time_torch(fn: Callable, runs: int, warmup: int) -> List[float]:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end))
    return samples


def torch_cuda() -> Optional[str]:
    """The CUDA device name when PyTorch with CUDA is importable, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def _numpy_fn(op: str, shape, causal: bool):
    """The reference in float32 on the op's first interface's cases (the baseline's job)."""
    iface = serving(op)[0]
    cases = iface.bench_cases(dense_inputs(op, shape), causal)
    return lambda: [iface.reference(c, dtype=np.float32) for c in cases]


def _time_cpu(fn: Callable, runs: int, budget_s: float = 20.0) -> List[float]:
    """Wall-clock samples; fewer than `runs` (at least 1) when one run would blow the budget."""
    samples: List[float] = []
    while len(samples) < runs:
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
        if sum(samples) / 1e3 > budget_s:
            break
    return samples


def run(
    ops: Sequence[str],
    impls: Optional[Sequence[str]],
    shapes: Optional[Sequence[Tuple[int, ...]]],
    causal: bool,
    runs: int = 10,
    warmup: int = 3,
    log: Callable[[str], None] = lambda s: None,
    modes: Sequence[str] = MODES,
) -> List[Record]:
    """Time every (op, impl, shape) natively, with the anchors, in one process and one run;
    kernels in each of `modes` (a kernel not registered as trusted runs checked only)."""
    from . import native  # imports wgpu: CPython with the native extra only

    if runs < 10:
        raise ValueError(f"runs must be at least 10 (a median of at least 10), got {runs}")
    bad = [m for m in modes if m not in MODES] or ([] if modes else ["(none)"])
    if bad:
        raise ValueError(f"unknown mode {bad[0]!r}; modes: {list(MODES)}")
    rt = native.runtime()
    adapter = rt.name
    every = {x for o in ops for x in kernel_impls(o)} | set(ANCHORS)
    unknown = [i for i in impls or () if i not in every]
    if unknown:
        raise ValueError(f"unknown impl {unknown[0]!r}; for {list(ops)}: {sorted(every)}")
    records = []
    for op in ops:
        known = kernel_impls(op) + list(ANCHORS)
        wanted = known if not impls else [i for i in impls if i in known]
        for shape in shapes or DEFAULT_SHAPES[op]:
            f = flops(op, shape, causal)
            for impl in wanted:
                label = f"{op} {impl} {shape}{' causal' if causal else ''}"
                if impl == "torch":
                    device = torch_cuda()
                    if device is None or op == "probs":
                        log(
                            f"skip {label}: "
                            + ("no PyTorch with CUDA here" if device is None else "PyTorch has no attention-probabilities op")
                        )
                        continue
                    dts = ["f32"] + (["f16"] if any(dtype_of(x) == "f16" for x in wanted) else [])
                    for dt in dts:
                        samples = _time_torch(_torch_fn(op, shape, causal, dt), runs, warmup)
                        records.append(_record(op, "torch", shape, causal, dt, device, samples, f, "gpu"))
                        log(_line(records[-1]))
                    continue
                if impl == "numpy":
                    samples = _time_cpu(_numpy_fn(op, shape, causal), runs)
                    records.append(
                        _record(op, "numpy", shape, causal, "f32", "CPU (NumPy reference, float32)", samples, f, "wall")
                    )
                    log(_line(records[-1]))
                    continue
                kernel = registry.load().kernel(impl)
                try:
                    job = plans(impl, op, shape, causal, target=rt.target)
                except ValueError as e:
                    log(f"skip {label}: {e}")
                    continue
                why = next((p.unavailable for p in job if p.unavailable), "")
                if why:
                    log(f"skip {label}: {why}")
                    continue
                config = " ".join(f"{k}={v}" for k, v in job[0].dispatches[0].constants.items())
                kernel_modes = [m for m in modes if m == "checked" or kernel.trusted]
                if not kernel_modes:
                    log(f"skip {label}: not registered as trusted, and only trusted mode was asked for")
                saved = rt.trusted
                try:
                    for mode in kernel_modes:
                        rt.trusted = mode == "trusted"
                        timer, total = "gpu", None
                        for p in job:
                            timer, samples = rt.time(p, runs=runs, warmup=warmup)
                            total = samples if total is None else [a + b for a, b in zip(total, samples)]
                        records.append(
                            _record(op, impl, shape, causal, dtype_of(impl), adapter, total, f, timer, mode=mode, config=config)
                        )
                        log(_line(records[-1]))
                finally:
                    rt.trusted = saved
    return records


def _record(op, impl, shape, causal, dtype, adapter, samples, f, timer, mode="", config="") -> Record:
    med = statistics.median(samples)
    return Record(
        op=op,
        impl=impl,
        shape=(int(shape[0]), int(shape[1]), int(shape[2]), int(shape[3])),
        causal=bool(causal),
        dtype=dtype,
        adapter=adapter,
        median_ms=med,
        tflops=f / (med * 1e-3) / 1e12,
        runs=len(samples),
        timer=timer,
        mode=mode,
        config=config,
    )


def _name(r: Record) -> str:
    return f"{r.impl} [{r.mode}]" if r.mode else r.impl


def _line(r: Record) -> str:
    return (
        f"{r.op:5s} {_name(r):36s} {','.join(map(str, r.shape)):16s} {r.dtype} "
        f"{r.median_ms:10.3f} ms {r.tflops:9.4f} TFLOP/s ({r.timer}, {r.runs} runs) {r.config}"
    )


def render_table(records: Sequence[Record]) -> str:
    """A table per (op, shape): each row with its TFLOP/s and its ratio to the row it is named
    against (the op's first kernel, the baseline)."""
    lines = []
    groups: Dict[Tuple, List[Record]] = {}
    for r in records:
        groups.setdefault((r.op, r.shape, r.causal), []).append(r)
    for (op, shape, causal), rows in groups.items():
        lines.append(f"{op} (B,H,S,D)={shape}{' causal' if causal else ''}")
        base = next((r for r in rows if r.impl not in ANCHORS), None)
        torch32 = next((r for r in rows if r.impl == "torch" and r.dtype == "f32"), None)
        lines.append(
            f"  {'impl [mode]':36s} {'dtype':5s} {'median ms':>11s} {'TFLOP/s':>10s} "
            f"{'x baseline':>10s} {'% torch f32':>11s}  adapter, tile"
        )
        for r in rows:
            xb = f"{base.median_ms / r.median_ms:10.2f}" if base else f"{'':10s}"
            pt = f"{100 * r.tflops / torch32.tflops:10.1f}%" if torch32 else f"{'':11s}"
            lines.append(
                f"  {_name(r):36s} {r.dtype:5s} {r.median_ms:11.3f} {r.tflops:10.4f} {xb} {pt}  "
                f"{r.adapter} ({r.timer}, {r.runs} runs) {r.config}"
            )
    return "\n".join(lines)
