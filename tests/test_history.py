"""The committed benchmark history (bench/history/, JSON Lines) and the tables docs/performance.md shows from
it: the docs agree with the history, every history file is a valid record file of its machine,
and a comparison names the rows that moved more than their spread."""

from __future__ import annotations

import json
import shutil

import pytest

from bench import history


def _rec(impl="flash_fwd.blocked", mode="trusted", median=2.0, iqr=0.02, repeat=0, runtime="native", adapter="gpu A"):
    return {
        "op": "fwd", "impl": impl, "shape": [4, 16, 2048, 64], "causal": True, "dtype": "f32", "runtime": runtime,
        "mode": mode, "config": "", "adapter": adapter, "browser": "", "flags": [], "median_ms": median,
        "tflops": 34.36 / median, "min_ms": median - iqr, "q1_ms": median - iqr / 2, "q3_ms": median + iqr / 2,
        "max_ms": median + iqr, "spread": iqr / median, "wide": iqr / median > 0.05, "rounds": 20, "reps": 1,
        "warmup_s": 2.0, "warmed": True, "timer": "gpu", "timer_resolution_ns": 1.0, "repeat": repeat,
        "time": "2026-11-24T10:00:00+00:00", "commit": "abc",
    }  # fmt: skip


def test_the_docs_tables_are_generated_from_the_history():
    """docs/performance.md's measured tables are exactly what bench/history.py writes from the
    committed records (after adding a history file: python -m bench.history docs)."""
    assert history.docs(check=True), "docs/performance.md is out of date: run python -m bench.history docs"


def test_a_stale_docs_table_is_caught(tmp_path):
    docs = tmp_path / "performance.md"
    docs.write_text(history.DOCS.read_text())
    hist = tmp_path / "history"
    shutil.copytree(history.HISTORY, hist)  # the records and their reports: the docs read both
    assert history.docs(check=True, history=hist, path=docs)
    (hist / "2099-01-01-h100.jsonl").write_text(history.lines([_rec()]))  # new figures, docs not regenerated
    assert not history.docs(check=True, history=hist, path=docs)
    history.docs(check=False, history=hist, path=docs)
    assert history.docs(check=True, history=hist, path=docs)
    assert "2099-01-01-h100.jsonl" in docs.read_text() and "h100: pending" not in docs.read_text()


def test_every_history_file_is_a_dated_record_file_of_one_machine():
    files = sorted(history.HISTORY.glob("*.jsonl"))
    assert files, "no committed benchmark history"
    for p in files:
        history.machine_of(p)  # named <date>-<machine>.jsonl
        recs = history.load(p)  # one record a line, checked as the page checks a dropped file
        assert recs and all(r["time"][:10] == p.name[:10] for r in recs), p.name
        assert all(r["rounds"] >= 5 for r in recs)


def test_compare_names_the_rows_that_moved_more_than_their_spread():
    old = [_rec(median=2.0), _rec("flash_fwd.tiled", median=3.0), _rec("torch", "", 1.0, runtime="torch")]
    new = [_rec(median=2.01), _rec("flash_fwd.tiled", median=3.3), _rec("torch", "", 1.0, runtime="torch")]
    new.append(_rec("flash_fwd.mma", median=1.0))
    text = history.compare(new, old)
    moved = [line for line in text.splitlines() if "MOVED" in line]
    assert len(moved) == 1 and "flash_fwd.tiled" in moved[0] and "-9.1%" in moved[0]
    assert "2 rows within their spread" in text and "new row: fwd 4,16,2048,64 causal flash_fwd.mma" in text
    wide = [_rec(median=2.0, iqr=0.5)]  # a noisy row: the same move is within its spread
    assert "MOVED" not in history.compare([_rec(median=2.2, iqr=0.5)], wide)


def test_repeats_must_agree_within_five_percent():
    recs = [_rec(median=2.0), _rec(median=2.04, repeat=1), _rec("flash_fwd.tiled", median=3.0)]
    recs.append(_rec("flash_fwd.tiled", median=3.3, repeat=1))
    text = history.repeat_agreement(recs, 0.05)
    assert text.startswith("repeats agree within 5%: 1 of 2 rows; 1 by more") and "DIFFER" in text and "flash_fwd.tiled" in text
    noisy = [_rec(median=2.0, iqr=0.5), _rec(median=2.3, iqr=0.5, repeat=1)]  # 15% apart, within the spread
    assert (
        history.repeat_agreement(noisy, 0.05) == "repeats agree within 5%: 0 of 1 rows; 1 more differ by less than their spread"
    )


