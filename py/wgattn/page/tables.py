"""What a PageSession holds between the page's calls: the runs whose plans the browser is
executing (their read-back bytes arrive one buffer at a time), the finished live runs kept for
their pictures, and the conformance grid and benchmark jobs in progress."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Dict, List, Optional, Set, Tuple, Union

import numpy as np

from ..bench import RunInfo
from ..gemm import Tile
from ..interfaces import Case, FilledCheck, Interface
from ..live import Live
from ..plan import Plan
from ..protocol import Protocol
from ..registry import Kernel
from .replies import BenchItem, OutputPair


@dataclass
class LiveRun:
    """A live run (prepare) until `finish` compares its runtimes."""

    kind: ClassVar[str] = "live"
    live: Live
    plan: Plan
    raw: Dict[str, bytes] = field(default_factory=dict)


@dataclass
class GridRun:
    """Item `index` of grid job `job` until `grid_judge` judges it."""

    kind: ClassVar[str] = "grid"
    job: int
    index: int
    kernel: Kernel
    case: Case
    plan: Plan
    raw: Dict[str, bytes] = field(default_factory=dict)


@dataclass
class ProbeRun:
    """The precision probe until `probe_judge` reports it."""

    kind: ClassVar[str] = "probe"
    plan: Plan
    raw: Dict[str, bytes] = field(default_factory=dict)


@dataclass
class BenchRun:
    """One plan of benchmark `bench`, until the page has timed it (`bench_release`)."""

    kind: ClassVar[str] = "bench"
    bench: int
    plan: Plan
    raw: Dict[str, bytes] = field(default_factory=dict)  # never read back: timing only


Run = Union[LiveRun, GridRun, ProbeRun, BenchRun]
RUN_KINDS = ("live", "grid", "probe", "bench")


@dataclass
class Finished:
    """A finished live run: what its pictures (heatmap, error_map) need."""

    live: Live
    outputs: Dict[str, Dict[str, np.ndarray]]  # runtime -> output name -> tensor
    pairs: List[OutputPair]


@dataclass
class GridJob:
    """The conformance grid of one interface: (kernel, case) items, judged one by one."""

    interface: Interface
    items: List[Tuple[Kernel, Case]]
    source: Optional[str]  # pasted WGSL, or None for the registered kernels
    left: Set[int] = field(default_factory=set)  # items not judged yet: none left frees the job

    def __post_init__(self) -> None:
        self.left = set(range(len(self.items)))


@dataclass
class BenchJob:
    """A benchmark's jobs, grouped in series (job indices timed together); the plans of the job
    being handed to the page are kept until its last plan is."""

    items: List[BenchItem]
    protocol: Protocol
    repeat: int  # each series timed this many times back to back
    info: RunInfo  # what every record of this benchmark shares (runtime, browser, time)
    series: List[List[int]]
    cache: Optional[Tuple[int, List[Plan]]] = None  # (job index, its plans)
    configs: Dict[int, Dict[str, float]] = field(default_factory=dict)  # job index -> what ran, once its plans are built
    left: Set[int] = field(default_factory=set)  # jobs neither recorded nor skipped: none left frees it
    # A case (an op on one configuration, wgattn.bench.CONFIG_OPS; the GEMM, wgattn.gemm): the one
    # case its jobs time, its name and configuration (its records'), each job's bytes (bandwidth),
    # a yardstick's own case (prefill) or tile (GEMM), the plans kept from building to their check
    # (its `check` buffer's read-back) and the checks.
    case: Optional[Case] = None
    name: str = ""
    config: Dict[str, object] = field(default_factory=dict)
    nbytes: Dict[int, int] = field(default_factory=dict)
    cases: Dict[int, Tuple[str, Case]] = field(default_factory=dict)  # a yardstick's job: (kernel id, its case)
    tiles: Dict[int, Tile] = field(default_factory=dict)
    filled: Dict[int, Plan] = field(default_factory=dict)
    checks: Dict[int, FilledCheck] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.left = set(range(len(self.items)))
