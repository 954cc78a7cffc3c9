"""Benchmarks: the same jobs timed natively (`wgattn bench`), in the page (Pyodide builds the plans
here, the browser times them) and against the anchors (PyTorch on CUDA, NumPy's reference).

An op is timed on dense (B, H, S, D) problems, Sq = Sk = S, H query and key/value heads, by the
kernels of every interface that serves it (Interface.bench_op; each lays the dense tensors out
as its own cases, Interface.bench_cases):
    fwd    attention forward
    bwd    attention backward (dq, dk, dv from dout)
    probs  attention probabilities for the last B positions of a history of S keys (the original
           attn_probs kernel's job; an interface taking one position per dispatch times B plans)
FLOPs follow FlashAttention: forward 4*B*H*S*S*D, halved when causal; backward 2.5x the forward;
probs 2*B*H*S*D (the scores; every entry of every row is written). A job may name a variant of
the problem (VARIANTS: ALiBi slopes, attention sinks or both, on the interfaces that carry them,
Interface.bench_variant), counted with the same FLOPs: what they add is elementwise.

An op of CONFIG_OPS is timed instead on one configuration of its interface (its Config,
Interface.bench_case), its large inputs filled on the GPU and each kernel's output checked
before it is timed (wgattn.bandwidth): decode (BANDWIDTH_OPS) as bandwidth, beside a copy of the
bytes it reads; prefill as FLOP/s (Interface.bench_flops: the visible pairs only), beside its
interface's yardstick on the same work (Interface.bench_yardstick: flash_fwd unpaged). In the
page through wgattn.page.bench_jobs; decode natively by bench/decode_bandwidth.py.

Plans are pure Python (Pyodide builds them too); only `run` and the anchors touch a GPU or a
CPU clock. Inputs are standard normal; the backward's out and lse are stand-ins of the right
magnitude (timing does not depend on their values; correctness is the harness's job), and a
large tensor repeats a block of 2**20 draws (`_normal`).

Every figure follows wgattn.protocol (warm-up by time, interleaved rounds, median with its
spread); a `Record` is the same in CPython and in the page (docs/performance.md reads them).
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import interfaces, protocol, registry
from .interfaces import Interface
from .plan import Plan
from .target import DEFAULT, Target

__all__ = [
    "OPS",
    "BANDWIDTH_OPS",
    "CONFIG_OPS",
    "config_of",
    "DEFAULT_SHAPES",
    "Record",
    "RunInfo",
    "browser_of",
    "flops",
    "kernel_impls",
    "make_record",
    "op_of",
    "plans",
    "parse_shape",
    "run",
    "render_table",
    "VARIANTS",
    "check_variant",
    "parse_variants",
]

OPS = ("fwd", "bwd", "probs")
CONFIG_OPS = ("decode", "prefill")  # timed on one configuration, inputs filled on the GPU, checked first
BANDWIDTH_OPS = ("decode",)  # of those, timed as bandwidth (the others as FLOP/s beside a yardstick)
MODES = ("trusted", "checked")
DEFAULT_SHAPES = {"fwd": [(1, 8, 1024, 64)], "bwd": [(1, 8, 1024, 64)], "probs": [(16, 8, 4096, 64)]}
ANCHORS = ("torch", "numpy")
# A job's variant of the problem: "" (plain), or what it adds per query head (the ALiBi slopes, the
# sinks): a forward with and without them timed side by side.
VARIANTS = ("", "alibi", "sinks", "alibi+sinks")


def check_variant(variant: object) -> str:
    """A benchmark variant, one of VARIANTS; ValueError saying which there are."""
    if not isinstance(variant, str) or variant not in VARIANTS:
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    return variant


def parse_variants(text: str) -> List[str]:
    """Variants as a command line or a request spells them: comma-separated, "plain" for the plain
    problem ("plain,alibi+sinks"); ValueError naming what there is."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise ValueError(f"variants must name at least one of {['plain', *VARIANTS[1:]]}, got {text!r}")
    out = []
    for name in names:
        if name != "plain" and name not in VARIANTS[1:]:
            raise ValueError(f"unknown variant {name!r}; variants: {['plain', *VARIANTS[1:]]}")
        out.append("" if name == "plain" else name)
    return list(dict.fromkeys(out))


