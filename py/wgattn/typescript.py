"""The page's TypeScript declarations of what Python sends it, generated from the Python shapes.

Every JSON shape that crosses between the page's JavaScript and Python (the plan, the target, the
live run and its result, the grid's rows, the probe's report, the benchmark's records, the
pictures, the catalogue) is declared once, as a TypedDict or dataclass next to the code that
makes it; `typescript()` writes them as global interfaces for static/wire.d.ts, which the page's
JSDoc names and tsc checks every use of. tests/test_wire_types.py fails when the file differs from
what this writes, so a key added on one side only cannot pass. Regenerate with

    .venv/bin/python -m wgattn.typescript > static/wire.d.ts
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import typing
from typing import Any, Dict, List, Optional, Tuple

from . import bandwidth, bench, conformance, interfaces, live, localise, pictures, plan, precision, protocol, target
from .interfaces import config
from .page import PageSession, bench_import, grid, replies, verdict

__all__ = ["WIRE", "typescript"]

# TypeScript name -> the Python shape, in the order they are written.
WIRE: List[Tuple[str, Any]] = [
    ("Plan", plan.PlanJson),
    ("PlanBuffer", plan.PlanBufferJson),
    ("Dispatch", plan.PlanDispatchJson),
    ("TargetJson", target.TargetJson),
    ("MatrixConfigJson", target.MatrixConfigJson),
    ("Catalogue", live.Catalogue),
    ("InterfaceInfo", live.InterfaceInfo),
    ("KernelInfo", live.KernelInfo),
    ("SchemaField", config.FieldSchema),
    ("Prepared", replies.Prepared),
    ("LivePrepared", replies.LivePrepared),
    ("Timings", replies.Timings),
    ("RuntimeReport", replies.RuntimeReport),
    ("Pair", replies.OutputPair),
    ("LiveResult", replies.LiveResult),
    ("Verdict", verdict.Verdict),
    ("NotRun", verdict.NotRun),
    ("LiveSummary", verdict.LiveSummary),
    ("Heatmap", pictures.Heatmap),
    ("ErrorPicture", pictures.ErrorPicture),
    ("GridItem", replies.GridItem),
    ("GridSkip", replies.GridSkip),
    ("GridStart", replies.GridStart),
    ("GridRow", grid.GridRow),
    ("OutputRow", conformance.OutputRow),
    ("Where", localise.Localisation),
    ("WhereMap", localise.ErrorMap),
    ("WorstElement", localise.WorstElement),
    ("ProbeReport", precision.ProbeReport),
    ("FunctionError", precision.FunctionReport),
    ("ProbeWorst", precision.Worst),
    ("BenchRecord", bench.Record),
    ("BenchJob", replies.BenchItem),
    ("BenchSkip", replies.BenchSkip),
    ("BenchProtocol", protocol.Protocol),
    ("BenchSeries", replies.BenchSeries),
    ("BenchStart", replies.BenchStart),
    ("BenchWarm", replies.BenchWarm),
    ("BenchCalibration", replies.BenchCalibration),
    ("BenchPlan", replies.BenchPlan),
    ("BenchPlanned", replies.BenchPlanned),
    ("BenchSkipped", replies.BenchSkipped),
    ("BenchCheck", interfaces.FilledCheck),
    ("BandwidthRecord", bandwidth.BandwidthRecord),
    ("ImportedRecords", bench_import.Imported),
    ("RecordSource", bench_import.RecordSource),
]

# Floats that may be infinite or NaN on the wire (wgattn.wire.jsonable writes them as strings):
# an error where an output is missing or NaN, an empty row's lse, an allowance of a failed case,
# a verdict's worst error over its allowance.
NON_FINITE = {
    "worst",
    "max_abs_err",
    "allowance",
    "naive_err",
    "naive_f32_err",
    "max_ulps",
    "max_abs",
    "err",
    "got",
    "ref",
    "exact",
}

_HEADER = """// The JSON shapes Python sends the page, as global TypeScript interfaces: GENERATED from the
// Python declarations (wgattn.typescript; regenerate with
// `.venv/bin/python -m wgattn.typescript > static/wire.d.ts`), never edited by hand.
// tests/test_wire_types.py fails when this file and the Python shapes differ.

