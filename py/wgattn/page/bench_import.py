"""A dropped `wgattn bench --json` file checked before the page charts it beside its own runs."""

from __future__ import annotations

import json
import math
from typing import Dict, List

from .. import bench

# Fields records written before the measurement protocol lack, and what they read as: such a
# record was not warmed by time (`warmed` False flags it) and its spread is unknown (none shown).
_BEFORE_PROTOCOL = {
    "mode": "",
    "config": "",
    "browser": "",
    "flags": [],
    "spread": 0.0,
    "wide": False,
    "reps": 1,
    "warmup_s": 0.0,
    "warmed": False,
    "timer_resolution_ns": 0.0,
    "repeat": 0,
    "time": "",
    "commit": "",
    "variant": "",
}
_STRINGS = ("impl", "dtype", "adapter", "timer", "runtime")
_NUMBERS = ("median_ms", "tflops", "min_ms", "q1_ms", "q3_ms", "max_ms", "spread", "warmup_s", "timer_resolution_ns")
_COUNTS = ("rounds", "reps", "repeat")


def _runtime_of(r: Dict[str, object]) -> str:
    """What an older record's runtime was, from what it says."""
    if r["impl"] in bench.ANCHORS:
        return str(r["impl"])
    return "browser" if "browser WebGPU" in str(r["adapter"]) else "native"


def _upgrade(r: Dict[str, object]) -> Dict[str, object]:
    """An older record with the fields it lacks (see _BEFORE_PROTOCOL)."""
    out = {**_BEFORE_PROTOCOL, **r}
    if "rounds" not in out and "runs" in out:
        out["rounds"] = out["runs"]
    out.pop("runs", None)
    for name in ("min_ms", "q1_ms", "q3_ms", "max_ms"):
        out.setdefault(name, out.get("median_ms"))
    if "runtime" not in out and isinstance(out.get("impl"), str):
        out["runtime"] = _runtime_of(out)
    return out


def check(text: str) -> List[Dict[str, object]]:
    """The records of a `wgattn bench --json` file (a list of records, bench.Record's fields;
    files from before the measurement protocol are read too), checked; ValueError saying what is
    wrong. The impl need not be registered here (PyTorch's, NumPy's, another machine's kernels)."""
    try:
        records = json.loads(text)
    except ValueError:
        raise ValueError("not JSON: expected the output of `wgattn bench --json` (a list of records)") from None
    if isinstance(records, dict):
        records = [records]
    if not isinstance(records, list) or not records:
        raise ValueError("expected a non-empty list of benchmark records (`wgattn bench --json`)")
    keys = list(bench.Record.__dataclass_fields__)
    required = ["op", "impl", "shape", "causal", "dtype", "adapter", "median_ms", "tflops", "timer"]
    out = []
    for n, r in enumerate(records):
        where = f"record {n}"
        if not isinstance(r, dict) or not set(required) <= set(r) or not set(r) <= set(keys) | {"runs"}:
            got = sorted(r) if isinstance(r, dict) else type(r).__name__
            raise ValueError(f"{where}: expected the fields {keys} (at least {required}), got {got}")
        r = _upgrade(r)
        if "rounds" not in r:
            raise ValueError(f"{where}: the number of rounds is missing (field rounds)")
        if r["op"] not in bench.OPS:
            raise ValueError(f"{where}: op must be one of {list(bench.OPS)}, got {r['op']!r}")
        shape = r["shape"]
        if (
            not isinstance(shape, list)
            or len(shape) != 4
            or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in shape)
        ):
            raise ValueError(f"{where}: shape must be 4 positive integers (B, H, S, D), got {shape!r}")
        for name in _NUMBERS:
            x = r[name]
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                raise ValueError(f"{where}: {name} must be a finite number >= 0, got {x!r}")
        for name in _COUNTS:
            x = r[name]
            if isinstance(x, bool) or not isinstance(x, int) or x < 0:
                raise ValueError(f"{where}: {name} must be an integer >= 0, got {x!r}")
        for name in _STRINGS:
            if not isinstance(r[name], str) or not r[name]:
                raise ValueError(f"{where}: {name} must be a non-empty string, got {r[name]!r}")
        for name in ("mode", "config", "browser", "time", "commit"):
            if not isinstance(r[name], str):
                raise ValueError(f"{where}: {name} must be a string, got {r[name]!r}")
        try:
            bench.check_variant(r["variant"])
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        for name in ("causal", "wide", "warmed"):
            if not isinstance(r[name], bool):
                raise ValueError(f"{where}: {name} must be true or false, got {r[name]!r}")
        if not isinstance(r["flags"], list) or not all(isinstance(f, str) for f in r["flags"]):
            raise ValueError(f"{where}: flags must be a list of strings, got {r['flags']!r}")
        out.append({k: r[k] for k in keys})
    return out
