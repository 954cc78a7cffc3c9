"""Native GPU times are timestamp counts times the device's timestamp period: wgpu-native resolves
raw counts, which are nanoseconds only where the period is 1 (lavapipe, NVIDIA), and the period is
the tick the benchmark protocol is told it knows."""

import time

import pytest

from wgattn import bandwidth

# A period no device has (about a second a count; a power of two, so that counts times it are exact
# in floating point): any pass that takes one count or more then lasts longer than the whole
# submission did by the host's clock, which only scaling by it can give.
FAKE_PERIOD_NS = 2.0**30


@pytest.fixture
def faked(native_runtime, monkeypatch):
    if "timestamp-query" not in native_runtime.features:
        pytest.skip("this adapter has no timestamp-query: native times are the host's clock")
    assert native_runtime.timestamp_period > 0
    monkeypatch.setattr(native_runtime, "timestamp_period", FAKE_PERIOD_NS)
    return native_runtime


def test_a_run_scales_its_timestamps_by_the_period(faked):
    timings = faked.run(bandwidth.stream_plan(1 << 20)).timings
    assert timings["gpu_ms"] >= FAKE_PERIOD_NS / 1e6 > timings["wall_ms"]


def test_a_benchmark_sample_scales_by_the_period_and_knows_it_as_the_tick(faked):
    timed = faked.timing([bandwidth.stream_plan(1 << 20)])
    assert timed.timer == "gpu" and timed.resolution_ns == FAKE_PERIOD_NS
    t0 = time.perf_counter()
    ms, stamps = timed.sample(2)
    wall_ms = (time.perf_counter() - t0) * 1e3
    assert ms >= FAKE_PERIOD_NS / 1e6 / 2 > wall_ms
    assert len(stamps) == 4 and all(s % FAKE_PERIOD_NS == 0 for s in stamps)
