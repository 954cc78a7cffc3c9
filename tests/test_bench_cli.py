"""`wgattn bench`: records of the documented shape, FlashAttention's FLOP convention, every
registered kernel of an op timed or skipped with a reason, and clear errors. Speed itself is a
benchmark figure, never asserted here."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re

import numpy as np
import pytest

from wgattn import bench, cli, registry

SMALL = "1,2,64,16"
QUICK = ["--rounds", "5", "--warmup-s", "0.2"]  # the protocol with little warm-up: tests check records, not speed
FIELDS = {
    "op",
    "impl",
    "shape",
    "causal",
    "dtype",
    "runtime",
    "mode",
    "config",
    "adapter",
    "browser",
    "flags",
    "median_ms",
    "tflops",
    "min_ms",
    "q1_ms",
    "q3_ms",
    "max_ms",
    "spread",
    "wide",
    "rounds",
    "reps",
    "warmup_s",
    "warmed",
    "timer",
    "timer_resolution_ns",
    "repeat",
    "time",
    "commit",
    "variant",
}


def test_flops_follow_flashattention():
    assert bench.flops("fwd", (4, 16, 2048, 64), False) == 4 * 4 * 16 * 2048 * 2048 * 64
    assert bench.flops("fwd", (4, 16, 2048, 64), True) == 2 * 4 * 16 * 2048 * 2048 * 64
    assert bench.flops("bwd", (2, 16, 4096, 128), True) == 2.5 * bench.flops("fwd", (2, 16, 4096, 128), True)
    assert bench.flops("probs", (16, 8, 4096, 64), False) == 2 * 16 * 8 * 4096 * 64


def test_every_op_lists_its_registered_kernels_baseline_first():
    reg = registry.load()
    assert bench.kernel_impls("fwd")[0] == "sdpa_arena.seed"
    assert set(bench.kernel_impls("fwd")) >= {k.id for k in reg.kernels_of("flash_fwd")}
    assert bench.kernel_impls("bwd") == [k.id for k in reg.kernels_of("varlen_bwd")]
    assert bench.kernel_impls("probs")[0] == "attn_probs.seed"
    with pytest.raises(ValueError, match="unknown op"):
        bench.kernel_impls("nope")


@pytest.mark.parametrize("op", bench.OPS)
def test_json_records(native_runtime, capsys, op):
    assert cli.main(["bench", "--op", op, "--shape", SMALL, "--causal", "--json", *QUICK]) == 0
    records = json.loads(capsys.readouterr().out)
    shape = [1, 2, 64, 16]
    runnable = [k for k in bench.kernel_impls(op) if not native_runtime.target.lacks(registry.load().kernel(k))]
    # Each kernel in both modes when it is registered as trusted, checked only otherwise.
    want = [(k, m) for k in runnable for m in bench.MODES if m == "checked" or registry.load().kernel(k).trusted]
    assert [(r["impl"], r["mode"]) for r in records if r["impl"] not in bench.ANCHORS] == want
    assert "numpy" in [r["impl"] for r in records]
    for r in records:
        assert set(r) == FIELDS
        assert (r["mode"] == "") == (r["impl"] in bench.ANCHORS)
        assert r["runtime"] == ("numpy" if r["impl"] == "numpy" else "native")
        if r["mode"]:  # the tile shape that ran, as override constants
            assert re.fullmatch(r"(\w+=\d+ ?)+", r["config"]), r["config"]
        assert r["op"] == op and r["shape"] == shape and r["causal"] is True
        assert r["dtype"] in ("f32", "f16") and r["timer"] in ("gpu", "wall")
        assert r["browser"] == "" and r["flags"] == [] and r["repeat"] == 0
        # the median with its spread over the rounds: ordered, and the spread is the IQR over the median
        assert 0 < r["min_ms"] <= r["q1_ms"] <= r["median_ms"] <= r["q3_ms"] <= r["max_ms"]
        assert r["spread"] == pytest.approx((r["q3_ms"] - r["q1_ms"]) / r["median_ms"])
        assert r["wide"] == (r["spread"] > 0.05)
        assert r["rounds"] == 5 and r["reps"] >= 1 and r["timer_resolution_ns"] > 0
        assert r["warmup_s"] >= 0.2 or not r["warmed"]
        assert datetime.datetime.fromisoformat(r["time"]).tzinfo is not None
        assert r["tflops"] == pytest.approx(bench.flops(op, shape, True) / (r["median_ms"] * 1e-3) / 1e12)
        if r["impl"] != "numpy":
            assert r["adapter"] == native_runtime.name


def test_repeat_times_each_series_again(native_runtime, capsys):
    args = ["bench", "--shape", SMALL, "--impl", "flash_fwd.tiled", "--mode", "trusted", "--repeat", "2", "--json", *QUICK]
    assert cli.main(args) == 0
    records = json.loads(capsys.readouterr().out)
    assert [(r["impl"], r["repeat"]) for r in records] == [("flash_fwd.tiled", 0), ("flash_fwd.tiled", 1)]
    assert records[0]["time"] == records[1]["time"]  # one run


def test_a_variant_is_timed_in_the_same_series_as_the_plain_problem(native_runtime, capsys):
    """--variants: each kernel once plain and once with ALiBi slopes and sinks, interleaved in one
    series, the records saying which; the anchors time the plain problem only."""
    args = ["bench", "--shape", SMALL, "--impl", "flash_fwd.tiled,numpy", "--mode", "trusted", "--json", *QUICK]
    assert cli.main([*args, "--variants", "plain,alibi+sinks"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [(r["impl"], r["variant"]) for r in records] == [
        ("flash_fwd.tiled", ""),
        ("flash_fwd.tiled", "alibi+sinks"),
        ("numpy", ""),
    ]
    assert records[0]["time"] == records[1]["time"] and all(set(r) == FIELDS for r in records)


def test_a_variant_adds_the_interfaces_per_head_inputs():
    (plain,) = bench.plans("flash_fwd.blocked", "fwd", (1, 4, 32, 16), True)
    (with_heads,) = bench.plans("flash_fwd.blocked", "fwd", (1, 4, 32, 16), True, variant="alibi+sinks")
    # both bind alibi_sinks [2, Hq]: zeros for the plain problem, the slopes and sinks for the variant
    a, b = (np.frombuffer(next(x.data for x in p.buffers if x.name == "alibi_sinks"), np.float32) for p in (plain, with_heads))
    assert not a.any() and b[:4].min() > 0 and b[4:].any()
    (bwd,) = bench.plans("varlen_bwd.seed", "bwd", (1, 4, 32, 16), True, variant="sinks")
    assert [d.entry_point for d in bwd.dispatches][-1] == "bwd_dsinks" and bwd.dispatches[-1].workgroups == (4, 1, 1)
    with pytest.raises(ValueError, match="sdpa_arena has no benchmark variant 'alibi'"):
        bench.plans("sdpa_arena.seed", "fwd", (1, 4, 32, 16), True, variant="alibi")
    with pytest.raises(ValueError, match="variant must be one of"):
        bench.plans("flash_fwd.blocked", "fwd", (1, 4, 32, 16), True, variant="softmax")
    assert bench.parse_variants("plain, alibi+sinks,plain") == ["", "alibi+sinks"]
    with pytest.raises(ValueError, match="unknown variant 'nope'"):
        bench.parse_variants("plain,nope")


def test_errors_are_clear(capsys):
    assert cli.main(["bench", "--shape", "1,2,3"]) == 2
    assert "B,H,S,D" in capsys.readouterr().err
    assert cli.main(["bench", "--impl", "nope", "--shape", SMALL]) == 2
    assert "unknown impl 'nope'" in capsys.readouterr().err
    assert cli.main(["bench", "--rounds", "3", "--shape", SMALL]) == 2
    assert "rounds must be an integer in 5..1000, got 3" in capsys.readouterr().err
    assert cli.main(["bench", "--warmup-s", "-1", "--shape", SMALL]) == 2
    assert "warmup_s must be a number in 0.0..60.0, got -1.0" in capsys.readouterr().err
    assert cli.main(["bench", "--repeat", "9", "--shape", SMALL, "--impl", "numpy"]) == 2
    assert "repeat must be an integer in 1..5, got 9" in capsys.readouterr().err
    assert cli.main(["bench", "--op", "nope"]) == 2
    assert "unknown op" in capsys.readouterr().err


def test_one_mode(native_runtime, capsys):
    assert (
        cli.main(
            ["bench", "--shape", SMALL, "--impl", "flash_fwd.blocked,flash_fwd.tiled", "--mode", "checked", "--json", *QUICK]
        )
        == 0
    )
    records = json.loads(capsys.readouterr().out)
    assert [(r["impl"], r["mode"]) for r in records] == [("flash_fwd.blocked", "checked"), ("flash_fwd.tiled", "checked")]


def test_a_records_dtype_is_the_kernels_registered_precision(monkeypatch):
    """Not its name's suffix: a record's dtype is the manifest's precision."""
    for kernel in registry.load().kernels.values():
        assert bench.dtype_of(kernel.id) == kernel.precision
    assert bench.dtype_of("torch") == bench.dtype_of("numpy") == "f32"
    # an f16 kernel whose name does not end in f16 (and the other way round)
    reg = registry.load()
    swapped = {k.id: dataclasses.replace(k, precision="f16" if k.precision == "f32" else "f32") for k in reg.kernels.values()}
    monkeypatch.setattr(registry, "load", lambda *a, **kw: dataclasses.replace(reg, kernels=swapped))
    assert bench.dtype_of("flash_fwd.tiled") == "f16" and bench.dtype_of("flash_fwd.tiled_f16") == "f32"
