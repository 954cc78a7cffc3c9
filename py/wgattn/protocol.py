"""The measurement protocol every benchmark figure follows: natively (`wgattn bench`: wgpu-py,
PyTorch, NumPy) and in the page (the browser's WebGPU). One set of rules, here, in pure Python:
CPython drives it itself (`measure`); the page's JavaScript, which must await the GPU, follows the
same rules by calling these functions through Pyodide (wgattn.page.bench_jobs).

Why: a GPU idles at low clocks and a short benchmark does not wake it. The same H100 row read 3.6
and then 15.9 TFLOP/s minutes apart. So figures are taken per *series*, the implementations timed
at one (op, shape, causal), like this:

0. Priming: every entry runs once, untimed (a driver may compile a pipeline at its first dispatch:
   lavapipe took 100 s for one, which no warm-up by time should count as GPU work).
1. Warm-up, by time. Rounds of every entry once, until at least `warmup_s` seconds have passed
   AND the round times of the last `settle_s` seconds of GPU work (at least `settle_rounds`
   rounds) agree within `settle_tol` of each other, so that a clock still ramping up, even
   slowly, keeps it warming; or until `warmup_cap_s` has passed, and then the records say the
   warm-up did not settle (`warmed`).
2. Calibration. Each entry gets `reps` dispatches per sample, enough for a sample to last
   `min_sample_ms` and `resolutions_per_sample` ticks of its timer (a quantized timer, such as a
   browser's coarsened timestamps, then costs under 1/`resolutions_per_sample` of a sample), but
   never more than fit in `max_sample_ms` (one, where one run is longer): whatever is believed of
   the timer, a round lasts at most about `max_sample_ms` or one run per entry. The tick is what
   is known of the timer beforehand (a host clock's, CUDA events', wgpu-native's timestamp
   period), else the greatest common divisor of its timestamps' offsets, inferred from
   `MIN_OFFSETS` offsets at least: the tick divides every offset, so a few of them only bound it
   from above (one warm-up round of a slow kernel gives two readings, and their one offset is the
   run itself).
3. Rounds, interleaved. Round r times every entry once, in `schedule`'s order (rotated by r, so no
   entry always goes first): a drift of the clock hits every entry alike.
4. Statistics (`summarize`): the median of an entry's per-round samples, with the minimum, the
   quartiles and the maximum. `spread` is the interquartile range over the median; a figure whose
   spread exceeds `wide` is flagged, and a comparison of two runs reads it as the row's noise.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, fields
from typing import Callable, Dict, List, Optional, Sequence, Tuple

__all__ = [
    "Protocol",
    "Spread",
    "Measured",
    "schedule",
    "warm_verdict",
    "reps_for",
    "timer_resolution_ns",
    "resolution_of",
    "calibrate",
    "summarize",
    "measure",
]

MOST_QUERIES = 4096  # WebGPU's (and wgpu's) largest timestamp query set: 2 per pass per rep
STAMPS_KEPT = 64  # timestamps per sample kept to find the timer's resolution
# Readings besides the first (nonzero offsets from it) a timer's tick is inferred from, at least.
# k offsets that are random multiples of the tick share a further factor p with probability
# p**-k: from 8, the inferred tick is the true one but for 0.4% of the time (then mostly twice
# it). Equal offsets count: on a quantized clock a fast kernel's readings repeat a few values.
MIN_OFFSETS = 8


@dataclass(frozen=True)
class Protocol:
    """The protocol's knobs (defaults: what `wgattn bench` and the page use)."""

    rounds: int = 20  # samples per entry, one per round
    warmup_s: float = 2.0  # warm for at least this long ...
    warmup_cap_s: float = 6.0  # ... and at most this long, settled or not
    settle_s: float = 0.5  # the warm-up rounds of the last this many seconds of work ...
    settle_rounds: int = 3  # ... and at least this many rounds ...
    settle_tol: float = 0.03  # ... agree within this (max/min - 1)
    min_sample_ms: float = 2.0  # a sample lasts at least this long ...
    resolutions_per_sample: int = 200  # ... and this many timer ticks ...
    max_sample_ms: float = 100.0  # ... but at most this long (or one run, where a run is longer)
    wide: float = 0.05  # a spread (IQR / median) above this is flagged
    max_reps: int = 512  # dispatches per sample, at most

    LIMITS = {
        "rounds": (5, 1000),
        "warmup_s": (0.0, 60.0),
        "warmup_cap_s": (0.0, 300.0),
        "settle_s": (0.0, 10.0),
        "settle_rounds": (2, 20),
        "settle_tol": (0.001, 1.0),
        "min_sample_ms": (0.0, 10000.0),
        "resolutions_per_sample": (1, 100000),
        "max_sample_ms": (1.0, 10000.0),
        "wide": (0.0, 10.0),
        "max_reps": (1, 2048),
    }

    def __post_init__(self) -> None:
        for f in fields(self):
            lo, hi = self.LIMITS[f.name]
            value = getattr(self, f.name)
            kind = int if isinstance(lo, int) else float
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
                raise ValueError(f"{f.name} must be {'an integer' if kind is int else 'a number'} in {lo}..{hi}, got {value!r}")
            if kind is int and not float(value).is_integer():
                raise ValueError(f"{f.name} must be an integer in {lo}..{hi}, got {value!r}")
        if self.warmup_cap_s < self.warmup_s:
            raise ValueError(f"warmup_cap_s ({self.warmup_cap_s}) must be at least warmup_s ({self.warmup_s})")
        if self.max_sample_ms < self.min_sample_ms:
            raise ValueError(f"max_sample_ms ({self.max_sample_ms}) must be at least min_sample_ms ({self.min_sample_ms})")

    @classmethod
    def of(cls, rounds: int, warmup_s: float) -> "Protocol":
        """The protocol with `rounds` and a warm-up of at least `warmup_s`, capped at three times
        that (what `wgattn bench`, the page and the suite ask for)."""
        return cls(rounds=rounds, warmup_s=warmup_s, warmup_cap_s=3 * warmup_s)

    def to_json(self) -> Dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Dict[str, object]) -> "Protocol":
        unknown = sorted(set(d) - set(cls.LIMITS))
        if unknown:
            raise ValueError(f"unknown protocol field(s) {unknown}; fields: {sorted(cls.LIMITS)}")
        return cls(**d)  # type: ignore[arg-type]  # checked by __post_init__


