"""The conformance view: the `wgattn check` grid of one interface, run by the browser's WebGPU
one (kernel, case) item at a time and judged here."""

from __future__ import annotations

import json
from typing import List, Optional, Tuple

from .. import interfaces, registry
from ..conformance import OutputRow, expected, judge, judged_case, suspects
from ..precision import ProbeReport
from ..target import Target
from .replies import GridSkip
from .tables import GridJob, GridRun


def start(request_json: str, target: Target) -> Tuple[GridJob, List[GridSkip]]:
    """{"interface", "source"?} -> the job (the project's kernels of that interface that `target`,
    the browser's device, can run, or the pasted WGSL, on the interface's conformance grid) and
    the kernels skipped [{"kernel", "reason"}] (wgattn.target says why)."""
    request = json.loads(request_json)
    if not isinstance(request, dict):
        raise ValueError("the grid request must be an object {interface, source?}")
    reg = registry.load()
    iface = interfaces.get(request.get("interface", ""))
    source = request.get("source") or None
    skipped: List[GridSkip] = []
    if source is not None:
        kernels = [reg.user_kernel(iface.name, "pasted WGSL")]
    else:
        kernels = []
        for k in iface.kernels():
            why = target.lacks(k)
            if why:
                skipped.append({"kernel": k.id, "reason": why})
            else:
                kernels.append(k)
    items = [(k, c) for k in kernels for c in iface.conformance_cases()]
    return GridJob(iface, items, source), skipped


class GridRow(OutputRow):
    kernel: str  # the kernel judged (the page's table names it)


def item_run(job_id: int, job: GridJob, index: int, target: Target) -> GridRun:
    """Item `index` of job `job_id`, planned for the browser's device `target`."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(job.items):
        raise ValueError(f"item must be an integer in 0..{len(job.items) - 1}, got {index!r}")
    kernel, case = job.items[index]
    case = judged_case(kernel, case)
    return GridRun(job_id, index, kernel, case, job.interface.plan(kernel, case, target, source=job.source))


def verdict(state: GridRun, error: str, probe: Optional[ProbeReport]) -> List[GridRow]:
    """Rows per output of a run the browser finished, or one failed row carrying its `error`, or
    one skipped row where the kernel cannot take the case on this device (the plan says why: a
    head dim no tile fits, a knob the kernel lacks), neither passed nor failed. A failing output
    is localised, with the browser's precision probe (when it ran) naming suspects."""
    case, kernel = state.case, state.kernel
    if state.plan.unavailable:
        skip: OutputRow = {
            "case": case.name,
            "output": "-",
            "max_abs_err": 0.0,
            "allowance": 0.0,
            "pass": False,
            "skipped": state.plan.unavailable,
        }
        return [{**skip, "kernel": kernel.id}]
    if error:
        rows: List[OutputRow] = [
            {"case": case.name, "output": "-", "max_abs_err": float("inf"), "allowance": 0.0, "pass": False, "error": error}
        ]
    else:
        got = state.plan.unpack(state.raw)
        code = "\n".join(sorted({d.source for d in state.plan.dispatches}))
        ref, naive = expected(kernel, case)
        rows = judge(case, got, ref, naive, suspects=suspects(code, probe), interface=interfaces.of(kernel))
    return [{**r, "kernel": kernel.id} for r in rows]
