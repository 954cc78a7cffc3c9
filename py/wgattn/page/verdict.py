"""The verdict of a live run, and of a run of every kernel: what agreed with what, in the words the
page shows (it only shows them).

A run is judged on its runtimes (the browser's WebGPU, the float64 reference here, the server's
native run) and its pairs (wgattn.page.compare):

    pass      every runtime ran and every pair of every output agrees        "PASS"
    partial   every pair that ran agrees but a runtime did not run, which    "PASS where it ran"
              is never counted as passing there; or (`unchecked`) fewer      "NOT CHECKED HERE"
              than two runtimes ran and none failed: nothing was compared,
              so no pass, and no failure either
    fail      a pair disagrees, or a runtime that should have run failed     "FAIL"

Why a runtime did not run is data (`not_run`: its reason, and whether it was skipped, because
that adapter cannot run the kernel, or failed).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Literal, Mapping, Sequence, Tuple, TypedDict

__all__ = ["RUNTIMES", "Runtime", "NotRun", "Verdict", "LiveSummary", "judge", "summarise"]

WORDS = {
    "browser": "your browser's WebGPU",
    "pyodide": "the float64 reference (NumPy in this page)",
    "native": "native wgpu-py on the server",
}
SHORT = {"browser": "browser", "pyodide": "reference", "native": "native"}
WORD = {"pass": "PASS", "partial": "PASS where it ran", "fail": "FAIL"}
UNCHECKED = "NOT CHECKED HERE"

State = Literal["pass", "partial", "fail"]
Runtime = Literal["browser", "pyodide", "native"]
RUNTIMES: Tuple[Runtime, ...] = ("browser", "pyodide", "native")


class NotRun(TypedDict):
    """A runtime with no outputs in a run, and why."""

    runtime: Runtime
    kind: Literal["skipped", "error"]  # skipped: that adapter cannot run the kernel; error: it failed
    reason: str


class Verdict(TypedDict):
    """A live run's verdict (LiveResult.verdict): its state, the word and sentence the page shows
    after the kernel's name, amber notes, and the reasons behind them as data."""

    state: State
    unchecked: bool  # fewer than two runtimes ran and none failed: nothing compared
    word: str  # PASS, PASS where it ran, NOT CHECKED HERE, FAIL
    text: str
    notes: List[str]
    worst: float  # the worst pair's max |error| as a multiple of its allowance (0 with no pair)
    ran: List[Runtime]  # the runtimes with outputs, in RUNTIMES order
    not_run: List[NotRun]


class LiveSummary(TypedDict):
    """The verdict of a run of every kernel (PageSession.live_summary): how many passed in all
    three runtimes, and which did not."""

    state: State
    word: str
    text: str
    notes: List[str]
    passed: List[str]  # kernel ids: "pass"
    native_only: List[str]  # "partial" with two runtimes compared: not run in this browser
    unchecked: List[str]  # nothing compared
    failed: List[str]


def _and(xs: Sequence[str]) -> str:
    """ "a, b and c"."""
    return "".join(xs) if len(xs) < 2 else f"{', '.join(xs[:-1])} and {xs[-1]}"


def _sci(x: float) -> str:
    """An error or allowance as the page's tables show it: 2 digits, exponent form."""
    return f"{x:.2e}" if isinstance(x, (int, float)) else str(x)


def _ratio(p: Mapping[str, Any]) -> float:
    """A pair's error as a multiple of its allowance (infinite for an infinite or NaN error)."""
    e, a = float(p["max_abs_err"]), float(p["allowance"])
    if math.isnan(e) or math.isnan(a):
        return math.inf
    return e / a if a > 0 else (math.inf if e > 0 else 0.0)


