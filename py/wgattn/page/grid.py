"""The conformance view: the `wgattn check` grid of one interface, run by the browser's WebGPU
one (kernel, case) item at a time and judged here."""

from __future__ import annotations

import json
from typing import Dict, List, Optional, Tuple

from .. import registry
from ..conformance import OutputRow, expected, judge, judged_case, suspects
from ..interfaces import module
from ..precision import ProbeReport
from .tables import GridJob, GridRun


def start(request_json: str) -> Tuple[GridJob, List[Dict[str, str]]]:
    """{"interface", "source"?, "features"?} -> the job (the project's kernels of that interface
    that the device's features allow, or the pasted WGSL, on the interface's conformance grid)
    and the kernels skipped [{"kernel", "reason"}]."""
    request = json.loads(request_json)
    if not isinstance(request, dict):
        raise ValueError("the grid request must be an object {interface, source?, features?}")
    reg = registry.load()
    iface = reg.interface(request.get("interface", ""))
    source = request.get("source") or None
    skipped = []
    if source is not None:
        kernels = [reg.user_kernel(iface.name, "pasted WGSL")]
    else:
        # A kernel needing a feature the browser's device lacks is skipped with the reason.
        have = set(request.get("features") or ())
        kernels = []
        for k in reg.kernels_of(iface.name):
            missing = [f for f in k.requires if f not in have]
            if missing:
                skipped.append({"kernel": k.id, "reason": f"needs adapter features {missing}, which this device lacks"})
            else:
                kernels.append(k)
    mod = module(iface.name)
    items = [(k, c) for k in kernels for c in mod.conformance_cases()]
    return GridJob(mod, items, source), skipped


class GridRow(OutputRow, total=False):
    kernel: str  # the kernel judged (the page's table names it)


def item_run(job_id: int, job: GridJob, index: int) -> GridRun:
    """Item `index` of job `job_id`, planned for the browser."""
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(job.items):
        raise ValueError(f"item must be an integer in 0..{len(job.items) - 1}, got {index!r}")
    kernel, case = job.items[index]
    case = judged_case(kernel, case)
    return GridRun(job_id, index, kernel, case, job.module.plan(kernel, case, source=job.source))


def verdict(state: GridRun, error: str, probe: Optional[ProbeReport]) -> List[GridRow]:
    """Rows per output of a run the browser finished, or one failed row carrying its `error`. A
    failing output is localised, with the browser's precision probe (when it ran) naming suspects."""
    case, kernel = state.case, state.kernel
    if error:
        rows: List[OutputRow] = [
            {"case": case.name, "output": "-", "max_abs_err": float("inf"), "allowance": 0.0, "pass": False, "error": error}
        ]
    else:
        got = state.plan.unpack(state.raw)
        code = "\n".join(sorted({d.source for d in state.plan.dispatches}))
        ref, naive = expected(kernel, case)
        rows = judge(case, got, ref, naive, suspects=suspects(code, probe))
    return [{**r, "kernel": kernel.id} for r in rows]