@dataclass
class Record:
    """One row of a benchmark: an implementation at one shape in one runtime, its median time
    over the protocol's rounds with their spread, and what a reader needs to trust or redo it."""

    op: str
    impl: str
    shape: Tuple[int, int, int, int]  # B, H, S, D
    causal: bool
    dtype: str
    runtime: str  # "native" (wgpu-py), "torch", "numpy", or the browser's engine ("chromium", ...)
    mode: str  # "trusted" / "checked": runtime bounds checks off / on (naga's natively, Dawn's
    #            robustness in a browser); "" for the anchors
    config: str  # the tile shape that ran (override constants), e.g. "BR=64 BC=32 WG=128"
    adapter: str
    browser: str  # the browser and its version ("Chromium 156.0.0.0"); "" outside one
    flags: List[str]  # the browser's command-line flags where known (a page cannot see its own)
    median_ms: float  # per run
    tflops: float  # FlashAttention's FLOPs over the median
    min_ms: float
    q1_ms: float
    q3_ms: float
    max_ms: float
    spread: float  # (q3 - q1) / median
    wide: bool  # spread above the protocol's `wide`: read the figure with care
    rounds: int  # samples, one per interleaved round
    reps: int  # runs per sample
    warmup_s: float  # seconds the series was warmed before its rounds
    warmed: bool  # the warm-up settled (consecutive rounds agreed) before its cap
    timer: str  # "gpu" (timestamp queries), "cuda" (CUDA events) or "wall" (host clock)
    timer_resolution_ns: float  # the timer's tick as known or as its readings showed it (0: unknown, too few)
    repeat: int  # 0, 1, ...: back-to-back repeats of the series in one run
    time: str  # when the run started (ISO 8601, UTC)
    commit: str  # the git commit that ran, "+dirty" with uncommitted changes; "" when unknown
    variant: str = ""  # the problem's variant (VARIANTS): "" plain, "alibi+sinks", ...

    def to_json(self) -> Dict[str, object]:
        d = asdict(self)
        d["shape"] = list(self.shape)
        return d


@dataclass
class RunInfo:
    """What every record of one run shares."""

    runtime: str = "native"
    browser: str = ""
    flags: List[str] = field(default_factory=list)
    time: str = ""
    commit: str = ""

    @classmethod
    def now(cls, **kw) -> "RunInfo":
        stamp = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
        return cls(time=stamp, **kw)


def git_commit(root: Optional[Path] = None) -> str:
    """The commit the code runs from: WGATTN_COMMIT (a copied tree has no .git: its packer sets
    it), else `git` in the repository, else ""."""
    if os.environ.get("WGATTN_COMMIT"):
        return os.environ["WGATTN_COMMIT"]
    root = root or Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return ""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=root, capture_output=True).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head.stdout.strip() + ("+dirty" if dirty else "")


def browser_of(user_agent: str) -> Tuple[str, str]:
    """(runtime, browser) from a user agent: ("chromium", "Chromium 156.0.0.0") for Chrome, Edge
    and headless Chromium; ("firefox", ...), ("safari", ...); ("browser", "") when unknown."""
    for pattern, runtime, name in (
        (r"Firefox/([\d.]+)", "firefox", "Firefox"),
        (r"(?:HeadlessChrome|Chrome|Chromium)/([\d.]+)", "chromium", "Chromium"),
        (r"Version/([\d.]+).*Safari/", "safari", "Safari"),
    ):
        m = re.search(pattern, user_agent or "")
        if m:
            return runtime, f"{name} {m.group(1)}"
    return "browser", ""


