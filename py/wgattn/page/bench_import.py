"""Benchmark records checked before the page charts them: a dropped `wgattn bench --json` file, a
history file of bench/history/ (JSON Lines), or the decode records of bench/decode_bandwidth.py and
the suite's --decode (kind "decode", "copy" or "read": GB/s of one case, wgattn.bandwidth.record).

`check(text)` reads a file of dense-op records (bench.Record); `read(text)` a file of either kind,
or both, as {"bench": [...], "bandwidth": [...]}; `source(path, text)` a committed history file as
the server's GET /api/records gives it to the page, which charts it before Python is loaded.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, TypedDict

from .. import bench
from ..bandwidth import BANDWIDTH_KINDS, BandwidthRecord

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


class Imported(TypedDict):
    """A file's records by kind: dense ops' (TFLOP/s) and bandwidth ones' (GB/s)."""

    bench: List[Dict[str, object]]  # bench.Record's fields
    bandwidth: List[BandwidthRecord]


class RecordSource(TypedDict):
    """A committed history file (bench/history/<date>-<machine>[-what].jsonl) and its records."""

    path: str  # repository-relative
    name: str  # the file's name without .jsonl: <date>-<machine>[-what]
    date: str  # YYYY-MM-DD, from the name ("" when it has none)
    records: Imported


def source(path: str, text: str) -> RecordSource:
    """The history file at repository-relative `path` holding `text`, read (ValueError naming the
    file and the record that is wrong)."""
    name = path.rsplit("/", 1)[-1]
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    date = stem[:10] if len(stem) >= 10 and stem[4] == "-" and stem[7] == "-" and stem[:4].isdigit() else ""
    try:
        records = read(text)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return {"path": path, "name": stem, "date": date, "records": records}


def _parse(text: str) -> List[Any]:
    """The records of a file: a JSON list, one JSON object, or JSON Lines (one record a line)."""
    try:
        records = json.loads(text)
    except ValueError:
        lines = [line for line in text.splitlines() if line.strip()]
        try:
            records = [json.loads(line) for line in lines] if len(lines) > 1 else None
        except ValueError:
            records = None
        if records is None:
            raise ValueError(
                "not JSON: expected benchmark records (`wgattn bench --json`'s list, or a bench/history file: one record a line)"
            ) from None
    if isinstance(records, dict):
        records = [records]
    if not isinstance(records, list) or not records:
        raise ValueError("expected a non-empty list of benchmark records (`wgattn bench --json`)")
    return records


def read(text: str) -> Imported:
    """The records of a file of dense-op records, bandwidth records, or both (see the module's
    docstring), checked; ValueError saying which record is wrong and how."""
    out: Imported = {"bench": [], "bandwidth": []}
    for n, r in enumerate(_parse(text)):
        if isinstance(r, dict) and "kind" in r:
            out["bandwidth"].append(_bandwidth(r, f"record {n}"))
        else:
            out["bench"].append(_dense(r, f"record {n}"))
    return out


def check(text: str) -> List[Dict[str, object]]:
    """The records of a `wgattn bench --json` file (a list of records, bench.Record's fields;
    files from before the measurement protocol are read too; JSON Lines too), checked; ValueError
    saying what is wrong. The impl need not be registered here (PyTorch's, NumPy's, another
    machine's kernels)."""
    return [_dense(r, f"record {n}") for n, r in enumerate(_parse(text))]


_REQUIRED = ["op", "impl", "shape", "causal", "dtype", "adapter", "median_ms", "tflops", "timer"]


def _dense(r: object, where: str) -> Dict[str, object]:
    """One dense-op record, checked and given the fields older records lack."""
    keys = list(bench.Record.__dataclass_fields__)
    if not isinstance(r, dict) or not set(_REQUIRED) <= set(r) or not set(r) <= set(keys) | {"runs"}:
        got = sorted(r) if isinstance(r, dict) else type(r).__name__
        raise ValueError(f"{where}: expected the fields {keys} (at least {_REQUIRED}), got {got}")
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
    _numbers(r, where, _NUMBERS)
    _counts(r, where, _COUNTS)
    _strings(r, where, _STRINGS, ("mode", "config", "browser", "time", "commit"))
    _bools(r, where, ("causal", "wide", "warmed"))
    _flags(r, where)
    try:
        bench.check_variant(r["variant"])
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return {k: r[k] for k in keys}


