"""The conformance core: run one case of an interface on a runtime and judge every output with
the tolerance rule against the float64 reference. `wgattn check` and the tests build on this."""

from __future__ import annotations

from typing import List, Mapping, Optional, Sequence, TypedDict

import numpy as np

from . import interfaces, tolerance
from .errors import DoesNotFit
from .interfaces import Case, Interface
from .localise import Localisation, localise
from .precision import ProbeReport
from .registry import Kernel

__all__ = ["judge", "judged_case", "expected", "run_case", "suspects"]

# One output of one case, judged ("pass" is a keyword, hence the functional form).
_Judged = TypedDict("_Judged", {"case": str, "output": str, "max_abs_err": float, "allowance": float, "pass": bool})


class OutputRow(_Judged, total=False):
    naive_err: float  # the naive implementation's error, the allowance's measure
    where: Localisation  # a failing output: where it is wrong
    error: str  # a case that could not run: why (wgattn check)
    skipped: str  # a case the kernel cannot take on this adapter: why (neither passed nor failed)


PRECISIONS = ("f32", "f16")


def judged_case(kernel: Kernel, case: Case) -> Case:
    """The case as a kernel of `kernel.precision` is judged on it: an f16 kernel gets its float
    inputs rounded to float16 first (what it can represent), so only its arithmetic is judged.
    A value it could not hold is refused first, on the inputs as given (ValueError saying the
    range: Interface.check_range), not rounded to an infinity."""
    if kernel.precision not in PRECISIONS:
        raise ValueError(f"{kernel.id}: precision must be one of {PRECISIONS}, got {kernel.precision!r}")
    if kernel.precision == "f32":
        return case
    interfaces.of(kernel).check_range(kernel, case)
    rounded = {name: (a.astype(np.float16).astype(np.float32) if a.dtype.kind == "f" else a) for name, a in case.inputs.items()}
    return Case(case.name, rounded, dict(case.options))


def expected(kernel: Kernel, case: Case):
    """(float64 reference, naive run in the kernel's precision) on a judged case."""
    iface = interfaces.of(kernel)
    naive_dtype = np.float16 if kernel.precision == "f16" else np.float32
    return iface.reference(case), iface.reference(case, dtype=naive_dtype)


def judge(
    case: Case,
    got: Mapping[str, np.ndarray],
    ref: Mapping[str, np.ndarray],
    naive: Mapping[str, np.ndarray],
    suspects: Sequence[str] = (),
    interface: Optional[Interface] = None,
) -> List[OutputRow]:
    """One row per output: {case, output, max_abs_err, allowance, pass, naive_err}, and for a
    failing output "where" (wgattn.localise: worst elements, |error| map, likely class, with the
    case's geometry where `interface`, the case's, has one; `suspects` are the kernel's
    built-ins that the runtime's precision probe found off)."""
    rows: List[OutputRow] = []
    for name, r in ref.items():
        naive_err = tolerance.max_abs_err(naive[name], r)
        g = got.get(name)
        if g is None or np.shape(g) != np.shape(r):
            err = float("inf")
        else:
            err = tolerance.max_abs_err(g, r)
        allowed = tolerance.allowance(naive_err, r)
        row: OutputRow = {
            "case": case.name,
            "output": name,
            "max_abs_err": err,
            "allowance": allowed,
            "naive_err": naive_err,
            "pass": bool(err <= allowed),
        }
        if not row["pass"]:
            row["where"] = localise(case, name, g if g is not None else np.zeros(0), r, allowed, suspects, interface=interface)
        rows.append(row)
    return rows


# Built-ins whose probe error counts against a kernel that calls them. log/log2 are left out:
# near 1 their allowed error is absolute (2^-21), huge in ulps of a result near 0, and fma's
# ulps measure a cancellation that an unfused a * b + c is allowed.
SUSPECT_CALLS = {"exp": "exp", "exp2": "exp2", "tanh": "tanh", "inverseSqrt": "inverseSqrt", "sqrt": "sqrt"}
SUSPECT_ULPS = 64.0


def suspects(source: str, probe: Optional[ProbeReport]) -> List[str]:
    """The built-ins `source` (WGSL) calls that the precision probe `probe` found more than
    SUSPECT_ULPS off, e.g. ["tanh: 687971 ulps (abs 1.4e-07)"]."""
    import re

    if not probe:
        return []
    code = re.sub(r"//[^\n]*", "", source)
    out = []
    for row in probe["functions"]:
        call = SUSPECT_CALLS.get(row["name"])
        if call and row["max_ulps"] > SUSPECT_ULPS and re.search(r"\b%s\s*\(" % call, code):
            out.append(f"{row['name']}: {row['max_ulps']:.0f} ulps (abs {row['max_abs']:.1e})")
    return out


def run_case(
    runtime,
    kernel: Kernel,
    case: Case,
    source: Optional[str] = None,
    entry_points: Optional[Mapping[str, str]] = None,
    overrides: Optional[Mapping[str, int]] = None,
) -> List[OutputRow]:
    """Run `case` on `runtime` (wgattn.native's, or one with its `target` and `run`) with `kernel`
    (or WGSL `source` on its interface) and judge it; a failing output is localised, with the
    runtime's precision probe (when it has one) naming the built-ins the kernel calls that it
    found off. DoesNotFit, saying why, when the kernel cannot take the case on this adapter (a
    head dim no tile fits, a knob it does not carry): a case to skip, not a result."""
    case = judged_case(kernel, case)
    plan = interfaces.of(kernel).plan(kernel, case, runtime.target, source=source, entry_points=entry_points, overrides=overrides)
    if plan.unavailable:
        raise DoesNotFit(plan.unavailable)
    got = runtime.run(plan).outputs
    ref, naive = expected(kernel, case)
    iface = interfaces.of(kernel)
    rows = judge(case, got, ref, naive, interface=iface)
    if not all(r["pass"] for r in rows) and hasattr(runtime, "precision"):
        # Rare: judge the failure again with the probe's suspects (the probe runs once per adapter).
        code = "\n".join(sorted({d.source for d in plan.dispatches}))
        rows = judge(case, got, ref, naive, suspects=suspects(code, runtime.precision()), interface=iface)
    return rows