def make_record(
    op: str,
    impl: str,
    shape: Sequence[int],
    causal: bool,
    dtype: str,
    adapter: str,
    measured: protocol.Measured,
    proto: protocol.Protocol,
    timer: str,
    info: RunInfo,
    mode: str = "",
    config: str = "",
    repeat: int = 0,
    variant: str = "",
) -> Record:
    """A record from what the protocol measured (the one place its statistics are computed, for
    the page's records too)."""
    st = protocol.summarize(proto, measured.samples)
    return Record(
        op=op,
        impl=impl,
        shape=(int(shape[0]), int(shape[1]), int(shape[2]), int(shape[3])),
        causal=bool(causal),
        dtype=dtype,
        runtime=info.runtime,
        mode=mode,
        config=config,
        adapter=adapter,
        browser=info.browser,
        flags=list(info.flags),
        median_ms=st.median_ms,
        tflops=flops(op, shape, causal) / (st.median_ms * 1e-3) / 1e12,
        min_ms=st.min_ms,
        q1_ms=st.q1_ms,
        q3_ms=st.q3_ms,
        max_ms=st.max_ms,
        spread=st.spread,
        wide=st.wide,
        rounds=len(measured.samples),
        reps=int(measured.reps),
        warmup_s=round(float(measured.warmup_s), 3),
        warmed=bool(measured.warmed),
        timer=timer,
        timer_resolution_ns=float(measured.resolution_ns),
        repeat=int(repeat),
        time=info.time,
        commit=info.commit,
        variant=check_variant(variant),
    )


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
    if op not in OPS + CONFIG_OPS:
        raise ValueError(f"unknown op {op!r}; ops: {list(OPS + CONFIG_OPS)}")
    return [i for i in interfaces.every() if i.bench_op == op]


def op_of(impl: str) -> str:
    """The op a registered kernel is benchmarked as (its interface's bench_op)."""
    iface = interfaces.of(registry.load().kernel(impl))
    if iface.bench_op not in OPS + CONFIG_OPS:
        raise ValueError(f"kernel {impl!r} (interface {iface.name}) has no benchmark op; ops: {list(OPS + CONFIG_OPS)}")
    return iface.bench_op


def dtype_of(impl: str) -> str:
    """A kernel's precision as the registry states it (not read off its name); the anchors run f32
    unless asked (PyTorch's f16 records say so themselves)."""
    return "f32" if impl in ANCHORS else registry.load().kernel(impl).precision


_BLOCK = 1 << 20  # standard normal draws per tensor, repeated to fill it


def _normal(rs: np.random.RandomState, shape) -> np.ndarray:
    """Standard normal float32 of `shape`: a block of at most 2**20 draws, repeated to fill it.
    What the kernels do does not depend on the values, and 16 M draws take seconds under
    Pyodide (0.5 s for a block and its copies)."""
    n = int(np.prod(shape))
    return np.resize(rs.standard_normal(min(n, _BLOCK)).astype(np.float32), shape)


_INPUTS: Dict[Tuple, Dict[str, np.ndarray]] = {}  # the last job's tensors (every impl of a series shares them)


def dense_inputs(op: str, shape: Sequence[int], seed: int = 0) -> Dict[str, np.ndarray]:
    """The job's tensors in PyTorch's layout: q, k, v [B, H, S, D] (and dout for bwd); for probs
    q [B, H, D] (one query per position) and k_hist [S, H, D]. Read-only, and kept until another
    job's are asked for (`forget_inputs`): every implementation of a series times the same ones,
    and drawing them is the slow part of building a plan under Pyodide."""
    key = (op, tuple(int(x) for x in shape), int(seed))
    if key not in _INPUTS:
        forget_inputs()  # one job's at a time: they can be GiB
        b, h, s, d = key[1]
        rs = np.random.RandomState(seed)
        if op == "probs":
            out = {"q": _normal(rs, (b, h, d)), "k_hist": _normal(rs, (s, h, d))}
        else:
            out = {name: _normal(rs, (b, h, s, d)) for name in ("q", "k", "v")}
            if op == "bwd":
                out["dout"] = _normal(rs, (b, h, s, d))
        for a in out.values():
            a.flags.writeable = False
        _INPUTS[key] = out
    return _INPUTS[key]