/** A float that JSON cannot hold as a number arrives as a string (wgattn.wire.jsonable). */
type JsonFloat = number | "inf" | "-inf" | "nan";
"""


def _ts(tp: Any, names: Dict[Any, str], key: str) -> str:
    """The TypeScript of Python type `tp` (a field named `key`)."""
    if tp in names:
        return names[tp]
    if tp is str:
        return "string"
    if tp is bool:
        return "boolean"
    if tp in (int, float):
        return "JsonFloat" if tp is float and key in NON_FINITE else "number"
    if tp is type(None):
        return "null"
    if tp is Any or tp is object:
        return "unknown"
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, List):
        return f"{_wrap(_ts(args[0], names, key))}[]"
    if origin in (dict, Dict):
        return f"Record<string, {_ts(args[1], names, key)}>"
    if origin in (tuple, Tuple):
        return "[" + ", ".join(_ts(a, names, key) for a in args) + "]"
    if origin is typing.Union:
        return " | ".join(_ts(a, names, key) for a in args)
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in args)
    if origin in (typing.Mapping,):
        return f"Record<string, {_ts(args[1], names, key)}>"
    raise TypeError(f"{key}: no TypeScript for {tp!r}; declare it in WIRE")


def _wrap(ts: str) -> str:
    return f"({ts})" if "|" in ts else ts


def _fields(tp: Any) -> List[Tuple[str, Any, bool]]:
    """(name, type, optional) of a TypedDict's keys or a dataclass's fields."""
    hints = typing.get_type_hints(tp)
    if dataclasses.is_dataclass(tp):
        return [(f.name, hints[f.name], False) for f in dataclasses.fields(tp)]
    optional: typing.FrozenSet[str] = getattr(tp, "__optional_keys__", frozenset())
    return [(name, t, name in optional) for name, t in hints.items()]


# PageSession's methods the page calls: JSON text in and out, numbers, and bytes as Pyodide hands
# them over (a proxy to copy out, a Uint8Array to copy in).
_SESSION_RETURNS = {str: "string", int: "number", bool: "boolean", type(None): "void", bytes: "PyProxy<Uint8Array>"}
_SESSION_PARAMS = {str: "string", int: "number", Optional[str]: "string | null"}


def _session() -> List[str]:
    """The WgattnPage interface: every public PageSession method whose arguments and result cross
    to JavaScript (Python-only helpers, which return Python objects, are left out)."""
    out = [
        "",
        "/** The page's wgattn.page.PageSession under Pyodide: JSON in, JSON out. (Python: wgattn.page.session.PageSession) */",
    ]
    out.append("interface WgattnPage {")
    for name, fn in inspect.getmembers(PageSession, inspect.isfunction):
        if name.startswith("_"):
            continue
        hints = typing.get_type_hints(fn)
        if hints.get("return") not in _SESSION_RETURNS:
            continue
        params = []
        for p in list(inspect.signature(fn).parameters.values())[1:]:
            ts = "Uint8Array" if p.name == "data" else _SESSION_PARAMS[hints[p.name]]
            params.append(f"{p.name}{'?' if p.default is not inspect.Parameter.empty else ''}: {ts}")
        doc = " ".join((inspect.getdoc(fn) or name).split("\n\n")[0].split())
        out.append(f"  /** {doc} */")
        out.append(f"  {name}({', '.join(params)}): {_SESSION_RETURNS[hints['return']]};")
    out.append("}")
    return out


def typescript() -> str:
    """static/wire.d.ts's text."""
    names = {tp: name for name, tp in WIRE}
    out = [_HEADER]
    for name, tp in WIRE:
        if typing.get_origin(tp) is typing.Union:  # a type alias: one of several shapes
            out.append("")
            out.append(f"type {name} = {_ts(tp, {k: v for k, v in names.items() if k is not tp}, name)};")
            continue
        doc = " ".join((tp.__doc__ or "").split()) if tp.__doc__ and not tp.__doc__.startswith(tp.__name__ + "(") else ""
        out.append("")
        out.append(f"/** {doc or name} (Python: {tp.__module__}.{tp.__name__}) */")
        out.append(f"interface {name} {{")
        for key, t, optional in _fields(tp):
            out.append(f"  {key}{'?' if optional else ''}: {_ts(t, names, key)};")
        out.append("}")
    out.extend(_session())
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(typescript())
