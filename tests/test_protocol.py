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
    p = protocol.Protocol(rounds=30, warmup_s=0.0, warmup_cap_s=0.0, min_sample_ms=10.0)  # 10 runs a sample
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
    assert protocol.reps_for(p, 0.5, 0.0) == 4  # an unknown tick: 2 ms


class Counted(Entry):
    """A stand-in that also logs how many runs each sample asked for."""

    def sample(self, reps):
        self.asked = getattr(self, "asked", []) + [reps]
        return super().sample(reps)


def test_a_warm_up_sample_lasts_min_sample_ms_by_the_priming_run_and_counts_as_that_much_work():
    """A 0.4 ms kernel with 20 ms samples: 50 runs a warm-up sample as in the rounds, so the GPU is
    as busy warming as timing; the warm-up's rounds are its work, and it settles as long ones do."""
    clock, log = Clock(), []
    p = protocol.Protocol.of(10, 0.5, 20.0)
    a = Counted("a", clock, lambda t: 0.4, log)
    (m,) = protocol.measure([a], p, clock=clock)
    warm = a.asked[1 : len(a.asked) - p.rounds]
    assert a.asked[0] == 1 and warm and set(warm) == {50} and m.reps == 50  # priming, warm-up, rounds
    assert m.warmed and m.warmup_s == pytest.approx(len(warm) * 0.02, rel=0.01)
    assert protocol.warm_reps(p, [0.4, 0.0, 30.0], [1, 1, 1]) == [50, p.max_reps, 1]  # unseen: bounded by max_reps
    assert protocol.warm_reps(protocol.Protocol(), [0.4], [1]) == [5]  # the default 2 ms


def test_a_longer_min_sample_raises_max_sample_ms_with_it_and_the_page_takes_it_from_the_request():
    assert protocol.Protocol.of(10, 1.0, 250.0).max_sample_ms == 250.0
    assert protocol.Protocol.of(10, 1.0, 20.0).max_sample_ms == protocol.Protocol.max_sample_ms
    with pytest.raises(ValueError, match="min_sample_ms must be a number in 0.0..10000.0"):
        protocol.Protocol.of(10, 1.0, -1.0)
    request = {"op": "fwd", "impls": "flash_fwd.tiled", "B": 1, "H": 2, "D": 16, "seq_lens": "64", "rounds": 5}
    job, reply = bench_jobs.start(json.dumps(dict(request, min_sample_ms=20)), TARGET, bench_id=1)
    assert job.protocol.min_sample_ms == 20.0 and reply["protocol"].min_sample_ms == 20.0
    job, _ = bench_jobs.start(json.dumps(request), TARGET, bench_id=1)
    assert job.protocol.min_sample_ms == protocol.Protocol.min_sample_ms
    with pytest.raises(ValueError, match=r"min_sample_ms must be a number of milliseconds in 0..1000, got 5000"):
        bench_jobs.start(json.dumps(dict(request, min_sample_ms=5000)), TARGET, bench_id=1)
    job, _ = bench_jobs.start(json.dumps(dict(request, min_sample_ms="10")), TARGET, bench_id=1)
    assert bench_jobs.warm_reps(job, json.dumps({"first_ms": [0.5, 20.0], "passes": [1, 2]})) == {"reps": [20, 1]}
    with pytest.raises(ValueError, match="one item per entry"):
        bench_jobs.warm_reps(job, json.dumps({"first_ms": [0.5], "passes": [1, 2]}))


def test_a_sample_lasts_at_most_max_sample_ms_or_one_run_whatever_the_tick_is_believed_to_be():
    p = protocol.Protocol(max_sample_ms=100.0)
    for per_run in (1e-4, 0.05, 0.7, 3.0, 40.0, 51.0, 99.0, 101.0, 1000.0, 60e3):
        for tick in (0.0, 1.0, 500.0, 65536.0, 1e5, 1e6, 1e9, 6e10):
            reps = protocol.reps_for(p, per_run, tick)
            assert reps >= 1 and reps * per_run <= max(p.max_sample_ms, per_run), (per_run, tick, reps)
    assert protocol.reps_for(p, 1000.0, 1e9) == 1  # a second-long run on a "1-second clock"
    assert protocol.reps_for(p, 1.0, 1e6) == 100  # 200 ticks of 1 ms would take 200 ms: 100 fit
    assert protocol.reps_for(p, 40.0, 1e6) == 2  # floor, not ceil: 80 ms, not 120