def forget_inputs() -> None:
    """Drop the kept tensors of `dense_inputs`."""
    _INPUTS.clear()


def config_of(plans: Sequence[Plan]) -> Dict[str, float]:
    """What ran, as a record names it: what the interface chose for the target (the plan's
    meta["config"]), else the first dispatch's override constants."""
    chosen = plans[0].meta.get("config") if plans else None
    if isinstance(chosen, dict):
        return dict(chosen)
    return dict(plans[0].dispatches[0].constants) if plans and plans[0].dispatches else {}


def config_text(config: Dict[str, float]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def plans(
    kernel_id: str,
    op: str,
    shape: Sequence[int],
    causal: bool = False,
    seed: int = 0,
    target: Target = DEFAULT,
    variant: str = "",
) -> List[Plan]:
    """The plans one timed run of `kernel_id` on the job dispatches on `target` (several for a
    kernel that takes one position per dispatch); their `unavailable` says when it cannot.
    `variant` (VARIANTS): the cases with the interface's ALiBi slopes and sinks (ValueError where
    the interface has none)."""
    kernel = registry.load().kernel(kernel_id)
    iface = interfaces.of(kernel)
    if iface.bench_op != op:
        raise ValueError(f"no {op} benchmark job for kernel {kernel_id!r}")
    cases = iface.bench_cases(dense_inputs(op, shape, seed), causal)
    if check_variant(variant):
        cases = [iface.bench_variant(case, variant) for case in cases]
    return [iface.plan(kernel, case, target) for case in cases]


# ---------------------------------------------------------------------------
# timing (CPython)
# ---------------------------------------------------------------------------

# cudaEventElapsedTime's resolution, as CUDA's documentation states it (around 0.5 microseconds).
CUDA_EVENT_RESOLUTION_NS = 500.0


class _TorchTimed(protocol.Timed):
    """PyTorch's SDPA (forward, or backward only) on CUDA, timed with CUDA events around `reps`
    calls."""

    timer = "cuda"
    resolution_ns = CUDA_EVENT_RESOLUTION_NS

    def __init__(self, op: str, shape, causal: bool, dtype: str):
        import torch
        import torch.nn.functional as F

        self.torch = torch
        self.fn: Callable[[], object]
        tdt = torch.float16 if dtype == "f16" else torch.float32
        x = {k: torch.from_numpy(np.array(v)).to("cuda", tdt) for k, v in dense_inputs(op, shape).items()}
        if op == "fwd":
            self.fn = lambda: F.scaled_dot_product_attention(x["q"], x["k"], x["v"], is_causal=causal)
        else:
            q, k, v = (x[n].requires_grad_() for n in ("q", "k", "v"))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            self.fn = lambda: torch.autograd.grad(out, (q, k, v), x["dout"], retain_graph=True)

    def sample(self, reps: int):
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            self.fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / reps, []


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


class _WallTimed(protocol.Timed):
    """A CPU function (NumPy's reference) on the host clock."""

    timer = "wall"

    def __init__(self, fn: Callable):
        self.fn = fn
        self.resolution_ns = time.get_clock_info("perf_counter").resolution * 1e9

    def sample(self, reps: int):
        t0 = time.perf_counter()
        for _ in range(reps):
            self.fn()
        return (time.perf_counter() - t0) * 1e3 / reps, []


@dataclass
class _Entry:
    """One entry of a series: what its records say besides the measurement."""

    impl: str
    dtype: str
    adapter: str
    runtime: str
    timed: protocol.Timed
    mode: str = ""
    config: str = ""
    variant: str = ""


def run(
    ops: Sequence[str],
    impls: Optional[Sequence[str]],
    shapes: Optional[Sequence[Tuple[int, ...]]],
    causal: bool,
    proto: protocol.Protocol = protocol.Protocol(),
    log: Callable[[str], None] = lambda s: None,
    modes: Sequence[str] = MODES,
    repeat: int = 1,
    info: Optional[RunInfo] = None,
    variants: Sequence[str] = ("",),
) -> List[Record]:
    """Time every (op, impl, shape) natively, with the anchors, in one process and one run, by
    wgattn.protocol: one series per (op, shape) of every kernel in each of `modes` (a kernel not
    registered as trusted runs checked only) and PyTorch, interleaved; NumPy (CPU) in a series of
    its own after it, so that the GPU does not idle inside a series. `repeat` times each series
    again, back to back (records numbered by `repeat`). Each kernel runs once per `variants`
    (VARIANTS: the problem plain, with ALiBi slopes, sinks or both) in the same series, so that a
    variant is timed interleaved with the plain problem; the anchors run the plain one only."""
    variants = [check_variant(v) for v in dict.fromkeys(variants)]
    if not variants:
        raise ValueError(f"variants must name at least one of {list(VARIANTS)}")
    from . import native  # imports wgpu: CPython with the native extra only

    dense = [op for op in ops if op not in OPS]
    if dense:
        raise ValueError(
            f"op {dense[0]!r} is not timed here; ops: {list(OPS)} (decode is timed as bandwidth: bench/decode_bandwidth.py; "
            "prefill in the page: bench/suite.py --prefill)"
        )
    bad = [m for m in modes if m not in MODES] or ([] if modes else ["(none)"])
    if bad:
        raise ValueError(f"unknown mode {bad[0]!r}; modes: {list(MODES)}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= 5:
        raise ValueError(f"repeat must be an integer in 1..5, got {repeat!r}")
    rt = native.runtime()
    info = info or RunInfo.now(commit=git_commit())
    every = {x for o in ops for x in kernel_impls(o)} | set(ANCHORS)
    unknown = [i for i in impls or () if i not in every]
    if unknown:
        raise ValueError(f"unknown impl {unknown[0]!r}; for {list(ops)}: {sorted(every)}")
    records: List[Record] = []
    for op in ops:
        known = kernel_impls(op) + list(ANCHORS)
        wanted = known if not impls else [i for i in impls if i in known]
        for shape in shapes or DEFAULT_SHAPES[op]:
            where = f"{op} {tuple(shape)}{' causal' if causal else ''}"
            gpu: List[_Entry] = []
            cpu: List[_Entry] = []
            for impl, variant in [(i, v) for i in wanted for v in variants]:
                label = f"{op} {impl} {tuple(shape)}{' causal' if causal else ''}{' ' + variant if variant else ''}"
                if impl in ANCHORS and variant:
                    log(f"skip {label}: the anchors time the plain problem only")
                    continue
                if impl == "torch":
                    device = torch_cuda()
                    if device is None or op == "probs":
                        why = "no PyTorch with CUDA here" if device is None else "PyTorch has no attention-probabilities op"
                        log(f"skip {label}: {why}")
                        continue
                    # f32 matches the f32 kernels; f16 is what a user of PyTorch would run instead
                    gpu += [_Entry("torch", dt, device, "torch", _TorchTimed(op, shape, causal, dt)) for dt in ("f32", "f16")]
                    continue
                if impl == "numpy":
                    numpy_timed = _WallTimed(_numpy_fn(op, shape, causal))
                    cpu.append(_Entry("numpy", "f32", "CPU (NumPy reference, float32)", "numpy", numpy_timed))
                    continue
                kernel = registry.load().kernel(impl)
                try:
                    job = plans(impl, op, shape, causal, target=rt.target, variant=variant)
                except ValueError as e:
                    log(f"skip {label}: {e}")
                    continue
                why = next((p.unavailable for p in job if p.unavailable), "")
                if why:
                    log(f"skip {label}: {why}")
                    continue
                config = config_text(config_of(job))
                kernel_modes = [m for m in modes if m == "checked" or kernel.trusted]
                if not kernel_modes:
                    log(f"skip {label}: not registered as trusted, and only trusted mode was asked for")
                for mode in kernel_modes:
                    timed = rt.timing(job, trusted=mode == "trusted")
                    gpu.append(_Entry(impl, dtype_of(impl), rt.name, "native", timed, mode, config, variant))
            for series in (gpu, cpu):
                if not series:
                    continue
                for rep in range(repeat):
                    log(f"{where}: {len(series)} entries" + (f", repeat {rep + 1} of {repeat}" if repeat > 1 else ""))
                    measured = protocol.measure([x.timed for x in series], proto, log=log)
                    for x, m in zip(series, measured):
                        run_info = RunInfo(x.runtime, info.browser, info.flags, info.time, info.commit)
                        rec = make_record(op, x.impl, shape, causal, x.dtype, x.adapter, m, proto, x.timed.timer, run_info)
                        rec.mode, rec.config, rec.repeat, rec.variant = x.mode, x.config, rep, x.variant
                        records.append(rec)
                        log(_line(rec))
            forget_inputs()
    return records


def _name(r: Record) -> str:
    name = f"{r.impl} [{r.mode}]" if r.mode else (f"{r.impl} {r.dtype}" if r.impl == "torch" else r.impl)
    return f"{name} +{r.variant}" if r.variant else name


def _flag(r: Record) -> str:
    return ("wide" if r.wide else "") + (" cold" if not r.warmed else "")


def _line(r: Record) -> str:
    return (
        f"  {_name(r):34s} {r.runtime:8s} {r.median_ms:10.4f} ms \u00b1{100 * r.spread:5.1f}% {r.tflops:9.4f} TFLOP/s "
        f"({r.rounds}x{r.reps}, {r.timer}) {r.config} {_flag(r)}"
    )


def render_table(records: Sequence[Record]) -> str:
    """A table per (op, shape): each row's median TFLOP/s with its spread (IQR over the median),
    its ratio to the op's first kernel (the baseline) and to PyTorch f32; flagged `wide` when the
    spread is wide and `cold` when the warm-up did not settle."""
    lines = []
    groups: Dict[Tuple, List[Record]] = {}
    for r in records:
        groups.setdefault((r.op, r.shape, r.causal), []).append(r)
    for (op, shape, causal), rows in groups.items():
        lines.append(f"{op} (B,H,S,D)={shape}{' causal' if causal else ''}")
        base = next((r for r in rows if r.impl not in ANCHORS), None)
        torch32 = next((r for r in rows if r.impl == "torch" and r.dtype == "f32"), None)
        lines.append(
            f"  {'impl [mode]':34s} {'runtime':9s}{'dtype':5s} {'median ms':>11s} {'IQR':>6s} {'TFLOP/s':>10s} "
            f"{'x baseline':>10s} {'% torch f32':>11s}  adapter, rounds x reps, tile"
        )
        for r in rows:
            xb = f"{base.median_ms / r.median_ms:10.2f}" if base else f"{'':10s}"
            pt = f"{100 * r.tflops / torch32.tflops:10.1f}%" if torch32 else f"{'':11s}"
            rep = f" #{r.repeat + 1}" if r.repeat else ""
            lines.append(
                f"  {_name(r) + rep:34s} {r.runtime:9s}{r.dtype:5s} {r.median_ms:11.4f} {100 * r.spread:5.1f}% {r.tflops:10.4f} "
                f"{xb} {pt}  {r.adapter} ({r.timer}, {r.rounds}x{r.reps}) {r.config} {_flag(r)}".rstrip()
            )
    return "\n".join(lines)
