"""The conformance core: run one case of an interface on a runtime and judge every output with
the tolerance rule against the float64 reference. `wgattn check` and the tests build on this."""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional

import numpy as np

from . import tolerance
from .interfaces import Case
from .registry import Kernel

__all__ = ["judge", "judged_case", "expected", "run_case"]

PRECISIONS = ("f32", "f16")


def judged_case(kernel: Kernel, case: Case) -> Case:
    """The case as a kernel of `kernel.precision` is judged on it: an f16 kernel gets its float
    inputs rounded to float16 first (what it can represent), so only its arithmetic is judged."""
    if kernel.precision not in PRECISIONS:
        raise ValueError(f"{kernel.id}: precision must be one of {PRECISIONS}, got {kernel.precision!r}")
    if kernel.precision == "f32":
        return case
    rounded = {name: (a.astype(np.float16).astype(np.float32) if a.dtype.kind == "f" else a)
               for name, a in case.inputs.items()}
    return Case(case.name, rounded, dict(case.options))


def expected(kernel: Kernel, case: Case):
    """(float64 reference, naive run in the kernel's precision) on a judged case."""
    from .interfaces import module

    mod = module(kernel.interface.name)
    naive_dtype = np.float16 if kernel.precision == "f16" else np.float32
    return mod.reference(case), mod.reference(case, dtype=naive_dtype)


def judge(case: Case, got: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray],
          naive: Mapping[str, np.ndarray]) -> List[Dict[str, object]]:
    """One row per output: {case, output, max_abs_err, allowance, pass, naive_err}."""
    rows = []
    for name, r in ref.items():
        naive_err = tolerance.max_abs_err(naive[name], r)
        g = got.get(name)
        if g is None or np.shape(g) != np.shape(r):
            err = float("inf")
        else:
            err = tolerance.max_abs_err(g, r)
        allowed = tolerance.allowance(naive_err, r)
        rows.append({"case": case.name, "output": name, "max_abs_err": err, "allowance": allowed,
                     "naive_err": naive_err, "pass": bool(err <= allowed)})
    return rows


def run_case(runtime, kernel: Kernel, case: Case, source: Optional[str] = None,
             entry_points: Optional[Mapping[str, str]] = None,
             overrides: Optional[Mapping[str, int]] = None) -> List[Dict[str, object]]:
    """Run `case` natively on `kernel` (or WGSL `source` on its interface) and judge it."""
    from .interfaces import module

    mod = module(kernel.interface.name)
    case = judged_case(kernel, case)
    plan = mod.plan(kernel, case, source=source, entry_points=entry_points, overrides=overrides)
    got = runtime.run(plan).outputs
    return judge(case, got, *expected(kernel, case))
