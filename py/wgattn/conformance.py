"""The conformance core: run one case of an interface on a runtime and judge every output with
the tolerance rule against the float64 reference. `wgattn check` and the tests build on this."""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional

import numpy as np

from . import tolerance
from .interfaces import Case
from .registry import Kernel

__all__ = ["judge", "run_case"]


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
    plan = mod.plan(kernel, case, source=source, entry_points=entry_points, overrides=overrides)
    got = runtime.run(plan).outputs
    return judge(case, got, mod.reference(case), mod.reference(case, dtype=np.float32))
