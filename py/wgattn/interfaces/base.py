"""The base of every interface: one object per interface owns everything about it.

An interface is a binding contract that any kernel (the project's or a user's) can implement: the
Params struct and bindings of its WGSL header (shaders/interfaces/<name>.wgsl), the passes of its
manifest entry, and this object, which owns what Python knows of it:

    check and layout   `layout(case)`: the case's arguments checked by wgattn.reference's own
                       checkers (one rule and one message per fault, whoever calls), then laid
                       out as buffers and Params values; `plan()` is the same for every
                       interface and takes the target adapter explicitly
    what it holds      `f32_bounds(case)` and `magnitudes(case)`: what the kernels' float32
                       arithmetic, and a float16 kernel's "half" values, must hold on the inputs
                       as sent (wgattn.ranges); `check_range` refuses the rest, saying the range
    the reference      `reference(case, dtype)`, and `case_from_reference(<the reference
                       function's arguments>)`, how the native API, the live checks and the
                       benchmark build cases
    its grid           `GRID`, rows of keywords of `grid_case`: `conformance_cases(seed)`
    live checks        `Config`, its seeded configuration (a dataclass whose fields carry their
                       bounds: wgattn.interfaces.config), and `live_case(config, tensors)`
    the benchmark      `bench_op` and `bench_cases(dense, causal)` for a dense op (fwd, bwd,
                       probs); for an op timed as bandwidth (decode: wgattn.bandwidth) the case
                       of a configuration, `bench_case(config, name)`, with `bench_shape`,
                       `bench_bytes` and `check_filled` (its output on GPU-filled inputs judged);
                       for an op timed as FLOP/s on a configuration (prefill) `bench_flops` and
                       `bench_yardstick` (what it is timed beside) instead of `bench_bytes`
    its pictures       `probabilities(case, head)` and `head_view(...)` (wgattn.pictures draws),
                       what their axes run over (`probability_axes`, `view_axes`) and which heads
                       a picture of the probabilities shows (`picture_heads`)
    localisation       `geometry(case, output, shape)` and `output_axes(case, output, ndim)`
                       (wgattn.localise reads them)

Nothing outside wgattn.interfaces knows an interface by name: callers ask
`wgattn.interfaces.get(name)` (or `of(kernel)`) for the object and call these; the native API
(`wgattn.native.<reference>`) is made from the registry.

Adding an interface touches five files of code: this package's module, its reference function,
its WGSL header, a kernel and the manifest (docs/kernels.md, "Adding an interface", says what each
holds). tests/test_new_interface.py adds one (`scale_rows`: out = scale * x) to a copy of the tree
and is the worked example.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Dict, List, Mapping, Optional, Sequence, Tuple, Type, TypedDict, Union

import numpy as np

from .. import ranges, registry
from ..bandwidth import is_device_filled
from ..errors import DoesNotFit, InterfaceMismatch
from ..plan import Buffer, Output, Plan
from ..registry import Abi, Kernel
from ..target import Target
from .config import LiveConfig

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = [
    "Case",
    "Option",
    "Layout",
    "Interface",
    "Geometry",
    "FilledCheck",
    "MAX_ELEMENTS",
    "MAX_SCORES",
    "data_buffer",
    "out_buffer",
]

# Keep one request within what a software adapter finishes in seconds and any adapter can bind,
# and the float64 reference's score matrices (B*H*Sq*Sk of them) within memory, Pyodide's included.
MAX_ELEMENTS = 1 << 22
MAX_SCORES = 1 << 24

# What a case's option may hold: causal (bool), pos and window counts (int), scale (float, None:
# 1/sqrt(D)), softcap (float), mask_kind / layout / causal_align (str), a varlen window (left,
# right). Each interface checks its own options' values (a case may come from a user).
Option = Union[bool, int, float, str, None, Tuple[int, ...]]


@dataclass
class Case:
    """A conformance case: named input arrays (float32, or int32 for cu_seqlens) and the
    interface's options (causal, window, mask kind, ...)."""

    name: str
    inputs: Dict[str, np.ndarray]
    options: Dict[str, Option] = field(default_factory=dict)


@dataclass
class Layout:
    """A case laid out for a kernel: the Params values, the buffers by binding name (all but the
    Params one, which `Interface.plan` packs) and where the outputs are read back."""

    values: Dict[str, float]
    buffers: Dict[str, Buffer]
    outputs: List[Output]
    # Override constants the interface chose for the target (`Interface.layout_on`), where its
    # Params depend on them (decode's split count follows its tile); held to the kernel's caps,
    # constraints and the target's limits like a registered tile candidate. Empty: the kernel's own.
    knobs: Dict[str, int] = field(default_factory=dict)
    # What the interface chose for the target, as a benchmark record names what ran (decode: its
    # tile, row blocks and split count); `Interface.plan` keeps it in the plan's meta["config"].
    # Empty: a record names the override constants.
    config: Dict[str, int] = field(default_factory=dict)


