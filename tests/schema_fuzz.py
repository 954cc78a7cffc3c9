"""Schemathesis over a running server's OpenAPI document: every operation, cases drawn from the
schema (positive: what it says is valid; negative: what it says is not), each sent as real HTTP.
Shared by the slow-tier test (tests/test_schema_fuzz.py) and bench/schema_fuzz.py (the full count).

A case is a hang when no answer comes within `timeout` seconds. `fuzz` returns the counts by
mode and status, the 5xx answers and hangs (the first few, with their bodies), the slowest answer,
and for positive cases the share answered 200, over all of them and over those that send no
tensors (a tensor's shape follows from the configuration and its data's length from the shape,
which JSON Schema cannot say, so schema-drawn tensors are refused with a 422 naming the shape)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Dict, List

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable

__all__ = ["fuzz"]

HOST = {"Host": "localhost"}  # the app's TrustedHost default


def _sends_tensors(case) -> bool:
    body = case.body if isinstance(case.body, dict) else {}
    return isinstance(body.get("inputs"), dict) and bool(body["inputs"])


def fuzz(url: str, examples: int, modes=("positive", "negative"), timeout: float = 150, seed: int = 0) -> Dict:
    """Up to `examples` cases per operation and mode against the server at `url`."""
    schema = schemathesis.openapi.from_url(url + "/openapi.json", headers=HOST)
    counts: Counter = Counter()
    tensors: Counter = Counter()
    bad: List[dict] = []
    slowest = 0.0
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
                nonlocal slowest
                t0 = time.perf_counter()
                try:
                    answer = case.call(headers=HOST, timeout=timeout)
                    status: object = answer.status_code
                except requests.Timeout:
                    answer, status = None, "hang"
                slowest = max(slowest, time.perf_counter() - t0)
                counts[mode, status] += 1
                if mode == "positive":
                    tensors[_sends_tensors(case), status] += 1
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
    return {
        "cases": sum(counts.values()),
        "by_mode_and_status": {f"{m} {s}": n for (m, s), n in sorted(counts.items(), key=str)},
        "server_errors": sum(n for (_, s), n in counts.items() if s != "hang" and s >= 500),
        "hangs": sum(n for (_, s), n in counts.items() if s == "hang"),
        "positive_200_share": counts["positive", 200] / positive if positive else None,
        "positive_without_tensors_200_share": tensors[False, 200] / no_tensors if no_tensors else None,
        "positive_without_tensors": no_tensors,
        "slowest_s": round(slowest, 2),
        "failures": bad,
    }
