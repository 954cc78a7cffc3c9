"""The measurement protocol (wgattn.protocol) on made-up clocks: warm-up by time until consecutive
rounds agree (capped), interleaved rounds that let a drift hit every entry alike, the timer's
resolution read off its timestamps, and the statistics every record carries, one function for
CPython and the page. No GPU: the entries are stand-ins whose times we choose."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import TARGET
from wgattn import bench, protocol
from wgattn.page import bench_jobs

FAST = protocol.Protocol(rounds=10, warmup_s=1.0, warmup_cap_s=3.0, min_sample_ms=0.0)


class Clock:
    """A clock the stand-in entries advance by the time they 'run'."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Entry(protocol.Timed):
    """A stand-in whose run takes `ms(now)` milliseconds; it logs which entry ran when."""

    timer = "gpu"

    def __init__(self, name, clock, ms, log, stamp_tick=1):
        self.name, self.clock, self.ms, self.log, self.tick = name, clock, ms, log, stamp_tick

    def sample(self, reps):
        ms = self.ms(self.clock.t)
        start = int(self.clock.t * 1e9) // self.tick * self.tick
        self.clock.t += ms * reps / 1e3
        end = int(self.clock.t * 1e9) // self.tick * self.tick
        self.log.append(self.name)
        return ms, [start, end]


def test_schedule_times_every_entry_once_per_round_and_rotates_who_goes_first():
    order = protocol.schedule(3, 5)
    assert all(sorted(r) == [0, 1, 2] for r in order)
    assert [r[0] for r in order] == [0, 1, 2, 0, 1]


def test_warm_up_lasts_at_least_warmup_s_and_until_rounds_agree():
    p = protocol.Protocol(warmup_s=2.0, warmup_cap_s=6.0, settle_s=0.03, settle_rounds=3, settle_tol=0.03)
    assert protocol.warm_verdict(p, 1.0, [10, 10, 10]) is None  # agree, but too early
    assert protocol.warm_verdict(p, 2.5, [20, 20]) is None  # too few rounds to tell
    assert protocol.warm_verdict(p, 2.5, [20, 12, 10, 10.2, 10.1]) is True
    assert protocol.warm_verdict(p, 2.5, [12, 11, 10]) is None  # still speeding up: 20% apart
    assert protocol.warm_verdict(p, 6.0, [12, 11, 10]) is False  # the cap: not settled
    # The last settle_s of work, not just the last few rounds: a slow ramp is still a ramp.
    slow = [10.0 - 0.01 * i for i in range(200)]
    assert protocol.warm_verdict(p, 2.5, slow) is True  # 30 ms of rounds: 0.3% apart
    assert protocol.warm_verdict(protocol.Protocol(warmup_s=2.0, settle_s=1.0), 2.5, slow) is None  # 1 s of them: 13%


def test_measure_keeps_warming_a_cold_clock_and_interleaves():
    """A GPU that speeds up from 3x to 1x over its first 2 s: the warm-up runs until the rounds
    agree, and only the rounds after it are recorded."""
    clock, log = Clock(), []
    ramp = lambda t: 1.0 + 2.0 * max(0.0, 1.0 - t / 2.0)  # noqa: E731  ms: 3 at t=0, 1 from t=2 s
    entries = [Entry(n, clock, ramp, log) for n in "abc"]
    got = protocol.measure(entries, FAST, clock=clock)
    assert all(m.warmed for m in got)
    assert got[0].warmup_s >= 2.0  # past the ramp, though warmup_s is 1
    for m in got:
        assert len(m.samples) == FAST.rounds and max(m.samples) == pytest.approx(1.0)
    timed = log[-3 * FAST.rounds :]
    rounds = [timed[i : i + 3] for i in range(0, len(timed), 3)]
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds)  # every entry once per round
    assert {r[0] for r in rounds} == {"a", "b", "c"}  # and each goes first in some round


def test_a_warm_up_that_never_settles_is_capped_and_says_so():
    clock, log = Clock(), []
    noisy = iter(np.random.RandomState(0).uniform(1, 3, size=100000))
    entries = [Entry("a", clock, lambda t: next(noisy), log)]
    (m,) = protocol.measure(entries, FAST, clock=clock)
    assert not m.warmed and FAST.warmup_cap_s <= m.warmup_s < FAST.warmup_cap_s + 0.01


def test_interleaving_lets_a_drift_hit_identical_entries_alike():
    """Identical kernels under a clock that slows down steadily: interleaved, their medians agree;
    timed one after the other they would differ by the drift."""
    clock, log = Clock(), []
    drift = lambda t: 1.0 + 0.05 * t  # noqa: E731  a steady 5% per second
    p = protocol.Protocol(rounds=30, warmup_s=0.0, warmup_cap_s=0.0, min_sample_ms=0.0)
    a, b = protocol.measure([Entry("a", clock, drift, log), Entry("b", clock, drift, log)], p, clock=clock)
    med = lambda m: protocol.summarize(p, m.samples).median_ms  # noqa: E731
    assert abs(med(a) / med(b) - 1) < 0.002
    (alone_a,) = protocol.measure([Entry("a", clock, drift, log)], p, clock=clock)
    (alone_b,) = protocol.measure([Entry("b", clock, drift, log)], p, clock=clock)
    assert med(alone_b) / med(alone_a) - 1 > 0.002  # what interleaving removes