def _gemm_rec(tile: str, mode: str, tflops: float, repeat: int = 0) -> dict:
    at = {"adapter": "NVIDIA H100 80GB HBM3", "time": "2026-11-24T10:00:00+00:00"}
    return {"op": "gemm", "impl": "gemm.smx", "shape": [4096] * 3, "config": tile, "mode": mode, "tflops": tflops,
            "spread": 0.01, "repeat": repeat, **at}  # fmt: skip


def test_the_gemm_table_puts_each_tile_in_a_row_fastest_first():
    recs = [_gemm_rec("slow", "checked", 28.0), _gemm_rec("slow", "trusted", 150.0), _gemm_rec("fast", "checked", 180.0)]
    recs.append(_gemm_rec("fast", "checked", 182.0, repeat=1))
    lines = history.gemm_table(recs).splitlines()
    assert lines[0] == "gemm.smx at 4096x4096x4096 (M x N x K): TFLOP/s ±IQR"
    assert lines[2].split()[:3] == ["fast", "180.0", "±1.0%"] and "/ 182.0" in lines[2]
    assert lines[3].split() == ["slow", "28.0", "±1.0%", "150.0", "±1.0%"]
    assert "| fast | 180.0 ±1.0% / 182.0 |  |" in history.gemm_table(recs, markdown=True)


def test_add_names_the_file_by_the_runs_date_and_machine(tmp_path):
    run = tmp_path / "records.json"
    run.write_text(json.dumps([_rec()]))
    assert history.add(run, "h100", history=tmp_path).name == "2026-11-24-h100.jsonl"
    with pytest.raises(SystemExit, match="machine name"):
        history.add(run, "H100 box", history=tmp_path)
    with pytest.raises(SystemExit, match="name the machine"):  # "gpu A" names no expected machine
        history.add(run, history=tmp_path)


def test_a_device_run_is_taken_in_from_its_read_only_folder(tmp_path):
    """What a device run sends back (the suite's --out folder, files read-only) becomes a history
    file of the machine its adapters name, its report beside it, its decode records in decode/,
    and docs tables that say how it was measured and what Dawn's robustness cost against native
    trusted."""
    landed = tmp_path / "files_at"
    landed.mkdir()
    h100 = "NVIDIA H100 80GB HBM3"
    recs = [
        _rec(median=2.0, adapter=h100),
        _rec(median=2.02, adapter=h100, repeat=1),
        _rec(median=2.5, runtime="chromium", mode="checked", adapter="nvidia"),
        _rec(median=2.0, runtime="chromium", mode="trusted", adapter="nvidia"),
        _rec("torch", "", 1.0, runtime="torch", adapter=h100),
    ]
    report = {"command": "python -m bench.suite --out /tmp/out", "wall_s": 512.3, "gpu_state_before": "H100, 345 MHz"}
    report["chromium_checked"] = {"live_check": {"results": [{"pass": True}, {"pass": True}, {"pass": False}]}}
    decode = [{"case": "target", "impl": "wgsl.copy", "kind": "copy", "adapter": h100, "time": "2026-11-24T10:00:00+00:00"}]
    (landed / "records.json").write_text(json.dumps(recs))
    (landed / "report.json").write_text(json.dumps(report))
    (landed / "decode.jsonl").write_text(history.lines(decode))
    gemm = [
        _gemm_rec("16x16x16 128x128 k64 2x4sg s1 unrolled split", "checked", 150.0),
        _gemm_rec("16x16x16 128x128 k64 2x4sg s1 unrolled split", "trusted", 187.0),
    ]
    (landed / "gemm.jsonl").write_text(history.lines(gemm))
    for f in landed.iterdir():
        f.chmod(0o444)
    landed.chmod(0o555)
    hist = tmp_path / "history"
    hist.mkdir()
    dest = history.add(landed, history=hist)
    assert dest.name == "2026-11-24-h100.jsonl" and history.load(dest) == history.load(landed / "records.json")
    assert len(dest.read_text().splitlines()) == len(recs)  # one record a line
    assert history.report_of(dest) == report and len((hist / "reports" / "2026-11-24-h100.json").read_text().splitlines()) == 1
    assert [json.loads(line) for line in (hist / "decode" / "2026-11-24-h100.jsonl").read_text().splitlines()] == decode
    assert [json.loads(line) for line in (hist / "gemm" / "2026-11-24-h100.jsonl").read_text().splitlines()] == gemm
    text = history.generated(hist)
    assert "### h100: `bench/history/2026-11-24-h100.jsonl`" in text
    assert "Command: `python -m bench.suite --out /tmp/out` (512.3 s)" in text and "2 of 3 kernels pass" in text
    row = next(line for line in text.splitlines() if line.startswith("| flash_fwd.blocked (f32)"))
    assert row.endswith("| 1.25x | 0.80x |")  # robustness off / on; Chromium (on) / native trusted
    assert "robustness off / on" in text and "| torch f32 (torch) |" in text
