"""PageSession frees what it creates: after a live run, a grid, a probe, a benchmark
or an abandoned run it holds nothing but the bounded finished runs kept for their pictures; a new
grid or benchmark frees the last; sessions share nothing; a freed or unknown id is a ValueError
naming it."""

import json

import pytest

from helpers import browser_stand_in, session_on
from wgattn.page import PageSession

NOTHING = {"live": 0, "grid": 0, "probe": 0, "bench": 0, "grid_jobs": 0, "bench_jobs": 0, "finished": 0}
SMALL = {"heads": 1, "seq_q": 4, "seq_k": 4, "head_dim": 4}
BENCH = {"op": "fwd", "impls": "sdpa_arena.seed,flash_fwd.tiled", "B": 1, "H": 1, "D": 8, "seq_lens": "16,32", "rounds": 5}


def _prepare(page, config=SMALL):
    return json.loads(page.prepare(json.dumps({"kernel": "sdpa_arena.seed", "config": config})))["run"]


def _grid(page, interface="sdpa_arena"):
    return json.loads(page.grid_start(json.dumps({"interface": interface, "features": []})))


def test_a_live_run_leaves_only_its_finished_run(native_runtime):
    page = session_on(native_runtime)
    run = _prepare(page)
    assert page.held() == dict(NOTHING, live=1)
    browser_stand_in(page, run, native_runtime)
    json.loads(page.finish(run, json.dumps({"timings": {}}), None))
    assert page.held() == dict(NOTHING, finished=1)
    json.loads(page.heatmap(run, 0))  # kept for its pictures


def test_finished_runs_are_bounded():
    page = PageSession()
    runs = [_prepare(page, dict(SMALL, seed=i)) for i in range(PageSession.KEEP_FINISHED + 2)]
    for run in runs:
        page.finish(run, json.dumps({"skipped": "no WebGPU here"}), None)
    assert page.held() == dict(NOTHING, finished=PageSession.KEEP_FINISHED)
    with pytest.raises(ValueError, match=f"run {runs[0]} is not among the last {PageSession.KEEP_FINISHED} finished runs"):
        page.heatmap(runs[0], 0)
    json.loads(page.heatmap(runs[-1], 0))


def test_a_failing_finish_still_frees_its_run():
    page = PageSession()
    run = _prepare(page)
    with pytest.raises(ValueError):  # the browser's JSON garbled
        page.finish(run, "{not json", None)
    assert page.held() == NOTHING


def test_an_aborted_run_is_released():
    """The JS error path: WebGPU failed mid-run, after some buffers came back."""
    page = PageSession()
    run = _prepare(page)
    page.add_buffer(run, "arena", b"\0" * 16)
    assert page.release(run) is True
    assert page.held() == NOTHING
    assert page.release(run) is False  # releasing twice is no error: the page's finally may race a finish
    with pytest.raises(ValueError, match=f"run {run} is not open"):
        page.finish(run, json.dumps({"timings": {}}), None)


def test_a_full_grid_frees_its_job(native_runtime):
    page = session_on(native_runtime)
    start = _grid(page)
    assert start["items"] and page.held() == dict(NOTHING, grid_jobs=1)
    for i in range(len(start["items"])):
        run = json.loads(page.grid_prepare(start["job"], i))["run"]
        if i == 1:  # a case whose WebGPU run failed is judged too (the page's error path)
            rows = json.loads(page.grid_judge(run, "GPUValidationError: stand-in"))
            assert rows[0]["error"] == "GPUValidationError: stand-in" and not rows[0]["pass"]
            continue
        browser_stand_in(page, run, native_runtime)
        assert all(r["pass"] for r in json.loads(page.grid_judge(run)))
    assert page.held() == NOTHING
    with pytest.raises(ValueError, match=f"grid job {start['job']} is not open"):
        page.grid_prepare(start["job"], 0)


def test_a_new_grid_frees_the_last_job_and_its_runs():
    page = PageSession()
    old = _grid(page)
    run = json.loads(page.grid_prepare(old["job"], 0))["run"]
    new = _grid(page, "attn_probs")
    assert new["job"] != old["job"]
    assert page.held() == dict(NOTHING, grid_jobs=1)
    with pytest.raises(ValueError, match=f"run {run} is not open"):
        page.plan_bytes(run, "arena")
    with pytest.raises(ValueError, match=f"grid job {old['job']} is not open"):
        page.grid_prepare(old["job"], 1)
    assert page.release(new["job"]) is True  # the page's cancel path
    assert page.held() == NOTHING


def test_the_probe_frees_its_run(native_runtime):
    page = session_on(native_runtime)
    run = json.loads(page.probe_prepare())["run"]
    browser_stand_in(page, run, native_runtime)
    page.probe_judge(run, "{}")
    assert page.held() == NOTHING and page.probe_report is not None


