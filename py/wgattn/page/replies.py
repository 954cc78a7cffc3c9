"""What the page's session answers, as typed shapes: the one declaration of each, from which
static/wire.d.ts (the page's TypeScript) is generated (wgattn.typescript). The shapes of the plan
(wgattn.plan), the target (wgattn.target), the catalogue (wgattn.live), the judged rows
(wgattn.conformance, wgattn.page.grid), the probe (wgattn.precision), the benchmark's record
(wgattn.bench.Record) and its protocol (wgattn.protocol.Protocol) are declared where they are
made."""

from __future__ import annotations

from typing import Any, Dict, List, TypedDict, Union

from ..plan import PlanJson
from ..protocol import Protocol
from ..tolerance import Pair
from .verdict import Verdict

__all__ = [
    "Prepared",
    "LivePrepared",
    "Timings",
    "RuntimeReport",
    "OutputPair",
    "LiveResult",
    "GridItem",
    "GridSkip",
    "GridStart",
    "BenchSkip",
    "BenchItem",
    "BenchSeries",
    "BenchStart",
    "BenchWarm",
    "BenchWarmReps",
    "BenchCalibration",
    "BenchPlan",
    "BenchPlanned",
    "BenchSkipped",
]


class Prepared(TypedDict):
    """A plan the page's Python prepared: `run` numbers it (its bytes: PageSession.plan_bytes)."""

    run: int
    plan: PlanJson


class LivePrepared(Prepared):
    """PageSession.prepare: a live run's plan and what the page shows of it."""

    digest: str  # sha256 of the seeded inputs (wgattn.cases.digest)
    config: Dict[str, Any]  # the configuration with every field filled in
    kernel: str
    interface: str
    requires: List[str]
    precision: str
    heads: int


class Timings(TypedDict, total=False):
    """Milliseconds: wall (submit to results), gpu (timestamps), reference (the float64 run)."""

    wall_ms: float
    gpu_ms: float
    reference_ms: float


class _RuntimeOk(TypedDict):
    ok: bool


class RuntimeReport(_RuntimeOk, total=False):
    """One runtime of a live run: it ran (ok, timings), was skipped (why), or failed (error)."""

    skipped: str
    error: str
    timings: Timings
    adapter: Dict[str, Any]


class OutputPair(Pair):
    """One runtime pair compared on one output."""

    output: str


# PageSession.finish: every pair of runtimes compared on every output ("pass" is a keyword,
# hence the functional form): naive_err is the naive run's error in the kernel's precision per
# output (naive_f32_err: its name before f16 kernels); runtimes: browser, pyodide, native; pass:
# every pair passed and no runtime failed (a skipped one is reported, not failed); verdict: what
# the page shows of it (wgattn.page.verdict).
LiveResult = TypedDict(
    "LiveResult",
    {
        "run": int,
        "kernel": str,
        "interface": str,
        "precision": str,
        "config": Dict[str, Any],
        "digest": str,
        "outputs": List[str],
        "heads": int,
        "naive_err": Dict[str, float],
        "naive_f32_err": Dict[str, float],
        "runtimes": Dict[str, RuntimeReport],
        "pairs": List[OutputPair],
        "pass": bool,
        "verdict": Verdict,
    },
)


class GridItem(TypedDict):
    kernel: str
    case: str


class _GridSkip(TypedDict):
    kernel: str
    reason: str


class GridSkip(_GridSkip, total=False):
    """A kernel this device cannot run at all, or (with `case`) one case it cannot take."""

    case: str


class GridStart(TypedDict):
    """PageSession.grid_start: the (kernel, case) items to run, and the kernels skipped."""

    job: int
    items: List[GridItem]
    skipped: List[GridSkip]


class BenchSkip(TypedDict):
    impl: str
    reason: str


class BenchItem(TypedDict):
    """One job of a benchmark: one impl at one shape."""

    index: int
    op: str
    impl: str
    config: str  # what a case's job runs besides its impl (a GEMM tile: wgattn.gemm.Tile.tag), "" none
    shape: List[int]  # B, H, S, D (a case's: its interface's bench_shape; the GEMM's: M, N, K)
    causal: bool
    flops: float
    dtype: str
    plans: int  # plans per timed run (Interface.bench_plans)
    # The buffer whose bytes bench_check judges after one run on the inputs bench_fills' plans
    # fill, before the job is timed (a bandwidth op's kernel: Interface.check_filled); "": none.
    check: str
    variant: str  # the problem's variant (wgattn.bench.VARIANTS): "" plain, "alibi+sinks", ...


class BenchSeries(TypedDict):
    """The jobs timed together, interleaved (wgattn.protocol): every impl at one shape."""

    shape: List[int]  # B, H, S, D
    jobs: List[int]  # indices into BenchStart.jobs


class Schedule(TypedDict):
    """What a benchmark's start tells the page: its jobs in their series and the protocol they
    follow (BenchStart adds what the request asked for)."""

    bench: int
    protocol: Protocol
    repeat: int  # each series timed this many times back to back
    jobs: List[BenchItem]
    series: List[BenchSeries]
    stamps_kept: int  # timestamps per sample to send with a record (the timer's resolution)
    skipped: List[BenchSkip]


class BenchStart(Schedule):
    """PageSession.bench_start: the schedule, the baseline and the limits the request met."""

    op: str
    baseline: str
    impls: List[str]
    seq_lens: List[int]
    limits: Dict[str, Any]


class BenchWarm(TypedDict):
    """PageSession.bench_warm: whether to stop warming, and whether the warm-up settled."""

    done: bool
    warmed: bool


class BenchWarmReps(TypedDict):
    """PageSession.bench_warm_reps: per entry of a series, dispatches per warm-up sample."""

    reps: List[int]


class BenchCalibration(TypedDict):
    """PageSession.bench_calibrate: per entry of a series, dispatches per sample and its timer's
    resolution (ns)."""

    reps: List[int]
    resolution_ns: List[float]


class BenchPlanned(Prepared):
    """PageSession.bench_plan: plan number `plan_index` of a job's `count`."""

    count: int


class BenchSkipped(TypedDict):
    """PageSession.bench_plan: why the job is skipped (its kernel cannot take its sizes)."""

    skipped: str


BenchPlan = Union[BenchPlanned, BenchSkipped]