class FilledCheck(TypedDict):
    """An output of a case on inputs the GPU filled, against the float64 reference on the parts
    named (`Interface.check_filled`): a benchmark times a kernel only once it is `ok`."""

    ok: bool
    max_abs_err: float
    allowed: float  # the tolerance rule's allowance (wgattn.tolerance)
    pairs: List[List[int]]  # the parts checked (decode: (sequence, kv head))


# Where one element of a packed output sits (wgattn.localise): per token of its first axis, the
# sequence, its row (or key) in it, the first and last visible partner and how many terms it sums.
Geometry = Dict[str, Any]


def data_buffer(name: str, array: np.ndarray, read: bool = False) -> Buffer:
    """A storage buffer holding `array`'s bytes; of its size and no bytes (it starts zeroed) for
    an input the GPU fills (wgattn.bandwidth.device_filled: a benchmark's GB-sized tensors)."""
    if is_device_filled(array):
        return Buffer(name, array.nbytes, "storage", read=read)
    return Buffer(name, array.nbytes, "storage", array.tobytes(), read=read)


def out_buffer(name: str, size: int) -> Buffer:
    """A zeroed storage buffer of `size` bytes that is read back."""
    return Buffer(name, size, "storage", read=True)


class Interface(abc.ABC):
    """One interface: see the module docstring for what it owns and how to add one."""

    name: ClassVar[str]
    OUTPUTS: ClassVar[Tuple[str, ...]]  # in the order the harness reports them
    Config: ClassVar[Type[LiveConfig]]  # its live configuration
    GRID: ClassVar[Sequence[Mapping[str, Any]]]  # conformance rows: keywords of grid_case
    bench_op: ClassVar[str] = ""  # the benchmark's op it serves ("fwd", "bwd", "probs"), "" none

    def __repr__(self) -> str:
        return f"<interface {self.name}>"

    @property
    def abi(self) -> Abi:
        """Its bindings, Params and passes (wgattn.registry)."""
        return registry.load().abi(self.name)

    def kernels(self) -> List[Kernel]:
        """Its registered kernels, in the manifest's order."""
        return registry.load().kernels_of(self.name)

    # --- Checking, layout and the plan ----------------------------------------------------

    @abc.abstractmethod
    def layout(self, case: Case) -> Layout:
        """The case's inputs and options checked (wgattn.reference's checkers first, then what
        this interface cannot carry; ValueError naming the argument) and laid out."""

    def layout_on(self, kernel: Kernel, case: Case, target: Target) -> Layout:
        """The case laid out for `kernel` on `target`: `layout(case)`, unless the interface
        chooses the tile (Layout.knobs) and Params that follow it per adapter, or lays its
        buffers out per kernel; DoesNotFit when no tile fits."""
        return self.layout(case)

    def plan(
        self,
        kernel: Kernel,
        case: Case,
        target: Target,
        source: Optional[str] = None,
        entry_points: Optional[Mapping[str, str]] = None,
        overrides: Optional[Mapping[str, int]] = None,
    ) -> Plan:
        """The dispatch plan running `kernel` (or WGSL `source` on this interface) on `case` on
        `target`. Bad input is a ValueError; a kernel the target cannot run (a feature, no tile
        that fits, a size past the kernel's limit) gives a plan with nothing in it but
        `unavailable`, the reason; a plan the target cannot hold says why there too."""
        if kernel.interface != self.name:
            raise InterfaceMismatch(f"{kernel.id} implements {kernel.interface}, not {self.name}")
        self.check_range(kernel, case)  # before layout: it converts the inputs to the kernel's precision
        try:
            lay = self.layout_on(kernel, case, target)
        except DoesNotFit as exc:
            return Plan.unrunnable(str(exc))
        if source is None:
            why = target.lacks(kernel)
            if why:
                return Plan.unrunnable(why)
        abi = kernel.abi
        uniform = abi.uniform.name
        buffers = dict(lay.buffers)
        if uniform in buffers:
            raise InterfaceMismatch(f"{self.name}: layout() made the Params buffer {uniform!r}; plan() packs it")
        buffers[uniform] = Buffer(uniform, abi.params_size, "uniform", abi.pack_params(lay.values))
        bound = abi.bind(buffers)
        ordered = [buffers[b.name] for b in abi.bindings]  # the bindings' order: one plan per case
        try:
            dispatches = kernel.dispatches(lay.values, bound, target, source, entry_points, overrides, lay.knobs or None)
        except DoesNotFit as exc:
            return Plan.unrunnable(str(exc))
        plan = Plan(buffers=ordered, dispatches=dispatches, outputs=lay.outputs)
        if lay.config:
            plan.meta["config"] = dict(lay.config)
        plan.unavailable = target.why_not(plan)
        return plan

    # --- What the arithmetic holds (wgattn.ranges) ------------------------------------------

    def magnitudes(self, case: Case) -> Dict[str, float]:
        """name -> the largest magnitude of each float input of `case` (wgattn.ranges.amax), and
        |scale| as "scale" where the case has one: what a float16 kernel's "half" expressions
        name. An interface adds the quantities its kernels hold beyond the inputs."""
        out = {n: ranges.amax(a) for n, a in case.inputs.items() if a is not None and np.asarray(a).dtype.kind == "f"}
        scale = case.options.get("scale")
        if isinstance(scale, (int, float)) and not isinstance(scale, bool):
            out["scale"] = abs(float(scale))
        return out

    def f32_bounds(self, case: Case) -> List["ranges.Bound"]:
        """What every kernel of the interface computes in float32 on `case`, bounded
        (wgattn.ranges: scores, sums of values, gradients). This default, for an interface that
        says nothing more: each float input within ranges.SAFE."""
        return [
            ranges.Bound(f"max|{n}|", f"max|{n}|", m, ranges.SAFE, "float32 arithmetic on it could overflow", "")
            for n, m in self.magnitudes(case).items()
            if n != "scale"
        ]

    def check_range(self, kernel: Kernel, case: Case) -> None:
        """ValueError when `kernel` cannot compute `case` as the float64 reference does on its
        inputs as sent: a float32 bound of the interface's arithmetic (`f32_bounds`), or a value
        the kernel holds in float16 (its manifest "half"), past its limit; the message says the
        range the kernel accepts. `plan` calls it, and wgattn.conformance.judged_case before it
        rounds a float16 kernel's inputs."""
        ranges.check(kernel.id, self.f32_bounds(case))
        if kernel.half:
            mags = self.magnitudes(case)
            wider = [k.id for k in self.kernels() if k.precision == "f32"]
            other = f"the float32 kernels of {self.name} hold more: {', '.join(wider)}" if wider else None
            ranges.check(kernel.id, [ranges.half(expr, mags) for expr in kernel.half], other)

    # --- The reference --------------------------------------------------------------------

    @abc.abstractmethod
    def reference(self, case: Case, dtype: "DTypeLike" = np.float64) -> Dict[str, np.ndarray]:
        """wgattn.reference on the case, every output; dtype float32 is the naive float32 run
        the tolerance rule measures against (float16 where the interface has f16 kernels)."""

    @abc.abstractmethod
    def case_from_reference(self, *args: Any, **kwargs: Any) -> Case:
        """The case computing the reference function's call with these arguments (its own
        signature, plus name=); ValueError for what this interface cannot carry."""

    # --- The conformance grid -------------------------------------------------------------

    @abc.abstractmethod
    def grid_case(self, *args: Any, **row: Any) -> Case:
        """The case of one GRID row, `grid_case(rng, **row)`, drawing from `rng` (grid_rng's,
        shared along the grid in row order)."""

    def grid_rng(self, seed: int) -> Any:
        """The random state a grid draws from, in row order."""
        return np.random.RandomState(seed)

    def conformance_cases(self, seed: int = 0) -> List[Case]:
        """The grid `wgattn check` runs: awkward sizes, empty sequences, rows with no visible key,
        long rows, every knob the interface carries (GRID, one row per case)."""
        rng = self.grid_rng(seed)
        return [self.grid_case(rng, **row) for row in self.GRID]

    # --- Live checks ----------------------------------------------------------------------

    @abc.abstractmethod
    def live_case(self, config: Any, tensors: Mapping[str, np.ndarray], name: str) -> Case:
        """The case of a live configuration (an instance of `Config`) on its drawn tensors."""

    # --- The benchmark --------------------------------------------------------------------

    def bench_cases(self, dense: Mapping[str, np.ndarray], causal: bool) -> List[Case]:
        """The cases one timed run of `bench_op` dispatches (one plan each), on the benchmark's
        dense tensors (wgattn.bench.dense_inputs: q, k, v [B, H, S, D] and dout for fwd and bwd;
        q [B, H, D] and k_hist [S, H, D] for probs); ValueError where it serves no op."""
        raise ValueError(f"{self.name} serves no benchmark op")

    def bench_variant(self, case: Case, variant: str) -> Case:
        """A benchmark case with a variant of the problem (wgattn.bench.VARIANTS: "alibi",
        "sinks", "alibi+sinks"), the per-head inputs it adds; ValueError where the interface has
        none."""
        raise ValueError(f"{self.name} has no benchmark variant {variant!r}")

    def bench_plans(self, shape: Sequence[int]) -> int:
        """How many plans one timed run takes (without building them)."""
        return 1

    def bench_case(self, config: Any, name: str) -> Case:
        """The case an op timed as bandwidth dispatches for a configuration (an instance of
        `Config`), its large inputs left for the GPU to fill (wgattn.bandwidth.device_filled);
        ValueError where the interface serves no such op."""
        raise ValueError(f"{self.name} serves no benchmark op timed as bandwidth")

    def bench_shape(self, config: Any) -> List[int]:
        """(B, H, S, D) of such a configuration, as its benchmark's jobs are labelled."""
        raise ValueError(f"{self.name} serves no benchmark op timed as bandwidth")

    def bench_bytes(self, kernel: Kernel, case: Case) -> int:
        """The bytes one run of `kernel` on `bench_case`'s case must read at least: its
        bandwidth's measure."""
        raise ValueError(f"{self.name} serves no benchmark op timed as bandwidth")

    def bench_flops(self, case: Case) -> float:
        """The FLOPs one run on `bench_case`'s case must compute at least, for an op timed as
        FLOP/s on one configuration (wgattn.bench.CONFIG_OPS, not BANDWIDTH_OPS)."""
        raise ValueError(f"{self.name} serves no benchmark op timed as FLOP/s on one configuration")

    def bench_yardstick(self, case: Case, target: Target) -> Tuple[Optional[Kernel], Optional[Case], str]:
        """What such an op is timed beside, in the same series: (kernel, its case of the same
        work, "") for another interface's kernel that `target` runs, or (None, None, why not)."""
        raise ValueError(f"{self.name} serves no benchmark op timed as FLOP/s on one configuration")

    def check_filled(self, case: Case, outputs: Mapping[str, np.ndarray], kernel: Optional[Kernel] = None) -> FilledCheck:
        """`outputs` of a run of `kernel` on `bench_case`'s case, once the GPU filled its inputs
        (wgattn.bandwidth.fill_values gives their values), against the float64 reference on a
        part small enough to compute, by the rule of the kernel's precision."""
        raise ValueError(f"{self.name} serves no benchmark op timed as bandwidth")

    # --- Pictures and localisation --------------------------------------------------------

    @abc.abstractmethod
    def probabilities(self, case: Case, head: int, max_cells: int) -> Tuple[np.ndarray, np.ndarray, str]:
        """(probabilities, visible mask, how rows and columns are laid out) of query head
        `head`, float64, at most about `max_cells` of them, from the reference's own masks."""

    def head_view(self, case: Case, output: np.ndarray, head: int, heads: int) -> np.ndarray:
        """One query head's slice of an output as a 2-D array (rows x last axis); outputs with k/v
        heads (dk, dv) show the k/v head that query head reads. This default: [rows, heads, ...], or
        [heads]."""
        a = np.asarray(output, dtype=np.float64)
        if a.ndim == 1:  # one value per query head (the sinks' gradient)
            return a[head : head + 1, None]
        h = head if a.shape[1] == heads else head // (heads // a.shape[1])
        x = a[:, h]
        return x[:, None] if x.ndim == 1 else x

    def geometry(self, case: Case, output: str, shape: Tuple[int, ...]) -> Optional[Geometry]:
        """Where each element of a packed output sits (wgattn.localise), or None."""
        return None

    def output_axes(self, case: Case, output: str, ndim: int) -> List[str]:
        """What each of the `ndim` axes of `output` runs over, in words: a failing element and the
        failure map are named by them (wgattn.localise). This default: a packed output
        [query token, head, dim]."""
        return (["query token", "head", "dim"] + [f"axis {i}" for i in range(3, ndim)])[:ndim]

    def view_axes(self, case: Case, output: str, ndim: int) -> Tuple[str, str]:
        """What runs down and across `head_view`'s 2-D slice of `output` ("" across a one-column
        slice). This default follows head_view's: the first axis down, the third across."""
        axes = self.output_axes(case, output, ndim)
        return axes[0], (axes[2] if ndim > 2 else "")

    def probability_axes(self, case: Case) -> Tuple[str, str]:
        """What runs down and across `probabilities`' picture."""
        return "query", "key"

    def picture_heads(self, case: Case, head: int, heads: int) -> List[int]:
        """The query heads a picture of the probabilities shows when `head` is chosen: this
        default, that head alone (an interface with few rows a head shows them all, grouped)."""
        return [head]