def _time_bench(page, start, skip=()):
    """Do what static/bench.js does, with made-up timings: every plan fetched and released, every
    job recorded (those in `skip` left unrecorded, as when the executor refuses a plan)."""
    for job in start["jobs"]:
        count, p = 1, 0
        while p < count:
            prep = json.loads(page.bench_plan(start["bench"], job["index"], p))
            assert "skipped" not in prep
            count = prep["count"]
            page.plan_bytes(prep["run"], page.plan(prep["run"]).buffers[0].name)
            page.bench_release(prep["run"])
            p += 1
        if job["index"] not in skip:
            payload = {"samples": [1.0] * 5, "reps": 1, "warmup_s": 0.1, "warmed": True, "timer": "wall", "adapter": "stand-in"}
            page.bench_record(start["bench"], job["index"], json.dumps(payload))


def test_a_full_benchmark_frees_itself():
    page = PageSession()
    start = json.loads(page.bench_start(json.dumps(BENCH)))
    assert len(start["jobs"]) == 4 and page.held() == dict(NOTHING, bench_jobs=1)
    _time_bench(page, start)
    assert page.held() == NOTHING
    with pytest.raises(ValueError, match=f"benchmark {start['bench']} is not open"):
        page.bench_plan(start["bench"], 0)


def test_an_abandoned_benchmark_is_freed_by_release_or_the_next_one():
    page = PageSession()
    start = json.loads(page.bench_start(json.dumps(BENCH)))
    _time_bench(page, start, skip={3})  # its last job failed: the benchmark stays open
    assert page.held() == dict(NOTHING, bench_jobs=1)
    assert page.release(start["bench"]) is True  # what static/bench.js does after its loop
    assert page.held() == NOTHING

    first = json.loads(page.bench_start(json.dumps(BENCH)))
    run = json.loads(page.bench_plan(first["bench"], 0))["run"]
    second = json.loads(page.bench_start(json.dumps(BENCH)))
    assert page.held() == dict(NOTHING, bench_jobs=1)  # the first one and its open plan are gone
    with pytest.raises(ValueError, match=f"run {run} is not open"):
        page.plan_bytes(run, "arena")
    with pytest.raises(ValueError, match=f"benchmark {first['bench']} is not open"):
        page.bench_record(first["bench"], 0, "{}")
    page.release(second["bench"])


def test_two_sessions_share_nothing():
    a, b = PageSession(), PageSession()
    run_a, run_b = _prepare(a), _prepare(b)
    assert run_a == run_b == 1  # each numbers its own
    assert a.release(run_a) is True
    assert b.held() == dict(NOTHING, live=1)
    b.finish(run_b, json.dumps({"skipped": "no WebGPU here"}), None)
    assert a.held() == NOTHING and b.held() == dict(NOTHING, finished=1)
    _grid(a)
    _grid(b)  # b's new grid frees only b's last one
    assert a.held()["grid_jobs"] == b.held()["grid_jobs"] == 1


def test_unknown_ids_and_wrong_kinds_are_value_errors_naming_them():
    page = PageSession()
    for call, what in [
        (lambda: page.plan_bytes(41, "arena"), "run 41 is not open"),
        (lambda: page.add_buffer(42, "arena", b""), "run 42 is not open"),
        (lambda: page.finish(43, "{}", None), "run 43 is not open"),
        (lambda: page.grid_judge(44), "run 44 is not open"),
        (lambda: page.probe_judge(45), "run 45 is not open"),
        (lambda: page.heatmap(46), "run 46 is not among the last"),
        (lambda: page.error_map(47, "out", "browser", "native"), "run 47 is not among the last"),
        (lambda: page.grid_prepare(48, 0), "grid job 48 is not open"),
        (lambda: page.bench_plan(49, 0), "benchmark 49 is not open"),
        (lambda: page.bench_record(50, 0, "{}"), "benchmark 50 is not open"),
    ]:
        with pytest.raises(ValueError, match=what):
            call()
    probe = json.loads(page.probe_prepare())["run"]
    with pytest.raises(ValueError, match=f"run {probe} is a probe run, not a live run"):
        page.finish(probe, "{}", None)
    assert page.held() == dict(NOTHING, probe=1)  # the wrong call took nothing
    start = json.loads(page.bench_start(json.dumps(BENCH)))
    with pytest.raises(ValueError, match="job index must be an integer in 0..3, got 4"):
        page.bench_plan(start["bench"], 4)
    with pytest.raises(ValueError, match="item must be an integer in 0..11, got 12"):
        page.grid_prepare(_grid(page)["job"], 12)


def test_a_runtime_that_cannot_run_the_kernel_is_skipped_not_failed(native_runtime):
    """The browser ran, the server's adapter cannot run the kernel (the page turns its
    `unavailable` 422 into {"skipped": why}): the run passes where it ran, native says why; an
    error from the server still fails it."""
    page = PageSession()
    for native, passes in [({"skipped": "the server's adapter lacks a feature"}, True), ({"error": "HTTP 500: boom"}, False)]:
        run = _prepare(page)
        browser_stand_in(page, run, native_runtime)
        result = json.loads(page.finish(run, json.dumps({"timings": {}}), json.dumps(native)))
        assert result["pass"] is passes and result["runtimes"]["browser"]["ok"] is True
        assert result["runtimes"]["native"] == {"ok": False, **native}