def judge(runtimes: Mapping[str, Mapping[str, Any]], pairs: Sequence[Mapping[str, Any]], outputs: Sequence[str]) -> Verdict:
    """The verdict of a run whose `runtimes` (RuntimeReport of wgattn.page.replies, by name) produced
    `pairs` (OutputPair) on `outputs`."""
    ran = [n for n in RUNTIMES if n in runtimes and runtimes[n]["ok"]]
    not_run: List[NotRun] = []
    for n in RUNTIMES:
        if n in ran:
            continue
        r = runtimes.get(n, {"ok": False})
        if r.get("error"):
            not_run.append({"runtime": n, "kind": "error", "reason": str(r["error"])})
        else:
            not_run.append({"runtime": n, "kind": "skipped", "reason": str(r.get("skipped") or "no result")})
    failing = [p for p in pairs if not p["pass"]]
    errored = any(x["kind"] == "error" for x in not_run)
    worst = max([0.0] + [_ratio(p) for p in pairs])
    unchecked = len(ran) < 2 and not errored and not failing
    state: State
    if unchecked:
        state = "partial"
    elif failing or errored or not pairs:
        state = "fail"
    else:
        state = "partial" if not_run else "pass"
    if failing:
        disagree = [
            f"{SHORT[p['a']]} and {SHORT[p['b']]} disagree on {p['output']} "
            f"(max |error| {_sci(p['max_abs_err'])}, allowed {_sci(p['allowance'])})"
            for p in failing
        ]
        text = _and(disagree) + "."
    elif len(ran) >= 2:
        text = f"{_and([WORDS[n] for n in ran])} agree on {_and(list(outputs))}: the worst error is {worst:#.2g}× its allowance."
    else:
        text = f"only {_and([WORDS[n] for n in ran]) or 'no runtime'} ran: nothing to compare."
    notes = [
        f"Not run in {WORDS[x['runtime']]}: {x['reason']}"
        + (". It does not count as passing in this browser." if x["runtime"] == "browser" and state != "fail" else ".")
        for x in not_run
    ]
    return {
        "state": state,
        "unchecked": unchecked,
        "word": UNCHECKED if unchecked else WORD[state],
        "text": text,
        "notes": notes,
        "worst": worst,
        "ran": ran,
        "not_run": not_run,
    }


def summarise(verdicts: Sequence[Mapping[str, object]]) -> LiveSummary:
    """The verdict of a run of every kernel from each run's {"kernel", "verdict"}: "pass" when
    every kernel passed in all three runtimes, "fail" when any failed, "partial" otherwise."""
    by_state: Dict[str, List[str]] = {"pass": [], "native_only": [], "unchecked": [], "fail": []}
    for i, run in enumerate(verdicts):
        v = run.get("verdict") if isinstance(run, Mapping) else None
        kernel = run.get("kernel") if isinstance(run, Mapping) else None
        if not isinstance(kernel, str) or not isinstance(v, Mapping) or v.get("state") not in WORD:
            raise ValueError(f"run {i} must be {{kernel, verdict}} with a verdict of PageSession.finish, got {run!r}")
        if v.get("unchecked"):
            by_state["unchecked"].append(kernel)
        else:
            by_state["native_only" if v["state"] == "partial" else str(v["state"])].append(kernel)
    passed, native, unchecked, failed = by_state["pass"], by_state["native_only"], by_state["unchecked"], by_state["fail"]
    state: State = "fail" if failed else "partial" if native or unchecked else "pass"
    text = f"{len(passed)} of {len(verdicts)} kernels pass in all three runtimes" + (
        f"; failing: {', '.join(failed)}." if failed else "."
    )
    notes = []
    if native:
        notes.append(
            f"{len(native)} not run in this browser, checked only between the reference and native wgpu-py "
            f"(not counted as passing here): {', '.join(native)}."
        )
    if unchecked:
        notes.append(
            f"{len(unchecked)} not checked here: neither this browser nor the server's adapter can run "
            f"{'them' if len(unchecked) > 1 else 'it'} (its details say what each lacks): {', '.join(unchecked)}."
        )
    return {
        "state": state,
        "word": WORD[state],
        "text": text,
        "notes": notes,
        "passed": passed,
        "native_only": native,
        "unchecked": unchecked,
        "failed": failed,
    }
