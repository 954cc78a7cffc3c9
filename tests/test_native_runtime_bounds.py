"""The native runtime's bounds: a compiled-pipeline cache that drops the least recently used past
its size (kernels specialised per shape compile a pipeline per shape: unbounded, a server that
sees many shapes grows without end), and a run that stops between dispatches when asked."""

import numpy as np
import pytest

from wgattn import live, native, tolerance

FLASH = {"batch": 1, "heads": 2, "seq_q": 9, "seq_k": 11, "causal": True, "seed": 3}


def test_the_cache_keeps_the_most_recently_used():
    built = []
    cache = native.PipelineCache(size=2)

    def get(key):
        return cache.get(key, lambda: built.append(key) or f"pipeline {key}")

    assert [get(k) for k in ("a", "b", "a", "c")] == ["pipeline a", "pipeline b", "pipeline a", "pipeline c"]
    assert built == ["a", "b", "c"]  # "a" came from the cache
    get("a")  # still cached: "b" was the least recently used, and went
    get("b")
    assert built == ["a", "b", "c", "b"]
    assert cache.stats() == {"entries": 2, "max_entries": 2, "hits": 2, "misses": 4, "evictions": 2}


def test_the_cache_size_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("WGATTN_PIPELINE_CACHE", "7")
    assert native.PipelineCache().size == 7
    with pytest.raises(ValueError, match="at least 1 pipeline"):
        native.PipelineCache(size=0)


def _distinct_pipelines(rt, kernel_id, head_dims):
    """Runs of `kernel_id` at each head_dim, checked against the float64 reference."""
    for d in head_dims:
        run = live.build(kernel_id, dict(FLASH, head_dim=d))
        outs = rt.run(run.plan(rt.target)).outputs
        ref, naive = run.expected()
        for name in ref:
            err = tolerance.max_abs_err(outs[name], ref[name])
            assert err <= tolerance.allowance(tolerance.max_abs_err(naive[name], ref[name]), ref[name]), (d, name, err)


def test_many_shapes_keep_the_runtime_cache_under_its_bound(native_runtime, monkeypatch):
    """flash_fwd.tiled specialises on head_dim: eight head_dims through a cache of three pipelines
    hold three, evict the rest, and every result (recompiled or not) stays right."""
    rt = native_runtime
    monkeypatch.setattr(rt, "pipelines", native.PipelineCache(size=3))
    head_dims = [8, 16, 24, 32, 40, 48, 56, 64]
    _distinct_pipelines(rt, "flash_fwd.tiled", head_dims)
    stats = rt.pipeline_cache_stats()
    assert stats["entries"] == 3 and stats["evictions"] == stats["misses"] - 3 >= len(head_dims) - 3, stats
    _distinct_pipelines(rt, "flash_fwd.tiled", head_dims[:1])  # evicted long ago: compiled again
    assert rt.pipeline_cache_stats()["misses"] == stats["misses"] + 1


def test_a_run_stops_between_dispatches_when_asked(native_runtime):
    """varlen_bwd.tiled is several dispatches: `between` runs after each but the last, and the run
    ends where it raises (the server's "the client has gone")."""
    run = live.build("varlen_bwd.tiled", {"batch": 2, "heads": 2, "seq_q": 8, "seq_k": 8, "head_dim": 8})
    plan = run.plan(native_runtime.target)
    assert len(plan.dispatches) > 1
    calls = []

    class Gone(Exception):
        pass

    def between():
        calls.append(len(calls))
        raise Gone

    with pytest.raises(Gone):
        native_runtime.run(plan, between=between)
    assert calls == [0]
    # Not asked to stop: every dispatch runs, with the same outputs as one submission.
    seen = []
    stepped = native_runtime.run(plan, between=lambda: seen.append(1)).outputs
    whole = native_runtime.run(plan).outputs
    assert len(seen) == len(plan.dispatches) - 1
    for name in whole:
        np.testing.assert_array_equal(stepped[name], whole[name])
