"""The page's benchmark view times the project's kernels in the browser's WebGPU (SwiftShader here)
by the measurement protocol (wgattn.protocol) and writes records of `wgattn bench --json`'s shape,
one per (impl, seq_len), charted as TFLOP/s against sequence length; bad input gets a visible
message and status error."""

import math

from pagetools import in_progress, wait_for_status
from wgattn import bench, protocol, registry

SEQ_LENS = [64, 128]
B, H, D = 1, 2, 32
SLOW_BOUND_S = 600  # the slow shape's benchmark, at most: ~1 min on 2 loaded cores; hours when samples grew to 200 runs


def _open(page, server):
    page.goto(server + "/?heads=1&seq_q=8&seq_k=8&head_dim=4")
    assert wait_for_status(page) == "done"


def _run(page, *, op="fwd", impls="", seq_lens="64,128", rounds="5", warmup_s="0.2", causal=True, b=B, h=H, d=D, timeout_s=120):
    page.select_option("#bench-form select[name=op]", op)
    page.fill("#bench-form input[name=impls]", impls)
    page.fill("#bench-form input[name=B]", str(b))
    page.fill("#bench-form input[name=H]", str(h))
    page.fill("#bench-form input[name=D]", str(d))
    page.fill("#bench-form input[name=seq_lens]", seq_lens)
    page.fill("#bench-form input[name=rounds]", str(rounds))
    page.fill("#bench-form input[name=warmup_s]", str(warmup_s))
    page.set_checked("#bench-form input[name=causal]", causal)
    page.click("#bench-run")
    finished = "['done', 'error'].includes(document.getElementById('bench').dataset.status)"
    page.wait_for_function(finished, timeout=timeout_s * 1000)
    return page.evaluate("document.getElementById('bench').dataset.status")


def _runnable(features):
    """The fwd kernels this adapter can run, from the registry (features it has, shader present)."""
    reg = registry.load()
    return [i for i in bench.kernel_impls("fwd") if set(reg.kernel(i).requires) <= set(features) and reg.kernel(i).path.exists()]


def test_small_benchmark_records_and_chart(page, server, console_errors):
    _open(page, server)
    assert page.get_attribute("#bench", "data-status") == "idle"
    assert _run(page) == "done", page.inner_text("#bench")
    state = page.evaluate("window.wgattn.bench")
    assert state["status"] == "done" and state["error"] is None
    features = page.evaluate("window.wgattn.results.adapter.features")
    impls = _runnable(features)
    assert impls and impls[0] == bench.kernel_impls("fwd")[0]
    records = state["records"]
    assert sorted((r["impl"], r["shape"][2]) for r in records) == sorted((i, s) for i in impls for s in SEQ_LENS)
    skipped = {s["impl"] for s in state["skipped"]}
    assert skipped == set(bench.kernel_impls("fwd")) - set(impls)
    for r in records:
        assert set(r) == set(bench.Record.__dataclass_fields__), r
        assert r["op"] == "fwd" and r["causal"] is True and r["rounds"] == 5 and r["reps"] >= 1
        assert r["shape"] == [B, H, r["shape"][2], D]
        assert r["dtype"] == bench.dtype_of(r["impl"]) and r["timer"] in ("gpu", "wall")
        assert "browser" in r["adapter"] and r["runtime"] == "chromium" and r["browser"].startswith("Chromium ")
        assert r["mode"] == "checked" and r["config"]  # robustness on; the tile that ran
        assert 0 < r["min_ms"] <= r["q1_ms"] <= r["median_ms"] <= r["q3_ms"] <= r["max_ms"]
        assert r["warmup_s"] >= 0.2 or not r["warmed"]
        # The timer's tick as the timestamps showed it: Chromium started with --enable-unsafe-webgpu
        # does not quantize them (docs/performance.md); a wall clock is coarsened to 100 us.
        assert r["timer_resolution_ns"] > 0
        assert math.isfinite(r["median_ms"]) and r["median_ms"] > 0
        assert math.isfinite(r["tflops"]) and r["tflops"] > 0
        f = bench.flops("fwd", tuple(r["shape"]), True)
        assert math.isclose(r["tflops"] * r["median_ms"] * 1e9, f, rel_tol=1e-9), (r, f)
    # The table: one row per record.
    assert page.locator("#bench-table tr[data-impl]").count() == len(records)
    # The chart: this browser's records beside the committed ones, a line per impl, a point per seq_len.
    lines = page.evaluate("""[...document.querySelectorAll('#bench-chart polyline.series[data-source=yours]')]
        .map((p) => [p.dataset.kernel, p.getAttribute('points').trim().split(/\\s+/).length])""")
    assert sorted(lines) == sorted([i, len(SEQ_LENS)] for i in impls)
    legend = page.inner_text("#bench-chart-legend")
    assert all(i in legend for i in impls) and "this browser" in legend
    assert "TFLOP/s" in page.get_attribute("#bench-chart svg", "aria-label")
    assert page.is_visible("#bench-download")
    assert in_progress(page) == {}  # the benchmark freed its jobs and plans
    assert console_errors == []


def test_a_slow_kernel_takes_seconds_a_sample_not_minutes(page, server, console_errors):
    """At (1,8,1024,64) causal a run takes seconds on SwiftShader: the 0.3 s warm-up is one
    round, two timestamps per kernel, whose one offset is a run, not the timer's tick. Samples
    stay one run long (wgattn.protocol's MIN_OFFSETS and max_sample_ms), so the benchmark takes
    a minute or two where 200-run samples took hours; the bound leaves room for a loaded machine."""
    _open(page, server)
    impls = "sdpa_arena.seed,flash_fwd.tiled"
    status = _run(page, impls=impls, seq_lens="1024", b=1, h=8, d=64, rounds=5, warmup_s="0.3", timeout_s=SLOW_BOUND_S)
    assert status == "done", page.inner_text("#bench")
    records = page.evaluate("window.wgattn.bench.records")
    assert sorted(r["impl"] for r in records) == sorted(impls.split(","))
    longest = protocol.Protocol.max_sample_ms
    for r in records:
        assert r["shape"] == [1, 8, 1024, 64] and r["rounds"] == 5
        # a sample: at most max_sample_ms or one run (twice that, for the warm-up's estimate of a run)
        assert r["reps"] * r["median_ms"] <= 2 * max(longest, r["median_ms"]), r
    assert console_errors == []


def test_bad_input_shows_a_message(page, server, console_errors):
    _open(page, server)
    assert _run(page, seq_lens="abc") == "error"
    assert page.is_visible("#bench-error")
    assert "seq_lens must be a comma-separated list" in page.inner_text("#bench-error")
    assert page.evaluate("window.wgattn.bench.status") == "error"
    assert _run(page, rounds=3) == "error"
    assert "rounds must be an integer in 5..100, got 3" in page.inner_text("#bench-error")
    assert _run(page, warmup_s="99") == "error"
    assert "warmup_s must be a number of seconds in 0..30, got 99.0" in page.inner_text("#bench-error")
    assert page.evaluate("window.wgattn.bench.records") == []
    assert console_errors == []
