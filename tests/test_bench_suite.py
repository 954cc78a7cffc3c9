"""bench/suite.py's browser passes without a browser: the two Chromiums (robustness on and off)
take each request in turn, the order alternating; a request that would end past the run's time
budget is skipped, and then in both passes alike; a browser that cannot open costs its own pass
only. A clock that the fake page advances stands in for time (no test waits)."""

from __future__ import annotations

import asyncio
import json

import pytest

from bench import suite
from helpers import TARGET
from wgattn import protocol
from wgattn.page import bench_jobs


class Clock:
    def __init__(self):
        self.now = 1000.0

    def time(self) -> float:
        return self.now


class FakePass(suite.BrowserPass):
    """A browser pass whose page takes `cost` seconds of the fake clock per request."""

    def __init__(self, name, dawn, out, clock, calls, cost=10.0, adapter=True):
        super().__init__(suite.parse_args([]), name, dawn, out)
        self.clock, self.calls, self.cost, self.adapter = clock, calls, cost, adapter

    async def open(self, base):
        if not self.adapter:
            raise suite.NoAdapter("no adapter")
        self.browser = object()

    async def live_check(self):
        self.calls.append((self.name, "live"))

    async def bench(self, req, timeout):
        self.calls.append((self.name, req["op"]))
        self.clock.now += self.cost
        return [{"impl": "k", "mode": self.mode, "op": req["op"]}]

    async def close(self):
        self.browser = None


def _run(monkeypatch, tmp_path, budget_s, adapters=(True, True)):
    clock, calls, saved = Clock(), [], []
    monkeypatch.setattr(suite, "time", clock)
    monkeypatch.delenv("WGATTN_VULKAN_FALLBACK", raising=False)
    passes = [
        FakePass("checked", [], tmp_path, clock, calls, adapter=adapters[0]),
        FakePass("trusted", ["disable_robustness"], tmp_path, clock, calls, adapter=adapters[1]),
    ]
    requests = [{"op": op, "B": 1, "H": 1, "seq_lens": "64", "D": 16} for op in ("r0", "r1", "r2")]
    report: dict = {}
    end = clock.now + budget_s
    asyncio.run(suite.run_browsers(passes, "http://x", requests, True, end, report, saved.extend))
    return calls, saved, passes


def test_the_passes_take_each_request_in_turn(monkeypatch, tmp_path):
    calls, saved, passes = _run(monkeypatch, tmp_path, budget_s=1000)
    assert calls == [
        ("checked", "live"),
        ("checked", "r0"),
        ("trusted", "r0"),
        ("trusted", "r1"),
        ("checked", "r1"),
        ("checked", "r2"),
        ("trusted", "r2"),
    ]
    assert sorted((r["mode"], r["op"]) for r in saved) == sorted(
        (m, op) for m in ("checked", "trusted") for op in ("r0", "r1", "r2")
    )
    assert all(p.browser is None for p in passes)  # closed


def test_a_request_that_would_end_past_the_budget_is_skipped_in_both_passes(monkeypatch, tmp_path):
    calls, saved, passes = _run(monkeypatch, tmp_path, budget_s=25)  # two requests of 10 s fit, a third not
    assert [c for c in calls if c[1] != "live"] == [("checked", "r0"), ("trusted", "r0")]
    for p in passes:
        assert p.report["skipped"] == ["r1 1,1,64,16", "r2 1,1,64,16"]


def test_a_browser_without_an_adapter_costs_only_its_own_pass(monkeypatch, tmp_path):
    calls, saved, passes = _run(monkeypatch, tmp_path, budget_s=1000, adapters=(False, True))
    assert "NoAdapter" in passes[0].report["error"]
    assert calls == [("trusted", "live"), ("trusted", "r0"), ("trusted", "r1"), ("trusted", "r2")]
    assert {r["mode"] for r in saved} == {"trusted"}


def test_a_failed_request_costs_that_request_and_a_hung_page_its_pass(monkeypatch, tmp_path):
    clock, calls, saved = Clock(), [], []
    monkeypatch.setattr(suite, "time", clock)

    class Failing(FakePass):
        async def bench(self, req, timeout):
            if req["op"] == "r0":
                self.calls.append((self.name, "r0"))
                raise RuntimeError("the page threw") if self.mode == "checked" else TimeoutError("no answer")
            return await super().bench(req, timeout)

    passes = [Failing("checked", [], tmp_path, clock, calls), Failing("trusted", ["disable_robustness"], tmp_path, clock, calls)]
    requests = [{"op": op, "B": 1, "H": 1, "seq_lens": "64", "D": 16} for op in ("r0", "r1")]
    asyncio.run(suite.run_browsers(passes, "http://x", requests, False, clock.now + 1000, {}, saved.extend))
    assert calls == [("checked", "r0"), ("trusted", "r0"), ("checked", "r1")]
    assert passes[0].report["failed_requests"][0]["error"] == "RuntimeError: the page threw" and "error" not in passes[0].report
    assert passes[1].report["error"] == "TimeoutError: no answer"
    assert [(r["mode"], r["op"]) for r in saved] == [("checked", "r1")]


@pytest.mark.parametrize(
    "argv, want_ms",
    [
        (["--gpu", "nvidia"], suite.GPU_SAMPLE_MS),
        (["--gpu", "software"], protocol.Protocol.min_sample_ms),
        (["--gpu", "nvidia", "--min-sample-ms", "5"], 5.0),
    ],
)
def test_every_series_native_and_in_the_page_takes_the_runs_shortest_sample(argv, want_ms, tmp_path):
    """A GPU's samples default to GPU_SAMPLE_MS (busy enough to keep its clock); the page's requests
    carry it, and the page's protocol is then the suite's."""
    proto = suite.suite_protocol(suite.parse_args(argv))
    assert proto.min_sample_ms == want_ms
    (fwd,) = suite.page_requests(["flash_fwd.tiled"], [(1, 2, 64, 16)], True, proto, 1)
    tiles = tmp_path / "tiles.json"
    tiles.write_text("[]")
    (gemm,) = suite.gemm_requests(str(tiles), "64,64,64", proto, 1)
    for req in (fwd, gemm):
        assert req["min_sample_ms"] == want_ms
    job, _ = bench_jobs.start(json.dumps(fwd), TARGET, 1)
    assert job.protocol == proto


def test_a_min_sample_the_protocol_refuses_stops_the_suite_with_why():
    with pytest.raises(SystemExit, match="suite: min_sample_ms must be a number in 0.0..10000.0"):
        suite.suite_protocol(suite.parse_args(["--min-sample-ms", "-3"]))


def test_a_grid_case_whose_error_is_not_finite_is_reported_as_a_failure(tmp_path, capsys):
    """The page's summary carries a NaN or infinite worst ratio as JSON's null: the pass reports
    the case as failed, with its grid's counts, instead of stopping."""

    class Page:
        async def eval(self, script, timeout=None):
            return {"status": "done", "passed": 1, "failed": 1, "skipped": [], "cases": [
                {"kernel": "k", "case": "a", "pass": True, "worst": 0.1},
                {"kernel": "k", "case": "b", "pass": False, "worst": None},
            ]}  # fmt: skip

    p = suite.BrowserPass(suite.parse_args([]), "checked", [], tmp_path)
    p.browser = Page()
    asyncio.run(p.grid("flash_fwd"))
    assert p.report["grid"]["flash_fwd"]["failed"] == 1
    said = capsys.readouterr()
    assert "FAIL k b: worst |err| / allowance not finite" in said.out + said.err