@dataclass
class Spread:
    """An entry's per-round samples, summarized (milliseconds)."""

    median_ms: float
    min_ms: float
    q1_ms: float
    q3_ms: float
    max_ms: float
    spread: float  # (q3 - q1) / median
    wide: bool


@dataclass
class Measured:
    """What the protocol measured for one entry."""

    samples: List[float]  # per-dispatch milliseconds, one per round
    reps: int  # dispatches per sample
    warmup_s: float  # seconds of warm-up before its rounds (the series')
    warmed: bool  # the warm-up settled (False: it hit warmup_cap_s)
    resolution_ns: float  # its timer's resolution, as seen (0: unknown)

    def record_fields(self, protocol: "Protocol") -> Dict[str, object]:
        """What a benchmark record says of this measurement: its summary (Spread's fields), the
        rounds, reps, warm-up and whether it settled."""
        return {
            **asdict(summarize(protocol, self.samples)),
            "rounds": len(self.samples),
            "reps": int(self.reps),
            "warmup_s": round(float(self.warmup_s), 3),
            "warmed": bool(self.warmed),
        }


def schedule(n_entries: int, rounds: int) -> List[List[int]]:
    """The order of every round: round r times entries r, r+1, ... (mod n), each once."""
    return [[(r + i) % n_entries for i in range(n_entries)] for r in range(rounds)]


def warm_verdict(protocol: Protocol, elapsed_s: float, round_ms: Sequence[float]) -> Optional[bool]:
    """After a warm-up round: None to go on warming, True when warm (long enough, and the rounds
    of the last `settle_s` seconds of work, `settle_rounds` at least, agree), False when
    `warmup_cap_s` passed without that. `round_ms` are the rounds' times so far, oldest first."""
    last: List[float] = []
    for ms in reversed(round_ms):
        if len(last) >= protocol.settle_rounds and sum(last) >= protocol.settle_s * 1e3:
            break
        last.append(float(ms))
    settled = (
        elapsed_s >= protocol.warmup_s
        and len(last) >= protocol.settle_rounds
        and sum(last) >= protocol.settle_s * 1e3
        and min(last) > 0
        and max(last) / min(last) - 1 <= protocol.settle_tol
    )
    if settled:
        return True
    return False if elapsed_s >= protocol.warmup_cap_s else None