def _numbers(r: Dict[str, Any], where: str, names) -> None:
    for name in names:
        x = r[name]
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            raise ValueError(f"{where}: {name} must be a finite number >= 0, got {x!r}")


def _counts(r: Dict[str, Any], where: str, names) -> None:
    for name in names:
        x = r[name]
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            raise ValueError(f"{where}: {name} must be an integer >= 0, got {x!r}")


def _strings(r: Dict[str, Any], where: str, filled, maybe_empty) -> None:
    for name in filled:
        if not isinstance(r[name], str) or not r[name]:
            raise ValueError(f"{where}: {name} must be a non-empty string, got {r[name]!r}")
    for name in maybe_empty:
        if not isinstance(r[name], str):
            raise ValueError(f"{where}: {name} must be a string, got {r[name]!r}")


def _bools(r: Dict[str, Any], where: str, names) -> None:
    for name in names:
        if not isinstance(r[name], bool):
            raise ValueError(f"{where}: {name} must be true or false, got {r[name]!r}")


def _flags(r: Dict[str, Any], where: str) -> None:
    if not isinstance(r["flags"], list) or not all(isinstance(f, str) for f in r["flags"]):
        raise ValueError(f"{where}: flags must be a list of strings, got {r['flags']!r}")


# A bandwidth record (wgattn.bandwidth.record): the fields it must have, and what older records
# (bench/history/decode/ before the page's decode benchmark) lack and read as.
_BW_FIELDS = list(BandwidthRecord.__annotations__)
_BW_REQUIRED = ["kind", "case", "shape", "impl", "runtime", "adapter", "bytes", "gbps", "median_ms", "rounds", "timer"]
_BW_BEFORE = {"browser": "", "flags": [], "repeat": 0, "verified": None, "pct_of_copy": 0.0, "splits": 0, "rule": False}
# ... and what a record written before the measurement protocol lacks (as _BEFORE_PROTOCOL).
_BW_UNMEASURED: Dict[str, object] = {
    "spread": 0.0,
    "wide": False,
    "reps": 1,
    "warmup_s": 0.0,
    "warmed": False,
    "timer_resolution_ns": 0.0,
    "mode": "",
    "config": "",
    "time": "",
    "commit": "",
}
_BW_TEXTS = ("dtype", "mode", "config", "browser", "time", "commit")
_BW_NUMBERS = ("gbps", "pct_of_copy", "median_ms", "min_ms", "q1_ms", "q3_ms", "max_ms", "spread", "warmup_s")


def _bandwidth(r: Dict[str, Any], where: str) -> BandwidthRecord:
    """One bandwidth record, checked and given the fields older records lack."""
    if not set(_BW_REQUIRED) <= set(r) or not set(r) <= set(_BW_FIELDS):
        wanted = f"the fields of a bandwidth record {_BW_FIELDS} (at least {_BW_REQUIRED})"
        raise ValueError(f"{where}: expected {wanted}, got {sorted(r)}")
    out: Dict[str, Any] = {**_BW_BEFORE, **r}
    shape = out["shape"]
    if not isinstance(shape, dict) or not all(isinstance(k, str) for k in shape):
        raise ValueError(f"{where}: shape must be the case's configuration (an object), got {shape!r}")
    if out["kind"] not in BANDWIDTH_KINDS:
        raise ValueError(f"{where}: kind must be one of {list(BANDWIDTH_KINDS)}, got {out['kind']!r}")
    out.setdefault("dtype", str(shape.get("cache", "")))
    for name in ("min_ms", "q1_ms", "q3_ms", "max_ms"):
        out.setdefault(name, out["median_ms"])
    for name, value in _BW_UNMEASURED.items():
        out.setdefault(name, value)
    _numbers(out, where, _BW_NUMBERS + ("timer_resolution_ns",))
    _counts(out, where, ("bytes", "rounds", "reps", "repeat", "splits"))
    _strings(out, where, ("case", "impl", "runtime", "adapter", "timer"), _BW_TEXTS)
    _bools(out, where, ("rule", "wide", "warmed"))
    _flags(out, where)
    if out["verified"] is not None and not isinstance(out["verified"], dict):
        raise ValueError(f"{where}: verified must be the check's verdict (an object) or null, got {out['verified']!r}")
    return {k: out[k] for k in _BW_FIELDS}  # type: ignore[return-value]
