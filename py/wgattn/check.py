"""`wgattn check`: run a kernel (the project's, or WGSL a user wrote) through a registered
interface on the interface's conformance grid, natively, judged by the tolerance rule."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Dict, List, Mapping, Optional, TypedDict

from . import conformance, interfaces, registry, wire
from .conformance import OutputRow
from .errors import AdapterError, CompileError, DoesNotFit, InterfaceMismatch
from .localise import render as render_where
from .precision import ProbeReport

__all__ = ["CheckError", "check", "render_table"]


class CheckError(Exception):
    """A check that could not run at all (not a failing case): bad arguments, no adapter,
    WGSL that does not compile or does not match the interface."""


# A case's row: its worst output's figures ("pass" is a keyword, hence the functional form).
CaseRow = TypedDict(
    "CaseRow",
    {
        "name": str,
        "pass": bool,
        "max_abs_err": float,
        "allowance": float,
        "worst_output": str,
        "failed_outputs": List[str],
        "outputs": List[OutputRow],
        "skipped": str,  # why the kernel cannot take the case on this adapter ("" when it ran)
    },
)


class KernelReport(TypedDict):
    kernel: str
    cases: List[CaseRow]
    passed: int
    failed: int
    skipped: int  # cases the kernel cannot take here (a head dim no tile fits, a knob it lacks)


class _Report(TypedDict):
    interface: str
    adapter: Dict[str, Any]  # the runtime's adapter description
    kernels: List[KernelReport]
    passed: int
    failed: int
    skipped: int


class CheckReport(_Report, total=False):
    precision: ProbeReport  # the adapter's built-ins, measured (a runtime with a probe)
    cases: List[Dict[str, Any]]  # every kernel's case rows, flattened, each with its "kernel"


def check(
    interface: str,
    wgsl: Optional[str] = None,
    entry: Optional[str] = None,
    sets: Optional[Mapping[str, int]] = None,
    kernel_ids: Optional[List[str]] = None,
    runtime=None,
    case_prefixes: Optional[List[str]] = None,
) -> CheckReport:
    """Run the grid (its cases whose names start with one of `case_prefixes`, when given);
    returns {"interface", "adapter", "precision", "kernels": [{"kernel", "cases", "passed",
    "failed", "skipped"}], "passed", "failed", "skipped"} with per-case rows naming the failing
    outputs, each failing output localised ("where": worst elements, |error| map, likely class); a
    case the kernel cannot take on this adapter is skipped, saying why."""
    reg = registry.load()
    try:
        iface = interfaces.get(interface)
    except ValueError as exc:
        raise CheckError(str(exc)) from None
    if wgsl is not None:
        kernels = [reg.user_kernel(interface)]
    else:
        kernels = [reg.kernel(k) for k in kernel_ids] if kernel_ids else reg.kernels_of(interface)
        if not kernels:
            raise CheckError(f"interface {interface!r} has no registered kernel yet")
    entry_points = None
    if entry:
        if "=" in entry:
            entry_points = dict(part.split("=", 1) for part in entry.split(","))
        elif len(iface.abi.passes) == 1:
            entry_points = {iface.abi.passes[0].name: entry}
        else:
            names = [p.name for p in iface.abi.passes]
            raise CheckError(f"{interface} has passes {names}: give --entry as PASS=NAME[,PASS=NAME]")
    if runtime is None:
        from . import native  # imports wgpu: CPython with the native extra only

        try:
            runtime = native.runtime()
        except AdapterError as exc:
            raise CheckError(str(exc)) from None
    report: CheckReport = {
        "interface": interface,
        "adapter": runtime.info,
        "kernels": [],
        "passed": 0,
        "failed": 0,
        "skipped": 0,
    }
    if hasattr(runtime, "precision"):
        report["precision"] = runtime.precision()  # the adapter's built-ins, measured (wgattn.precision)
    cases = iface.conformance_cases()
    if case_prefixes:
        cases = [c for c in cases if c.name.startswith(tuple(case_prefixes))]
        if not cases:
            raise CheckError(f"no case of {interface}'s grid starts with {case_prefixes}")
    for kernel in kernels:
        overrides = dict(kernel.overrides)
        overrides.update(sets or {})
        if sets:
            kernel = replace(kernel, overrides=overrides)
        rows: List[CaseRow] = []
        for case in cases:
            outs: List[OutputRow]
            try:
                outs = conformance.run_case(runtime, kernel, case, source=wgsl, entry_points=entry_points, overrides=sets or None)
            except (CompileError, InterfaceMismatch) as exc:  # nothing else will run either
                raise CheckError(str(exc)) from None
            except DoesNotFit as exc:  # not this kernel's case here: said, and counted apart
                rows.append(
                    {
                        "name": case.name,
                        "pass": False,
                        "max_abs_err": 0.0,
                        "allowance": 0.0,
                        "worst_output": "-",
                        "failed_outputs": [],
                        "outputs": [],
                        "skipped": str(exc),
                    }
                )
                continue
            except ValueError as exc:
                outs = [
                    {
                        "case": case.name,
                        "output": "-",
                        "max_abs_err": float("inf"),
                        "allowance": 0.0,
                        "pass": False,
                        "error": str(exc),
                    }
                ]
            worst = max(outs, key=lambda r: _ratio(r))
            rows.append(
                {
                    "name": case.name,
                    "pass": all(r["pass"] for r in outs),
                    "max_abs_err": worst["max_abs_err"],
                    "allowance": worst["allowance"],
                    "worst_output": worst["output"],
                    "failed_outputs": [r["output"] for r in outs if not r["pass"]],
                    "outputs": outs,
                    "skipped": "",
                }
            )
        passed = sum(r["pass"] for r in rows)
        skipped = sum(bool(r["skipped"]) for r in rows)
        failed = len(rows) - passed - skipped
        report["kernels"].append({"kernel": kernel.id, "cases": rows, "passed": passed, "failed": failed, "skipped": skipped})
        report["passed"] += passed
        report["failed"] += failed
        report["skipped"] += skipped
    report["cases"] = [dict(r, kernel=k["kernel"]) for k in report["kernels"] for r in k["cases"]]
    return report


def _ratio(row: Mapping[str, Any]) -> float:
    err, allowed = float(row["max_abs_err"]), float(row["allowance"])
    return float("inf") if err == float("inf") else err / allowed if allowed > 0 else 0.0


def render_table(report: CheckReport) -> str:
    a = report["adapter"]
    lines = [f"interface {report['interface']} on {a.get('device') or a.get('vendor')} ({a.get('backend', '')})"]
    for k in report["kernels"]:
        lines.append(f"\n{k['kernel']}")
        lines.append(f"  {'case':44s} {'output':7s} {'max abs err':>12s} {'allowance':>10s} {'ratio':>6s}  verdict")
        for c in k["cases"]:
            if c["skipped"]:
                lines.append(f"  {c['name']:44s} SKIPPED: {c['skipped']}")
                continue
            ratio = _ratio(c)
            lines.append(
                f"  {c['name']:44s} {c['worst_output']:7s} {c['max_abs_err']:12.3e} {c['allowance']:10.3e} "
                f"{ratio:6.2f}  {'PASS' if c['pass'] else 'FAIL ' + ','.join(c['failed_outputs'])}"
            )
            for r in c["outputs"]:
                if r.get("error"):
                    lines.append(f"    error: {r['error']}")
                if r.get("where"):
                    lines.extend(render_where(r["where"]))
        lines.append(f"  {k['passed']} passed, {k['failed']} failed, {k['skipped']} skipped")
    lines.append(f"\n{report['passed']} passed, {report['failed']} failed, {report['skipped']} skipped")
    if report.get("precision"):
        off = [
            f"{r['name']} {r['max_ulps']:.0f} ulps"
            for r in report["precision"]["functions"]
            if r["name"] in conformance.SUSPECT_CALLS and r["max_ulps"] > conformance.SUSPECT_ULPS
        ]
        lines.append(
            "built-ins off by more than %d ulps on this adapter: %s (wgattn probe)"
            % (conformance.SUSPECT_ULPS, ", ".join(off) or "none")
        )
    return "\n".join(lines)


def to_json(report: CheckReport) -> str:
    return json.dumps(wire.jsonable(report), indent=1)
