"""A dropped `wgattn bench --json` file checked before the page charts it beside its own runs."""

from __future__ import annotations

import json
import math
from typing import Dict, List

from .. import bench


def check(text: str) -> List[Dict[str, object]]:
    """The records of a `wgattn bench --json` file (a list of {op, impl, shape, causal, dtype,
    adapter, median_ms, tflops, runs, timer}), checked; ValueError saying what is wrong. The impl
    need not be registered here (PyTorch's, NumPy's, another machine's kernels)."""
    try:
        records = json.loads(text)
    except ValueError:
        raise ValueError("not JSON: expected the output of `wgattn bench --json` (a list of records)") from None
    if isinstance(records, dict):
        records = [records]
    if not isinstance(records, list) or not records:
        raise ValueError("expected a non-empty list of benchmark records (`wgattn bench --json`)")
    keys = list(bench.Record.__dataclass_fields__)
    optional = {"mode", "config"}  # records of wgattn bench before trusted mode lack them
    out = []
    for n, r in enumerate(records):
        where = f"record {n}"
        if not isinstance(r, dict) or not set(keys) - optional <= set(r) <= set(keys):
            got = sorted(r) if isinstance(r, dict) else type(r).__name__
            raise ValueError(f"{where}: expected the fields {keys} ({sorted(optional)} optional), got {got}")
        r = {"mode": "", "config": "", **r}
        for name in optional:
            if not isinstance(r[name], str):
                raise ValueError(f"{where}: {name} must be a string, got {r[name]!r}")
        if r["op"] not in bench.OPS:
            raise ValueError(f"{where}: op must be one of {list(bench.OPS)}, got {r['op']!r}")
        shape = r["shape"]
        if (
            not isinstance(shape, list)
            or len(shape) != 4
            or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in shape)
        ):
            raise ValueError(f"{where}: shape must be 4 positive integers (B, H, S, D), got {shape!r}")
        for name in ("median_ms", "tflops"):
            x = r[name]
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                raise ValueError(f"{where}: {name} must be a finite number >= 0, got {x!r}")
        for name in ("impl", "dtype", "adapter", "timer"):
            if not isinstance(r[name], str) or not r[name]:
                raise ValueError(f"{where}: {name} must be a non-empty string, got {r[name]!r}")
        if not isinstance(r["causal"], bool):
            raise ValueError(f"{where}: causal must be true or false, got {r['causal']!r}")
        out.append({k: r[k] for k in keys})
    return out
