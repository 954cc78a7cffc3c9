"""Schemathesis over a running server's OpenAPI document: every operation, cases drawn from the
schema (positive: what it says is valid; negative: what it says is not), each sent as real HTTP.
Shared by the slow-tier test (tests/test_schema_fuzz.py) and lab/server_load/schema_fuzz.py (the full count).

A case is a hang when no answer comes within `timeout` seconds. `fuzz` returns the counts by
mode and status, the 5xx answers and hangs (the first few, with their bodies), the slowest
answers, for positive cases the share answered 200, over all of them and over those that send no
tensors, and why the other positive cases were refused: each reason (numbers blanked) and its
class in REFUSALS, the rules the schema cannot state. A positive case refused for any other
reason ("other") is a schema that says less than the server checks."""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Dict, List

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable

__all__ = ["fuzz", "REFUSALS", "refusal_class"]

HOST = {"Host": "localhost"}  # the app's TrustedHost default

# Why a case the schema says is valid may still be refused: what JSON Schema cannot state (or, for
# GQA, states only as a branch per value: app/schemas.py says why it does not), each a regex over
# the reason with numbers blanked (N).
REFUSALS = {
    # A tensor's shape follows from the configuration, its data's length from its shape.
    "tensor shape": r"^\w+: shape \[.*\] of \w+ needs N bytes|^input '\w+' must be \w+ of shape|^unknown inputs \[",
    # A product of fields against MAX_ELEMENTS or MAX_SCORES (a memory bound).
    "case size": r"^case too large|^the cache \(",
    # One field against another.
    "GQA": r"must be a multiple of heads_kv \(N\) for grouped-query attention$",
    "between fields": (
        r"^positions must be an integer in N\.\.N"  # attn_probs_batched: positions <= history
        r"|^seq_len \(N\) must hold"  # paged_decode: seq_len >= new_tokens
        r"|causal_align='bottom_right' with causal=True"  # varlen_fwd: only where lengths are equal
    ),
    # A kernel needing what this adapter lacks (the answer says `unavailable`).
    "adapter": r"needs adapter features",
    # A value the kernel's float32 (or float16) arithmetic cannot hold: a bound on a product of
    # the scale and the inputs' magnitudes (wgattn.ranges), which depends on the tensors' values.
    "range": r"cannot hold this case: ",
}


def refusal_class(reason: str) -> str:
    """The REFUSALS class of a reason (as _reason blanks it), or "other"."""
    return next((name for name, pattern in REFUSALS.items() if re.search(pattern, reason)), "other")


def _sends_tensors(case) -> bool:
    body = case.body if isinstance(case.body, dict) else {}
    return isinstance(body.get("inputs"), dict) and bool(body["inputs"])


def _reason(answer) -> str:
    """A 4xx answer's reason with its numbers blanked, so that like refusals count together: the
    fields and error types of a validation error, or the text of a `detail` string."""
    try:
        detail = answer.json()["detail"]
    except (ValueError, KeyError, TypeError):
        return answer.text[:80]
    if isinstance(detail, list):
        text = "; ".join(sorted({f"{'.'.join(str(p) for p in e.get('loc', []))}: {e.get('type')}" for e in detail}))
    else:
        text = str(detail)
    return re.sub(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", "N", text)[:120]


def _by_class(refusals: Counter) -> Dict[str, int]:
    counts: Counter = Counter()
    for (_, _, reason), n in refusals.items():
        counts[refusal_class(reason)] += n
    return dict(counts)


def fuzz(url: str, examples: int, modes=("positive", "negative"), timeout: float = 150, seed: int = 0) -> Dict:
    """Up to `examples` cases per operation and mode against the server at `url`."""
    schema = schemathesis.openapi.from_url(url + "/openapi.json", headers=HOST)
    counts: Counter = Counter()
    tensors: Counter = Counter()
    refusals: Counter = Counter()
    bad: List[dict] = []
    slowest: List[tuple] = []  # (seconds, status, body), the 5 slowest answers
    for result in schema.get_all_operations():
        op = result.ok()
        for mode in modes:

            @given(case=op.as_strategy(generation_mode=schemathesis.GenerationMode(mode)))
            @settings(
                max_examples=examples,
                deadline=None,
                database=None,
                derandomize=seed == 0,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.generate],
            )
            def one(case):
                t0 = time.perf_counter()
                try:
                    answer = case.call(headers=HOST, timeout=timeout)
                    status: object = answer.status_code
                except requests.Timeout:
                    answer, status = None, "hang"
                shown = {k: v for k, v in case.body.items() if k != "inputs"} if isinstance(case.body, dict) else op.label
                slowest.append((round(time.perf_counter() - t0, 2), status, str(shown)[:300]))
                slowest[:] = sorted(slowest, key=lambda row: -row[0])[:5]
                counts[mode, status] += 1
                if mode == "positive":
                    tensors[_sends_tensors(case), status] += 1
                    if answer is not None and 400 <= answer.status_code < 500:
                        refusals[answer.status_code, _sends_tensors(case), _reason(answer)] += 1
                if (answer is None or answer.status_code >= 500) and len(bad) < 10:
                    bad.append(
                        {
                            "operation": op.label,
                            "mode": mode,
                            "status": status,
                            "body": str(case.body)[:300],
                            "answer": answer.text[:300] if answer is not None else "",
                        }
                    )

            try:
                one()
            except Unsatisfiable:  # nothing to draw: a GET without parameters has no negative case
                pass
    positive = sum(n for (mode, _), n in counts.items() if mode == "positive")
    no_tensors = sum(n for (sent, _), n in tensors.items() if not sent)
    # Those the adapter runs: a kernel needing a feature it lacks depends on the machine, not the schema.
    runnable = no_tensors - sum(n for (_, sent, r), n in refusals.items() if not sent and refusal_class(r) == "adapter")
    return {
        "cases": sum(counts.values()),
        "by_mode_and_status": {f"{m} {s}": n for (m, s), n in sorted(counts.items(), key=str)},
        "server_errors": sum(n for (_, s), n in counts.items() if s != "hang" and s >= 500),
        "hangs": sum(n for (_, s), n in counts.items() if s == "hang"),
        "positive_200_share": counts["positive", 200] / positive if positive else None,
        "positive_without_tensors_200_share": tensors[False, 200] / no_tensors if no_tensors else None,
        "positive_without_tensors": no_tensors,
        "positive_without_tensors_runnable_200_share": tensors[False, 200] / runnable if runnable else None,
        "slowest_s": slowest[0][0] if slowest else 0.0,
        "slowest": slowest,
        "positive_refusals_by_class": _by_class(refusals),
        "positive_refusals": [
            {"status": s, "sends_tensors": t, "class": refusal_class(r), "reason": r, "cases": n}
            for (s, t, r), n in refusals.most_common()
        ],
        "failures": bad,
    }
