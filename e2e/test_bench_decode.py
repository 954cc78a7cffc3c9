"""The suite's --decode (bench/suite.py) on this machine's software adapter (SwiftShader in headless Chromium):
the page fills a shrunk decode case's cache on the GPU, checks the kernel's output against the
float64 reference, then times it with the WGSL copy in one series, in both browser passes
(robustness on and off), through the same benchmark jobs as every op (wgattn.page.bench_jobs).
The same run asks for the GEMM (--gemm sweep), a case of the same jobs, which SwiftShader cannot
run (no subgroup matrices): each fragment shape is skipped with the reason, nothing fails. The
records' shape is checked, never their timings."""

import json
import os
import subprocess
import sys

import pytest

from bench.demo import CHROMIUM, ROOT
from wgattn import bandwidth, gemm
from wgattn.interfaces.paged_decode import DecodeConfig, bytes_touched

CASES = {"target": "paged_decode.split_f16", "target-f32-cache": "paged_decode.split"}  # shrunk


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (make setup installs Debian's chromium)")
    if not (ROOT / ".cache" / "pyodide").is_dir():
        pytest.skip("the page needs Pyodide in .cache/pyodide: run `make setup`")
    out = tmp_path_factory.mktemp("suite")
    argv = ["--runtimes=chromium", "--kernels=", f"--decode={','.join(CASES)}", "--decode-smoke", "--gemm=sweep", "--no-live"]
    history = tmp_path_factory.mktemp("history")  # none to compare with
    argv += ["--rounds=5", "--warmup-s=0.1", "--repeat=1", "--gpu=software", f"--out={out}", f"--history={history}"]
    # In its own process: the suite drives Chromium with asyncio.run(), which cannot start inside
    # the event loop Playwright's sync API leaves in this one.
    done = subprocess.run([sys.executable, "-m", "bench.suite", *argv], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    report = json.loads((out / "report.json").read_text())
    records = [json.loads(line) for line in (out / "decode.jsonl").read_text().splitlines()]
    return out, report, records


def test_each_pass_times_the_kernels_it_can_run_and_the_copy(run):
    out, report, records = run
    for mode in ("checked", "trusted"):
        p = report[f"chromium_{mode}"]
        assert "error" not in p, p
        mine = [r for r in records if r["mode"] == mode]
        skipped = {s["impl"] for b in p["bench"] for s in b["skipped"]}
        for b in p["bench"]:
            assert not b["failed"], b
        want = set(CASES.items())
        timed = {(r["case"], r["impl"]) for r in mine if r["kind"] == "decode"}
        assert timed | {w for w in want if w[1] in skipped} == want, (timed, skipped)
        assert ("target-f32-cache", "paged_decode.split") in timed  # f32 runs on every adapter
        assert {r["case"] for r in mine if r["impl"] == bandwidth.COPY} == set(CASES)


def test_the_gemm_is_asked_for_every_fragment_shape_and_skipped_without_matrices(run):
    out, report, records = run
    for mode in ("checked", "trusted"):
        asked = [b for b in report[f"chromium_{mode}"]["bench"] if b["request"].startswith("gemm ")]
        assert [b["request"] for b in asked] == [f"gemm 4096x4096x4096 {'x'.join(map(str, f))}" for f in gemm.FRAGMENTS]
        for b in asked:
            assert b["status"] == "done" and not b["failed"] and not b["checks"], b
            (skip,) = b["skipped"]
            assert "lacks" in skip["reason"] or "subgroup matrices" in skip["reason"], b
    assert not (out / "gemm.jsonl").exists()


def test_records_carry_bandwidth_and_the_check_before_timing(run):
    out, report, records = run
    for r in records:
        assert r["runtime"] == "chromium" and r["browser"].startswith("Chromium ") and r["flags"]
        assert r["rounds"] == 5 and r["reps"] >= 1 and r["timer"] in ("gpu", "wall")
        assert 0 < r["min_ms"] <= r["q1_ms"] <= r["median_ms"] <= r["q3_ms"] <= r["max_ms"]
        assert r["gbps"] > 0 and r["bytes"] > 0
        config = DecodeConfig(**r["shape"])  # the case's configuration, as a live check takes it
        assert config.batch == 2 and config.seq_len == 700 and not config.ragged  # decode_bandwidth.smoke
        item = 2 if r["dtype"] == "f16" else 4
        read = bytes_touched([config.seq_len] * config.batch, -1, config.new_tokens, config.kv_heads, config.head_dim, item)
        if r["kind"] == "decode":
            v = r["verified"]
            assert v["ok"] and v["max_abs_err"] <= v["allowed"] and v["pairs"], v
            assert r["bytes"] == read and r["splits"] >= 1 and r["rule"] and r["impl"] == CASES[r["case"]]
            assert r["pct_of_copy"] > 0  # its share of the same pass's copy
        else:
            assert r["kind"] == "copy" and r["verified"] is None and r["bytes"] == 2 * read
    table = (out / "table.txt").read_text()
    assert "decode target-f32-cache: GB/s" in table and "chromium checked" in table and "chromium trusted" in table