def reps_for(protocol: Protocol, per_run_ms: float, resolution_ns: float, passes: int = 1) -> int:
    """Dispatches per sample for an entry whose one run takes `per_run_ms` (from its warm-up),
    timed by a clock of `resolution_ns` (0: unknown), with `passes` timestamped passes per run:
    enough for `min_sample_ms` and `resolutions_per_sample` ticks, as many as fit in
    `max_sample_ms` at most, and 1 at least."""
    want_ms = max(protocol.min_sample_ms, protocol.resolutions_per_sample * resolution_ns * 1e-6)
    if per_run_ms > 0:
        reps = min(math.ceil(want_ms / per_run_ms), math.floor(protocol.max_sample_ms / per_run_ms))
    else:  # a run its timer could not see: as many as may be
        reps = protocol.max_reps
    most = max(1, min(protocol.max_reps, MOST_QUERIES // (2 * max(1, passes))))
    return int(min(max(reps, 1), most))


def timer_resolution_ns(stamps: Sequence[int]) -> int:
    """The tick of a clock as its readings show it: the greatest common divisor of their offsets
    from the first (1 for a nanosecond clock; 65536 for Dawn's quantized timestamps). 0 (unknown)
    when fewer than `MIN_OFFSETS` readings differ from the first: the tick divides each offset,
    so a few only bound it from above."""
    first = int(stamps[0]) if len(stamps) else 0
    offsets = [abs(int(s) - first) for s in stamps if int(s) != first]
    if len(offsets) < MIN_OFFSETS:
        return 0
    g = 0
    for d in offsets:
        g = math.gcd(g, d)
    return g


def _quantile(sorted_xs: Sequence[float], q: float) -> float:
    """NumPy's default ("linear") quantile of sorted data, in plain Python (the page's too)."""
    pos = (len(sorted_xs) - 1) * q
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def summarize(protocol: Protocol, samples: Sequence[float]) -> Spread:
    """The median of the samples with their spread; ValueError for no, non-finite or
    non-positive samples (a clock that could not see the work)."""
    xs = sorted(float(x) for x in samples)
    if not xs or not all(math.isfinite(x) for x in xs):
        raise ValueError(f"no finite timings ({list(samples)[:3]}...)")
    med = _quantile(xs, 0.5)
    if med <= 0:
        raise ValueError("the median time is not positive (below the timer's resolution)")
    q1, q3 = _quantile(xs, 0.25), _quantile(xs, 0.75)
    spread = (q3 - q1) / med
    return Spread(med, xs[0], q1, q3, xs[-1], spread, spread > protocol.wide)


class Timed:
    """What `measure` times: one entry of a series (a kernel in one mode, an anchor)."""

    timer: str = "wall"  # "gpu" (timestamp queries), "cuda" (CUDA events) or "wall"
    resolution_ns: float = 0.0  # the timer's tick where it is known beforehand (else from stamps)
    passes: int = 1  # timestamped passes per run

    def sample(self, reps: int) -> Tuple[float, Sequence[int]]:
        """Run `reps` times in one go: (milliseconds per run, raw timestamps in ns or [])."""
        raise NotImplementedError


def resolution_of(known_ns: float, stamps: Sequence[int]) -> float:
    """A timer's resolution: what is known of it beforehand (a host clock's, CUDA events'), else
    what its timestamps show (`timer_resolution_ns`)."""
    return float(known_ns) if known_ns else float(timer_resolution_ns(stamps))


def calibrate(
    protocol: Protocol,
    per_run_ms: Sequence[Sequence[float]],
    stamps: Sequence[Sequence[int]],
    passes: Sequence[int],
    known_ns: Sequence[float],
) -> Tuple[List[int], List[float]]:
    """After the warm-up: each entry's dispatches per sample (`reps_for` on the median of its
    last `settle_rounds` warm-up runs) and its timer's resolution."""
    reps, res = [], []
    for runs, st, n, known in zip(per_run_ms, stamps, passes, known_ns):
        recent = sorted(runs[-protocol.settle_rounds :])
        r = resolution_of(known, st)
        reps.append(reps_for(protocol, recent[len(recent) // 2] if recent else 0.0, r, n))
        res.append(r)
    return reps, res


def measure(
    entries: Sequence[Timed],
    protocol: Protocol,
    clock: Callable[[], float] = time.perf_counter,
    log: Callable[[str], None] = lambda s: None,
) -> List[Measured]:
    """The protocol on one series of entries (CPython: native, PyTorch, NumPy). The page does the
    same in JavaScript, asking these functions at each step (static/bench.js)."""
    order = schedule(len(entries), protocol.rounds)
    stamps: List[List[int]] = [[] for _ in entries]
    per_run: List[List[float]] = [[] for _ in entries]
    rounds: List[float] = []
    for e in entries:
        e.sample(1)  # priming: compiled and touched before the warm-up's clock starts
    t0 = clock()
    while True:
        total = 0.0
        for i in order[len(rounds) % len(order)]:
            ms, st = entries[i].sample(1)
            per_run[i].append(ms)
            stamps[i].extend(list(st)[:STAMPS_KEPT])
            total += ms
        rounds.append(total)
        verdict = warm_verdict(protocol, clock() - t0, rounds)
        if verdict is not None:
            break
    warm_s = clock() - t0
    log(f"  warm-up {warm_s:.1f} s, {len(rounds)} rounds, {'settled' if verdict else 'NOT settled'}")
    known = [e.resolution_ns for e in entries]
    reps, _ = calibrate(protocol, per_run, stamps, [e.passes for e in entries], known)
    samples: List[List[float]] = [[] for _ in entries]
    for round_order in order:
        for i in round_order:
            ms, st = entries[i].sample(reps[i])
            samples[i].append(ms)
            stamps[i].extend(list(st)[:STAMPS_KEPT])
    return [Measured(s, r, warm_s, bool(verdict), resolution_of(k, st)) for s, r, k, st in zip(samples, reps, known, stamps)]