def test_the_resolution_is_read_off_enough_readings():
    ns = [1000, 1003, 1010, 2001, 2950, 4007, 5012, 6000, 7019]  # 8 offsets from the first
    assert protocol.timer_resolution_ns(ns) == 1
    quantized = [65536 * k for k in (17, 18, 20, 25, 26, 31, 32, 40, 41)]
    assert protocol.timer_resolution_ns(quantized) == 65536
    # A fast kernel on that clock, as the page sends it (each sample's offsets from its first):
    # a few values, repeated, are readings all the same.
    page = [x for d in (65536, 0, 65536, 131072, 0, 65536, 65536, 0, 65536, 131072, 65536) for x in (0, d)]
    assert protocol.timer_resolution_ns(page) == 65536
    # Fewer only bound the tick from above (it divides each): unknown, not a multiple of it.
    assert protocol.timer_resolution_ns([2_000_000_000, 3_052_348_238]) == 0  # one warm-up run of a slow kernel
    assert protocol.timer_resolution_ns(ns[: protocol.MIN_OFFSETS]) == 0
    assert protocol.timer_resolution_ns(page[:14]) == 0  # 5 readings off the first (and zeros)
    assert protocol.timer_resolution_ns([5]) == protocol.timer_resolution_ns([]) == 0


def test_min_offsets_of_a_nanosecond_clock_show_its_tick():
    """MIN_OFFSETS readings of a 1-ns clock at random: the inferred tick is 1 but for a fraction
    of a percent of the time, and then a small factor, never a run's length."""
    rs = np.random.RandomState(3)
    got = [protocol.timer_resolution_ns(rs.randint(0, 10**9, size=protocol.MIN_OFFSETS + 1)) for _ in range(2000)]
    assert sum(g == 1 for g in got) >= 0.99 * len(got) and max(got) <= 4


def test_a_quantized_clock_is_seen_in_the_warm_up():
    clock, log = Clock(), []
    (m,) = protocol.measure([Entry("a", clock, lambda t: 0.7, log, stamp_tick=65536)], FAST, clock=clock)
    assert m.resolution_ns == 65536 and m.reps * 0.7 >= 200 * 65536e-6


def test_a_slow_kernel_on_a_nanosecond_timer_gets_one_run_per_sample():
    """Runs of about a second on a timer that ticks at 1 ns, warmed for 0.3 s (capped at 0.9):
    one warm-up round gives each entry two readings, whose only offset is the run itself, not the
    timer's tick. Taking it for the tick asked for 200 ticks of a "1-second clock" per sample:
    200 runs a sample, half an hour a series. Reps stay 1, and the series lasts seconds."""
    clock, log = Clock(), []
    jitter = np.random.RandomState(2)
    second = lambda t: round(jitter.uniform(800.0, 1060.0), 6)  # noqa: E731  ms, to the ns
    quick = lambda t: round(jitter.uniform(30.0, 45.0), 6)  # noqa: E731  a faster kernel beside it
    p = protocol.Protocol.of(5, 0.3)
    slow, fast = protocol.measure([Entry("slow", clock, second, log), Entry("fast", clock, quick, log)], p, clock=clock)
    assert not slow.warmed and slow.warmup_s < 2.0  # one warm-up round: the cap, not the rule
    assert (slow.reps, fast.reps) == (1, 1)
    assert log.count("slow") == 1 + 1 + p.rounds  # priming, the warm-up round, the rounds
    assert clock.t < (2 + p.rounds) * 1.2  # seconds of (made-up) time, all runs included


def test_a_timer_believed_coarse_costs_at_most_max_sample_ms_a_sample():
    """An entry whose timer is said to tick once a second: 200 ticks would be 200 s a sample; it
    gets what fits in max_sample_ms, and its series lasts about a second of (made-up) time."""
    clock, log = Clock(), []
    entry = Entry("a", clock, lambda t: 40.0, log)
    entry.resolution_ns = 1e9
    p = protocol.Protocol.of(5, 0.3)
    (m,) = protocol.measure([entry], p, clock=clock)
    assert m.resolution_ns == 1e9 and m.reps == 2  # 80 ms: floor(100 / 40)
    assert clock.t < 0.04 + p.warmup_cap_s + 0.04 + p.rounds * p.max_sample_ms / 1e3


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
    with pytest.raises(ValueError, match=r"max_sample_ms \(5.0\) must be at least min_sample_ms \(10.0\)"):
        protocol.Protocol(min_sample_ms=10.0, max_sample_ms=5.0)
    with pytest.raises(ValueError, match="unknown protocol field"):
        protocol.Protocol.from_json({"runs": 3})


def test_the_page_and_cpython_write_the_same_record_from_the_same_samples():
    """One function computes a record's statistics on both sides (the page's Python calls it)."""
    request = {"op": "fwd", "impls": "flash_fwd.tiled", "B": 1, "H": 2, "D": 16, "seq_lens": "64", "causal": True, "rounds": 5}
    request["user_agent"] = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/156.0.0.0"
    job, reply = bench_jobs.start(json.dumps(request), TARGET, bench_id=1)
    samples = [1.2, 1.0, 1.1, 1.4, 1.05]
    stamps = [1024 * k for k in (0, 1, 4, 5, 9, 11, 14, 17, 22)]
    payload = {"samples": samples, "stamps": stamps, "reps": 3, "warmup_s": 2.5, "warmed": True, "timer": "gpu"}
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
