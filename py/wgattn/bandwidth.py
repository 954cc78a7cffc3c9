"""Kernels timed on one configuration with inputs the GPU fills (wgattn.bench.CONFIG_OPS: decode
as bandwidth, prefill as FLOP/s): what the native benchmark (bench/decode_bandwidth.py) and the
page's (wgattn.page.bench_jobs, static/bench.js) share.

* the copy a kernel's bandwidth is compared with, and the read alone (`stream_plan`, `copy_plan`:
  shaders/stream.wgsl);
* inputs the GPU fills (`device_filled`, `fill_plans`: shaders/hash_fill.wgsl): a benchmark's
  K/V cache is GB-sized and must never cross HTTP nor Pyodide's memory. The fill is a hash of
  each element's index, exact in f16 and f32, so `fill_values` (NumPy) reproduces any part of it
  bit for bit, and the interface checks an output on such inputs against the float64 reference
  (Interface.check_filled) before it is timed. The GEMM benchmark (wgattn.gemm, timed in TFLOP/s
  rather than as bandwidth) has its A and B made the same way, prefill (FLOP/s) its q and cache;
* a record (`record`) and its share of the same series' copy (`copy_shares`); a prefill's record
  (`rate_record`) and its share of the same series' yardstick (`yardstick_shares`: flash_fwd on
  the same work unpaged).

Bandwidth = the bytes a step must read (Interface.bench_bytes) over the protocol's median; a copy
counts its read and written bytes. A rate = the FLOPs a run must compute (Interface.bench_flops:
the visible pairs only) over the median, the same count for the yardstick.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple, TypedDict

import numpy as np

from . import protocol
from .plan import Buffer, Dispatch, Plan
from .registry import Pass, shader_dir

__all__ = [
    "COPY",
    "COPY_PER",
    "device_filled",
    "is_device_filled",
    "stream_plan",
    "copy_bytes",
    "copy_plan",
    "fill_plans",
    "fill_values",
    "record",
    "copy_shares",
    "BandwidthRecord",
    "BANDWIDTH_KINDS",
    "rate_record",
    "yardstick_shares",
]

COPY = "wgsl.copy"  # the impl of a series' copy in its records
COPY_PER = 8  # vec4s per invocation of the copy (stream.wgsl's PER)
# One fill per tensor the GPU fills, each its own values (hash_fill.wgsl's SEED): decode's and
# prefill's q and cache, the GEMM's inputs (wgattn.gemm).
SEEDS = {"q": 0x71717171, "k_cache": 0x6B6B6B6B, "v_cache": 0x76767676, "a": 0x61616161, "b": 0x62626262}
_WG = 256  # stream.wgsl's and hash_fill.wgsl's workgroup size


def _source(name: str) -> str:
    return (shader_dir() / f"{name}.wgsl").read_text()


def _grid(items: int) -> Tuple[int, int, int]:
    return Pass("grid", "grid", (0,), {"items": str(-(-items // _WG))}).workgroups({}, {})


def device_filled(shape: Sequence[int], dtype=np.float32) -> np.ndarray:
    """An input of `shape` that the GPU fills (`fill_plans`): zeros by construction that hold no
    memory (a zero-strided view of one zero). A plan gives its buffer a size and no bytes."""
    return np.broadcast_to(np.zeros((), dtype=dtype), tuple(int(n) for n in shape))


def is_device_filled(a: np.ndarray) -> bool:
    """`a` is a `device_filled` input."""
    return a.size > 1 and all(s == 0 for s in a.strides) and not a.flat[0]


def stream_plan(nbytes: int, per: int = COPY_PER, write: bool = True) -> Plan:
    """stream.wgsl over `nbytes` (whole vec4s): a copy into a buffer as large, or (write=False) a
    read of them alone."""
    n = nbytes // 16
    return Plan(
        buffers=[Buffer("src", n * 16, "storage"), Buffer("dst", n * 16 if write else 16, "storage")],
        dispatches=[
            Dispatch(
                label="copy" if write else "read",
                source=_source("stream"),
                entry_point="stream",
                constants={"PER": per, "WRITE": int(write)},
                bindings={0: "src", 1: "dst"},
                layout=[(0, "read-only-storage"), (1, "storage")],
                workgroups=_grid(-(-n // per)),
            )
        ],
        outputs=[],
    )


def copy_bytes(nbytes: int, max_binding: int) -> int:
    """The bytes the copy of `nbytes` moves: whole vec4s, at most a binding's limit `max_binding`."""
    return min(nbytes, max_binding) // 16 * 16