def test_reps_make_a_sample_long_against_the_timer_tick():
    p = protocol.Protocol(min_sample_ms=2.0, resolutions_per_sample=200)
    assert protocol.reps_for(p, 5.0, 1.0) == 1  # a long run on a nanosecond timer: one per sample
    assert protocol.reps_for(p, 0.5, 1.0) == 4  # 2 ms at least
    quantum = 65536.0  # Dawn's quantized timestamps: 200 ticks = 13.1 ms
    assert protocol.reps_for(p, 1.0, quantum) == 14
    assert protocol.reps_for(p, 1e-6, 1.0) == p.max_reps  # bounded ...
    assert protocol.reps_for(p, 1e-6, 1.0, passes=5) == protocol.MOST_QUERIES // 10  # ... and by the query set


def test_the_resolution_is_read_off_the_timestamps():
    assert protocol.timer_resolution_ns([1000, 1003, 1010, 2001]) == 1
    quantized = [65536 * k for k in (17, 18, 20, 25)]
    assert protocol.timer_resolution_ns(quantized) == 65536
    assert protocol.timer_resolution_ns([5]) == 0  # unknown
    clock, log = Clock(), []
    (m,) = protocol.measure([Entry("a", clock, lambda t: 0.7, log, stamp_tick=65536)], FAST, clock=clock)
    assert m.resolution_ns == 65536 and m.reps * 0.7 >= 200 * 65536e-6


def test_summarize_is_numpys_median_and_quartiles():
    xs = list(np.random.RandomState(1).lognormal(0, 0.3, size=17))
    s = protocol.summarize(FAST, xs)
    q1, med, q3 = np.percentile(xs, [25, 50, 75])
    assert (s.q1_ms, s.median_ms, s.q3_ms) == pytest.approx((q1, med, q3), rel=1e-12)
    assert (s.min_ms, s.max_ms) == (min(xs), max(xs))
    assert s.spread == pytest.approx((q3 - q1) / med) and s.wide
    assert not protocol.summarize(FAST, [1.0, 1.01, 0.99, 1.0, 1.0]).wide
    for bad, why in (([], "no finite"), ([1.0, float("nan")], "no finite"), ([0.0, 0.0, 1.0], "not positive")):
        with pytest.raises(ValueError, match=why):
            protocol.summarize(FAST, bad)


def test_bad_knobs_are_refused_naming_the_range():
    with pytest.raises(ValueError, match="rounds must be an integer in 5..1000, got 2"):
        protocol.Protocol(rounds=2)
    with pytest.raises(ValueError, match=r"warmup_cap_s \(1.0\) must be at least warmup_s \(2.0\)"):
        protocol.Protocol(warmup_s=2.0, warmup_cap_s=1.0)
    with pytest.raises(ValueError, match="unknown protocol field"):
        protocol.Protocol.from_json({"runs": 3})


def test_the_page_and_cpython_write_the_same_record_from_the_same_samples():
    """One function computes a record's statistics on both sides (the page's Python calls it)."""
    request = {"op": "fwd", "impls": "flash_fwd.tiled", "B": 1, "H": 2, "D": 16, "seq_lens": "64", "causal": True, "rounds": 5}
    request["user_agent"] = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0"
    job, reply = bench_jobs.start(json.dumps(request), TARGET, bench_id=1)
    samples = [1.2, 1.0, 1.1, 1.4, 1.05]
    payload = {"samples": samples, "stamps": [0, 1024, 4096], "reps": 3, "warmup_s": 2.5, "warmed": True, "timer": "gpu"}
    page, last = bench_jobs.record(job, 0, json.dumps(dict(payload, adapter="a (browser WebGPU)")))
    assert last
    m = protocol.Measured(samples, 3, 2.5, True, 1024.0)
    info = bench.RunInfo("chromium", "Chromium 156.0.0.0", [], page["time"], "")
    cpython = bench.make_record(
        "fwd", "flash_fwd.tiled", [1, 2, 64, 16], True, "f32", "a (browser WebGPU)", m, job.protocol, "gpu", info
    )
    assert page == dict(cpython.to_json(), mode="checked", config=page["config"])
    assert page["runtime"] == "chromium" and page["timer_resolution_ns"] == 1024.0 and page["rounds"] == 5


@pytest.mark.parametrize(
    "agent, want",
    [
        (
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0 Safari/537.36",
            ("chromium", "Chromium 156.0.0.0"),
        ),
        ("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:141.0) Gecko/20100101 Firefox/141.0", ("firefox", "Firefox 141.0")),
        (
            "Mozilla/5.0 (Macintosh) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/26.0 Safari/605.1.15",
            ("safari", "Safari 26.0"),
        ),
        ("", ("browser", "")),
    ],
)
def test_the_browser_is_named_from_its_user_agent(agent, want):
    assert bench.browser_of(agent) == want