def copy_plan(nbytes: int, max_binding: int) -> Plan:
    """The copy of `nbytes` (`copy_bytes` of them) through one device."""
    return stream_plan(copy_bytes(nbytes, max_binding))


def fill_plans(plan: Plan, inputs: Mapping[str, np.ndarray]) -> List[Plan]:
    """The fills of the `device_filled` ones of a case's `inputs` in `plan`: one plan per buffer,
    binding it by name (the executor binds the timed plan's buffer of that name; nothing else is
    made), f16 pairs where the buffer holds 2 bytes an element."""
    out = []
    for name, a in inputs.items():
        if not is_device_filled(a):
            continue
        size = next(b.size for b in plan.buffers if b.name == name)
        out.append(
            Plan(
                buffers=[Buffer(name, size, "storage")],
                dispatches=[
                    Dispatch(
                        label=f"fill.{name}",
                        source=_source("hash_fill"),
                        entry_point="fill",
                        constants={"SEED": SEEDS[name], "HALF": int(size < 4 * a.size)},
                        bindings={0: name},
                        layout=[(0, "storage")],
                        workgroups=_grid(size // 4),
                    )
                ],
                outputs=[],
            )
        )
    return out


def fill_values(name: str, index: np.ndarray) -> np.ndarray:
    """The values hash_fill.wgsl writes at element indices `index` of input `name`, float64."""
    x = np.asarray(index, dtype=np.uint32) ^ np.uint32(SEEDS[name])
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return ((x >> np.uint32(24)).astype(np.int64) - 128) / 64.0


BANDWIDTH_KINDS = ("decode", "copy", "read")  # a record's kind: a kernel's step, the copy, the read alone


class BandwidthRecord(TypedDict):
    """One bandwidth record (`record`): a kernel's, the copy's or the read's GB/s on one case."""

    kind: str  # one of BANDWIDTH_KINDS
    case: str  # the case's name ("target", "gqa8-16k", ...)
    shape: Dict[str, object]  # the case's configuration (the interface's Config fields)
    impl: str
    dtype: str  # the cache's precision
    runtime: str
    browser: str
    flags: List[str]
    mode: str  # "trusted" / "checked" as for bench.Record; "" for the copy and the anchors
    splits: int  # the split count that ran (0: none)
    rule: bool  # the split count is the interface's rule's (not a sweep's)
    config: str
    adapter: str
    bytes: int  # what one step reads (a copy: reads and writes)
    gbps: float
    pct_of_copy: float  # GB/s over the same series' copy's, in % (0: no copy in the series)
    median_ms: float
    min_ms: float
    q1_ms: float
    q3_ms: float
    max_ms: float
    spread: float
    wide: bool
    rounds: int
    reps: int
    warmup_s: float
    warmed: bool
    timer: str
    timer_resolution_ns: float
    repeat: int
    verified: Optional[Dict[str, object]]  # the output's check before timing; None for the copy
    time: str
    commit: str


def record(
    case: str,
    shape: Mapping[str, object],
    impl: str,
    dtype: str,
    nbytes: int,
    measured: protocol.Measured,
    proto: protocol.Protocol,
    timer: str,
    adapter: str,
    info,
    mode: str = "",
    config: Optional[Mapping[str, float]] = None,
    rule: bool = False,
    repeat: int = 0,
    verified: Optional[Mapping[str, object]] = None,
    kind: str = "",
) -> Dict[str, object]:
    """One bandwidth record (bench/decode_bandwidth.py's --json lines, the suite's decode.jsonl):
    `kind` "copy" (its bandwidth counts the read and written bytes: `nbytes`), "read" or "decode"
    (over the bytes a step must read); by default "copy" for COPY, else "decode". `shape` is the
    case's configuration, `config` what ran (the tile, the split count as `num_splits`);
    pct_of_copy is filled by `copy_shares` once the series' copy is in. `verified`: the output's
    check before timing (None: not checked, the copy). `info` is a wgattn.bench.RunInfo."""
    st = protocol.summarize(proto, measured.samples)
    chosen = dict(config or {})
    return {
        "kind": kind or ("copy" if impl == COPY else "decode"),
        "case": case,
        "shape": dict(shape),
        "impl": impl,
        "dtype": dtype,
        "runtime": info.runtime,
        "browser": info.browser,
        "flags": list(info.flags),
        "mode": mode,
        "splits": int(chosen.get("num_splits", 0)),
        "rule": rule,
        "config": " ".join(f"{k}={int(v)}" for k, v in chosen.items()),
        "adapter": adapter,
        "bytes": int(nbytes),
        "gbps": nbytes / st.median_ms / 1e6,
        "pct_of_copy": 0.0,
        **measured.record_fields(proto),
        "timer": timer,
        "timer_resolution_ns": float(measured.resolution_ns),
        "repeat": int(repeat),
        "verified": None if verified is None else dict(verified),
        "time": info.time,
        "commit": info.commit,
    }


def copy_shares(records: Sequence[Dict[str, object]]) -> None:
    """Set each record's pct_of_copy: its GB/s over that of the WGSL copy of the same case, cache
    precision, runtime, adapter, browser flags and repeat (the same series), 0 where there is none."""

    def at(r: Mapping[str, object]) -> Tuple[object, ...]:
        flags = r.get("flags")
        listed = tuple(flags) if isinstance(flags, (list, tuple)) else ()
        return (r["case"], r.get("dtype", ""), r.get("runtime"), r.get("adapter"), listed, r.get("repeat", 0))

    copy = {at(r): _gbps(r) for r in records if r["impl"] == COPY}
    for r in records:
        c = copy.get(at(r))
        r["pct_of_copy"] = 100.0 * _gbps(r) / c if c else 0.0


def _gbps(r: Mapping[str, object]) -> float:
    value = r["gbps"]
    if not isinstance(value, (int, float)):
        raise ValueError(f"a record's gbps must be a number, got {value!r}")
    return float(value)


def rate_record(
    case: str,
    shape: Mapping[str, object],
    impl: str,
    dtype: str,
    flops: float,
    measured: protocol.Measured,
    proto: protocol.Protocol,
    timer: str,
    adapter: str,
    info,
    mode: str = "",
    config: Optional[Mapping[str, float]] = None,
    repeat: int = 0,
    verified: Optional[Mapping[str, object]] = None,
    yardstick: bool = False,
    kind: str = "prefill",
) -> Dict[str, object]:
    """One record of an op timed as FLOP/s on one configuration (the suite's prefill.jsonl): `flops`
    (Interface.bench_flops) over the protocol's median; `yardstick` marks the kernel it is timed
    beside (the same work, another interface: its `verified` is None, it is not checked);
    pct_of_yardstick is filled by `yardstick_shares` once the series' yardstick is in. `shape` is
    the case's configuration, `config` what ran (the tile)."""
    st = protocol.summarize(proto, measured.samples)
    return {
        "kind": kind,
        "case": case,
        "shape": dict(shape),
        "impl": impl,
        "dtype": dtype,
        "runtime": info.runtime,
        "browser": info.browser,
        "flags": list(info.flags),
        "mode": mode,
        "yardstick": bool(yardstick),
        "config": " ".join(f"{k}={int(v)}" for k, v in dict(config or {}).items()),
        "adapter": adapter,
        "flops": float(flops),
        "tflops": flops / (st.median_ms * 1e-3) / 1e12,
        "pct_of_yardstick": 0.0,
        **measured.record_fields(proto),
        "timer": timer,
        "timer_resolution_ns": float(measured.resolution_ns),
        "repeat": int(repeat),
        "verified": None if verified is None else dict(verified),
        "time": info.time,
        "commit": info.commit,
    }


def yardstick_shares(records: Sequence[Dict[str, object]]) -> None:
    """Set each rate record's pct_of_yardstick: its TFLOP/s over that of the yardstick of the same
    case, runtime, adapter, browser flags, mode and repeat (the same series), 0 where there is none."""

    def at(r: Mapping[str, object]) -> Tuple[object, ...]:
        flags = r.get("flags")
        listed = tuple(flags) if isinstance(flags, (list, tuple)) else ()
        return (r["case"], r.get("runtime"), r.get("adapter"), listed, r.get("mode", ""), r.get("repeat", 0))

    ref = {at(r): float(r["tflops"]) for r in records if r.get("yardstick")}  # type: ignore[arg-type]
    for r in records:
        y = ref.get(at(r))
        r["pct_of_yardstick"] = 100.0 * float(r["tflops"]) / y if y else 0.0  # type: ignore[arg-type]
